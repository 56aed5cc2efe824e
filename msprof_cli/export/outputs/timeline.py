"""msprof / step_trace timeline JSON (timeline.md), rendered vectorised.

Events are rendered to JSON text per column with fixed templates in the exact key order and
separators of the real tool (Python ``json.dumps`` defaults: ``", "`` and ``": "``), because
orjson cannot emit those separators.  Each layer yields (metadata strings, event strings, sort
keys); the file is all metadata in layer order, then all events stably sorted by
``float(ts)`` -- the real tool's sort, including its float64 ties.

Pre-sort layer order (decides ties, read off the golden export): Step Trace, CANN, Ascend
Hardware tasks, HostToDevice flows, Overlap Analysis.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from msprof_cli.raw import layouts as L

from ..decode.dataset import MEMCPY_SOURCE, DeviceData
from ..fmt import float_str, int_str, ts_sort_key, us_list, us_str
from ..decode.host import NA

SORT_CANN, SORT_HARDWARE, SORT_OVERLAP = 7, 14, 20
HOST_SLOT = 31
STEP_TID_BASE = 70000
CONTEXT_ID_910 = 4294967295
LEVEL_DISPLAY = {L.LEVEL_ACL: "AscendCL", L.LEVEL_MODEL: "Model", L.LEVEL_NODE: "Node",
                 L.LEVEL_RUNTIME: "Runtime", L.LEVEL_HCCL: "Communication"}
LAYERS = ("ascend", "cann", "step_trace", "overlap_analyse", "msproftx", "communication")


@dataclass
class Layer:
    """Metadata, sort keys and events of one timeline layer.

    Big layers (one event per task or API) are lazy: `render(idx)` returns the event strings
    of rows `idx` (any order), so a file is written in sorted chunks and the strings of all
    events never exist at once (memory bounded by the chunk, not the task count)."""

    meta: list[str] = field(default_factory=list)
    events: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))
    keys: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float64))
    render: Callable[[np.ndarray], list[str]] | None = None
    n: int = -1  # the row count once `keys` are dropped (EventStream keeps no sort keys)

    def __len__(self) -> int:
        if self.n >= 0:
            return self.n
        return len(self.keys) if self.render is not None else len(self.events)

    def take(self, idx: np.ndarray) -> list[str]:
        if self.render is not None:
            return self.render(idx)
        return self.events[idx].tolist()


KEY_STEP = 1024


class EventStream:
    """The events of several layers stably sorted by key (float(ts)), rendered on demand.

    Only the sort order (one int64 per event) is held; `chunks(lo, hi, size)` yields the
    event strings of sorted positions [lo, hi) in lists of at most `size`."""

    def __init__(self, layers: list[Layer]) -> None:
        layers = [lay for lay in layers if len(lay)]
        sizes = [len(lay) for lay in layers]
        self.starts = np.cumsum([0] + sizes)[:-1].astype(np.int64)
        keys = np.concatenate([lay.keys for lay in layers]) if layers \
            else np.zeros(0, np.float64)
        order = np.argsort(keys, kind="stable")
        # every `key_step`-th sorted key (µs): enough to say which times a slice of the stream
        # covers (the slice index, issue 20 item 7); at most ~8k keys (64 KB)
        self.key_step = max(1, min(KEY_STEP, len(order) // 8192))
        self.sampled = keys[order[::self.key_step]] if len(order) else np.zeros(0, np.float64)
        self.last_key = float(keys[order[-1]]) if len(order) else 0.0
        del keys
        # int32 positions and no sort keys kept (the callers' layers keep theirs): at 1M
        # tasks ~6M events, 72 MB less for the whole export
        self.order = order.astype(np.int32) if len(order) < 2**31 else order
        del order
        self.layers = [Layer(events=lay.events, render=lay.render, n=n)
                       for lay, n in zip(layers, sizes)]

    def __len__(self) -> int:
        return len(self.order)

    def key_range(self, lo: int, hi: int) -> tuple[float, float]:
        """Times (µs) bracketing sorted events [lo, hi): a lower bound of the first one's
        and an upper bound of the last one's (within `key_step` events)."""
        s, step = self.sampled, self.key_step
        first = float(s[min(lo // step, len(s) - 1)])
        k = (hi - 1) // step + 1
        last = float(s[k]) if k < len(s) else self.last_key
        return first, last

    def __iter__(self):
        for chunk in self.chunks(0, len(self), 100_000):
            yield from chunk

    def chunks(self, lo: int, hi: int, size: int):
        for a in range(lo, hi, size):
            pos = self.order[a:min(a + size, hi)]
            if len(self.layers) == 1:
                yield self.layers[0].take(pos)
                continue
            which = np.searchsorted(self.starts, pos, side="right") - 1
            out = np.empty(len(pos), dtype=object)
            for k, lay in enumerate(self.layers):
                sel = np.flatnonzero(which == k)
                if len(sel):
                    out[sel] = lay.take(pos[sel] - self.starts[k])
            yield out.tolist()


def pid_of(app_pid: int, sort_index: int, slot: int) -> int:
    return (app_pid << 10) | (sort_index << 5) | slot


def jstr(values: np.ndarray) -> np.ndarray:
    """JSON string literals of an object array (json.dumps per unique value)."""
    values = np.asarray(values, dtype=object)
    if len(values) == 0:
        return values
    inv, uniq = pd.factorize(values)
    return np.array([json.dumps(str(u)) for u in uniq], dtype=object)[inv]


class JCol:
    """A text column kept as (codes, JSON literal per distinct value): factorized and
    json-encoded once when the layer is built; each rendered chunk only gathers."""

    def __init__(self, values: np.ndarray) -> None:
        values = np.asarray(values, dtype=object)
        if len(values):
            self.codes, uniq = pd.factorize(values)
            self.table = np.array([json.dumps(str(u)) for u in uniq], dtype=object)
        else:
            self.codes, self.table = np.zeros(0, np.intp), np.zeros(0, dtype=object)

    def take(self, idx: np.ndarray) -> list[str]:
        return self.table[self.codes[idx]].tolist()


def meta(name: str, pid: int, tid: int, args: dict) -> str:
    return json.dumps({"name": name, "pid": pid, "tid": tid, "args": args, "ph": "M"})


def process_meta(pid: int, name: str, labels: str, sort_index: int,
                 threads: list[tuple[int, str, int | None]]) -> list[str]:
    out = [meta("process_name", pid, 0, {"name": name})]
    for tid, tname, tsort in threads:
        out.append(meta("thread_name", pid, tid, {"name": tname}))
        if tsort is not None:
            out.append(meta("thread_sort_index", pid, tid, {"sort_index": tsort}))
    out.append(meta("process_labels", pid, 0, {"labels": labels}))
    out.append(meta("process_sort_index", pid, 0, {"sort_index": sort_index}))
    return out


def _s(v) -> np.ndarray:
    return np.asarray(v, dtype=object)


def dur_json(ns: np.ndarray) -> np.ndarray:
    return float_str(np.asarray(ns, dtype=np.int64) / 1000.0)


# --- CANN ------------------------------------------------------------------------------

def _ints(a: np.ndarray) -> list[int]:
    return np.asarray(a).astype(np.int64).tolist()


def us_parts(ns: np.ndarray) -> tuple[list[int], list[int]]:
    """(whole µs, ns remainder) of local ns, printed as ``%d.%03d`` = fmt.us_str exactly."""
    ns = np.asarray(ns, dtype=np.int64)
    whole = np.floor_divide(ns, 1000)
    return whole.tolist(), (ns - whole * 1000).tolist()


def dur_text(ns: np.ndarray) -> list[str]:
    """Durations ns -> the ``repr`` of their µs floats (= fmt.float_str), printed with ``%s``.

    Durations repeat (the same ops every iteration): the float repr -- a third of the cost
    of a whole event's ``%`` format -- is made once per distinct value and gathered."""
    ns = np.asarray(ns, dtype=np.int64)
    if len(ns) >= 64:
        codes, uniq = pd.factorize(ns)
        if len(uniq) * 2 <= len(ns):
            table = np.array(list(map(repr, (np.asarray(uniq) / 1000.0).tolist())),
                             dtype=object)
            return table[codes].tolist()
    return list(map(repr, (ns / 1000.0).tolist()))


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
    return kind


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
    stream = tasks["stream_id"].to_numpy(np.int64)
    start = tasks["start_local"].to_numpy(np.int64)
    dur = tasks["dur_ns"].to_numpy(np.int64)
    model = tasks["model_id"].to_numpy(np.int64)
    task = tasks["task_id"].to_numpy(np.int64)
    batch = tasks["batch_id"].to_numpy(np.int64)
    cid = tasks["connection_id"].to_numpy(np.int64)
    tmpl = ('{"name": %s, "pid": ' + str(pid) + ', "tid": %d, "ts": "%d.%03d", "dur": %s, '
            '"args": {"Model Id": %d, "Task Type": %s, "Physic Stream Id": %d, "Task Id": %d, '
            '"Batch Id": %d, "Subtask Id": ' + str(CONTEXT_ID_910) + '%s}, "ph": "X"}')

    name_j, kind_j = JCol(name), JCol(kind)
    # a task without a host task_track: "connection_id": -1 (the analysis's
    # AscendTaskGenerator._gen_top_down_task_by_device_task, DEFAULT_INVALID_VALUE)
    cid = np.where(cid < 0, -1, cid)
    tmpl_c = tmpl.replace("%s}", ', "connection_id": %d}')

    ai_dur = None
    if analysis_memcpy:
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
                kind_j.take(idx), st, task[idx].tolist(), batch[idx].tolist())
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


def flow_id_ints(device_id: int, stream: np.ndarray, task: np.ndarray, batch: np.ndarray
                 ) -> list[int]:
    """The flow ids of `flow_ids` as Python ints (printed with ``%d`` by the templates):
    (dev<<80)+(stream<<64) | lo, lo = (task<<48)+(batch<<32)+context < 2**64."""
    hi = ((np.int64(device_id) << 16) + np.asarray(stream, dtype=np.int64)).tolist()
    lo = ((np.asarray(task, dtype=np.uint64) << np.uint64(48))
          + (np.asarray(batch, dtype=np.uint64) << np.uint64(32))
          + np.uint64(CONTEXT_ID_910)).tolist()
    return [(h << 64) | v for h, v in zip(hi, lo)]


def flow_layer(dev: DeviceData, tasks: pd.DataFrame, app_pid: int,
               analysis_memcpy: bool = False) -> Layer:
    """Per host-known task an ``s`` event (at its task_track) then an ``f`` event (at the
    task start): layer row 2i is task i's ``s``, 2i+1 its ``f``.  `analysis_memcpy`: none
    for the ts memcpy tasks (the analysis's device tasks of the 910 do not include them)."""
    known = tasks["host_known"].to_numpy(bool)
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
                                                  batch[rows]))), dtype=object)[inv]
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


