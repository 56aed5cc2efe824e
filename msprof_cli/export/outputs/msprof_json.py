"""The msprof json, step_trace json and msprof_tx json timelines of both layouts.

Every window's msprof json layers (trace.MSPROF_LAYER_ORDER) are appended to one
carry.WindowTimeline per device (the Overlap Analysis Free gap across a cut is carried
there).  Each device's timeline is the analysis's per-device file (device_N/timeline): its own
layers plus the whole CANN layer; the mindstudio merge (MsprofOutputSummary._insert_json_data
/ FileSliceHelper._pretreat_json_data) appends the device files one after the other and
drops a CANN event (name with ``@``) whose connection_id is not 0 and already seen -- so a
later device keeps only the CANN events of connection_id 0, and its events are kept
(streams.DeferredEvents) and appended after the first device's at the end.  msproftx is a
layer of the first device in the legacy layout, the host dir's own file (merged after the
device files) in the mindstudio one.  The step layer of a window is made once per job
process (`step_layer`) for msprof json and step_trace json.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..fmt import ts_sort_key
from ..pipeline import Export, Output, TraceOutput
from ..sinks import files as FS
from ..sinks import writers as W
from ..sinks.streams import DeferredEvents, JsonStream
from . import comm_layer as CL
from . import overlap_layer as OV
from . import summaries as S
from . import timeline as T
from . import freq_layer as FQ
from .memory_files import SORT_NPU_MEM, has_npu_mem, npu_mem_layer
from . import trace as TR
from .carry import WindowTimeline, msprof_meta, plus_margin, restrict_layer

TIMELINE = "timeline"  # the job of the msprof and step_trace json


def key_bounds(run: Export, k: int) -> tuple[float, float]:
    """The sort-key range of window k's events."""
    plan = run.plan
    lo = -np.inf if k == 0 else float(ts_sort_key(np.array([plan.cuts[k]]))[0])
    hi = np.inf if k == len(plan) - 1 else float(ts_sort_key(np.array([plan.cuts[k + 1]]))[0])
    return lo, hi


def step_layer(run: Export, w, j: int) -> TR.Layer:
    """Device j's Step Trace events of window k (made once per process: `w.cache`): the
    iterations whose [start, end] meets the window widened by 1 µs (a float key spans up to
    0.25 µs), restricted to the window's key range."""
    key = ("step", j)
    if key not in w.cache:
        dw, plan = w.devs[j], run.plan
        its = dw.its
        near = its[(its["step_start_ns"].to_numpy(np.int64) < plus_margin(plan.cuts[w.k + 1]))
                   & (its["step_end_ns"].to_numpy(np.int64)
                      >= plus_margin(plan.cuts[w.k], -1))]
        w.cache[key] = restrict_layer(T.step_layer(dw.d, near, run.app_pid, dw.models),
                                      *key_bounds(run, w.k))
    return w.cache[key]


