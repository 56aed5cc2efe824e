"""The msprof json Overlap Analysis layer (docs/formats/timeline.md 7) and the interval arithmetic
it rests on:
Computing (the union of op_summary tasks), Communication, Communication(Not Overlapped) and
Free; shared with the db's OVERLAP_ANALYSIS table.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from ..decode.data import DeviceData
from ..fmt import ts_sort_key
from .comm_layer import CommData
from .trace import SORT_OVERLAP, Layer, dur_text, pid_of, process_meta, us_parts


def merge_intervals(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals; touching or overlapping ones merge.  Vectorised."""
    if len(start) == 0:
        return start, end
    o = np.argsort(start, kind="stable")
    s, e = start[o], end[o]
    run_end = np.maximum.accumulate(e)
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > run_end[:-1]
    grp = np.cumsum(new) - 1
    ms = s[new]
    me = np.zeros(len(ms), dtype=np.int64)
    np.maximum.at(me, grp, e)
    return ms, me


def subtract_intervals(s: np.ndarray, e: np.ndarray, cut_s: np.ndarray, cut_e: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Parts of each interval [s, e) outside the union of [cut_s, cut_e); both inputs
    disjoint and sorted (merge_intervals output).  Vectorised over the elementary segments
    between all boundaries; the parts of one source interval that touch are joined (a
    zero-length cut does not split), parts of different source intervals never are."""
    if len(s) == 0:
        return s, e
    pts = np.unique(np.concatenate([s, e, cut_s, cut_e]))
    a, b = pts[:-1], pts[1:]

    def owner(ss: np.ndarray, ee: np.ndarray, x: np.ndarray) -> np.ndarray:
        """index of the interval holding x (x < end), -1 if none"""
        if len(ss) == 0:
            return np.full(len(x), -1, np.int64)
        k = np.searchsorted(ss, x, side="right") - 1
        return np.where((k >= 0) & (x < ee[np.maximum(k, 0)]), k, -1)

    src = owner(s, e, a)
    keep = (src >= 0) & (owner(cut_s, cut_e, a) < 0)
    ka, kb, src = a[keep], b[keep], src[keep]
    if len(ka) == 0:
        return ka, kb
    new = np.ones(len(ka), bool)
    new[1:] = (ka[1:] != kb[:-1]) | (src[1:] != src[:-1])
    last = np.ones(len(ka), bool)
    last[:-1] = new[1:]
    return ka[new], kb[last]


def overlap_intervals(rows: pd.DataFrame, ops: pd.DataFrame | None,
                      span: tuple[int | None, int | None] | None = None
                      ) -> list[tuple[np.ndarray, np.ndarray]]:
    """Overlap Analysis intervals (local ns) in the order Computing, Communication,
    Communication(Not Overlapped), Free -- the layer of msprof json and the db's
    OVERLAP_ANALYSIS table share this one definition (docs/formats/timeline.md 7).
    `span`: (first start, last end) of every device task, when tasks that are neither
    computing nor communication may lie outside them (an Atlas A2's copies are device
    tasks): Free then also covers the span before the first (after the last) computing
    interval; None for an end a later (earlier) window of a windowed export owns."""
    cs, ce = merge_intervals(rows["start_local"].to_numpy(np.int64),
                             rows["end_local"].to_numpy(np.int64))
    if ops is not None and len(ops):
        ms, me = merge_intervals(ops["start_local"].to_numpy(np.int64),
                                 ops["end_local"].to_numpy(np.int64))
    else:
        ms = me = np.zeros(0, np.int64)
    ns, ne = subtract_intervals(ms, me, cs, ce)
    fs, fe = ce[:-1], cs[1:]  # the gaps between computing intervals ...
    if span is not None and len(cs):
        # int64 throughout: local ns exceed float64's exact integers
        lead = int(span[0] is not None and span[0] < cs[0])
        trail = int(span[1] is not None and span[1] > ce[-1])
        fs = np.concatenate([np.array([span[0]] * lead, np.int64), fs,
                             np.array([ce[-1]] * trail, np.int64)])
        fe = np.concatenate([np.array([cs[0]] * lead, np.int64), fe,
                             np.array([span[1]] * trail, np.int64)])
    if len(ms):  # ... minus communication
        fs, fe = subtract_intervals(fs, fe, ms, me)
    return [(cs, ce), (ms, me), (ns, ne), (fs, fe)]


def overlap_templates(pid: int) -> list[str]:
    """``%`` templates (ts parts, dur) of the Overlap Analysis lanes, tid 0..3."""
    return ['{"name": ' + json.dumps(name) + ', "pid": ' + str(pid) + ', "tid": ' + str(tid)
            + ', "ts": "%d.%03d", "dur": %s, "ph": "X"}'
            for tid, name in enumerate(("Computing", "Communication",
                                        "Communication(Not Overlapped)", "Free"))]


def overlap_sorts(device_ids: list[int], npu_mem: dict[int, int] | None = None
                  ) -> dict[int, int]:
    """Process sort index of each device's Overlap Analysis layer.  The process is not in
    the analysis's LAYER_INFO_MAP: MsprofTimeline.get_layer_info gives it the next index
    from 19 on, and that counter lives in a singleton across the device dirs, which
    ExportCommand._process_sub_dirs visits in reverse name order (``device_1`` before
    ``device_0``).  So with one device 20; with several the last dir name gets 20, the one
    before 21, ... (the sort index is also part of the pid).  A device's NPU MEM lane (no
    fixed index either) takes the index before its Overlap Analysis: `npu_mem` (filled
    here) gets those, for the devices whose dir has npu_mem data (its keys on entry)."""
    names = sorted((f"device_{d}", d) for d in device_ids)
    out: dict[int, int] = {}
    at = SORT_OVERLAP - 1
    for _, d in reversed(names):
        if npu_mem is not None and d in npu_mem:
            at += 1
            npu_mem[d] = at
        at += 1
        out[d] = at
    return out


def free_event(device_id: int, app_pid: int, begin: int, end: int,
               sort: int = SORT_OVERLAP) -> str:
    """One Overlap Analysis ``Free`` event [begin, end) (local ns), as `overlap_layer` prints
    it (the windowed export adds the gap between two windows' computing with it)."""
    tmpl = overlap_templates(pid_of(app_pid, sort, device_id))[3]
    w, f = us_parts(np.array([begin]))
    return tmpl % (w[0], f[0], dur_text(np.array([end - begin]))[0])


def overlap_layer(dev: DeviceData, rows: pd.DataFrame, app_pid: int,
                  comm: CommData | None = None, sort: int = SORT_OVERLAP,
                  span: tuple[int | None, int | None] | None = None) -> Layer:
    """Computing = union of the op_summary task intervals; Communication = union of the HCCL
    op executions; Communication(Not Overlapped) = Communication minus Computing; Free = the
    parts of [first task start, last task end] covered by neither (docs/formats/timeline.md 7)."""
    pid = pid_of(app_pid, sort, dev.device_id)
    m = process_meta(pid, "Overlap Analysis", f"NPU {dev.device_id}", sort,
                     [(0, "Computing", None), (1, "Communication", None),
                      (2, "Communication(Not Overlapped)", None), (3, "Free", None)])
    ops = comm.ops if comm is not None else None
    if len(rows) == 0 and (ops is None or len(ops) == 0):
        return Layer(m)
    # layer rows: Computing, Communication, Not Overlapped, Free (tid 0..3), in this order
    parts = overlap_intervals(rows, ops, span)
    b = np.concatenate([p[0] for p in parts])
    d = np.concatenate([p[1] - p[0] for p in parts])
    bounds = np.cumsum([0] + [len(p[0]) for p in parts])
    tmpls = overlap_templates(pid)

    def render(idx: np.ndarray) -> list[str]:
        out = np.empty(len(idx), dtype=object)
        kind = np.searchsorted(bounds, idx, side="right") - 1
        for k, tmpl in enumerate(tmpls):
            sel = np.flatnonzero(kind == k)
            if len(sel):
                w, f = us_parts(b[idx[sel]])
                out[sel] = list(map(tmpl.__mod__, zip(w, f, dur_text(d[idx[sel]]))))
        return out.tolist()

    return Layer(m, keys=ts_sort_key(b), render=render)