SORT_COMMUNICATION = 17
PLANE_TID_BASE = 1000  # Communication process: op lanes tid 0.., plane lanes 1000 + plane


@dataclass
class CommData:
    """HCCL data of one device for msprof json (built by communication.device_comm):
    `ops` = op executions (hccl.OP_COLS), `steps` = hccl_info steps (plane_id, name,
    start_local, dur_ns), `step_args` = their args JSON text."""

    ops: pd.DataFrame
    steps: pd.DataFrame
    step_args: np.ndarray
    # the steps are device tasks, shown as the analysis shows them (communication_layer)
    analysis: bool = False

    def __len__(self) -> int:
        return len(self.ops) + len(self.steps)


def overlap_intervals(rows: pd.DataFrame, ops: pd.DataFrame | None
                      ) -> list[tuple[np.ndarray, np.ndarray]]:
    """Overlap Analysis intervals (local ns) in the order Computing, Communication,
    Communication(Not Overlapped), Free -- the layer of msprof json and the db's
    OVERLAP_ANALYSIS table share this one definition (timeline.md 7)."""
    cs, ce = merge_intervals(rows["start_local"].to_numpy(np.int64),
                             rows["end_local"].to_numpy(np.int64))
    if ops is not None and len(ops):
        ms, me = merge_intervals(ops["start_local"].to_numpy(np.int64),
                                 ops["end_local"].to_numpy(np.int64))
    else:
        ms = me = np.zeros(0, np.int64)
    ns, ne = subtract_intervals(ms, me, cs, ce)
    fs, fe = ce[:-1], cs[1:]  # the gaps between computing intervals ...
    if len(ms):  # ... minus communication
        fs, fe = subtract_intervals(fs, fe, ms, me)
    return [(cs, ce), (ms, me), (ns, ne), (fs, fe)]


