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

Several devices (windows.plan_all_devices: the same cuts for all): a window decodes every
device; msprof json merges them by time with a Free carry per device; the CSVs stay
device-major -- the first device's rows go to the output, the later devices' rows are kept
(streams.DeferredRows) and appended after it at the end.  HCCL data (Communication layer,
communication_statistic) and l2_cache (its records read in chunks at the end) are covered.
The helpers shared with the legacy layout (windowed_legacy.py) live here too.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from . import advice as A
from . import communication as C
from . import fusion as F
from . import msproftx as X
from . import summaries as S
from . import timeline as T
from .communication import device_comm
from .dataset import HostData, ProfData
from .fmt import ts_sort_key
from .memory import release
from .parallel import JobPool, run_jobs
from .mindstudio import OUTPUT_DIR, json_per_device, merge_tables, stamp, with_device
from .readme import readme_text, summary_json_stem
from .selection import ALL
from .stack import model_names
from .streams import CsvStream, DeferredRows, JsonRowsStream, JsonStream
from .windows import INT64_MAX, INT64_MIN, NotWindowable, WindowPlan, l2_rows, load_window
from . import writers as W
from .writers import SliceNamer, write_csv

from msprof_cli.raw import layouts as L

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


class WindowTimeline:
    """msprof json across windows: sorted events written at once, except those held back
    behind a pending Free gap (see the module doc) -- one per device (`overlap_at`: the
    position of each device's Overlap Analysis layer, `layer_slots`)."""

    def __init__(self, out: JsonStream, device_ids: list[int], app_pid: int,
                 overlap_at: list[int]) -> None:
        self.out, self.device_ids, self.app_pid = out, device_ids, app_pid
        self.overlap_at = overlap_at
        self.pending: dict[int, int] = {}  # device position -> end of its last computing
        self.held: list[tuple[float, int, str]] = []  # (key, layer position, event)
        # False once no later window has computing rows (a legacy selection has ended):
        # nothing is held back for a Free gap that cannot come
        self.more_rows = True

    def window(self, layers: list[T.Layer], busy: list[tuple[np.ndarray, np.ndarray]]
               ) -> None:
        """`busy`: per device, the starts and ends of the window's computing rows."""
        present = [k for k, lay in enumerate(layers) if len(lay)]
        stream = T.EventStream([layers[k] for k in present])
        n = len(stream)
        with_rows = [j for j, (s, _) in enumerate(busy) if len(s)]
        for j in with_rows:
            if j in self.pending:
                self._insert_free(j, int(busy[j][0].min()))
        new = {j: int(_merged_last_end(*busy[j])) for j in with_rows}
        if self.pending and self.more_rows:  # a device still waits for its computing
            self.pending.update(new)
            self._hold(stream, layers, present, 0, n)
            return
        self.pending = {}
        self._flush()
        if not new:
            self._write(stream, 0, n)
            return
        # events with a key below the first Free start are final now
        fkey = min(float(ts_sort_key(np.array([v]))[0]) for v in new.values())
        p = sum(int(np.count_nonzero(layers[k].keys < fkey)) for k in present)
        self._write(stream, 0, p)
        self._hold(stream, layers, present, p, n)
        self.pending = new

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

    def _insert_free(self, j: int, first_start: int) -> None:
        begin = self.pending.pop(j)
        fkey = float(ts_sort_key(np.array([begin]))[0])
        ev = T.free_event(self.device_ids[j], self.app_pid, begin, first_start)
        # the Free lane comes after every event of its key in the layers up to its Overlap
        at_layer = self.overlap_at[j]
        at = next((i for i, (k, lp, _) in enumerate(self.held)
                   if k > fkey or (k == fkey and lp > at_layer)), len(self.held))
        self.held.insert(at, (fkey, at_layer, ev))

    def _flush(self) -> None:
        for lo in range(0, len(self.held), W.EVENT_CHUNK):
            self.out.write([e for _, _, e in self.held[lo:lo + W.EVENT_CHUNK]])
        self.held = []

    def finish(self) -> None:
        self._flush()  # a gap after the last computing interval is not Free (timeline.md 7)