class MsprofJson(TraceOutput):
    """msprof json: `timelines` one per device (the first writes `out`, the later ones are
    DeferredEvents); `tx_out`: the msproftx events kept for after every device (mindstudio),
    None: msproftx is the first device's layer (legacy)."""

    stem = "msprof"
    job = TIMELINE

    def __init__(self, out: JsonStream, timelines: list[WindowTimeline],
                 tx_out: DeferredEvents | None, n_devices: int) -> None:
        self.out, self.timelines, self.tx_out = out, timelines, tx_out
        n = max(n_devices, 1)
        self.threads: set[int] = set()  # the CANN lanes
        self.stream_ids: list[set[int]] = [set() for _ in range(n)]
        self.any_op_rows = [False] * n  # Overlap Analysis' Computing
        self.any_comm_ops = [False] * n
        self.comm_lanes: list[tuple | None] = [None] * n  # the whole export's lanes
        # per device (j): its NPU MEM lane, the whole collection's (memory_files.py)
        self.npu_mem: dict[int, TR.Layer] | None = None

    def prepare(self, run: Export, w) -> None:
        end = run.rows_end
        self.timelines[0].more_rows = end is None or run.plan.cuts[w.k] < end
        for dw in w.devs:
            self.stream_ids[dw.j].update(int(s) for s in T.lane_streams(dw.tasks,
                                                                        run.analysis_memcpy))
            self.any_op_rows[dw.j] |= bool(dw.d.has_host_ops and len(dw.rows))
            if dw.comm is not None:
                self.comm_lanes[dw.j] = dw.lanes
                self.any_comm_ops[dw.j] |= dw.comm_ops
        apis = run.cann_apis(w)
        if len(apis):
            self.threads.update(int(x) for x in apis["thread_id"].unique())
        if self.npu_mem is None:  # made once, in this process: the windows' jobs cut it
            self.npu_mem = {}
            for dw in w.devs:
                if TR.layer_on("npu_mem", run.switches) and has_npu_mem(dw.d.rd):
                    sort = getattr(run, "npu_mem_sorts", {}).get(dw.d.device_id, SORT_NPU_MEM)
                    self.npu_mem[dw.j] = npu_mem_layer(dw.d.rd, run.app_pid, sort)

    def feed(self, run: Export, w) -> None:
        if run.one_window:  # every lane is known: the file is written in place
            self.out.begin(self._meta(run))
        sw, app_pid, apis = run.switches, run.app_pid, run.cann_apis(w)
        lo_key, hi_key = key_bounds(run, w.k)
        tx_on = run.tx_layer is not None and TR.layer_on("tx", sw)
        if self.tx_out is not None and tx_on:
            tx = restrict_layer(run.tx_layer, lo_key, hi_key)
            if len(tx):
                stream = TR.EventStream([tx])
                for chunk in stream.chunks(0, len(stream), W.EVENT_CHUNK):
                    self.tx_out.write(chunk)
        slot = {kind: (at[0] if isinstance(at, list) else at)
                for kind, at in TR.layer_slots(1).items()}  # one device's layer positions
        cann = later_cann = TR.Layer()
        if TR.layer_on("cann", sw):
            cann = T.cann_layer(apis, app_pid)
            if len(w.devs) > 1 and len(apis):
                later_cann = T.cann_layer(
                    apis[apis["connection_id"].to_numpy(np.int64) == 0], app_pid)
        for dw in w.devs:
            j, d, tasks = dw.j, dw.d, dw.tasks
            layers = [TR.Layer()] * slot["size"]
            if TR.layer_on("step", sw):
                layers[slot["step"]] = step_layer(run, w, j)
            if TR.layer_on("hardware", sw):
                layers[slot["hardware"]] = T.hardware_layer(d, tasks, app_pid,
                                                            run.analysis_memcpy)
            if TR.layer_on("freq", sw) and d.rd.stars:
                layers[slot["freq"]] = restrict_layer(FQ.freq_layer(d, app_pid),
                                                      lo_key, hi_key)
            if self.npu_mem and j in self.npu_mem:
                layers[slot["npu_mem"]] = restrict_layer(self.npu_mem[j], lo_key, hi_key)
            if TR.layer_on("flow", sw) and run.use_flow:
                layers[slot["flow"]] = T.flow_layer(d, tasks, app_pid, run.analysis_memcpy)
            if dw.comm is not None and TR.layer_on("comm", sw):
                layers[slot["comm"]] = CL.communication_layer(d, dw.comm, app_pid, dw.lanes)
            # Computing: the op_summary rows -- none without them (no host data: the
            # analysis has no op summary db, PipelineOverlapViewer.get_timeline_data)
            busy_rows = dw.rows if d.has_host_ops else dw.rows.iloc[:0]
            if d.comm_ops is not None and len(busy_rows):  # not the collectives' own rows
                busy_rows = busy_rows[busy_rows["task_type"].to_numpy(object)
                                      != S.COMM_TASK_TYPE]
            if TR.layer_on("overlap", sw):
                # an Atlas A2's copies are device tasks: Free spans them too, from the
                # first window's first task to the last window's last one
                span = (int(tasks["start_local"].min()) if w.k == 0 else None,
                        int(tasks["end_local"].max()) if w.k == len(run.plan) - 1
                        else None) if d.rd.stars and len(tasks) else None
                layers[slot["overlap"]] = OV.overlap_layer(d, busy_rows, app_pid, dw.comm,
                                                          run.overlap_sorts[j], span)
            layers[slot["cann"]] = cann if j == 0 else later_cann
            if j == 0 and self.tx_out is None and tx_on:
                layers[slot["tx"]] = restrict_layer(run.tx_layer, lo_key, hi_key)
            busy = (busy_rows["start_local"].to_numpy(np.int64),
                    busy_rows["end_local"].to_numpy(np.int64)) \
                if TR.layer_on("overlap", sw) and len(busy_rows) \
                else (np.zeros(0, np.int64), np.zeros(0, np.int64))
            self.timelines[j].window(layers, [busy])
        if not w.devs:  # a host dir alone: the CANN (and msproftx) layers
            layers = [TR.Layer()] * slot["size"]
            layers[slot["cann"]] = cann
            if self.tx_out is None and tx_on:
                layers[slot["tx"]] = restrict_layer(run.tx_layer, lo_key, hi_key)
            self.timelines[0].window(layers, [])

    def close_jobs(self, run: Export):
        for j, tl in enumerate(self.timelines):
            tl.finish()
            if j:  # the later devices' events after the first's (device-major)
                tl.out.replay(self.out)
        if self.tx_out is not None:
            self.tx_out.replay(self.out)
        return self.out.close_jobs(self._meta(run))

    def _meta(self, run: Export) -> list[str]:
        """The metadata events of every lane the windows so far have shown."""
        sw = run.switches
        n = len(run.dev_ids)
        return msprof_meta(
            run.app_pid, run.first, sw, self.threads, self.stream_ids,
            run.tx_layer if TR.layer_on("tx", sw) else None,
            run.step_meta if sw.get("step_trace", True) else [[]] * n,
            [self.any_op_rows[j] or self.any_comm_ops[j] for j in range(n)],
            [CL.comm_meta(run.dev_ids[j], run.app_pid, self.comm_lanes[j])
             if self.comm_lanes[j] is not None else None for j in range(n)],
            run.overlap_sorts, tx_last=self.tx_out is not None,
            npu_mem_sorts=getattr(run, "npu_mem_sorts", {}))

    def discard(self) -> None:
        for st in (self.out, *(tl.out for tl in self.timelines[1:]), self.tx_out):
            if st is not None:
                st.discard()