def overlap_templates(pid: int) -> list[str]:
    """``%`` templates (ts parts, dur) of the Overlap Analysis lanes, tid 0..3."""
    return ['{"name": ' + json.dumps(name) + ', "pid": ' + str(pid) + ', "tid": ' + str(tid)
            + ', "ts": "%d.%03d", "dur": %s, "ph": "X"}'
            for tid, name in enumerate(("Computing", "Communication",
                                        "Communication(Not Overlapped)", "Free"))]


def overlap_sorts(device_ids: list[int]) -> dict[int, int]:
    """Process sort index of each device's Overlap Analysis layer.  The process is not in
    the analysis's LAYER_INFO_MAP: MsprofTimeline.get_layer_info gives it the next index
    from 19 on, and that counter lives in a singleton across the device dirs, which
    ExportCommand._process_sub_dirs visits in reverse name order (``device_1`` before
    ``device_0``).  So with one device 20; with several the last dir name gets 20, the one
    before 21, ... (the sort index is also part of the pid)."""
    names = sorted((f"device_{d}", d) for d in device_ids)
    return {d: SORT_OVERLAP + i for i, (_, d) in enumerate(reversed(names))}


def free_event(device_id: int, app_pid: int, begin: int, end: int,
               sort: int = SORT_OVERLAP) -> str:
    """One Overlap Analysis ``Free`` event [begin, end) (local ns), as `overlap_layer` prints
    it (the windowed export adds the gap between two windows' computing with it)."""
    tmpl = overlap_templates(pid_of(app_pid, sort, device_id))[3]
    w, f = us_parts(np.array([begin]))
    return tmpl % (w[0], f[0], dur_text(np.array([end - begin]))[0])