def _merged_last_end(start: np.ndarray, end: np.ndarray) -> int:
    s, e = T.merge_intervals(start.astype(np.int64), end.astype(np.int64))
    return int(e[-1])


def timeline_window(run, k: int, devs: list[tuple], apis: pd.DataFrame) -> None:
    """Window k's msprof json layers, in timeline.msprof_layers order, appended to
    `run.timeline`, and its step_trace json events to `run.step_json` (`run`: a windowed
    export).  `devs`: per device (device, tasks, rows, iterations, models, comm, lanes):
    what the layout exports of the window, every model of its step-trace lanes, its HCCL
    data of the window (or None) on the Communication `lanes` of the whole export."""
    plan, sw, app_pid = run.plan, run.switches, run.app_pid
    lo_key = -np.inf if k == 0 else float(ts_sort_key(np.array([plan.cuts[k]]))[0])
    hi_key = np.inf if k == len(plan) - 1 else \
        float(ts_sort_key(np.array([plan.cuts[k + 1]]))[0])
    slot = T.layer_slots(len(devs))
    layers = [T.Layer()] * slot["size"]
    steps = []
    for j, (d, tasks, rows, its, models, comm, lanes) in enumerate(devs):
        # the iterations that may have an event in the window's key range: [start, end]
        # meets the window widened by 1 µs (a float key spans up to 0.25 µs)
        near = its[(its["step_start_ns"].to_numpy(np.int64) < _plus(plan.cuts[k + 1]))
                   & (its["step_end_ns"].to_numpy(np.int64) >= _plus(plan.cuts[k], -1))]
        steps.append(_restrict(T.step_layer(d, near, app_pid, models), lo_key, hi_key))
        if T.layer_on("step", sw):
            layers[slot["step"][j]] = steps[-1]
        if T.layer_on("hardware", sw):
            layers[slot["hardware"][j]] = T.hardware_layer(d, tasks, app_pid)
        if T.layer_on("flow", sw) and run.use_flow:
            layers[slot["flow"][j]] = T.flow_layer(d, tasks, app_pid)
        if comm is not None and T.layer_on("comm", sw):
            layers[slot["comm"][j]] = T.communication_layer(d, comm, app_pid, lanes)
        if T.layer_on("overlap", sw):
            layers[slot["overlap"][j]] = T.overlap_layer(d, rows, app_pid, comm)
    steps = [lay for lay in steps if len(lay)]
    if steps:  # step_trace json: the step layers alone
        stream = T.EventStream(steps)
        for chunk in stream.chunks(0, len(stream), W.EVENT_CHUNK):
            run.step_json.write(chunk)
    if T.layer_on("cann", sw):
        layers[slot["cann"]] = T.cann_layer(apis, app_pid)
    if run.tx_layer is not None and T.layer_on("tx", sw):
        layers[slot["tx"]] = _restrict(run.tx_layer, lo_key, hi_key)
    none = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    busy = [(rows["start_local"].to_numpy(np.int64), rows["end_local"].to_numpy(np.int64))
            if T.layer_on("overlap", sw) and len(rows) else none
            for _, _, rows, _, _, _, _ in devs]
    run.timeline.window(layers, busy)


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


class L2Names:
    """The op name of each (stream, task) pair of the exported tasks: its first task's
    (summaries.l2_names over the windows so far)."""

    def __init__(self) -> None:
        self.frame: pd.DataFrame | None = None

    def add(self, tasks: pd.DataFrame) -> None:
        new = S.l2_names(tasks)
        self.frame = new if self.frame is None else pd.concat(
            [self.frame, new], ignore_index=True).drop_duplicates(
                ["stream_id", "task_id"], keep="first")