class StepTraceJson(TraceOutput):
    """step_trace json: the Step Trace layer alone, device-major (`outs`: the first device's
    stream, then DeferredEvents)."""

    stem = "step_trace"
    job = TIMELINE

    def __init__(self, outs: list) -> None:
        self.outs = outs

    def feed(self, run: Export, w) -> None:
        if run.one_window:
            self.outs[0].begin(self._meta(run))
        for dw in w.devs:
            step = step_layer(run, w, dw.j)
            if len(step):
                stream = TR.EventStream([step])
                for chunk in stream.chunks(0, len(stream), W.EVENT_CHUNK):
                    self.outs[dw.j].write(chunk)

    def close_jobs(self, run: Export):
        for out in self.outs[1:]:
            out.replay(self.outs[0])
        return self.outs[0].close_jobs(self._meta(run))

    @staticmethod
    def _meta(run: Export) -> list[str]:
        return [m for sm in run.step_meta for m in sm]

    def discard(self) -> None:
        for out in self.outs:
            out.discard()


class TxJson(Output):
    """msprof_tx json: the msproftx layer alone (small: written whole at the end)."""

    stem = "msprof_tx"

    def __init__(self, paths: FS.SliceNamer, slice_events: int) -> None:
        self.paths, self.slice_events = paths, slice_events

    def close(self, run: Export) -> list[Path]:
        if run.tx_layer_all is None or len(run.tx_layer_all) == 0:
            return []
        meta, events = TR.assemble_stream([run.tx_layer_all])
        return run.record(self.stem, W.write_events(self.paths, meta, events,
                                                    self.slice_events), timeline=True)