def overlap_layer(dev: DeviceData, rows: pd.DataFrame, app_pid: int,
                  comm: CommData | None = None, sort: int = SORT_OVERLAP) -> Layer:
    """Computing = union of the op_summary task intervals; Communication = union of the HCCL
    op executions; Communication(Not Overlapped) = Communication minus Computing; Free = the
    parts of [first task start, last task end] covered by neither (timeline.md 7)."""
    pid = pid_of(app_pid, sort, dev.device_id)
    m = process_meta(pid, "Overlap Analysis", f"NPU {dev.device_id}", sort,
                     [(0, "Computing", None), (1, "Communication", None),
                      (2, "Communication(Not Overlapped)", None), (3, "Free", None)])
    ops = comm.ops if comm is not None else None
    if len(rows) == 0 and (ops is None or len(ops) == 0):
        return Layer(m)
    # layer rows: Computing, Communication, Not Overlapped, Free (tid 0..3), in this order
    parts = overlap_intervals(rows, ops)
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


def comm_lanes(comm: CommData) -> tuple[list[str], list[int]]:
    """The Communication process's lanes: group names and plane ids, sorted (`lanes` of
    `communication_layer`: a window's events take the lanes of the whole export)."""
    ops, steps = comm.ops, comm.steps
    groups = sorted(str(g) for g in ops["group"].unique()) if len(ops) else []
    planes = sorted(int(p) for p in steps["plane_id"].unique()) if len(steps) else []
    if comm.analysis:  # the analysis's plane lanes follow the group lanes (tid 1, ...)
        return groups, planes, len(groups)
    return groups, planes


