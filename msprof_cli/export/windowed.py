"""The mindstudio layout of a big PROF dir, written window by window (windows.py).

Each window is decoded, its rows appended to the open outputs and dropped before the next
one, so memory is bounded by the window.  The files are byte-identical to the whole export
(export_mindstudio): the per-task CSVs (op_summary, task_time, aicpu) are appended in time
order; op_statistic keeps exact per-window aggregates; api_statistic, fusion_op and the
step-trace outputs are computed once from small global inputs; the msprof json events of a
window all sort before the next window's (windows are cut where nothing crosses, see
windows.py), so each window's sorted events are appended to the open slices.

Two things cross a cut and are carried: the wait time of a window's first op_summary row
(the previous row's end), and the Overlap Analysis ``Free`` gap between the last computing
interval of one window and the first of the next.  The events from that gap's start on are
held back (rendered) until the next computing start is known, then written with the Free
event in its sorted place.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from . import advice as A
from . import fusion as F
from . import msproftx as X
from . import summaries as S
from . import timeline as T
from .communication import device_comm
from .dataset import HostData, ProfData
from .fmt import ts_sort_key
from .memory import release
from .parallel import JobPool
from .mindstudio import OUTPUT_DIR, _merge, _stamp, _with_device
from .readme import readme_text
from .stack import model_names
from .streams import CsvStream, JsonStream
from .windows import INT64_MAX, INT64_MIN, NotWindowable, WindowPlan, load_window
from . import writers as W
from .writers import SliceNamer, write_csv

from msprof_cli.raw import layouts as L

# fixed positions of the msprof json layers (timeline.msprof_layers order, one device)
STEP, CANN, HARDWARE, FLOW, COMM, OVERLAP, TX = range(7)


def _plus(t: int, sign: int = 1, margin: int = 1000) -> int:
    """t +- margin ns, the open ends of the first and last window kept open."""
    if t in (INT64_MIN, INT64_MAX):
        return t
    return t + sign * margin


def _restrict(layer: T.Layer, lo: float, hi: float) -> T.Layer:
    """The events of a global layer whose key lies in [lo, hi) (no metadata)."""
    if len(layer) == 0:
        return T.Layer()
    sel = np.flatnonzero((layer.keys >= lo) & (layer.keys < hi))
    if layer.render is not None:
        render = layer.render
        return T.Layer([], keys=layer.keys[sel], render=lambda idx: render(sel[idx]))
    return T.Layer([], events=layer.events[sel], keys=layer.keys[sel])


class _Timeline:
    """msprof json across windows: sorted events written at once, except those held back
    behind a pending Free gap (see the module doc)."""

    def __init__(self, out: JsonStream, device_id: int, app_pid: int) -> None:
        self.out, self.device_id, self.app_pid = out, device_id, app_pid
        self.pending: int | None = None  # end of the last computing interval so far
        self.held: list[tuple[float, int, str]] = []  # (key, layer position, event)
        # False once no later window has computing rows (a legacy selection has ended):
        # nothing is held back for a Free gap that cannot come
        self.more_rows = True

    def window(self, layers: list[T.Layer], rows_start: np.ndarray, rows_end: np.ndarray
               ) -> None:
        present = [k for k, lay in enumerate(layers) if len(lay)]
        stream = T.EventStream([layers[k] for k in present])
        n = len(stream)
        if len(rows_start):
            first_start = int(rows_start.min())
            if self.pending is not None:
                self._insert_free(first_start)
            self._flush()
            ce_last = int(_merged_last_end(rows_start, rows_end))
            fkey = float(ts_sort_key(np.array([ce_last]))[0])
            # events with a key below the Free start's are final now
            p = sum(int(np.count_nonzero(layers[k].keys < fkey)) for k in present)
            self._write(stream, 0, p)
            self._hold(stream, layers, present, p, n)
            self.pending = ce_last
        elif self.pending is not None and self.more_rows:
            self._hold(stream, layers, present, 0, n)
        elif self.pending is not None:
            self._flush()
            self.pending = None
            self._write(stream, 0, n)
        else:
            self._write(stream, 0, n)

    def _write(self, stream: T.EventStream, lo: int, hi: int) -> None:
        for chunk in stream.chunks(lo, hi, W.EVENT_CHUNK):
            self.out.write(chunk)

    def _hold(self, stream: T.EventStream, layers: list[T.Layer], present: list[int],
              lo: int, hi: int) -> None:
        if hi <= lo:
            return
        pos = stream.order[lo:hi].astype(np.int64)
        which = np.searchsorted(stream.starts, pos, side="right") - 1
        local = pos - stream.starts[which]
        keys = np.empty(len(pos))
        for j, k in enumerate(present):
            sel = which == j
            keys[sel] = layers[k].keys[local[sel]]
        layer_pos = np.asarray(present, dtype=np.int64)[which]
        texts = [e for chunk in stream.chunks(lo, hi, W.EVENT_CHUNK) for e in chunk]
        self.held.extend(zip(keys.tolist(), layer_pos.tolist(), texts))

    def _insert_free(self, first_start: int) -> None:
        begin = self.pending
        fkey = float(ts_sort_key(np.array([begin]))[0])
        ev = T.free_event(self.device_id, self.app_pid, begin, first_start)
        # the Free lane comes after every event of its key in the layers up to Overlap
        at = next((i for i, (k, lp, _) in enumerate(self.held)
                   if k > fkey or (k == fkey and lp > OVERLAP)), len(self.held))
        self.held.insert(at, (fkey, OVERLAP, ev))
        self.pending = None

    def _flush(self) -> None:
        for lo in range(0, len(self.held), W.EVENT_CHUNK):
            self.out.write([e for _, _, e in self.held[lo:lo + W.EVENT_CHUNK]])
        self.held = []

    def finish(self) -> None:
        self._flush()  # a gap after the last computing interval is not Free (timeline.md 7)


def _merged_last_end(start: np.ndarray, end: np.ndarray) -> int:
    s, e = T.merge_intervals(start.astype(np.int64), end.astype(np.int64))
    return int(e[-1])


def timeline_window(run, k: int, d, tasks: pd.DataFrame, rows, its: pd.DataFrame,
                    models: list[int], apis: pd.DataFrame, comm: T.CommData | None = None,
                    lanes: tuple[list[str], list[int]] | None = None) -> None:
    """Window k's msprof json layers, in timeline.msprof_layers order, appended to
    `run.timeline`, and its step_trace json events to `run.step_json` (`run`: a windowed
    export; `tasks`, `rows`, `its`: what the layout exports of the window, `models`: every
    model of the step-trace lanes; `comm`: the window's HCCL data, on the Communication
    `lanes` of the whole export)."""
    plan, sw, app_pid = run.plan, run.switches, run.app_pid
    lo_key = -np.inf if k == 0 else float(ts_sort_key(np.array([plan.cuts[k]]))[0])
    hi_key = np.inf if k == len(plan) - 1 else \
        float(ts_sort_key(np.array([plan.cuts[k + 1]]))[0])
    layers = [T.Layer()] * 7
    # the iterations that may have an event in the window's key range: [start, end]
    # meets the window widened by 1 µs (a float key spans up to 0.25 µs)
    near = its[(its["step_start_ns"].to_numpy(np.int64) < _plus(plan.cuts[k + 1]))
               & (its["step_end_ns"].to_numpy(np.int64) >= _plus(plan.cuts[k], -1))]
    step = _restrict(T.step_layer(d, near, app_pid, models), lo_key, hi_key)
    if len(step):  # step_trace json: the step layer alone
        for chunk in T.EventStream([step]).chunks(0, len(step), W.EVENT_CHUNK):
            run.step_json.write(chunk)
    if sw.get("step_trace", True):
        layers[STEP] = step
    if sw.get("cann", True):
        layers[CANN] = T.cann_layer(apis, app_pid)
    if sw.get("ascend", True):
        layers[HARDWARE] = T.hardware_layer(d, tasks, app_pid)
        if sw.get("cann", True) and run.use_flow:
            layers[FLOW] = T.flow_layer(d, tasks, app_pid)
    if comm is not None and sw.get("communication", True):
        layers[COMM] = T.communication_layer(d, comm, app_pid, lanes)
    overlap = sw.get("overlap_analyse", True)
    if overlap:
        layers[OVERLAP] = T.overlap_layer(d, rows, app_pid, comm)
    if run.tx_layer is not None and sw.get("msproftx", True):
        layers[TX] = _restrict(run.tx_layer, lo_key, hi_key)
    if overlap and len(rows):
        run.timeline.window(layers, rows["start_local"].to_numpy(np.int64),
                            rows["end_local"].to_numpy(np.int64))
    else:
        run.timeline.window(layers, np.zeros(0, np.int64), np.zeros(0, np.int64))


def write_task_rows(csv: dict[str, CsvStream], d, tasks: pd.DataFrame, rows,
                    prev_op: tuple[int, int] | None, device_col: str | None = None,
                    rules=None) -> pd.DataFrame | None:
    """A window's task_time, op_summary and aicpu rows appended to `csv` (streams opened by
    the export process), in chunks of CHUNK_ROWS; the wait time of the first op_summary row
    is the gap after `prev_op` (start, duration of the last row of the windows before).
    `device_col`: a leading Device_id column (mindstudio); `rules`: an advice.RuleState fed
    with the op_summary rows as written (legacy).  Returns the op_statistic aggregates."""
    def put(stem: str, part: pd.DataFrame) -> None:
        if device_col is not None:
            part.insert(0, "Device_id", device_col)
        csv[stem].write(part)

    for lo in range(0, len(tasks), W.CHUNK_ROWS):
        put("task_time", S.task_time(d, tasks.iloc[lo:lo + W.CHUNK_ROWS])[1])
    if d.has_host_ops and len(rows):
        start = rows["start_local"].to_numpy(np.int64)
        for lo in range(0, len(rows), W.CHUNK_ROWS):
            hi = min(lo + W.CHUNK_ROWS, len(rows))
            part = S.op_summary(d, rows, lo, hi)[1]
            if lo == 0 and prev_op is not None:  # the wait after the last window
                gap = max(int(start[0]) - prev_op[0] - prev_op[1], 0)
                part.iloc[0, part.columns.get_loc("Task Wait Time(us)")] = \
                    S.dur_str(np.array([gap]))[0]
            if rules is not None:
                rules.add(A.OpTable.from_summary(part, d.rd.ai_core_num, start[lo:hi]))
            put("op_summary", part)
    a = S.aicpu(d, tasks)
    if a is not None:
        put("aicpu", a[1])
    return S.op_statistic_agg(rows) if d.has_node_info and len(rows) else None


def window_fusion_rows(plan: WindowPlan, first: ProfData, model_apis: list[pd.DataFrame]
                       ) -> pd.DataFrame:
    """fusion.fusion_rows of the whole collection: the fusion records (read whole by every
    window) against the model API spans of every window."""
    host = first.host
    models = pd.concat(model_apis, ignore_index=True) if model_apis else host.apis.iloc[:0]
    scope = ProfData(prof=plan.prof, host=HostData(rd=host.rd, tables=host.tables,
                                                   apis=models),
                     devices=first.devices, log=first.log)
    return F.fusion_rows(scope, model_names(scope))


def export_mindstudio_windows(plan: WindowPlan, *, reports: Path | None = None,
                              csv_slice_rows: int, json_slice_events: int,
                              on_window=None) -> list[Path]:
    """Every file of the mindstudio layout (csv summaries), window by window.  Raises
    NotWindowable (nothing left behind) when a window holds what window mode does not
    cover; the caller then exports whole.

    Pipelined: a window's CSV rows and its timeline are written by two forked jobs while
    this process decodes the next window; a window's jobs start once the previous
    window's are done (they continue its files)."""
    run = _WindowedExport(plan, reports, csv_slice_rows, json_slice_events)
    return drive(run, len(plan), on_window, run.finish)


