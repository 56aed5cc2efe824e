"""Layout (b): ``PROF_X/mindstudio_profiler_output/{name}_{YYYYmmddHHMMSS}.{csv,json}``.

All data of the PROF dir (all models, all iterations); devices merged, ``Device_id`` first in
every CSV; host API summaries (api_statistic, fusion_op) once per device, with its number (the
analysis exports them in every device dir and merges the dirs); msprof_tx rows carry the PROF's
first device.
Written from the plan (outputs.py) of every device with the same cuts: a window decodes
every device; msprof json merges them by time with a Free carry per device; the CSVs stay
device-major -- the first device's rows go to the output, the later devices' rows are kept
(streams.DeferredRows) and appended after it at the end.  Devices whose op_summary columns
differ (one collected without PMU) share one header, the union, N/A where a device has none.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd

from msprof_cli.raw import layouts as L

from . import communication as C
from . import fusion as F
from . import msproftx as X
from . import summaries as S
from . import timeline as T
from . import writers as W
from .dataset import ProfData, number_comm_ops
from .memory import release
from .parallel import JobPool
from .readme import readme_text, summary_json_stem
from .selection import ALL
from .streams import CsvStream, DeferredEvents, DeferredRows, JsonRowsStream, JsonStream
from .plan import Plan
from .writers import SliceNamer, write_csv, write_json_rows
from .outputs import (MEMCPY_ROWS, TASK_ROW_JOBS, TASK_ROW_STEMS, L2Names, WindowTimeline,
                      close_json_streams, drive, msprof_meta, slim_first, timeline_window,
                      window_comm, window_fusion_rows, write_l2_cache, write_task_rows)

OUTPUT_DIR = "mindstudio_profiler_output"


def stamp() -> str:
    return time.strftime("%Y%m%d%H%M%S", time.localtime())


def with_device(dev_id: int, table: S.Table) -> S.Table:
    header, df = table
    df = df.copy()
    df.insert(0, "Device_id", str(dev_id))
    return ["Device_id"] + header, df


def merge_tables(tables: list[S.Table]) -> S.Table | None:
    tables = [t for t in tables if t is not None]
    if not tables:
        return None
    # the widest header wins (step_trace: devices with fewer Reduce pairs get N/A there)
    header = max((t[0] for t in tables), key=len)
    df = pd.concat([t[1] for t in tables], ignore_index=True)
    return header, df.fillna("N/A") if df.isna().any(axis=None) else df


def json_per_device(out_dir: Path, name: str, header: list[str], df: pd.DataFrame
                     ) -> list[Path]:
    """``--summary-format json``: the per-device summaries copied as they are (no Device_id,
    export-files.md 2.2): ``{name}_{ts}.json`` for one device, ``{name}_device_{id}_{ts}.json``
    each when the PROF dir holds several (project choice: keeps the devices apart)."""
    devices = list(dict.fromkeys(df["Device_id"].tolist())) if len(df) else []
    stem = summary_json_stem(name)
    if len(devices) <= 1:
        return write_json_rows(out_dir / f"{stem}_{stamp()}.json", header[1:],
                               df.drop(columns="Device_id"))
    out: list[Path] = []
    for dev in devices:
        part = df[df["Device_id"] == dev].drop(columns="Device_id")
        out += write_json_rows(out_dir / f"{stem}_device_{dev}_{stamp()}.json", header[1:], part)
    return out


def export_mindstudio(plan: Plan, *, reports: Path | None = None,
                      csv_slice_rows: int = W.CSV_SLICE_ROWS,
                      json_slice_events: int = W.JSON_SLICE_EVENTS,
                      on_window=None, summary_format: str = "csv") -> list[Path]:
    """Every file of the mindstudio layout, window by window (one window: the whole).

    Pipelined: a window's CSV rows and its timeline are written by two forked jobs while
    this process decodes the next window; a window's jobs start once the previous
    window's are done (they continue its files)."""
    run = _MindstudioExport(plan, reports, csv_slice_rows, json_slice_events, summary_format)
    return drive(run, len(plan), on_window, run.finish)


