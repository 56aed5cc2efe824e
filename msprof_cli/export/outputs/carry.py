"""What the outputs carry across a cut, and the helpers several outputs share.

Every output is written from a plan (pipeline.py): each window is decoded, its rows appended
to the open outputs and dropped before the next one, so memory is bounded by the window.
The msprof json events of a window all sort before the next window's (windows are cut
where nothing crosses, see decode/windows.py), so each window's sorted events are appended
to the open slices -- except the Overlap Analysis ``Free`` gap between the last computing
interval of one window and the first of the next: the events from that gap's start on are
held back (rendered) until the next computing start is known, then written with the Free
event in its sorted place (`WindowTimeline`).  Also here: a window's HCCL data
(`window_comm`), what is kept of the first window (`slim_first`), the msprof json metadata
(`msprof_meta`), l2_cache (read in chunks at the end, `Plan.l2_chunks`) and fusion_op's rows.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from ..decode.data import HostData, ProfData
from ..decode.quiet import INT64_MAX, INT64_MIN
from ..derive import fusion as F
from ..derive.communication import device_comm
from ..derive.stack import model_names
from ..fmt import ts_sort_key
from ..plan import Plan
from ..sinks import writers as W
from ..sinks.streams import JsonStream
from . import comm_layer as CL
from . import freq_layer as FQ
from .memory_files import has_npu_mem, npu_mem_meta
from . import overlap_layer as OV
from . import summaries as S
from . import timeline as T
from . import trace as TR


def plus_margin(t: int, sign: int = 1, margin: int = 1000) -> int:
    """t +- margin ns, the open ends of the first and last window kept open."""
    if t in (INT64_MIN, INT64_MAX):
        return t
    return t + sign * margin


def restrict_layer(layer: TR.Layer, lo: float, hi: float) -> TR.Layer:
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
        self.out.write_stream(stream, lo, hi)

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
        # a gap after the last computing interval is not Free (docs/formats/timeline.md 7)
        self._flush()


def _merged_last_end(start: np.ndarray, end: np.ndarray) -> int:
    s, e = OV.merge_intervals(start.astype(np.int64), end.astype(np.int64))
    return int(e[-1])


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
                tx_last: bool = False, npu_mem_sorts: dict[int, int] | None = None
                ) -> list[str]:
    """The msprof json metadata of the whole export: per device (its streams, step-trace
    metadata, whether it has an Overlap Analysis layer and its sort index, its
    Communication metadata or None) a block in trace.MSPROF_LAYER_ORDER, the CANN
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
        if TR.layer_on("freq", switches) and d.rd.stars:
            parts["freq"] = FQ.freq_meta(d.device_id, app_pid)
        if TR.layer_on("npu_mem", switches) and has_npu_mem(d.rd):
            parts["npu_mem"] = npu_mem_meta(d.device_id, app_pid,
                                            (npu_mem_sorts or {}).get(d.device_id, 20))
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