def drive(run, n: int, on_window, finish) -> list[Path]:
    """Run the `n` windows of a windowed export, then `finish()`; on any failure the
    running jobs are stopped and every temporary output removed (`run.discard`)."""
    try:
        for k in range(n):
            run.window(k)
            if on_window is not None:
                on_window(k)
        run.collect()
        return finish()
    except BaseException:
        run.discard()
        raise


class _WindowedExport:
    """The open outputs and the carried state of one windowed export."""

    def __init__(self, plan: WindowPlan, reports: Path | None, csv_slice_rows: int,
                 json_slice_events: int) -> None:
        self.plan = plan
        self.out_dir = plan.prof / OUTPUT_DIR
        self.dev_id = plan.dev_rd.device_id or 0
        self.app_pid = plan.dev_rd.app_pid
        self.switches = T.read_reports(reports)
        self.csv_slice_rows, self.json_slice_events = csv_slice_rows, json_slice_events
        self.msprof = JsonStream(self.name("msprof", "json"), json_slice_events)
        self.step_json = JsonStream(self.name("step_trace", "json"), json_slice_events)
        self.jobs: JobPool | None = None  # the running window's jobs
        self.csv: dict[str, CsvStream] = {}  # task_time, op_summary, aicpu, opened on use
        self.timeline = _Timeline(self.msprof, self.dev_id, self.app_pid)
        self.step_meta: list[str] = []
        self.tx_layer: T.Layer | None = None
        self.first: ProfData | None = None  # what is kept of the first window (_slim)
        self.prev_op: tuple[int, int] | None = None  # (start, dur) of the last op row
        self.op_stat: list[pd.DataFrame] = []
        self.api_cols: list[pd.DataFrame] = []
        self.api_acc = _ApiGroups()
        self.model_apis: list[pd.DataFrame] = []
        self.threads: set[int] = set()
        self.stream_ids: set[int] = set()
        self.use_flow = plan.has_apis  # as msprof_layers: flows only with host API rows

    def name(self, stem: str, ext: str) -> SliceNamer:
        return SliceNamer(self.out_dir, stem, f"_{_stamp()}", ext)

    def _csv(self, stem: str, header: list[str]) -> CsvStream:
        if stem not in self.csv:
            self.csv[stem] = CsvStream(self.name(stem, "csv"), ["Device_id"] + header,
                                       self.csv_slice_rows)
        return self.csv[stem]

    def window(self, k: int) -> None:
        data = load_window(self.plan, k)  # while the previous window's jobs run
        d = data.devices[0]
        if device_comm(data, d) is not None:
            raise NotWindowable("HCCL tasks")
        rows = S.op_rows(d)
        if self.first is None:
            self.first = _slim(data)
            # the step layer's metadata depends on the models only; its events (a few
            # hundred MB of text at 10M tasks) are made per window
            self.step_meta = T.step_layer(d, d.iterations.drop_duplicates("model_id"),
                                          self.app_pid).meta
            tx = X.markers(data)
            if len(tx) and self.switches.get("msproftx", True):
                self.tx_layer = X.tx_layer(tx, self.app_pid, X.process_name(data))
        self.collect()  # the previous window's files are where this window continues them
        # the streams are made here: their temporary files belong to this process
        if len(d.tasks):
            self._csv("task_time", S.TASK_TIME)
        if d.has_host_ops and len(rows):
            self._csv("op_summary", S.op_summary_header(d))
        if d.aicpu is not None and len(d.aicpu):
            self._csv("aicpu", S.AICPU)
        apis = data.host.apis
        pool = JobPool()
        pool.caller_busy = False  # this process only decodes the next window meanwhile
        pool.submit(lambda: self._summaries(d, rows))
        pool.submit(lambda: self._timeline(k, d, rows, apis))
        self.jobs = pool
        if d.has_host_ops and len(rows):
            self.prev_op = (int(rows["start_local"].to_numpy(np.int64)[-1]),
                            int(rows["dur_ns"].to_numpy(np.int64)[-1]))
        if len(apis):
            self.api_cols.append(self.api_acc.add(apis))
            self.model_apis.append(apis[(apis["level"] == L.LEVEL_MODEL)])
            self.threads.update(int(t) for t in apis["thread_id"].unique())
        self.stream_ids.update(int(s) for s in d.tasks["stream_id"].unique())
        del data, d, rows, apis
        release()

    def collect(self) -> None:
        """Wait for the running window's jobs and take their outputs' state back."""
        if self.jobs is None:
            return
        pool, self.jobs = self.jobs, None
        (csv, op_stat), (timeline, step_json) = pool.results()
        self.csv.update(csv)
        if op_stat is not None:
            self.op_stat.append(op_stat)
        self.timeline, self.msprof, self.step_json = timeline, timeline.out, step_json

    def _summaries(self, d, rows) -> tuple[dict[str, CsvStream], pd.DataFrame | None]:
        """The window's task_time, op_summary and aicpu rows (a JobPool job): returns the
        streams as they are now and the op_statistic aggregates."""
        op_stat = write_task_rows(self.csv, d, d.tasks, rows, self.prev_op, str(self.dev_id))
        return dict(self.csv), op_stat

    def _timeline(self, k: int, d, rows, apis: pd.DataFrame) -> tuple["_Timeline", JsonStream]:
        """This window's msprof json layers and step_trace json events (a JobPool job):
        returns the two outputs' state."""
        models = sorted(int(x) for x in d.iterations["model_id"].unique())
        timeline_window(self, k, d, d.tasks, rows, d.iterations, models, apis)
        return self.timeline, self.step_json

    def finish(self) -> list[Path]:
        self.timeline.finish()
        step_meta = self.step_meta if self.switches.get("step_trace", True) else []
        meta = _meta(self.plan, self.first, self.switches, self.threads, self.stream_ids,
                     self.tx_layer, step_meta)
        written: list[Path] = []
        timelines: list[str] = []
        if self.tx_layer is not None:  # msprof_tx json: the msproftx layer alone (small)
            written += _single_layer(self.name("msprof_tx", "json"), self.tx_layer,
                                     self.json_slice_events)
            timelines.append("msprof_tx")
        for stem, stream, head in (("msprof", self.msprof, meta),
                                   ("step_trace", self.step_json, self.step_meta)):
            files = stream.close(head)
            if files:
                written += files
                timelines.append(stem)
        release()  # the last window's heap, before the global summaries
        summaries: set[str] = set()
        for stem in ("task_time", "op_summary"):
            if stem in self.csv:
                got = self.csv[stem].close()
                written += got
                if got:
                    summaries.add(stem)
        written += self._rest(summaries)
        if written:
            readme = self.out_dir / "README.txt"
            with W.AtomicFile(readme) as fh:
                fh.write(readme_text(set(timelines), summaries, "csv"))
            written.append(readme)
        return written

    def _rest(self, summaries: set[str]) -> list[Path]:
        """The summaries of mindstudio._rest, in its order, from the windows' accumulators."""
        out: list[Path] = []
        dev_id = self.dev_id

        def emit(stem: str, table) -> None:
            if table is None:
                return
            header, df = table
            out.extend(write_csv(self.name(stem, "csv"), header, df, self.csv_slice_rows))
            summaries.add(stem)

        if self.api_cols:
            # in record order, as the whole API table: the per-call sums add in its order
            apis = pd.concat(self.api_cols, ignore_index=True)
            self.api_cols.clear()
            order = np.argsort(apis["cid"].to_numpy(), kind="stable")
            codes = apis["g"].to_numpy()[order]
            dur = apis["dur"].to_numpy()[order]
            del apis, order
            names, levels = self.api_acc.tables()
            emit("api_statistic", _with_device(dev_id, S.api_statistic_of(codes, dur, names,
                                                                          levels)))
            del codes, dur
        if self.op_stat:  # windows with node info (has_node_info) and op rows
            emit("op_statistic", _merge([_with_device(dev_id, S.op_statistic(
                None, S.combine_op_statistic(self.op_stat)))]))
        first = self.first
        d0 = first.devices[0]
        if len(d0.iterations):
            emit("step_trace", _merge([_with_device(dev_id, S.step_trace(d0.iterations))]))
        # fusion_op: the fusion records against the model spans of every window
        fusion = F.fusion_op(window_fusion_rows(self.plan, first, self.model_apis))
        emit("fusion_op", _with_device(dev_id, fusion) if fusion is not None else None)
        if "aicpu" in self.csv:  # a window had AI CPU records: the file, even without rows
            got = self.csv["aicpu"].close(empty_file=True)
            out.extend(got)
            if got:
                summaries.add("aicpu")
        tx = X.markers(first)
        if len(tx):
            emit("msprof_tx", _with_device(dev_id, X.tx_table(tx, merged=True)))
        return out

    def discard(self) -> None:
        if self.jobs is not None:
            self.jobs.cancel()  # no worker writes on after the files are removed
            self.jobs = None
        for st in (self.msprof, self.step_json, *self.csv.values()):
            st.discard()