def comm_meta(device_id: int, app_pid: int, lanes: tuple[list[str], list[int]]
              ) -> list[str]:
    """Metadata of the Communication process with `lanes` (groups, planes)."""
    groups, planes = lanes[0], lanes[1]
    base = lanes[2] if len(lanes) > 2 else PLANE_TID_BASE
    threads = [(i, f"Group {g} Communication", i) for i, g in enumerate(groups)] + \
        [(base + p, f"Plane {p}", base + p) for p in planes]
    return process_meta(pid_of(app_pid, SORT_COMMUNICATION, device_id), "Communication",
                        f"NPU {device_id}", SORT_COMMUNICATION, threads)


def communication_layer(dev: DeviceData, comm: CommData | None, app_pid: int,
                        lanes: tuple[list[str], list[int]] | None = None) -> Layer:
    """Process ``Communication`` (label NPU n, sort 17): per communication group a lane
    ``Group {group} Communication`` (tid 0, 1, … by group name) with one X per HCCL op
    execution, and per plane a lane ``Plane {id}`` (tid 1000 + plane) with one X per
    hccl_info task step (the steps of hccl json).  Project choice of names and tids."""
    if comm is None or len(comm) == 0:
        return Layer()
    pid = pid_of(app_pid, SORT_COMMUNICATION, dev.device_id)
    ops, steps = comm.ops, comm.steps
    lanes = lanes if lanes is not None else comm_lanes(comm)
    groups = lanes[0]
    m = comm_meta(dev.device_id, app_pid, lanes)
    head = '{"name": %s, "pid": ' + str(pid) + ', "tid": %d, "ts": "%d.%03d", "dur": %s, '
    ev: list[np.ndarray] = []
    keys: list[np.ndarray] = []
    if comm.analysis:
        return _analysis_comm_layer(m, pid, head, comm, groups,
                                    lanes[2] if len(lanes) > 2 else len(groups))
    if len(ops):
        gid = {g: i for i, g in enumerate(groups)}
        tmpl = head + ('"args": {"Op Type": %s, "Group Name": %s, "Local Rank": %d, '
                       '"Rank Size": %d}, "ph": "X"}')
        start = ops["start_local"].to_numpy(np.int64)
        w, f = us_parts(start)
        grp = ops["group"].astype(str).to_numpy(object)
        ev.append(np.array(list(map(tmpl.__mod__, zip(
            jstr(ops["op_name"].to_numpy(object)).tolist(), [gid[g] for g in grp], w, f,
            dur_text(ops["dur_ns"]), jstr(ops["op_type"].to_numpy(object)).tolist(),
            jstr(grp).tolist(), _ints(ops["local_rank"]), _ints(ops["rank_size"])))),
            dtype=object))
        keys.append(ts_sort_key(start))
    if len(steps):
        _step_events(ev, keys, head, comm, PLANE_TID_BASE)
    return Layer(m, np.concatenate(ev) if ev else np.zeros(0, dtype=object),
                 np.concatenate(keys) if keys else np.zeros(0, np.float64))


def _step_events(ev: list[np.ndarray], keys: list[np.ndarray], head: str, comm: CommData,
                 plane_base: int) -> None:
    """The hccl_info steps of `comm` as X events on their plane lanes (`plane_base` + plane)."""
    steps = comm.steps
    tmpl = head + '"args": %s, "ph": "X"}'
    start = steps["start_local"].to_numpy(np.int64)
    w, f = us_parts(start)
    ev.append(np.array(list(map(tmpl.__mod__, zip(
        jstr(steps["name"].to_numpy(object)).tolist(),
        (plane_base + steps["plane_id"].to_numpy(np.int64)).tolist(), w, f,
        dur_text(steps["dur_ns"]), np.asarray(comm.step_args, dtype=object).tolist()))),
        dtype=object))
    keys.append(ts_sort_key(start))