def write_l2_cache(outs: list, plans: list[WindowPlan], names: list[L2Names],
                   device_col: bool = False, restrict: bool = False) -> None:
    """l2_cache rows of the devices of `plans` (device-major) written to `outs` (the stream
    of each plan; csv: one for all), their records read in chunks at the end
    (windows.l2_rows); `device_col`: a leading Device_id column; `restrict`: the legacy
    iteration window.  The caller closes the streams (discarded here on failure)."""
    try:
        for out, p, nm in zip(outs, plans, names):
            known = nm.frame if nm.frame is not None else pd.DataFrame({
                "stream_id": np.zeros(0, np.int64), "task_id": np.zeros(0, np.int64),
                "op_name": np.zeros(0, object)})
            for l2 in l2_rows(p, W.CHUNK_ROWS):
                table = S.l2_cache_of(l2, known, p.dev_rd.l2_events, restrict)
                if table is None:
                    continue
                df = table[1]
                if device_col:
                    df.insert(0, "Device_id", str(p.dev_rd.device_id or 0))
                out.write(df)
    except BaseException:
        for out in outs:
            out.discard()
        raise


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


def export_mindstudio_windows(plan: WindowPlan | list[WindowPlan], *,
                              reports: Path | None = None,
                              csv_slice_rows: int, json_slice_events: int,
                              on_window=None, summary_format: str = "csv") -> list[Path]:
    """Every file of the mindstudio layout, window by window.  Raises
    NotWindowable (nothing left behind) when a window holds what window mode does not
    cover; the caller then exports whole.

    Pipelined: a window's CSV rows and its timeline are written by two forked jobs while
    this process decodes the next window; a window's jobs start once the previous
    window's are done (they continue its files)."""
    plans = plan if isinstance(plan, list) else [plan]
    run = _WindowedExport(plans, reports, csv_slice_rows, json_slice_events, summary_format)
    return drive(run, len(plans[0]), on_window, run.finish)