class _MindstudioExport:
    # the ts memcpy tasks as the real analysis shows them (summaries.task_time,
    # timeline.hardware_layer / memcpy_events): after the other task_time rows, as
    # "MemcopyAsync" events without a lane name or flows
    analysis_memcpy = True
    """The open outputs and the carried state of one mindstudio export (one device, or the
    devices of `plan_all_devices` with the same cuts)."""

    def __init__(self, plan: Plan, reports: Path | None, csv_slice_rows: int,
                 json_slice_events: int, summary_format: str = "csv") -> None:
        # json summaries: a file per device, no Device_id column (json_per_device); the
        # streams of the devices after the first are then kept in `deferred` too
        self.summary_format = summary_format
        self.plan = plan
        self.facts = plan.facts
        self.out_dir = plan.prof / OUTPUT_DIR
        self.dev_ids = [f.rd.device_id or 0 for f in self.facts]
        # host API rows carry the first device's number
        self.host_dev = self.dev_ids[0] if self.dev_ids else 0
        self.app_pid = plan.app_pid()
        self.switches = T.read_reports(reports)
        self.csv_slice_rows, self.json_slice_events = csv_slice_rows, json_slice_events
        self.msprof = JsonStream(self.name("msprof", "json"), json_slice_events)
        self.step_json = JsonStream(self.name("step_trace", "json"), json_slice_events)
        self.jobs: JobPool | None = None  # the running window's jobs
        # task_time, op_summary, aicpu, opened on use
        self.csv: dict[str, CsvStream | JsonRowsStream] = {}
        # the rows of the devices after the first, kept until the first's are written
        self.deferred: dict[tuple[str, int], DeferredRows | JsonRowsStream] = {}
        n = len(self.dev_ids)
        # one timeline per device: the first writes the files, the later ones are kept
        # (DeferredEvents) and appended after it at the end -- device-major, as the
        # analysis's merge of its per-device files (outputs.timeline_window)
        sorts = T.overlap_sorts(self.dev_ids)
        self.overlap_sorts = [sorts[i] for i in self.dev_ids]
        at = T.layer_slots(1)["overlap"]
        self.timelines = [WindowTimeline(
            self.msprof if j == 0 else DeferredEvents(self.name(f"msprof_device_{i}", "json")),
            [i], self.app_pid, at, [self.overlap_sorts[j]]) for j, i in enumerate(self.dev_ids)] \
            or [WindowTimeline(self.msprof, [], self.app_pid, at)]  # a host dir alone
        self.timelines[0].parallel = len(plan) == 1
        self.step_outs: list[JsonStream | DeferredEvents] = [self.step_json] + [
            DeferredEvents(self.name(f"step_trace_device_{i}", "json"))
            for i in self.dev_ids[1:]]
        # msproftx events: the analysis's host file, merged after the device files
        self.tx_out = DeferredEvents(self.name("msprof_host", "json"))
        self.step_meta: list[list[str]] = []
        self.op_header: list[str] = []  # op_summary's (_start)
        self.tx_layer: T.Layer | None = None
        self.first: ProfData | None = None  # what is kept of the first window (slim_first)
        self.prev_op: list[tuple[int, int] | None] = [None] * n  # (start, dur) of last row
        self.op_stat: list[list[pd.DataFrame]] = [[] for _ in range(n)]
        self.comm_rows: list[list[pd.DataFrame]] = [[] for _ in range(n)]
        self.comm_lanes: list[tuple[list[str], list[int]] | None] = [None] * n
        self.comm_seen = [0] * n  # collectives of the windows so far (dataset.number_comm_ops)
        self.any_comm_ops = [False] * n
        self.api_cols: list[pd.DataFrame] = []
        self.api_acc = _ApiGroups()
        self.model_apis: list[pd.DataFrame] = []
        self.threads: set[int] = set()
        self.stream_ids: list[set[int]] = [set() for _ in range(n)]
        self.any_op_rows = [False] * n  # Overlap Analysis' Computing (timeline_window)
        self.l2_names = [L2Names() for _ in range(n)]
        self.use_flow = plan.has_apis()  # as msprof_layers: flows only with host API rows

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
        # devices with other PMU columns (one collected without): one header, the union
        # in device order, N/A in the columns a device has not
        for d in data.devices:
            if d.has_host_ops:
                self.op_header += [c for c in S.op_summary_header(d)
                                   if c not in self.op_header]
        self.first = slim_first(data)
        # the step layer's metadata depends on the models only; its events (a few hundred
        # MB of text at 10M tasks) are made per window
        self.step_meta = [T.step_layer(d, d.iterations.drop_duplicates("model_id"),
                                       self.app_pid).meta for d in data.devices]
        tx = X.markers(data)
        if len(tx):  # msprof_tx json, and msprof json's last layer (if switched on)
            self.tx_layer = X.tx_layer(tx, self.app_pid, X.process_name(data),
                                       X.collection_begin_ns(data))

    def window(self, k: int) -> None:
        data = self.plan.load(k)
        if self.first is None:
            self._start(data)
        lo, hi = self.plan.bounds(k)
        devs = []
        for j, d in enumerate(data.devices):
            self.comm_seen[j] = number_comm_ops(d, self.comm_seen[j])
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
                if (MEMCPY_ROWS, j) not in self.deferred \
                        and (~S.not_memcpy(tasks)).any():
                    self.deferred[MEMCPY_ROWS, j] = DeferredRows(
                        self.name(f"{MEMCPY_ROWS}_device_{j}", "csv"))
            if d.has_host_ops and len(rows):
                self._csv("op_summary", self.op_header, j)
            if d.aicpu is not None and len(d.aicpu):
                self._csv("aicpu", S.AICPU, j)
        apis = data.host.apis
        pool = JobPool()
        pool.caller_busy = False  # this process only decodes the next window meanwhile
        # the jobs bind their inputs now: a job that waits for a free core forks later
        # one window: nothing is decoded meanwhile, so the task rows take two jobs
        parts = TASK_ROW_JOBS if len(self.plan) == 1 else (TASK_ROW_STEMS,)
        for stems in parts:
            pool.submit(lambda devs=devs, stems=stems: self._summaries(devs, stems))
        pool.submit(lambda devs=devs, apis=apis: self._timeline(k, devs, apis))
        self.jobs = pool
        for j, (d, tasks, rows, *_rest) in enumerate(devs):
            if d.has_host_ops and len(rows):
                self.prev_op[j] = (int(rows["start_local"].to_numpy(np.int64)[-1]),
                                   int(rows["dur_ns"].to_numpy(np.int64)[-1]))
            self.stream_ids[j].update(int(s) for s in T.lane_streams(tasks, True))
            self.any_op_rows[j] |= bool(d.has_host_ops and len(rows))
            if self.facts[j].l2_records:
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
        *rows, (timeline, step_json) = pool.results()
        for csv, deferred, op_stats in rows:
            self.csv.update(csv)
            self.deferred.update(deferred)
            for j, op_stat in enumerate(op_stats):
                if op_stat is not None:
                    self.op_stat[j].append(op_stat)
        self.timelines, (self.step_outs, self.tx_out) = timeline, step_json
        self.msprof, self.step_json = timeline[0].out, self.step_outs[0]

    def _summaries(self, devs: list[tuple], stems: tuple[str, ...] = TASK_ROW_STEMS):
        """The window's task_time, op_summary and aicpu rows (`stems` of them) of every
        device (a JobPool job): returns those outputs as they are now and the op_statistic
        aggregates."""
        op_stats = []
        for j, (d, tasks, rows, *_rest) in enumerate(devs):
            out = dict(self.csv) if j == 0 else {stem: self.deferred[stem, j]
                                                 for stem, jj in self.deferred if jj == j}
            if j == 0 and (MEMCPY_ROWS, 0) in self.deferred:
                out[MEMCPY_ROWS] = self.deferred[MEMCPY_ROWS, 0]
            op_stats.append(write_task_rows(
                out, d, tasks, rows, self.prev_op[j],
                None if self.summary_format == "json" else str(self.dev_ids[j]),
                op_header=self.op_header, stems=stems, analysis=self.analysis_memcpy))
        return ({k: v for k, v in self.csv.items() if k in stems},
                {k: v for k, v in self.deferred.items() if k[0] in stems
                 or (k[0] == MEMCPY_ROWS and "task_time" in stems)}, op_stats)

    def _timeline(self, k: int, devs: list[tuple], apis: pd.DataFrame
                  ) -> tuple[list[WindowTimeline], list]:
        """This window's msprof json layers and step_trace json events (a JobPool job):
        returns the outputs' state (per device)."""
        timeline_window(self, k, devs, apis)
        return self.timelines, (self.step_outs, self.tx_out)

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
        def copies(j: int, out) -> None:  # a device's ts memcpy rows after its others
            if stem == "task_time" and (MEMCPY_ROWS, j) in self.deferred:
                self.deferred.pop((MEMCPY_ROWS, j)).replay(out)

        if self.summary_format == "json":
            first = self.csv.pop(stem)
            copies(0, first)
            streams = [first]
            for j in range(1, len(self.dev_ids)):
                if (stem, j) in self.deferred:
                    streams.append(self.deferred.pop((stem, j)))
                    copies(j, streams[-1])
            return self._close_json(stem, streams, empty_file)
        out = self.csv[stem]
        copies(0, out)
        for j in range(1, len(self.dev_ids)):
            if (stem, j) in self.deferred:
                self.deferred.pop((stem, j)).replay(out)
            copies(j, out)
        return out.close(empty_file=empty_file)

    def finish(self) -> list[Path]:
        for j, tl in enumerate(self.timelines):
            tl.finish()
            if j:  # the later devices' events after the first's (device-major)
                tl.out.replay(self.msprof)
                self.step_outs[j].replay(self.step_json)
        self.tx_out.replay(self.msprof)
        sw = self.switches
        step_meta = self.step_meta if sw.get("step_trace", True) else [[]] * len(self.dev_ids)
        first = self.first
        n = len(self.dev_ids)
        overlap = [self.any_op_rows[j] or self.any_comm_ops[j] for j in range(n)]
        comm_meta = [T.comm_meta(self.dev_ids[j], self.app_pid, self.comm_lanes[j])
                     if self.comm_lanes[j] is not None else None for j in range(n)]
        meta = msprof_meta(self.app_pid, first, sw, self.threads, self.stream_ids,
                           self.tx_layer if T.layer_on("tx", sw) else None,
                           step_meta, overlap, comm_meta, self.overlap_sorts, tx_last=True)
        written: list[Path] = []
        timelines: list[str] = []
        if self.tx_layer is not None:  # msprof_tx json: the msproftx layer alone (small),
            # every marker (msprof json's: those since the collection began)
            written += _single_layer(self.name("msprof_tx", "json"), X.tx_layer(
                X.markers(first), self.app_pid, X.process_name(first)), self.json_slice_events)
            timelines.append("msprof_tx")
        outs = [("msprof", self.msprof, meta),
                ("step_trace", self.step_json, [m for sm in self.step_meta for m in sm])]
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
            table = S.api_statistic_of(codes, dur, names, levels)
            emit("api_statistic", self._every_device(table))
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
        emit("fusion_op", self._every_device(fusion) if fusion is not None else None)
        if "aicpu" in self.csv:  # a window had AI CPU records: the file, even without rows
            got = self._close_csv("aicpu", empty_file=True)
            out.extend(got)
            if got:
                summaries.add("aicpu")
        if any(f.l2_records for f in self.facts):
            if self.summary_format == "json":
                l2s = [JsonRowsStream(self._device_name("l2_cache", j), S.L2_CACHE, True)
                       for j in range(len(self.dev_ids))]
                write_l2_cache(l2s, self.plan, self.l2_names)
                got = self._close_json("l2_cache", l2s)
            else:
                l2 = CsvStream(self.name("l2_cache", "csv"), ["Device_id"] + S.L2_CACHE,
                               self.csv_slice_rows)
                write_l2_cache([l2] * len(self.dev_ids), self.plan, self.l2_names,
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
            emit("msprof_tx", X.tx_table(tx, merged=True))  # Device_id host
        return out

    def _every_device(self, table: S.Table) -> S.Table | None:
        """A summary of host data (api_statistic, fusion_op) in the merged file: the analysis
        exports it in every device dir, with that device's number, and the merge
        (MsprofOutputSummary._save_summary_data) appends the device dirs in sorted order --
        so one copy of the rows per device, device-major (the PROF's first device alone
        when it has no device dir)."""
        ids = self.dev_ids or [self.host_dev]
        return merge_tables([with_device(i, table) for i in ids])

    def discard(self) -> None:
        if self.jobs is not None:
            self.jobs.cancel()  # no worker writes on after the files are removed
            self.jobs = None
        for st in (self.msprof, self.step_json, *self.csv.values(), *self.deferred.values(),
                   *(tl.out for tl in self.timelines[1:]), *self.step_outs[1:], self.tx_out):
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