def _analysis_comm_layer(m: list[str], pid: int, head: str, comm: CommData,
                         groups: list[str], plane_base: int) -> Layer:
    """The Communication process as the analysis writes it (viewer/get_hccl_export_data.py
    _format_hccl_data: the steps, then the ops; host_connect_device.add_hccl_end_points:
    an ``f`` per op, id (connection_id << 32) - 1): per step an X named by its task type
    on its plane lane, per collective an X on its group lane with the analysis's args."""
    ops, steps = comm.ops, comm.steps
    ev: list[np.ndarray] = []
    keys: list[np.ndarray] = []
    if len(steps):
        _step_events(ev, keys, head, comm, plane_base)
    if len(ops):
        gid = {g: i for i, g in enumerate(groups)}
        grp = [gid.get(str(g), 0) for g in ops["group"].astype(str).tolist()]
        start = ops["start_local"].to_numpy(np.int64)
        w, f = us_parts(start)
        cid = ops["connection_id"].to_numpy(np.int64).tolist()
        tmpl = head + ('"args": {"rank_size": %d, "connection_id": %d, "model id": %d, '
                       '"data_type": "N/A", "alg_type": "N/A", "count": -1}, "ph": "X"}')
        ev.append(np.array(list(map(tmpl.__mod__, zip(
            jstr(ops["op_name"].to_numpy(object)).tolist(), grp, w, f,
            dur_text(ops["dur_ns"]), _ints(ops["rank_size"]), cid,
            _ints(ops["model_id"])))), dtype=object))
        keys.append(ts_sort_key(start))
        f_tmpl = ('{"name": "HostToDevice%d", "ph": "f", "id": "%d", "ts": "%d.%03d", '
                  '"cat": "HostToDevice", "pid": ' + str(pid) + ', "tid": %d, "bp": "e"}')
        ids = [(c << 32) - 1 for c in cid]
        ev.append(np.array(list(map(f_tmpl.__mod__, zip(ids, ids, w, f, grp))), dtype=object))
        keys.append(ts_sort_key(start))
    return Layer(m, np.concatenate(ev) if ev else np.zeros(0, dtype=object),
                 np.concatenate(keys) if keys else np.zeros(0, np.float64))


# --- Step Trace --------------------------------------------------------------------------

