"""The msprof / step_trace json layers of the host and the device (docs/formats/timeline.md),
rendered
vectorised: CANN (host APIs), Ascend Hardware (tasks, memcpy), the HostToDevice flows and
Step Trace.  The trace core is trace.py; Communication and Overlap Analysis are
comm_layer.py and overlap_layer.py.  Each layer yields (metadata strings, event strings, sort
keys); the file is all metadata in layer order, then all events stably sorted by
``float(ts)`` -- the real tool's sort, including its float64 ties.

Pre-sort layer order (decides ties, read off the golden export): Step Trace, CANN, Ascend
Hardware tasks, HostToDevice flows, Overlap Analysis.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from msprof_cli.raw import layouts as L

from ..decode.data import COPY_SOURCE, MEMCPY_SOURCE, MIX_GE_TYPES, DeviceData
from ..decode.host import NA
from ..decode.steptrace import step_columns
from ..fmt import int_str, ts_sort_key, us_list, us_str
from .trace import (HOST_SLOT, SORT_CANN, SORT_HARDWARE, STEP_TID_BASE, JCol, Layer, dur_json,
                    dur_text, obj_array, pid_of, process_meta, us_parts)

CONTEXT_ID_910 = 4294967295
LEVEL_DISPLAY = {L.LEVEL_ACL: "AscendCL", L.LEVEL_MODEL: "Model", L.LEVEL_NODE: "Node",
                 L.LEVEL_RUNTIME: "Runtime", L.LEVEL_HCCL: "Communication"}


# --- CANN ------------------------------------------------------------------------------


def cann_meta(app_pid: int, threads) -> list[str]:
    """Metadata of the CANN process with lanes for `threads` (thread ids, any order)."""
    pid = pid_of(app_pid, SORT_CANN, HOST_SLOT)
    return process_meta(pid, "CANN", "CPU", SORT_CANN,
                        [(t, f"Thread {t}", t) for t in sorted(int(t) for t in threads)])


def cann_layer(apis: pd.DataFrame, app_pid: int) -> Layer:
    if apis is None or len(apis) == 0:
        return Layer()
    pid = pid_of(app_pid, SORT_CANN, HOST_SLOT)
    m = cann_meta(app_pid, apis["thread_id"].unique())
    lvl = apis["level"].to_numpy()
    lcode, lvals = pd.factorize(lvl)  # a handful of levels: per-level text by code (O(n))
    disp = np.array([LEVEL_DISPLAY.get(int(v), L.LEVEL_NAMES.get(int(v), str(int(v))).title())
                     for v in lvals], dtype=object)[lcode]
    lname = np.array([L.LEVEL_NAMES.get(int(v), str(int(v))) for v in lvals],
                     dtype=object)[lcode]
    mode = apis["type_name"].to_numpy(object)
    item = apis["item_name"].to_numpy(object)
    api = np.where(lvl == L.LEVEL_HCCL, item, mode)
    ident = np.where(lvl == L.LEVEL_ACL, item, "0")
    tid = apis["thread_id"].to_numpy(np.int64)
    begin = apis["begin_local"].to_numpy(np.int64)
    dur = apis["dur_ns"].to_numpy(np.int64)
    cid = apis["connection_id"].to_numpy(np.int64)
    tmpl = ('{"name": %s, "pid": ' + str(pid) + ', "tid": %d, "ts": "%d.%03d", "dur": %s, '
            '"args": {"Thread Id": %d, "Mode": %s, "level": %s, "id": %s, "item_id": %s, '
            '"connection_id": %d}, "ph": "X"}')

    # "{level}@{api}" built once per distinct (level, api) pair, not per event
    pair, first = pd.factorize(lcode.astype(np.int64) * (1 << 32)
                               + pd.factorize(api)[0].astype(np.int64))
    rows = np.zeros(len(first), dtype=np.int64)
    rows[pair[::-1]] = np.arange(len(pair))[::-1]
    name_j = JCol((disp[rows] + "@" + api[rows].astype(str).astype(object))[pair])
    mode_j, lname_j, ident_j, item_j = JCol(mode), JCol(lname), JCol(ident), JCol(item)

    def render(idx: np.ndarray) -> list[str]:
        t = tid[idx].tolist()
        w, f = us_parts(begin[idx])
        return list(map(tmpl.__mod__, zip(
            name_j.take(idx), t, w, f, dur_text(dur[idx]), t, mode_j.take(idx),
            lname_j.take(idx), ident_j.take(idx), item_j.take(idx), cid[idx].tolist())))

    return Layer(m, keys=ts_sort_key(begin), render=render)


# --- Ascend Hardware ---------------------------------------------------------------------

def task_kind(tasks: pd.DataFrame) -> np.ndarray:
    ge = tasks["task_type"].to_numpy(object)
    rt = tasks["rt_type"].to_numpy(object)
    known = tasks["host_known"].to_numpy(bool)
    kind = np.where(ge != NA, ge, np.where(known & (rt != NA), rt, "Other"))
    if "comm_step" in tasks:  # a collective's step: its runtime type
        kind = np.where(tasks["comm_step"].to_numpy(bool), rt, kind)
    return np.where(np.isin(ge, MIX_GE_TYPES), rt, kind)  # an A2 MIX kernel's context


def hardware_meta(device_id: int, app_pid: int, streams, set_order: bool = False
                  ) -> list[str]:
    """Metadata of a device's Ascend Hardware process with lanes for `streams`, sorted, or
    (`set_order`, mindstudio) in the analysis's order: the iteration order of its set of
    (app pid, stream) pairs (viewer/task_time_viewer.py get_time_timeline_header), filled
    here in stream order."""
    pid = pid_of(app_pid, SORT_HARDWARE, device_id)
    order = sorted(int(s) for s in streams)
    if set_order:
        order = [s for _, s in set((int(app_pid), s) for s in order)]
    return process_meta(pid, "Ascend Hardware", f"NPU {device_id}", SORT_HARDWARE,
                        [(s, f"Stream {s}", s) for s in order])


def lane_streams(tasks: pd.DataFrame, analysis_memcpy: bool = False) -> np.ndarray:
    """The streams with an Ascend Hardware lane: all, or (`analysis_memcpy`) those with a
    task other than a ts memcpy copy (the analysis names no lane for the copies' events)."""
    if analysis_memcpy:
        tasks = tasks[tasks["source"].to_numpy(object) != MEMCPY_SOURCE]
    return tasks["stream_id"].unique()


def hardware_layer(dev: DeviceData, tasks: pd.DataFrame, app_pid: int,
                   analysis_memcpy: bool = False) -> Layer:
    """`analysis_memcpy` (mindstudio): the ts memcpy tasks as the analysis shows them
    (`memcpy_events`), not as tasks."""
    if len(tasks) == 0:
        return Layer()
    pid = pid_of(app_pid, SORT_HARDWARE, dev.device_id)
    m = hardware_meta(dev.device_id, app_pid, lane_streams(tasks, analysis_memcpy))
    is_mc = (tasks["source"].to_numpy(object) == MEMCPY_SOURCE) if analysis_memcpy \
        else np.zeros(len(tasks), bool)
    mc_text = memcpy_events(dev, tasks[is_mc], pid) if is_mc.any() else None
    kind = task_kind(tasks)
    op = tasks["op_name"].to_numpy(object)
    name = np.where(op == NA, kind, op)
    if "comm_step" in tasks:  # no op of its own (no ge task): named by its type
        name = np.where(tasks["comm_step"].to_numpy(bool), kind, name)
    copy = tasks["source"].to_numpy(object) == COPY_SOURCE  # an A2 copy: by its type
    mix = np.isin(tasks["task_type"].to_numpy(object), MIX_GE_TYPES)  # and its MIX contexts
    if copy.any() or mix.any():
        name = np.where(copy | mix, kind, name)
    stream = tasks["stream_id"].to_numpy(np.int64)
    start = tasks["start_local"].to_numpy(np.int64)
    dur = tasks["dur_ns"].to_numpy(np.int64)
    model = tasks["model_id"].to_numpy(np.int64)
    task = tasks["task_id"].to_numpy(np.int64)
    batch = tasks["batch_id"].to_numpy(np.int64)
    cid = tasks["connection_id"].to_numpy(np.int64)
    tmpl = ('{"name": %s, "pid": ' + str(pid) + ', "tid": %d, "ts": "%d.%03d", "dur": %s, '
            '"args": {"Model Id": %d, "Task Type": %s, "Physic Stream Id": %d, "Task Id": %d, '
            '"Batch Id": %d, "Subtask Id": %d%s}, "ph": "X"}')
    subtask = np.where(mix, 0, CONTEXT_ID_910)

    name_j, kind_j = JCol(name), JCol(kind)
    # a task without a host task_track: "connection_id": -1 (the analysis's
    # AscendTaskGenerator._gen_top_down_task_by_device_task, DEFAULT_INVALID_VALUE)
    cid = np.where((cid < 0) | copy, -1, cid)
    tmpl_c = tmpl.replace("%s}", ', "connection_id": %d}')

    ai_dur = None
    if analysis_memcpy and not dev.rd.stars:  # the 910's ts_track AI CPU times
        ai = tasks["source"].to_numpy(object) == "aicpu"
        if ai.any():
            ai_dur = np.full(len(tasks), None, dtype=object)
            ai_dur[ai] = aicpu_dur_text(dev, start[ai], start[ai] + dur[ai])

    def durs(idx: np.ndarray) -> list[str]:
        out = dur_text(dur[idx])
        if ai_dur is not None:
            a = ai_dur[idx]
            out = [x if y is None else y for x, y in zip(out, a.tolist())]
        return out

    def render_tasks(idx: np.ndarray) -> list[str]:
        st = stream[idx].tolist()
        w, f = us_parts(start[idx])
        cols = (name_j.take(idx), st, w, f, durs(idx), model[idx].tolist(),
                kind_j.take(idx), st, task[idx].tolist(), batch[idx].tolist(),
                subtask[idx].tolist())
        return list(map(tmpl_c.__mod__, zip(*cols, cid[idx].tolist())))

    if mc_text is None:
        return Layer(m, keys=ts_sort_key(start), render=render_tasks)
    mc_pos = np.full(len(tasks), -1, np.int64)
    mc_pos[is_mc] = np.arange(int(is_mc.sum()))

    def render(idx: np.ndarray) -> list[str]:
        idx = np.asarray(idx)
        out = np.empty(len(idx), dtype=object)
        sel = mc_pos[idx] >= 0
        if sel.any():
            out[sel] = [mc_text[i] for i in mc_pos[idx[sel]].tolist()]
        if (~sel).any():
            out[~sel] = render_tasks(idx[~sel])
        return out.tolist()

    return Layer(m, keys=ts_sort_key(start), render=render)


def aicpu_dur_text(dev: DeviceData, start: np.ndarray, end: np.ndarray) -> list[str]:
    """The durations of AI CPU tasks (local ns) as the analysis prints them: its device
    task is ts_track's times in ms (time_from_syscnt / 1e6), duration (end - start) * 1e6
    ns (ai_cpu_model.py get_ai_cpu_data_within_time_range), shown / 1000."""
    from ..decode.device import analysis_time

    off = np.int64(dev.rd.offset_ns)
    s_ms = analysis_time(np.asarray(start, np.int64) - off, dev.rd, 1e9) / 1e6
    e_ms = analysis_time(np.asarray(end, np.int64) - off, dev.rd, 1e9) / 1e6
    return list(map(repr, ((e_ms - s_ms) * 1e6 / 1000.0).tolist()))


def memcpy_events(dev: DeviceData, tasks: pd.DataFrame, pid: int) -> list[str]:
    """The ts memcpy tasks as the analysis's Ascend Hardware events (Ascend/msprof viewer/
    memory_copy/memory_copy_viewer.py get_memory_copy_timeline): "MemcopyAsync", Task Type
    "other", the received / started / ended times, on the stream's tid; the duration is the
    difference of the two float µs times (device.analysis_us), printed as its repr."""
    from ..decode.device import analysis_us

    rd = dev.rd
    off = np.int64(rd.offset_ns)
    start = tasks["start_local"].to_numpy(np.int64)
    end = tasks["end_local"].to_numpy(np.int64)
    recv = tasks["recv_local"].to_numpy(np.int64)
    dur = analysis_us(end - off, rd) - analysis_us(start - off, rd)
    s_txt, e_txt, r_txt = us_list(start), us_list(end), us_list(recv)
    tmpl = ('{"name": "MemcopyAsync", "pid": ' + str(pid) + ', "tid": %d, "ts": "%s", '
            '"dur": %s, "args": {"Task Type": "other", "Stream Id": %d, "Task Id": %d, '
            '"Receive Time": "%s", "Start Time": "%s", "End Time": "%s"}, "ph": "X"}')
    st = tasks["stream_id"].to_numpy(np.int64).tolist()
    return list(map(tmpl.__mod__, zip(st, s_txt, map(repr, dur.tolist()), st,
                                      tasks["task_id"].to_numpy(np.int64).tolist(),
                                      r_txt, s_txt, e_txt)))


def flow_ids(device_id: int, stream: np.ndarray, task: np.ndarray, batch: np.ndarray
             ) -> np.ndarray:
    """Decimal text of (dev<<80)+(stream<<64)+(task<<48)+(batch<<32)+context, vectorised.

    The value exceeds 64 bits, so it is assembled in base-1e9 limbs:
    hi * 2**64 + lo with hi = (dev<<16)+stream and lo = (task<<48)+(batch<<32)+context."""
    hi = (np.int64(device_id) << 16) + np.asarray(stream, dtype=np.int64)
    lo = ((np.asarray(task, dtype=np.uint64) << np.uint64(48))
          + (np.asarray(batch, dtype=np.uint64) << np.uint64(32)) + np.uint64(CONTEXT_ID_910))
    b = np.uint64(1_000_000_000)
    lo0 = (lo % b).astype(np.int64)
    lo1 = ((lo // b) % b).astype(np.int64)
    lo2 = (lo // b // b).astype(np.int64)
    # 2**64 = 18 * 1e18 + 446744073 * 1e9 + 709551616
    l0 = hi * 709551616 + lo0
    l1 = hi * 446744073 + lo1 + l0 // 1_000_000_000
    l0 = l0 % 1_000_000_000
    l2 = hi * 18 + lo2 + l1 // 1_000_000_000
    l1 = l1 % 1_000_000_000
    s2 = int_str(l2)
    s1 = np.char.zfill(l1.astype(str), 9).astype(object)
    s0 = np.char.zfill(l0.astype(str), 9).astype(object)
    lead1 = l1.astype(str).astype(object)
    return np.where(l2 > 0, s2 + s1 + s0, np.where(l1 > 0, lead1 + s0, int_str(l0)))


def flow_id_ints(device_id: int, stream: np.ndarray, task: np.ndarray, batch: np.ndarray,
                 context: np.ndarray | None = None) -> list[int]:
    """The flow ids of `flow_ids` as Python ints (printed with ``%d`` by the templates):
    (dev<<80)+(stream<<64) | lo, lo = (task<<48)+(batch<<32)+context < 2**64 (`context`:
    per task, default the invalid id; an A2 MIX kernel's is 0)."""
    hi = ((np.int64(device_id) << 16) + np.asarray(stream, dtype=np.int64)).tolist()
    ctx = np.uint64(CONTEXT_ID_910) if context is None else np.asarray(context, np.uint64)
    lo = ((np.asarray(task, dtype=np.uint64) << np.uint64(48))
          + (np.asarray(batch, dtype=np.uint64) << np.uint64(32)) + ctx).tolist()
    return [(h << 64) | v for h, v in zip(hi, lo)]


def flow_layer(dev: DeviceData, tasks: pd.DataFrame, app_pid: int,
               analysis_memcpy: bool = False) -> Layer:
    """Per host-known task an ``s`` event (at its task_track) then an ``f`` event (at the
    task start): layer row 2i is task i's ``s``, 2i+1 its ``f``.  `analysis_memcpy`: none
    for the ts memcpy tasks (the analysis's device tasks of the 910 do not include them)."""
    known = tasks["host_known"].to_numpy(bool) \
        & (tasks["source"].to_numpy(object) != COPY_SOURCE)  # an A2 copy: no flow
    extra = None
    if analysis_memcpy:
        known = known & (tasks["source"].to_numpy(object) != MEMCPY_SOURCE)
        if "comm_step" in tasks and dev.comm_ops is not None:
            step = tasks["comm_step"].to_numpy(bool)
            extra = _hccl_flows(dev, tasks[step], app_pid)
            known = known & ~step
    t = tasks[known]
    if len(t) == 0:
        return extra or Layer()
    cann = pid_of(app_pid, SORT_CANN, HOST_SLOT)
    hw = pid_of(app_pid, SORT_HARDWARE, dev.device_id)
    stream = t["stream_id"].to_numpy(np.int64)
    task = t["task_id"].to_numpy(np.int64)
    batch = t["batch_id"].to_numpy(np.int64)
    thread = t["tt_thread"].to_numpy(np.int64)
    tt_local = t["tt_local"].to_numpy(np.int64)
    start = t["start_local"].to_numpy(np.int64)
    context = np.where(np.isin(t["task_type"].to_numpy(object), MIX_GE_TYPES), 0,
                       CONTEXT_ID_910)
    # the flow id appears twice per event: printed once (str), inserted twice (%s)
    s_tmpl = ('{"name": "HostToDevice%s", "ph": "s", "cat": "HostToDevice", "id": "%s", '
              '"pid": ' + str(cann) + ', "tid": %d, "ts": "%d.%03d"}')
    f_tmpl = ('{"name": "HostToDevice%s", "ph": "f", "id": "%s", "ts": "%d.%03d", '
              '"cat": "HostToDevice", "pid": ' + str(hw) + ', "tid": %d, "bp": "e"}')

    def render(idx: np.ndarray) -> list[str]:
        row = idx // 2
        is_f = (idx % 2).astype(bool)
        # a task's s and f events are mostly in the same sorted chunk (the launch lag is
        # short): its flow id (a >64-bit int printed in Python) is made once for both
        rows, inv = np.unique(row, return_inverse=True)
        ids = np.array(list(map(str, flow_id_ints(dev.device_id, stream[rows], task[rows],
                                                  batch[rows], context[rows]))),
                       dtype=object)[inv]
        out = np.empty(len(idx), dtype=object)
        sel = np.flatnonzero(~is_f)
        if len(sel):
            r = row[sel]
            fi = ids[sel].tolist()
            w, f = us_parts(tt_local[r])
            out[sel] = list(map(s_tmpl.__mod__, zip(fi, fi, thread[r].tolist(), w, f)))
        sel = np.flatnonzero(is_f)
        if len(sel):
            r = row[sel]
            fi = ids[sel].tolist()
            w, f = us_parts(start[r])
            out[sel] = list(map(f_tmpl.__mod__, zip(fi, fi, w, f, stream[r].tolist())))
        return out.tolist()

    keys = np.empty(2 * len(t), dtype=np.float64)
    keys[0::2] = ts_sort_key(tt_local)
    keys[1::2] = ts_sort_key(start)
    if extra is None or len(extra) == 0:
        return Layer([], keys=keys, render=render)
    n = len(keys)

    def render_all(idx: np.ndarray) -> list[str]:
        idx = np.asarray(idx)
        out = np.empty(len(idx), dtype=object)
        mine = idx < n
        if mine.any():
            out[mine] = render(idx[mine])
        if (~mine).any():
            out[~mine] = extra.events[idx[~mine] - n]
        return out.tolist()

    return Layer([], keys=np.concatenate([keys, extra.keys]), render=render_all)


def _hccl_flows(dev: DeviceData, steps: pd.DataFrame, app_pid: int) -> Layer:
    """The analysis's HostToDevice flows of the collectives (viewer/association/
    host_connect_device.py): from the op's node launch (CANN, its begin) an ``s`` with id
    (connection_id << 32) - 1 (its ``f`` is on the Communication op event) and, per
    MEMCPY_ASYNC step, an ``s`` with id (connection_id << 32) + 4294967295 ending on the
    step's Ascend Hardware event; the steps get no per-task flows."""
    ops = dev.comm_ops
    if ops is None or len(ops) == 0:
        return Layer()
    cann = pid_of(app_pid, SORT_CANN, HOST_SLOT)
    hw = pid_of(app_pid, SORT_HARDWARE, dev.device_id)
    s_tmpl = ('{"name": "HostToDevice%d", "ph": "s", "cat": "HostToDevice", "id": "%d", '
              '"pid": ' + str(cann) + ', "tid": %d, "ts": "%d.%03d"}')
    f_tmpl = ('{"name": "HostToDevice%d", "ph": "f", "id": "%d", "ts": "%d.%03d", '
              '"cat": "HostToDevice", "pid": ' + str(hw) + ', "tid": %d, "bp": "e"}')
    ev: list[str] = []
    keys: list[int] = []
    mc = steps[steps["rt_type"].to_numpy(object) == "MEMCPY_ASYNC"]
    mc_cids = set(mc["connection_id"].to_numpy(np.int64).tolist())
    ok = ops["launch_local"].to_numpy(np.int64) >= 0
    o = ops[ok]
    lw, lf = us_parts(o["launch_local"].to_numpy(np.int64))
    for c, th, w, f, lk in zip(o["connection_id"].to_numpy(np.int64).tolist(),
                               o["thread"].to_numpy(np.int64).tolist(), lw, lf,
                               o["launch_local"].to_numpy(np.int64).tolist()):
        i = (c << 32) - 1
        ev.append(s_tmpl % (i, i, th, w, f))
        keys.append(lk)
        if c in mc_cids:
            i = (c << 32) + CONTEXT_ID_910
            ev.append(s_tmpl % (i, i, th, w, f))
            keys.append(lk)
    known = set(o["connection_id"].to_numpy(np.int64).tolist())
    mc = mc[mc["connection_id"].isin(known)]
    mw, mf = us_parts(mc["start_local"].to_numpy(np.int64))
    for c, st, w, f, sl in zip(mc["connection_id"].to_numpy(np.int64).tolist(),
                               mc["stream_id"].to_numpy(np.int64).tolist(), mw, mf,
                               mc["start_local"].to_numpy(np.int64).tolist()):
        i = (c << 32) + CONTEXT_ID_910
        ev.append(f_tmpl % (i, i, w, f, st))
        keys.append(sl)
    return Layer([], np.array(ev, dtype=object), ts_sort_key(np.array(keys, np.int64)))


# --- Overlap Analysis --------------------------------------------------------------------


# --- Step Trace --------------------------------------------------------------------------

def step_models(its: pd.DataFrame) -> list[int]:
    """The models of iterations `its`, sorted: a Step Trace lane each."""
    return sorted(int(x) for x in its["model_id"].unique())


def step_meta(dev: DeviceData, models: list[int], app_pid: int) -> list[str]:
    """Metadata of the step layer (its lanes) of `models`, none without a model: it depends
    on the models only, so an export writes it before (or without) the events."""
    if not models:
        return []
    pid = pid_of(app_pid, SORT_HARDWARE, dev.device_id)
    return process_meta(pid, "Ascend Hardware", f"NPU {dev.device_id}", SORT_HARDWARE,
                        [(app_pid + STEP_TID_BASE + i, f"Step Trace(Model ID:{mdl})",
                          STEP_TID_BASE + mdl) for i, mdl in enumerate(models)])


def step_layer(dev: DeviceData, its: pd.DataFrame, app_pid: int,
               models: list[int] | None = None) -> Layer:
    """`models`: every model of the device (lane per model), when `its` are only some of
    its iterations (the windowed export); by default the models of `its`."""
    if len(its) == 0:
        return Layer()
    pid = pid_of(app_pid, SORT_HARDWARE, dev.device_id)
    if models is None:
        models = step_models(its)
    tid_of = {mdl: app_pid + STEP_TID_BASE + i for i, mdl in enumerate(models)}
    m = step_meta(dev, models, app_pid)
    its = its.sort_values("step_end_ns", kind="stable")
    tid = int_str(its["model_id"].map(tid_of).to_numpy(np.int64))
    i = int_str(its["iteration_id"])
    start, end, fp, bp, aug, has_fp, has_bp = step_columns(its)
    fp_s = np.where(has_fp, '"' + us_str(np.maximum(fp, 0)) + '"', '"N/A"')
    bp_s = np.where(has_bp, '"' + us_str(np.maximum(bp, 0)) + '"', '"N/A"')
    end_s = '"' + us_str(end) + '"'
    head = ', "pid": ' + str(pid) + ', "tid": ' + tid + ', "ts": "'
    it = ('{"name": "Iteration ' + i + '"' + head + us_str(start) + '", "dur": '
          + dur_json(end - start) + ', "args": {"Iteration ID": ' + i + ', "FP Start": ' + fp_s
          + ', "BP End": ' + bp_s + ', "Iteration End": ' + end_s + ', "Iteration Time(us)": '
          + dur_json(end - start) + '}, "cat": "Iteration Time", "ph": "X"}')
    fpbp = ('{"name": "FP_BP Time ' + i + '"' + head + us_str(np.maximum(fp, 0)) + '", "dur": '
            + dur_json(bp - fp) + ', "args": {"Iteration ID": ' + i + ', "FP Start": ' + fp_s
            + ', "BP End": ' + bp_s + ', "FP_BP Time(us)": ' + dur_json(bp - fp)
            + '}, "cat": "FP_BP Time", "ph": "X"}')
    refresh = ('{"name": "Iteration Refresh ' + i + '"' + head + us_str(np.maximum(bp, 0))
               + '", "dur": ' + dur_json(end - bp) + ', "args": {"Iteration ID": ' + i
               + ', "BP End": ' + bp_s + ', "Iteration End": ' + end_s
               + ', "Iteration Refresh(us)": ' + dur_json(end - bp)
               + '}, "cat": "Iteration Refresh", "ph": "X"}')
    # an iteration without its FP Start or its BP End gets its Iteration event only: no FP_BP,
    # no Iteration Refresh, no Data_aug flow (the real analysis,
    # analysis/viewer/training/step_trace_viewer.py `__format_trace_json`)
    both = has_fp & has_bp
    x_cols, x_keys, x_oks = [obj_array(it), obj_array(fpbp), obj_array(refresh)], \
        [ts_sort_key(start), ts_sort_key(np.maximum(fp, 0)), ts_sort_key(np.maximum(bp, 0))], \
        [np.ones(len(its), bool), both, both]
    # Reduce_{i}_{k}: the k-th AllReduce (tags 10000+2k / 10001+2k, k from 0) of iteration i,
    # only when both of its markers are in the iteration (docs/formats/step-trace-and-advice.md 3)
    for k in sorted(int(c.rsplit("_", 1)[1]) for c in its.columns
                    if c.startswith("reduce_start_")):
        rs = its[f"reduce_start_{k}"].to_numpy(np.int64)
        re_ = its[f"reduce_end_{k}"].to_numpy(np.int64) if f"reduce_end_{k}" in its.columns \
            else np.full(len(its), -1, np.int64)
        ok = (rs >= 0) & (re_ >= 0)
        rs0, re0 = np.maximum(rs, 0), np.maximum(re_, 0)
        x_cols.append(obj_array('{"name": "Reduce_' + i + '_' + str(k) + '"' + head + us_str(rs0)
                         + '", "dur": ' + dur_json(re0 - rs0) + ', "args": {"Iteration ID": '
                         + i + ', "Reduce Start ' + str(k) + '": "' + us_str(rs0)
                         + '", "Reduce End ' + str(k) + '": "' + us_str(re0)
                         + '"}, "cat": "Reduce", "ph": "X"}'))
        x_keys.append(ts_sort_key(rs0))
        x_oks.append(ok)
    x_ev = np.stack(x_cols, axis=1)
    x_key = np.stack(x_keys, axis=1)
    x_ok = np.stack(x_oks, axis=1)
    # Data_aug flow: "t" at FP of iteration i, "s" at the middle of its refresh phase
    flow_id = f'"Data_aug Bound {app_pid}_' + tid + '"'
    prev_i = int_str(its["iteration_id"].to_numpy(np.int64) - 1)
    mid = bp + (end - bp) // 2
    t_ev = ('{"name": "Data_aug Bound ' + prev_i + '", "cat": "Data_aug Bound", "ph": "t", '
            '"ts": "' + us_str(np.maximum(fp, 0)) + '", "pid": ' + str(pid) + ', "tid": ' + tid
            + ', "id": ' + flow_id + ', "args": {"Iteration ID": ' + i + '}}')
    aug_v = np.where(aug >= 0, dur_json(np.maximum(aug, 0)), "0.0")
    s_ev = ('{"name": "Data_aug Bound ' + i + '", "cat": "Data_aug Bound", "ph": "s", '
            '"ts": "' + us_str(np.maximum(mid, 0)) + '", "pid": ' + str(pid) + ', "tid": ' + tid
            + ', "id": ' + flow_id + ', "args": {"Data_aug Bound(us)": ' + aug_v + '}}')
    f_ev = np.stack([obj_array(t_ev), obj_array(s_ev)], axis=1)
    f_key = np.stack([ts_sort_key(np.maximum(fp, 0)), ts_sort_key(np.maximum(mid, 0))], axis=1)
    f_ok = np.stack([both, both], axis=1)
    ev = np.concatenate([x_ev[x_ok], f_ev[f_ok]])
    keys = np.concatenate([x_key[x_ok], f_key[f_ok]])
    return Layer(m, ev, keys)


