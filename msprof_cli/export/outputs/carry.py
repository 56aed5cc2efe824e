"""The outputs both text layouts write window by window (plan.py), and what they carry
across a cut.

Every text output is written from a plan: each window is decoded, its rows appended to the
open outputs and dropped before the next one, so memory is bounded by the window (a plan of
one window is the whole collection: the same code, one pass).  The per-task CSVs
(op_summary, task_time, aicpu) are appended in time order; op_statistic keeps exact
per-window aggregates; api_statistic, fusion_op and the step-trace outputs are computed once
from small global inputs; the msprof json events of a window all sort before the next
window's (windows are cut where nothing crosses, see windows.py), so each window's sorted
events are appended to the open slices.

Two things cross a cut and are carried: the wait time of a window's first op_summary row
(the previous row's end), and the Overlap Analysis ``Free`` gap between the last computing
interval of one window and the first of the next.  The events from that gap's start on are
held back (rendered) until the next computing start is known, then written with the Free
event in its sorted place (`WindowTimeline`).

The layouts (legacy.py, mindstudio.py) are drivers over these: the state of their open
outputs, one `window(k)` per window (its jobs run in forked workers while the next window
is decoded), `finish()`.  l2_cache records carry no time: they are read in chunks at the end
(`Plan.l2_chunks`).
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from ..decode.data import HostData, ProfData
from ..decode.quiet import INT64_MAX, INT64_MIN
from ..derive import advice_table as OT
from ..derive import fusion as F
from ..derive.communication import device_comm
from ..derive.stack import model_names
from ..fmt import ts_sort_key
from ..plan import Plan
from ..runtime.parallel import run_jobs
from ..sinks import writers as W
from ..sinks.streams import CsvStream, JsonStream
from . import comm_layer as CL
from . import overlap_layer as OV
from . import summaries as S
from . import timeline as T
from . import trace as TR


def _plus(t: int, sign: int = 1, margin: int = 1000) -> int:
    """t +- margin ns, the open ends of the first and last window kept open."""
    if t in (INT64_MIN, INT64_MAX):
        return t
    return t + sign * margin


def _restrict(layer: TR.Layer, lo: float, hi: float) -> TR.Layer:
    """The events of a global layer whose key lies in [lo, hi) (no metadata)."""
    if len(layer) == 0:
        return TR.Layer()
    sel = np.flatnonzero((layer.keys >= lo) & (layer.keys < hi))
    if layer.render is not None:
        render = layer.render
        return TR.Layer([], keys=layer.keys[sel], render=lambda idx: render(sel[idx]))
    return TR.Layer([], events=layer.events[sel], keys=layer.keys[sel])


class WindowTimeline:
    """msprof json across windows: sorted events written at once, except those held back
    behind a pending Free gap (see the module doc) -- one per device (`overlap_at`: the
    position of each device's Overlap Analysis layer, `layer_slots`)."""

    def __init__(self, out: JsonStream, device_ids: list[int], app_pid: int,
                 overlap_at: list[int], overlap_sorts: list[int] | None = None) -> None:
        self.out, self.device_ids, self.app_pid = out, device_ids, app_pid
        self.overlap_at = overlap_at
        # per device: the sort index of its Overlap Analysis process (timeline.overlap_sorts)
        self.overlap_sorts = overlap_sorts or [TR.SORT_OVERLAP] * len(device_ids)
        self.pending: dict[int, int] = {}  # device position -> end of its last computing
        self.held: list[tuple[float, int, str]] = []  # (key, layer position, event)
        # False once no later window has computing rows (a legacy selection has ended):
        # nothing is held back for a Free gap that cannot come
        self.more_rows = True
        # a one-window plan: the events are rendered by parallel pieces (nothing else is
        # decoded meanwhile; JsonStream.write_stream)
        self.parallel = False

    def window(self, layers: list[TR.Layer], busy: list[tuple[np.ndarray, np.ndarray]]
               ) -> None:
        """`busy`: per device, the starts and ends of the window's computing rows."""
        present = [k for k, lay in enumerate(layers) if len(lay)]
        stream = TR.EventStream([layers[k] for k in present])
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

    def _write(self, stream: TR.EventStream, lo: int, hi: int) -> None:
        self.out.write_stream(stream, lo, hi, self.parallel)

    def _hold(self, stream: TR.EventStream, layers: list[TR.Layer], present: list[int],
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
        ev = OV.free_event(self.device_ids[j], self.app_pid, begin, first_start,
                          self.overlap_sorts[j])
        # the Free lane comes after every event of its key in the layers up to its Overlap
        at_layer = self.overlap_at[j]
        at = next((i for i, (k, lp, _) in enumerate(self.held)
                   if k > fkey or (k == fkey and lp > at_layer)), len(self.held))
        self.held.insert(at, (fkey, at_layer, ev))

    def _flush(self) -> None:
        for lo in range(0, len(self.held), W.EVENT_CHUNK):
            part = self.held[lo:lo + W.EVENT_CHUNK]
            self.out.write([e for _, _, e in part], [k for k, _, _ in part])
        self.held = []

    def finish(self) -> None:
        self._flush()  # a gap after the last computing interval is not Free (timeline.md 7)


def _merged_last_end(start: np.ndarray, end: np.ndarray) -> int:
    s, e = OV.merge_intervals(start.astype(np.int64), end.astype(np.int64))
    return int(e[-1])


def timeline_window(run, k: int, devs: list[tuple], apis: pd.DataFrame) -> None:
    """Window k's msprof json layers, in timeline.msprof_layers order, appended to
    `run.timelines` (one WindowTimeline per device), and its step_trace json events to
    `run.step_outs` (one output per device) -- `run`: a windowed export.  `devs`: per device
    (device, tasks, rows, iterations, models, comm, lanes): what the layout exports of the
    window, every model of its step-trace lanes, its HCCL data of the window (or None) on the
    Communication `lanes` of the whole export.

    Each device's timeline is the analysis's per-device file (device_N/timeline): its own
    layers plus the whole CANN layer; the mindstudio merge (MsprofOutputSummary.
    _insert_json_data / FileSliceHelper._pretreat_json_data) appends the device files one
    after the other and drops a CANN event (name with ``@``) whose connection_id is not 0
    and already seen -- so a later device keeps only the CANN events of connection_id 0
    (project: msproftx stays with the first device)."""
    plan, sw, app_pid = run.plan, run.switches, run.app_pid
    lo_key = -np.inf if k == 0 else float(ts_sort_key(np.array([plan.cuts[k]]))[0])
    hi_key = np.inf if k == len(plan) - 1 else \
        float(ts_sort_key(np.array([plan.cuts[k + 1]]))[0])
    # mindstudio: msproftx is the host dir's own file in the analysis, merged after the
    # device files (`run.tx_out` keeps its events until then); legacy: a layer of msprof json
    tx_out = getattr(run, "tx_out", None)
    if tx_out is not None and run.tx_layer is not None and TR.layer_on("tx", sw):
        tx = _restrict(run.tx_layer, lo_key, hi_key)
        if len(tx):
            stream = TR.EventStream([tx])
            for chunk in stream.chunks(0, len(stream), W.EVENT_CHUNK):
                tx_out.write(chunk)
    slot = {kind: (at[0] if isinstance(at, list) else at)
            for kind, at in TR.layer_slots(1).items()}  # one device's layer positions
    cann = later_cann = TR.Layer()
    if TR.layer_on("cann", sw):
        cann = T.cann_layer(apis, app_pid)
        if len(devs) > 1 and len(apis):
            later_cann = T.cann_layer(
                apis[apis["connection_id"].to_numpy(np.int64) == 0], app_pid)
    for j, (d, tasks, rows, its, models, comm, lanes) in enumerate(devs):
        layers = [TR.Layer()] * slot["size"]
        # the iterations that may have an event in the window's key range: [start, end]
        # meets the window widened by 1 µs (a float key spans up to 0.25 µs)
        near = its[(its["step_start_ns"].to_numpy(np.int64) < _plus(plan.cuts[k + 1]))
                   & (its["step_end_ns"].to_numpy(np.int64) >= _plus(plan.cuts[k], -1))]
        step = _restrict(T.step_layer(d, near, app_pid, models), lo_key, hi_key)
        if TR.layer_on("step", sw):
            layers[slot["step"]] = step
        if len(step):  # step_trace json: the step layer alone
            stream = TR.EventStream([step])
            for chunk in stream.chunks(0, len(stream), W.EVENT_CHUNK):
                run.step_outs[j].write(chunk)
        if TR.layer_on("hardware", sw):
            layers[slot["hardware"]] = T.hardware_layer(
                d, tasks, app_pid, getattr(run, "analysis_memcpy", False))
        if TR.layer_on("flow", sw) and run.use_flow:
            layers[slot["flow"]] = T.flow_layer(d, tasks, app_pid,
                                                getattr(run, "analysis_memcpy", False))
        if comm is not None and TR.layer_on("comm", sw):
            layers[slot["comm"]] = CL.communication_layer(d, comm, app_pid, lanes)
        # Computing: the op_summary rows -- none without them (no host data: the analysis
        # has no op summary db, PipelineOverlapViewer.get_timeline_data)
        busy_rows = rows if d.has_host_ops else rows.iloc[:0]
        if d.comm_ops is not None and len(busy_rows):  # not the collectives' own rows
            busy_rows = busy_rows[busy_rows["task_type"].to_numpy(object)
                                  != S.COMM_TASK_TYPE]
        if TR.layer_on("overlap", sw):
            layers[slot["overlap"]] = OV.overlap_layer(d, busy_rows, app_pid, comm,
                                                      run.overlap_sorts[j])
        layers[slot["cann"]] = cann if j == 0 else later_cann
        if j == 0 and tx_out is None and run.tx_layer is not None and TR.layer_on("tx", sw):
            layers[slot["tx"]] = _restrict(run.tx_layer, lo_key, hi_key)
        busy = (busy_rows["start_local"].to_numpy(np.int64),
                busy_rows["end_local"].to_numpy(np.int64)) \
            if TR.layer_on("overlap", sw) and len(busy_rows) \
            else (np.zeros(0, np.int64), np.zeros(0, np.int64))
        run.timelines[j].window(layers, [busy])
    if not devs:  # a host dir alone: the CANN (and msproftx) layers
        layers = [TR.Layer()] * slot["size"]
        layers[slot["cann"]] = cann
        if tx_out is None and run.tx_layer is not None and TR.layer_on("tx", sw):
            layers[slot["tx"]] = _restrict(run.tx_layer, lo_key, hi_key)
        run.timelines[0].window(layers, [])


# the per-task CSVs of a window (write_task_rows), and how a one-window plan splits them
# between two jobs (the op_summary rows are ~60 % of the rendering)
TASK_ROW_STEMS = ("task_time", "op_summary", "aicpu")
# mindstudio: the ts memcpy tasks' task_time rows of a device, kept until its other rows of
# every window are written (the analysis writes them after those)
MEMCPY_ROWS = "task_time_memcpy"
TASK_ROW_JOBS = (("op_summary", "aicpu"), ("task_time",))


def write_task_rows(csv: dict[str, CsvStream], d, tasks: pd.DataFrame, rows,
                    prev_op: tuple[int, int] | None, device_col: str | None = None,
                    rules=None, op_header: list[str] | None = None,
                    stems: tuple[str, ...] = TASK_ROW_STEMS,
                    analysis: bool = False) -> pd.DataFrame | None:
    """A window's task_time, op_summary and aicpu rows appended to `csv` (streams opened by
    the export process), in chunks of CHUNK_ROWS; the wait time of the first op_summary row
    is the gap after `prev_op` (start, duration of the last row of the windows before).
    `device_col`: a leading Device_id column (mindstudio); `rules`: an advice.RuleState fed
    with the op_summary rows as written (legacy); `op_header`: the op_summary columns of
    the file (devices without some PMU columns: N/A there); `stems`: only these outputs
    (a one-window plan writes op_summary and task_time in two jobs); `analysis`
    (mindstudio): the ts memcpy tasks' task_time rows after the window's others and the aicpu
    Node as the analysis makes them (summaries.task_time_memcpy, summaries.aicpu).  Returns
    the op_statistic aggregates (None without op_summary)."""
    def put(stem: str, part: pd.DataFrame) -> None:
        if device_col is not None:
            part.insert(0, "Device_id", device_col)
        csv[stem].write(part)

    if "task_time" in stems:
        copies, tasks_tt = None, tasks
        if analysis:
            mc = ~S.not_memcpy(tasks)
            if mc.any():
                copies, tasks_tt = tasks[mc], tasks[~mc]
        for lo in range(0, len(tasks_tt), W.CHUNK_ROWS):
            put("task_time", S.task_time(d, tasks_tt.iloc[lo:lo + W.CHUNK_ROWS])[1])
        if copies is not None:  # after the device's other rows (mindstudio defers them)
            put(MEMCPY_ROWS if MEMCPY_ROWS in csv else "task_time",
                S.task_time_memcpy(d, copies)[1])
        del tasks_tt, copies
    if "op_summary" not in stems:
        return None
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
                rules.add(OT.OpTable.from_summary(part, d.rd.ai_core_num, start[lo:hi]))
            if op_header is not None and len(part.columns) != len(op_header):
                part = part.reindex(columns=op_header, fill_value="N/A")
            put("op_summary", part)
    a = S.aicpu(d, tasks, analysis=analysis)
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


def write_l2_cache(outs: list, plan: Plan, names: list[L2Names],
                   device_col: bool = False, restrict: bool = False) -> None:
    """l2_cache rows of the devices of `plan` (device-major) written to `outs` (the stream
    of each device; csv: one for all), their records read in chunks at the end
    (Plan.l2_chunks); `device_col`: a leading Device_id column; `restrict`: the legacy
    iteration window.  The caller closes the streams (discarded here on failure)."""
    try:
        for j, (out, facts, nm) in enumerate(zip(outs, plan.facts, names)):
            known = nm.frame if nm.frame is not None else pd.DataFrame({
                "stream_id": np.zeros(0, np.int64), "task_id": np.zeros(0, np.int64),
                "op_name": np.zeros(0, object)})
            for l2 in plan.l2_chunks(j, W.CHUNK_ROWS):
                table = S.l2_cache_of(l2, known, facts.rd.l2_events, restrict)
                if table is None:
                    continue
                df = table[1]
                if device_col:
                    df.insert(0, "Device_id", str(facts.rd.device_id or 0))
                out.write(df)
    except BaseException:
        for out in outs:
            out.discard()
        raise


def window_fusion_rows(plan: Plan, first: ProfData, model_apis: list[pd.DataFrame]
                       ) -> pd.DataFrame:
    """fusion.fusion_rows of the whole collection: the fusion records (read whole by every
    window) against the model API spans of every window."""
    host = first.host
    models = pd.concat(model_apis, ignore_index=True) if model_apis else host.apis.iloc[:0]
    scope = ProfData(prof=plan.prof, host=HostData(rd=host.rd, tables=host.tables,
                                                   apis=models),
                     devices=first.devices, log=first.log)
    return F.fusion_rows(scope, model_names(scope))


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


def slim_first(data: ProfData) -> ProfData:
    """What the export keeps of the first window after it: iterations, name dictionaries,
    fusion / graph / msproftx records -- not its task, launch or node tables."""
    devs = [replace(d, tasks=d.tasks.iloc[:0].copy(), aicpu=None, l2=None)
            for d in data.devices]
    ht = data.host.tables
    tables = None if ht is None else replace(
        ht, task_track=ht.task_track.iloc[:0], node_basic=ht.node_basic.iloc[:0],
        tensors=ht.tensors.iloc[:0], apis=ht.apis.iloc[:0])
    host = HostData(rd=data.host.rd, tables=tables, apis=data.host.apis.iloc[:0].copy())
    return ProfData(prof=data.prof, host=host, devices=devs, log=data.log,
                    rank_ids=data.rank_ids)


def window_comm(data: ProfData, d, sel, lo: int, hi: int
                ) -> tuple[CL.CommData | None, tuple[list[str], list[int]] | None, bool]:
    """The HCCL data of a window's device: (what starts in [lo, hi), the Communication
    lanes of the whole export, whether the export has op executions) -- hccl_info is read
    whole by every window (its op executions are numbered over the collection)."""
    comm = device_comm(data, d, sel)
    if comm is None:
        return None, None, False
    return comm_in_window(comm, lo, hi), CL.comm_lanes(comm), len(comm.ops) > 0


def comm_in_window(comm: CL.CommData, lo: int, hi: int) -> CL.CommData:
    """The op executions and steps of `comm` that start in [lo, hi)."""
    o = comm.ops["start_local"].to_numpy(np.int64)
    st = comm.steps["start_local"].to_numpy(np.int64) if len(comm.steps) \
        else np.zeros(0, np.int64)
    ok_o, ok_s = (o >= lo) & (o < hi), (st >= lo) & (st < hi)
    return CL.CommData(ops=comm.ops[ok_o].reset_index(drop=True),
                      steps=comm.steps[ok_s].reset_index(drop=True) if len(comm.steps)
                      else comm.steps, step_args=comm.step_args[ok_s],
                      analysis=comm.analysis)


def msprof_meta(app_pid: int, first: ProfData, switches: dict, threads: set[int],
                stream_ids: list[set[int]], tx_layer: TR.Layer | None,
                step_meta: list[list[str]], overlap: list[bool],
                comm_meta: list[list[str] | None], overlap_sorts: list[int],
                tx_last: bool = False) -> list[str]:
    """The msprof json metadata of the whole export: per device (its streams, step-trace
    metadata, whether it has an Overlap Analysis layer and its sort index, its
    Communication metadata or None) a block in timeline.msprof_layers order, the CANN
    process in every block -- the analysis's per-device files each hold it, and the merge
    keeps every metadata event (FileSliceHelper._pretreat_json_data); msproftx in the
    first block, or (`tx_last`: mindstudio, the host dir's own file) after every block;
    mindstudio (`tx_last`) also orders the stream lanes as the analysis (hardware_meta)."""
    out: list[str] = []
    if not first.devices:  # a host dir alone
        parts = {"cann": T.cann_meta(app_pid, threads)
                 if TR.layer_on("cann", switches) and threads else [],
                 "tx": list(tx_layer.meta) if tx_layer is not None else []}
        return TR.in_layer_order(parts)
    for j, d in enumerate(first.devices):
        parts: dict[str, list[str]] = {"step": list(step_meta[j])}
        if TR.layer_on("cann", switches) and threads:
            parts["cann"] = T.cann_meta(app_pid, threads)
        if TR.layer_on("hardware", switches) and stream_ids[j]:
            parts["hardware"] = T.hardware_meta(d.device_id, app_pid, stream_ids[j],
                                                set_order=tx_last)
        if TR.layer_on("comm", switches):
            parts["comm"] = list(comm_meta[j] or [])
        if TR.layer_on("overlap", switches) and overlap[j]:
            parts["overlap"] = OV.overlap_layer(d, d.tasks.iloc[:0], app_pid, None,
                                               overlap_sorts[j]).meta
        if j == 0 and tx_layer is not None and not tx_last:
            parts["tx"] = list(tx_layer.meta)
        out += TR.in_layer_order(parts)
    if tx_last and tx_layer is not None:
        out += list(tx_layer.meta)
    return out