class _ApiGroups:
    """The API calls of every window as (record index, group code, duration): the
    (API Name, Level) groups numbered across windows (summaries.api_groups)."""

    def __init__(self) -> None:
        self.ids: dict[tuple[str, str], int] = {}

    def add(self, apis: pd.DataFrame) -> pd.DataFrame:
        codes, names, levels = S.api_groups(apis)
        glob = np.array([self.ids.setdefault((str(n), str(lv)), len(self.ids))
                         for n, lv in zip(names, levels)], dtype=np.int32)
        return pd.DataFrame({"cid": apis["connection_id"].to_numpy(np.int64),
                             "g": glob[codes], "dur": apis["dur_ns"].to_numpy(np.int64)})

    def tables(self) -> tuple[np.ndarray, np.ndarray]:
        keys = list(self.ids)
        return (np.array([k[0] for k in keys], dtype=object),
                np.array([k[1] for k in keys], dtype=object))


def _single_layer(paths: SliceNamer, layer: T.Layer, slice_events: int) -> list[Path]:
    """A timeline of one global layer, written as the whole export writes it."""
    meta, events = T.assemble_stream([layer])
    return W.write_events(paths, meta, events, len(events), slice_events)


def _slim(data: ProfData) -> ProfData:
    """What the export keeps of the first window after it: iterations, name dictionaries,
    fusion / graph / msproftx records -- not its task, launch or node tables."""
    d = data.devices[0]
    dev = replace(d, tasks=d.tasks.iloc[:0].copy(), aicpu=None, l2=None)
    ht = data.host.tables
    tables = replace(ht, task_track=ht.task_track.iloc[:0], node_basic=ht.node_basic.iloc[:0],
                     tensors=ht.tensors.iloc[:0], apis=ht.apis.iloc[:0])
    host = HostData(rd=data.host.rd, tables=tables, apis=data.host.apis.iloc[:0].copy())
    return ProfData(prof=data.prof, host=host, devices=[dev], log=data.log)


def _meta(plan: WindowPlan, first: ProfData, switches: dict, threads: set[int],
          stream_ids: set[int], tx_layer: T.Layer | None, step_meta: list[str],
          overlap: bool = True, comm_meta: list[str] | None = None) -> list[str]:
    """The msprof json metadata of the whole export (timeline.msprof_layers order)."""
    dev_id = plan.dev_rd.device_id or 0
    app_pid = plan.dev_rd.app_pid
    meta: list[str] = list(step_meta)
    if switches.get("cann", True) and threads:
        meta += T.cann_meta(app_pid, threads)
    if switches.get("ascend", True) and stream_ids:
        meta += T.hardware_meta(dev_id, app_pid, stream_ids)
    if comm_meta and switches.get("communication", True):
        meta += comm_meta
    if switches.get("overlap_analyse", True) and overlap:
        meta += T.overlap_layer(first.devices[0], first.devices[0].tasks.iloc[:0], app_pid,
                                None).meta
    if tx_layer is not None:
        meta += tx_layer.meta
    return meta