def close_json_streams(outs: list[tuple[str, JsonStream, list[str]]]
                       ) -> list[tuple[str, list[Path]]]:
    """Close the Chrome-trace streams ``(stem, stream, metadata)``: every slice's final file
    is a job of its own (parallel.run_jobs: the copies of the bodies -- a third of the
    output bytes at 10M tasks -- share the cores).  Returns each stem's files; on failure
    the streams' temporary files are left to the caller's discard."""
    jobs = [st.close_jobs(head) for _, st, head in outs]
    results = iter(run_jobs([j for js in jobs for j in js]))
    return [(stem, [p for _ in js for p in next(results)]) for (stem, _, _), js
            in zip(outs, jobs)]


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
    """The open outputs and the carried state of one windowed export (one device, or the
    devices of `plan_all_devices` with the same cuts)."""

    def __init__(self, plans: list[WindowPlan], reports: Path | None, csv_slice_rows: int,
                 json_slice_events: int, summary_format: str = "csv") -> None:
        self.plans = plans
        # json summaries: a file per device, no Device_id column (json_per_device); the
        # streams of the devices after the first are then kept in `deferred` too
        self.summary_format = summary_format
        self.plan = plan = plans[0]  # the host side and the cuts
        self.out_dir = plan.prof / OUTPUT_DIR
        self.dev_ids = [p.dev_rd.device_id or 0 for p in plans]
        self.host_dev = self.dev_ids[0]  # host API rows carry the first device's number
        self.app_pid = plan.dev_rd.app_pid
        self.switches = T.read_reports(reports)
        self.csv_slice_rows, self.json_slice_events = csv_slice_rows, json_slice_events
        self.msprof = JsonStream(self.name("msprof", "json"), json_slice_events)
        self.step_json = JsonStream(self.name("step_trace", "json"), json_slice_events)
        self.jobs: JobPool | None = None  # the running window's jobs
        # task_time, op_summary, aicpu, opened on use
        self.csv: dict[str, CsvStream | JsonRowsStream] = {}
        # the rows of the devices after the first, kept until the first's are written
        self.deferred: dict[tuple[str, int], DeferredRows | JsonRowsStream] = {}
        n = len(plans)
        self.timeline = WindowTimeline(self.msprof, self.dev_ids, self.app_pid,
                                  T.layer_slots(n)["overlap"])
        self.step_meta: list[str] = []
        self.tx_layer: T.Layer | None = None
        self.first: ProfData | None = None  # what is kept of the first window (slim_first)
        self.prev_op: list[tuple[int, int] | None] = [None] * n  # (start, dur) of last row
        self.op_stat: list[list[pd.DataFrame]] = [[] for _ in range(n)]
        self.comm_rows: list[list[pd.DataFrame]] = [[] for _ in range(n)]
        self.comm_lanes: list[tuple[list[str], list[int]] | None] = [None] * n
        self.any_comm_ops = [False] * n
        self.api_cols: list[pd.DataFrame] = []
        self.api_acc = _ApiGroups()
        self.model_apis: list[pd.DataFrame] = []
        self.threads: set[int] = set()
        self.stream_ids: list[set[int]] = [set() for _ in range(n)]
        self.l2_names = [L2Names() for _ in range(n)]
        self.use_flow = plan.has_apis  # as msprof_layers: flows only with host API rows

    def name(self, stem: str, ext: str) -> SliceNamer:
        return SliceNamer(self.out_dir, stem, f"_{stamp()}", ext)

    def _csv(self, stem: str, header: list[str], j: int) -> None:
        if self.summary_format == "json":
            for jj in {0, j}:
                out = self.csv if jj == 0 else self.deferred
                key = stem if jj == 0 else (stem, jj)
                if key not in out:
                    out[key] = JsonRowsStream(self._device_name(stem, jj), header,
                                              fill_na=True)
            return
        if stem not in self.csv:
            self.csv[stem] = CsvStream(self.name(stem, "csv"), ["Device_id"] + header,
                                       self.csv_slice_rows)
        if j and (stem, j) not in self.deferred:
            self.deferred[stem, j] = DeferredRows(self.name(f"{stem}_device_{j}", "csv"))

    def _start(self, data: ProfData) -> None:
        """The first window: what is kept of it, the step-trace metadata, the markers."""
        headers = {tuple(S.op_summary_header(d)) for d in data.devices if d.has_host_ops}
        if len(headers) > 1:  # devices with different PMU columns: merged whole
            raise NotWindowable("op_summary headers differ between devices")
        self.first = slim_first(data)
        # the step layer's metadata depends on the models only; its events (a few hundred
        # MB of text at 10M tasks) are made per window
        self.step_meta = [m for d in data.devices for m in T.step_layer(
            d, d.iterations.drop_duplicates("model_id"), self.app_pid).meta]
        tx = X.markers(data)
        if len(tx) and self.switches.get("msproftx", True):
            self.tx_layer = X.tx_layer(tx, self.app_pid, X.process_name(data))

    def window(self, k: int) -> None:
        data = load_window(self.plans if len(self.plans) > 1 else self.plan, k)
        if self.first is None:
            self._start(data)
        lo, hi = self.plan.bounds(k)
        devs = []
        for j, d in enumerate(data.devices):
            comm, lanes, ops = window_comm(data, d, ALL, lo, hi)
            if comm is not None:
                self.comm_lanes[j] = lanes
                self.any_comm_ops[j] |= ops
                self.comm_rows[j].append(comm.ops)
            models = sorted(int(x) for x in d.iterations["model_id"].unique())
            devs.append((d, d.tasks, S.op_rows(d), d.iterations, models, comm, lanes))
        self.collect()  # the previous window's files are where this window continues them
        # the streams are made here: their temporary files belong to this process
        for j, (d, tasks, rows, *_rest) in enumerate(devs):
            if len(tasks):
                self._csv("task_time", S.TASK_TIME, j)
            if d.has_host_ops and len(rows):
                self._csv("op_summary", S.op_summary_header(d), j)
            if d.aicpu is not None and len(d.aicpu):
                self._csv("aicpu", S.AICPU, j)
        apis = data.host.apis
        pool = JobPool()
        pool.caller_busy = False  # this process only decodes the next window meanwhile
        pool.submit(lambda: self._summaries(devs))
        pool.submit(lambda: self._timeline(k, devs, apis))
        self.jobs = pool
        for j, (d, tasks, rows, *_rest) in enumerate(devs):
            if d.has_host_ops and len(rows):
                self.prev_op[j] = (int(rows["start_local"].to_numpy(np.int64)[-1]),
                                   int(rows["dur_ns"].to_numpy(np.int64)[-1]))
            self.stream_ids[j].update(int(s) for s in tasks["stream_id"].unique())
            if self.plans[j].l2_records:
                self.l2_names[j].add(tasks)
        if len(apis):
            self.api_cols.append(self.api_acc.add(apis))
            self.model_apis.append(apis[(apis["level"] == L.LEVEL_MODEL)])
            self.threads.update(int(t) for t in apis["thread_id"].unique())
        del data, devs, apis
        release()

    def collect(self) -> None:
        """Wait for the running window's jobs and take their outputs' state back."""
        if self.jobs is None:
            return
        pool, self.jobs = self.jobs, None
        (csv, deferred, op_stats), (timeline, step_json) = pool.results()
        self.csv.update(csv)
        self.deferred.update(deferred)
        for j, op_stat in enumerate(op_stats):
            if op_stat is not None:
                self.op_stat[j].append(op_stat)
        self.timeline, self.msprof, self.step_json = timeline, timeline.out, step_json

    def _summaries(self, devs: list[tuple]):
        """The window's task_time, op_summary and aicpu rows of every device (a JobPool
        job): returns the outputs as they are now and the op_statistic aggregates."""
        op_stats = []
        for j, (d, tasks, rows, *_rest) in enumerate(devs):
            out = self.csv if j == 0 else {stem: self.deferred[stem, j]
                                           for stem, jj in self.deferred if jj == j}
            op_stats.append(write_task_rows(
                out, d, tasks, rows, self.prev_op[j],
                None if self.summary_format == "json" else str(self.dev_ids[j])))
        return dict(self.csv), dict(self.deferred), op_stats

    def _timeline(self, k: int, devs: list[tuple], apis: pd.DataFrame
                  ) -> tuple["WindowTimeline", JsonStream]:
        """This window's msprof json layers and step_trace json events (a JobPool job):
        returns the two outputs' state."""
        timeline_window(self, k, devs, apis)
        return self.timeline, self.step_json

    def _device_name(self, stem: str, j: int) -> SliceNamer:
        return self.name(f"{summary_json_stem(stem)}_device_{self.dev_ids[j]}", "json")

    def _close_json(self, stem: str, streams: list[JsonRowsStream],
                    empty_file: bool = False) -> list[Path]:
        """The json files of one summary, per device as `json_per_device` names them: a
        file per device with rows, ``{stem}_{ts}.json`` when only one has (or none, with
        `empty_file`: ``[]``)."""
        has = [k for k, st in enumerate(streams) if st.total]
        if len(has) > 1:
            return [p for st in streams for p in st.close()]
        out: list[Path] = []
        for k, st in enumerate(streams):
            if k == (has[0] if has else 0):
                out += st.close(empty_file, self.name(summary_json_stem(stem), "json").single())
            else:
                st.discard()
        return out

    def _close_csv(self, stem: str, empty_file: bool = False) -> list[Path]:
        """The device-major file: the first device's rows, then each later device's."""
        if self.summary_format == "json":
            streams = [self.csv.pop(stem)] + [self.deferred.pop((stem, j))
                                              for j in range(1, len(self.plans))
                                              if (stem, j) in self.deferred]
            return self._close_json(stem, streams, empty_file)
        out = self.csv[stem]
        for j in range(1, len(self.plans)):
            if (stem, j) in self.deferred:
                self.deferred.pop((stem, j)).replay(out)
        return out.close(empty_file=empty_file)

    def finish(self) -> list[Path]:
        self.timeline.finish()
        sw = self.switches
        step_meta = self.step_meta if sw.get("step_trace", True) else []
        first = self.first
        n = len(self.plans)
        overlap = [bool(self.stream_ids[j]) or self.any_comm_ops[j] for j in range(n)]
        comm_meta = [T.comm_meta(self.dev_ids[j], self.app_pid, self.comm_lanes[j])
                     if self.comm_lanes[j] is not None else None for j in range(n)]
        meta = msprof_meta(self.plan, first, sw, self.threads, self.stream_ids, self.tx_layer,
                     step_meta, overlap, comm_meta)
        written: list[Path] = []
        timelines: list[str] = []
        if self.tx_layer is not None:  # msprof_tx json: the msproftx layer alone (small)
            written += _single_layer(self.name("msprof_tx", "json"), self.tx_layer,
                                     self.json_slice_events)
            timelines.append("msprof_tx")
        outs = [("msprof", self.msprof, meta), ("step_trace", self.step_json, self.step_meta)]
        for stem, files in close_json_streams([(stem, st, head) for stem, st, head in outs]):
            if files:
                written += files
                timelines.append(stem)
        release()  # the last window's heap, before the global summaries
        summaries: set[str] = set()
        for stem in ("task_time", "op_summary"):
            if stem in self.csv:
                got = self._close_csv(stem)
                written += got
                if got:
                    summaries.add(stem)
        written += self._rest(summaries)
        if written:
            readme = self.out_dir / "README.txt"
            with W.AtomicFile(readme) as fh:
                fh.write(readme_text(set(timelines), summaries, self.summary_format))
            written.append(readme)
        return written

    def _rest(self, summaries: set[str]) -> list[Path]:
        """The summaries of mindstudio._rest, in its order, from the windows' accumulators."""
        out: list[Path] = []

        def emit(stem: str, table) -> None:
            if table is None:
                return
            header, df = table
            if self.summary_format == "json":
                out.extend(json_per_device(self.out_dir, stem, header, df))
            else:
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
            emit("api_statistic", with_device(self.host_dev, S.api_statistic_of(
                codes, dur, names, levels)))
            del codes, dur
        ids = self.dev_ids
        first = self.first
        # windows with node info (has_node_info) and op rows
        emit("op_statistic", merge_tables([with_device(ids[j], S.op_statistic(
            None, S.combine_op_statistic(st))) for j, st in enumerate(self.op_stat) if st]))
        emit("step_trace", merge_tables([with_device(ids[j], S.step_trace(d.iterations))
                                   for j, d in enumerate(first.devices)
                                   if len(d.iterations)]))
        # fusion_op: the fusion records against the model spans of every window
        fusion = F.fusion_op(window_fusion_rows(self.plan, first, self.model_apis))
        emit("fusion_op", with_device(self.host_dev, fusion) if fusion is not None else None)
        if "aicpu" in self.csv:  # a window had AI CPU records: the file, even without rows
            got = self._close_csv("aicpu", empty_file=True)
            out.extend(got)
            if got:
                summaries.add("aicpu")
        if any(p.l2_records for p in self.plans):
            if self.summary_format == "json":
                l2s = [JsonRowsStream(self._device_name("l2_cache", j), S.L2_CACHE, True)
                       for j in range(len(self.plans))]
                write_l2_cache(l2s, self.plans, self.l2_names)
                got = self._close_json("l2_cache", l2s)
            else:
                l2 = CsvStream(self.name("l2_cache", "csv"), ["Device_id"] + S.L2_CACHE,
                               self.csv_slice_rows)
                write_l2_cache([l2] * len(self.plans), self.plans, self.l2_names,
                               device_col=True)
                got = l2.close()
            out.extend(got)
            if got:
                summaries.add("l2_cache")
        emit("communication_statistic", merge_tables([
            with_device(ids[j], C.communication_statistic(pd.concat(rows, ignore_index=True)))
            for j, rows in enumerate(self.comm_rows)
            if rows and sum(len(r) for r in rows)]))
        tx = X.markers(first)
        if len(tx):
            emit("msprof_tx", with_device(self.host_dev, X.tx_table(tx, merged=True)))
        return out

    def discard(self) -> None:
        if self.jobs is not None:
            self.jobs.cancel()  # no worker writes on after the files are removed
            self.jobs = None
        for st in (self.msprof, self.step_json, *self.csv.values(), *self.deferred.values()):
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