def step_layer(dev: DeviceData, its: pd.DataFrame, app_pid: int,
               models: list[int] | None = None) -> Layer:
    """`models`: every model of the device (lane per model), when `its` are only some of
    its iterations (the windowed export); by default the models of `its`."""
    if len(its) == 0:
        return Layer()
    pid = pid_of(app_pid, SORT_HARDWARE, dev.device_id)
    if models is None:
        models = sorted(int(x) for x in its["model_id"].unique())
    tid_of = {mdl: app_pid + STEP_TID_BASE + i for i, mdl in enumerate(models)}
    m = process_meta(pid, "Ascend Hardware", f"NPU {dev.device_id}", SORT_HARDWARE,
                     [(tid_of[mdl], f"Step Trace(Model ID:{mdl})", STEP_TID_BASE + mdl)
                      for mdl in models])
    its = its.sort_values("step_end_ns", kind="stable")
    tid = int_str(its["model_id"].map(tid_of).to_numpy(np.int64))
    i = int_str(its["iteration_id"])
    start = its["step_start_ns"].to_numpy(np.int64)
    end = its["step_end_ns"].to_numpy(np.int64)
    fp = its["fp_ns"].to_numpy(np.int64)
    bp = its["bp_ns"].to_numpy(np.int64)
    aug = its["data_aug_ns"].to_numpy(np.int64)
    has_fp, has_bp = fp >= 0, bp >= 0
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
    x_cols, x_keys, x_oks = [_s(it), _s(fpbp), _s(refresh)], \
        [ts_sort_key(start), ts_sort_key(np.maximum(fp, 0)), ts_sort_key(np.maximum(bp, 0))], \
        [np.ones(len(its), bool), has_fp & has_bp, has_bp]
    # Reduce_{i}_{k}: the k-th AllReduce (tags 10000+2k / 10001+2k, k from 0) of iteration i,
    # only when both of its markers are in the iteration (step-trace-and-advice.md 3)
    for k in sorted(int(c.rsplit("_", 1)[1]) for c in its.columns
                    if c.startswith("reduce_start_")):
        rs = its[f"reduce_start_{k}"].to_numpy(np.int64)
        re_ = its[f"reduce_end_{k}"].to_numpy(np.int64) if f"reduce_end_{k}" in its.columns \
            else np.full(len(its), -1, np.int64)
        ok = (rs >= 0) & (re_ >= 0)
        rs0, re0 = np.maximum(rs, 0), np.maximum(re_, 0)
        x_cols.append(_s('{"name": "Reduce_' + i + '_' + str(k) + '"' + head + us_str(rs0)
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
    f_ev = np.stack([_s(t_ev), _s(s_ev)], axis=1)
    f_key = np.stack([ts_sort_key(np.maximum(fp, 0)), ts_sort_key(np.maximum(mid, 0))], axis=1)
    f_ok = np.stack([has_fp, has_bp], axis=1)
    ev = np.concatenate([x_ev[x_ok], f_ev[f_ok]])
    keys = np.concatenate([x_key[x_ok], f_key[f_ok]])
    return Layer(m, ev, keys)


def assemble(layers: list[Layer]) -> tuple[list[str], list[str]]:
    """Metadata in layer order, then every event stably sorted by float(ts) (as a list)."""
    meta_out, stream = assemble_stream(layers)
    return meta_out, list(stream) if len(stream) else []


def assemble_stream(layers: list[Layer]) -> tuple[list[str], EventStream]:
    """As `assemble`, the events as a lazy sorted EventStream (writers.write_events writes
    it chunk by chunk)."""
    meta_out: list[str] = []
    for lay in layers:
        meta_out.extend(lay.meta)
    return meta_out, EventStream(layers)


def read_reports(path) -> dict[str, bool]:
    """--reports layer switches (timeline.md 8); invalid content -> every layer on."""
    on = {k: True for k in LAYERS}
    if path is None:
        return on
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        proc = data["json_process"]
        if not isinstance(proc, dict):
            raise ValueError
    except (OSError, ValueError, KeyError, TypeError):
        return on
    for k in LAYERS:
        if isinstance(proc.get(k), bool):
            on[k] = proc[k]
    return on


# The msprof json layers, in their order (defined once: the whole export, the windows'
# fixed positions and the windowed metadata all follow it): (kind, one layer per device,
# the --reports switches that must all be on).  msproftx last: project choice.
MSPROF_LAYER_ORDER: tuple[tuple[str, bool, tuple[str, ...]], ...] = (
    ("step", True, ("step_trace",)),
    ("cann", False, ("cann",)),
    ("hardware", True, ("ascend",)),
    ("flow", True, ("ascend", "cann")),
    ("comm", True, ("communication",)),
    ("overlap", True, ("overlap_analyse",)),
    ("tx", False, ("msproftx",)),
)


def layer_on(kind: str, switches: dict[str, bool]) -> bool:
    """Whether the --reports switches keep the msprof json layers of `kind`."""
    need = next(sw for k, _, sw in MSPROF_LAYER_ORDER if k == kind)
    return all(switches.get(name, True) for name in need)


def layer_slots(n: int) -> dict[str, list[int] | int]:
    """Fixed positions of the msprof json layers of `n` devices in MSPROF_LAYER_ORDER: a list
    per per-device kind, an int per global one, `size` = the number of positions."""
    slots: dict[str, list[int] | int] = {}
    at = 0
    for kind, per_device, _ in MSPROF_LAYER_ORDER:
        slots[kind] = list(range(at, at + n)) if per_device else at
        at += n if per_device else 1
    slots["size"] = at
    return slots


def in_layer_order(parts: dict[str, list]) -> list:
    """The items of `parts` (kind -> its layers, or metadata lines) in MSPROF_LAYER_ORDER."""
    return [x for kind, _, _ in MSPROF_LAYER_ORDER for x in parts.get(kind, ())]