def slim_first(data: ProfData) -> ProfData:
    """What the export keeps of the first window after it: iterations, name dictionaries,
    fusion / graph / msproftx records -- not its task, launch or node tables."""
    devs = [replace(d, tasks=d.tasks.iloc[:0].copy(), aicpu=None, l2=None)
            for d in data.devices]
    ht = data.host.tables
    tables = replace(ht, task_track=ht.task_track.iloc[:0], node_basic=ht.node_basic.iloc[:0],
                     tensors=ht.tensors.iloc[:0], apis=ht.apis.iloc[:0])
    host = HostData(rd=data.host.rd, tables=tables, apis=data.host.apis.iloc[:0].copy())
    return ProfData(prof=data.prof, host=host, devices=devs, log=data.log,
                    rank_ids=data.rank_ids)


def window_comm(data: ProfData, d, sel, lo: int, hi: int
                ) -> tuple[T.CommData | None, tuple[list[str], list[int]] | None, bool]:
    """The HCCL data of a window's device: (what starts in [lo, hi), the Communication
    lanes of the whole export, whether the export has op executions) -- hccl_info is read
    whole by every window (its op executions are numbered over the collection)."""
    comm = device_comm(data, d, sel)
    if comm is None:
        return None, None, False
    return comm_in_window(comm, lo, hi), T.comm_lanes(comm), len(comm.ops) > 0


def comm_in_window(comm: T.CommData, lo: int, hi: int) -> T.CommData:
    """The op executions and steps of `comm` that start in [lo, hi)."""
    o = comm.ops["start_local"].to_numpy(np.int64)
    st = comm.steps["start_local"].to_numpy(np.int64) if len(comm.steps) \
        else np.zeros(0, np.int64)
    ok_o, ok_s = (o >= lo) & (o < hi), (st >= lo) & (st < hi)
    return T.CommData(ops=comm.ops[ok_o].reset_index(drop=True),
                      steps=comm.steps[ok_s].reset_index(drop=True) if len(comm.steps)
                      else comm.steps, step_args=comm.step_args[ok_s])


def msprof_meta(plan: WindowPlan, first: ProfData, switches: dict, threads: set[int],
          stream_ids: list[set[int]], tx_layer: T.Layer | None, step_meta: list[str],
          overlap: list[bool], comm_meta: list[list[str] | None]) -> list[str]:
    """The msprof json metadata of the whole export (timeline.msprof_layers order; per
    device: its streams, whether it has an Overlap Analysis layer, its Communication
    metadata or None)."""
    app_pid = plan.dev_rd.app_pid
    devs = first.devices
    parts: dict[str, list[str]] = {"step": list(step_meta)}
    if T.layer_on("cann", switches) and threads:
        parts["cann"] = T.cann_meta(app_pid, threads)
    if T.layer_on("hardware", switches):
        parts["hardware"] = [m for d, streams in zip(devs, stream_ids) if streams
                             for m in T.hardware_meta(d.device_id, app_pid, streams)]
    if T.layer_on("comm", switches):
        parts["comm"] = [m for cm in comm_meta for m in (cm or [])]
    if T.layer_on("overlap", switches):
        parts["overlap"] = [m for d, on in zip(devs, overlap) if on
                            for m in T.overlap_layer(d, d.tasks.iloc[:0], app_pid, None).meta]
    if tx_layer is not None:
        parts["tx"] = list(tx_layer.meta)
    return T.in_layer_order(parts)
