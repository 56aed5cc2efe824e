"""Host component files of the legacy layout: ai_stack_time, ge, runtime_api, thread_group.

Reference: docs/formats/export-files.md 1.2/1.3/4.1/4.2, docs/formats/timeline.md 11.2.  All of them
are built on the
*executions* of the export scope: the GE ModelExecute APIs (15000/1) of the host data, the
n-th call of model m being iteration n of m (the analysis numbers step-trace iterations the
same way, 1, 2, ... per model).  With a model/iteration selection only the selected
executions count; without one (no step trace) every execution does.

Joins (no loop per record):
* GE InputCopy (15000/3) / OutputCopy (15000/4) and runtime APIs (level 5000) belong to the
  ModelExecute of their thread that encloses their begin (``dataset.enclose``).
* A runtime API gets the device and stream of the task_track it encloses (one launch API per
  task); an API that encloses none is kept for every device (stream ``N/A``).
* A device task belongs to the execution that encloses its host task_track.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from msprof_cli.raw import layouts as L

from ..decode.data import DeviceData, ProfData
from ..decode.enclose import enclosing
from ..decode.join import sorted_positions
from ..decode.host import NA, resolve, type_names
from ..fmt import float_str, int_str, obj_full, py_round
from ..outputs import timeline as T
from ..outputs import trace as TR
from ..outputs.numeric_trace import ArgsTemplate, thread_meta, x_events
from .selection import Selection

Table = tuple[list[str], pd.DataFrame]

AI_STACK_TIME = ["Infer ID", "Module", "API", "Start Time", "Duration(ns)"]
RUNTIME_API = ["Name", "Stream ID", "Time(%)", "Time(ns)", "Calls", "Avg(ns)", "Min(ns)",
               "Max(ns)", "Process ID", "Thread ID"]
STACK_THREADS = [(0, "AscendCL"), (1, "GE"), (2, "Runtime"), (3, "Task Scheduler")]
GROUP_TID = {L.LEVEL_ACL: 0, L.LEVEL_MODEL: 1, L.LEVEL_NODE: 1, L.LEVEL_HCCL: 1,
             L.LEVEL_RUNTIME: 2}


@dataclass
class Scope:
    """Host API data of one legacy export (one device, one selection)."""

    execs: pd.DataFrame  # me_cid, model_id, exec_id, thread_id, begin/end_local, in_*/out_*
    runtime: pd.DataFrame  # runtime APIs in scope (+ me_cid, stream_id)
    apis: pd.DataFrame  # every API in scope (thread_group)
    tasks: pd.DataFrame  # device tasks of the selected executions (+ me_cid, exec_id)
    model_names: dict[int, str]


Spans = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # thread, begin, end, cid


def _spans(df: pd.DataFrame, rows: np.ndarray) -> Spans:
    """(thread, begin, end, connection id) of the API rows `rows`, the spans of `_enclosing`."""
    return tuple(df[c].to_numpy(np.int64)[rows]  # type: ignore[return-value]
                 for c in ("thread_id", "begin_local", "end_local", "connection_id"))


def _enclosing(thread: np.ndarray, ts: np.ndarray, spans: Spans) -> np.ndarray:
    """Connection id of the span of the same thread enclosing each (thread, ts), -1 where
    none (decode.enclose.enclosing on numpy columns: the frames a join builds cost more
    than the join itself on a small export)."""
    s_thread, begin, end, cid = spans
    if len(cid) == 0:
        return np.full(len(ts), -1, np.int64)
    at = enclosing(thread, ts, s_thread, begin, end)
    return np.where(at >= 0, cid[np.maximum(at, 0)], -1)


def _with_copies(apis: pd.DataFrame, lvl: np.ndarray, typ: np.ndarray, spans: Spans) -> Spans:
    """The ModelExecute spans widened by their GE copies: an InputCopy that ends before the
    ModelExecute of its thread begins (GE reports the two one after another,
    docs/formats/raw-format.md 4.12) starts that execution; an OutputCopy that begins after
    one ends closes it.  A copy inside a ModelExecute (older data) widens nothing."""
    s_thread, begin, end, cid = spans
    begin, end = begin.copy(), end.copy()
    th = apis["thread_id"].to_numpy(np.int64)
    b = apis["begin_local"].to_numpy(np.int64)
    e = apis["end_local"].to_numpy(np.int64)
    for typ_id, before in ((L.MODEL_INPUT_COPY, True), (L.MODEL_OUTPUT_COPY, False)):
        rows = np.flatnonzero((lvl == L.LEVEL_MODEL) & (typ == typ_id))
        rows = rows[_enclosing(th[rows], b[rows], spans) < 0]
        for t in np.unique(th[rows]).tolist():
            mine = rows[th[rows] == t]
            on = np.flatnonzero(s_thread == t)
            if before:  # the execution beginning first at or after the copy's end
                on = on[np.argsort(begin[on], kind="stable")]
                at = np.searchsorted(begin[on], e[mine], side="left")
                ok = at < len(on)
                idx = on[at[ok]]
                np.minimum.at(begin, idx, b[mine[ok]])
            else:  # the execution ending last at or before the copy's begin
                on = on[np.argsort(end[on], kind="stable")]
                at = np.searchsorted(end[on], b[mine], side="right") - 1
                ok = at >= 0
                idx = on[at[ok]]
                np.maximum.at(end, idx, e[mine[ok]])
    return s_thread, begin, end, cid


def _lookup(keys: np.ndarray, values: np.ndarray, want: np.ndarray, missing: int = -1
            ) -> np.ndarray:
    """values[i] where keys[i] == want (keys sorted, unique), `missing` elsewhere."""
    if len(keys) == 0:
        return np.full(len(want), missing, np.int64)
    at = sorted_positions(keys, want)
    return np.where(at >= 0, values[np.maximum(at, 0)], missing)


def model_names(data: ProfData) -> dict[int, str]:
    ht = data.host.tables
    if ht is None or len(ht.graphs) == 0:
        return {}
    g = ht.graphs.drop_duplicates("model_id", keep="first")
    names = resolve(g["model_name_hash"].to_numpy(np.uint64), ht.hashes)
    return dict(zip(g["model_id"].astype(int).tolist(), names.tolist()))


def _runtime_devices(data: ProfData, runtime_rows: np.ndarray, apis: pd.DataFrame
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(connection id sorted, device id, stream id) of the first task_track each runtime API
    (`runtime_rows` of `apis`) encloses."""
    ht = data.host.tables
    none = np.zeros(0, np.int64)
    if ht is None or len(ht.task_track) == 0 or len(runtime_rows) == 0:
        return none, none, none
    tt = ht.task_track
    names = type_names(np.full(len(tt), L.LEVEL_RUNTIME), tt["rt_type"].to_numpy(), ht.types)
    rows = np.flatnonzero(~np.isin(names, ["FLIP_TASK", "MAINTENANCE"]))
    off = data.host.rd.offset_ns if data.host.rd else 0
    cid = _enclosing(tt["thread_id"].to_numpy(np.int64)[rows],
                     tt["ts_ns"].to_numpy(np.int64)[rows] + off, _spans(apis, runtime_rows))
    inside = np.flatnonzero(cid >= 0)
    keys, first = np.unique(cid[inside], return_index=True)  # a runtime API's first record
    at = rows[inside[first]]
    return (keys, tt["device_id"].to_numpy(np.int64)[at],
            tt["stream_id"].to_numpy(np.int64)[at])


RUNTIME_COLS = ["connection_id", "type_name", "thread_id", "begin_local", "end_local", "dur_ns",
                "me_cid"]
SCOPE_TASK_COLS = ["op_name", "task_type", "rt_type", "host_known", "start_local", "end_local",
                   "dur_ns", "tt_thread", "tt_local"]


def build_scope(data: ProfData, dev: DeviceData, sel: Selection, tasks: pd.DataFrame,
                exec_base: dict[int, int] | None = None) -> Scope:
    """`exec_base`: per model, the executions before these host data (the windows before,
    legacy.py): execution n of a model is the n-th of the whole collection.

    On numpy columns: a tiny export spent ~20 ms here in pandas' per-call costs (merges,
    groupby, sorts of a few rows)."""
    apis = data.host.apis
    names = model_names(data)
    empty = pd.DataFrame()
    if apis is None or len(apis) == 0:
        return Scope(empty, empty, empty, tasks.iloc[0:0], names)
    lvl, typ = apis["level"].to_numpy(), apis["type"].to_numpy()
    is_me = (lvl == L.LEVEL_MODEL) & (typ == L.MODEL_EXECUTE)
    # ModelExecutes by model, then begin (stable); exec_id: 1, 2, ... per model
    me = np.flatnonzero(is_me)
    model = apis["item_id"].to_numpy()[me].astype(np.int64)
    order = np.lexsort((apis["begin_local"].to_numpy(np.int64)[me], model))
    me, model = me[order], model[order]
    n = len(me)
    first = np.r_[True, model[1:] != model[:-1]] if n else np.zeros(0, bool)
    exec_id = np.arange(n) - np.maximum.accumulate(np.where(first, np.arange(n), 0)) + 1
    if exec_base and n:
        uniq, inv = np.unique(model, return_inverse=True)
        exec_id = exec_id + np.array([int(exec_base.get(int(m), 0)) for m in uniq],
                                     np.int64)[inv]
    spans = _with_copies(apis, lvl, typ, _spans(apis, me))
    m_thread, m_begin, m_end, m_cid = spans
    chosen = np.ones(n, bool)
    if sel.model_id is not None:
        chosen = (model == sel.model_id) & (exec_id >= sel.first) & (exec_id <= sel.last)
    c_cid = m_cid[chosen]
    # the chosen executions by begin, then model (stable)
    o = np.lexsort((model[chosen], m_begin[chosen]))
    me_b = apis["begin_local"].to_numpy(np.int64)[me]
    me_e = apis["end_local"].to_numpy(np.int64)[me]
    execs = pd.DataFrame({"me_cid": c_cid[o], "model_id": model[chosen][o],
                          "exec_id": exec_id[chosen][o], "thread_id": m_thread[chosen][o],
                          "begin_local": me_b[chosen][o], "end_local": me_e[chosen][o]})
    ids = np.sort(c_cid)
    # every API -> its enclosing ModelExecute (a ModelExecute is its own)
    cid = apis["connection_id"].to_numpy(np.int64)
    me_of = np.where(is_me, cid, _enclosing(apis["thread_id"].to_numpy(np.int64),
                                            apis["begin_local"].to_numpy(np.int64), spans))
    scoped = apis.assign(me_cid=me_of)
    if sel.model_id is not None:
        in_scope = np.isin(me_of, ids)
        if not in_scope.all():  # a filtered copy only when something is out of scope
            scoped = scoped[in_scope].reset_index(drop=True)
            lvl, typ, me_of = lvl[in_scope], typ[in_scope], me_of[in_scope]
    # GE copies per execution: the first of each execution
    s_begin = scoped["begin_local"].to_numpy(np.int64)
    s_end = scoped["end_local"].to_numpy(np.int64)
    for typ_id, pre in ((L.MODEL_INPUT_COPY, "in"), (L.MODEL_OUTPUT_COPY, "out")):
        rows = np.flatnonzero((lvl == L.LEVEL_MODEL) & (typ == typ_id) & (me_of >= 0))
        keys, at = np.unique(me_of[rows], return_index=True)
        rows = rows[at]
        execs[f"{pre}_b"] = _lookup(keys, s_begin[rows], c_cid[o])
        execs[f"{pre}_e"] = _lookup(keys, s_end[rows], c_cid[o])
    # runtime APIs of this device (those whose first task_track is on another one are not)
    # only the columns the runtime outputs read (not every named-API column: memory)
    rt_rows = np.flatnonzero(lvl == L.LEVEL_RUNTIME)
    keys, r_dev, r_stream = _runtime_devices(data, np.flatnonzero(apis["level"].to_numpy()
                                                                  == L.LEVEL_RUNTIME), apis)
    r_cid = scoped["connection_id"].to_numpy(np.int64)[rt_rows]
    dev_of = _lookup(keys, r_dev, r_cid)
    keep = (dev_of < 0) | (dev_of == dev.device_id)
    rt = scoped[RUNTIME_COLS].take(rt_rows[keep]).reset_index(drop=True)
    rt["device_id"] = np.where(dev_of[keep] >= 0, dev_of[keep], np.nan)
    rt["stream_id"] = _lookup(keys, r_stream, r_cid[keep])
    # device tasks -> execution of their launch
    # only the columns ai_stack_time reads (not a copy of every task column)
    known = np.flatnonzero(tasks["host_known"].to_numpy(bool))
    t_me = _enclosing(tasks["tt_thread"].to_numpy(np.int64)[known],
                      tasks["tt_local"].to_numpy(np.int64)[known], spans)
    mine = np.isin(t_me, ids)
    t = tasks[SCOPE_TASK_COLS].take(known[mine]).reset_index(drop=True)
    t["me_cid"] = t_me[mine]
    t["exec_id"] = _lookup(ids, exec_id[chosen][np.argsort(c_cid, kind="stable")], t_me[mine])
    return Scope(execs, rt, scoped, t, names)


# --- ai_stack_time ---------------------------------------------------------------------------

def _span_per_exec(me_cid: np.ndarray, frame: pd.DataFrame, b: str, e: str
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per execution (`me_cid`): whether `frame` has rows of it, the earliest `b` and the
    latest `e` of those rows (0 where none)."""
    keys, inv = np.unique(frame["me_cid"].to_numpy(np.int64), return_inverse=True)
    first = np.full(len(keys), np.iinfo(np.int64).max)
    last = np.full(len(keys), np.iinfo(np.int64).min)
    np.minimum.at(first, inv, frame[b].to_numpy(np.int64))
    np.maximum.at(last, inv, frame[e].to_numpy(np.int64))
    at = sorted_positions(keys, me_cid)
    ok = at >= 0
    at = np.maximum(at, 0)
    return ok, np.where(ok, first[at], 0), np.where(ok, last[at], 0)


def _stack_rows(scope: Scope) -> dict[str, np.ndarray]:
    """exec_id, module, api, start, dur of every row: by execution (the order of
    `scope.execs`), then kind (GE Input, Infer, Output, Runtime, Task Scheduler).  On numpy
    columns: the per-kind frames, groupbys, merges and sort were ~8 ms of pandas call costs
    on a small export."""
    ex = scope.execs
    order = np.arange(len(ex))
    exec_id = ex["exec_id"].to_numpy(np.int64)
    parts: list[tuple] = []

    def add(kind: int, module: str, api: str, ok: np.ndarray, start: np.ndarray,
            end: np.ndarray) -> None:
        n = int(ok.sum())
        parts.append((order[ok], np.full(n, kind), exec_id[ok], obj_full(n, module),
                      obj_full(n, api), start[ok], (end - start)[ok]))

    col = {c: ex[c].to_numpy(np.int64) for c in ("in_b", "in_e", "out_b", "out_e",
                                                  "begin_local", "end_local", "me_cid")}
    add(1, "GE", "Input", col["in_b"] >= 0, col["in_b"], col["in_e"])
    add(2, "GE", "Infer", np.ones(len(ex), bool), col["begin_local"], col["end_local"])
    add(3, "GE", "Output", col["out_b"] >= 0, col["out_b"], col["out_e"])
    for kind, module, frame, b, e in (
            (4, "Runtime", scope.runtime, "begin_local", "end_local"),
            (5, "Task Scheduler", scope.tasks, "start_local", "end_local")):
        if len(frame) == 0:
            continue
        ok, first, last = _span_per_exec(col["me_cid"], frame, b, e)
        add(kind, module, NA, ok, first, last)
    o, k, eid, module, api, start, dur = (np.concatenate(c) for c in zip(*parts))
    by = np.lexsort((k, o))  # by execution, then kind (stable)
    return {"exec_id": eid[by], "module": module[by], "api": api[by], "start": start[by],
            "dur": dur[by]}


def has_stack_data(scope: Scope) -> bool:
    """ai_stack_time needs task_time or runtime_api data (GE copies, runtime APIs, tasks)."""
    ex = scope.execs
    return len(ex) > 0 and (bool((ex["in_b"] >= 0).any() or (ex["out_b"] >= 0).any())
                            or len(scope.runtime) > 0 or len(scope.tasks) > 0)


def ai_stack_time(scope: Scope) -> Table | None:
    if not has_stack_data(scope):
        return None
    return AI_STACK_TIME, ai_stack_rows(scope)


def ai_stack_rows(scope: Scope) -> pd.DataFrame:
    """The ai_stack_time rows of every execution in scope (written when any execution of
    the export has stack data: `has_stack_data`)."""
    rows = _stack_rows(scope)
    return pd.DataFrame({
        "Infer ID": int_str(rows["exec_id"]),
        "Module": rows["module"],
        "API": rows["api"],
        "Start Time": int_str(rows["start"]),
        "Duration(ns)": int_str(rows["dur"]),
    })


def _stack_args(iter_id: np.ndarray, start: np.ndarray, end: np.ndarray):
    """The args objects of AI Stack Time events, rendered inside each event's template per
    chunk (x_events: lazy)."""
    it = np.asarray(iter_id).astype(np.int64)
    b = np.asarray(start).astype(np.int64)
    e = np.asarray(end).astype(np.int64)
    tmpl = '{"Iter ID": %d, "Start Time": %d, "End Time": %d, "Duration Time(ns)": %d}'

    def columns(idx: np.ndarray) -> list[list]:
        bb, ee = b[idx], e[idx]
        return [it[idx].tolist(), bb.tolist(), ee.tolist(), (ee - bb).tolist()]
    return ArgsTemplate(tmpl, columns)


def ai_stack_meta(app_pid: int) -> list[str]:
    return thread_meta(app_pid, "AI Stack Time", STACK_THREADS)


def ai_stack_layers(scope: Scope, app_pid: int) -> list[TR.Layer]:
    """The AI Stack Time events of every execution in scope (no metadata)."""
    ex = scope.execs
    layers = []
    for name, b, e in (("Input", "in_b", "in_e"), ("Infer", "begin_local", "end_local"),
                       ("Output", "out_b", "out_e")):
        sub = ex[ex[b] >= 0]
        layers.append(x_events(obj_full(len(sub), name), app_pid,
                               np.full(len(sub), 1), sub[b], sub[e] - sub[b],
                               _stack_args(sub["exec_id"], sub[b], sub[e])))
    # the runtime APIs of the executions in scope, with their exec_id (an inner join)
    cid = ex["me_cid"].to_numpy(np.int64)
    by = np.argsort(cid, kind="stable")
    rt = scope.runtime
    got = _lookup(cid[by], ex["exec_id"].to_numpy(np.int64)[by], rt["me_cid"].to_numpy(np.int64))
    rt = rt[got >= 0].assign(exec_id=got[got >= 0])
    layers.append(x_events(rt["type_name"].to_numpy(object), app_pid, np.full(len(rt), 2),
                           rt["begin_local"], rt["dur_ns"],
                           _stack_args(rt["exec_id"], rt["begin_local"], rt["end_local"])))
    t = scope.tasks
    if len(t):
        kind = T.task_kind(t)
        name = np.where(t["op_name"].to_numpy(object) == NA, kind, t["op_name"].to_numpy(object))
        layers.append(x_events(name, app_pid, np.full(len(t), 3), t["start_local"], t["dur_ns"],
                               _stack_args(t["exec_id"], t["start_local"], t["end_local"])))
    return layers  # rendered chunk by chunk when written


# --- ge ----------------------------------------------------------------------------------------

def has_ge_data(scope: Scope) -> bool:
    ex = scope.execs
    a = scope.apis
    launches = len(a) and bool(((a["level"] == L.LEVEL_NODE) & (a["type"] == L.NODE_LAUNCH))
                               .any())
    return len(ex) > 0 and bool(launches or (ex["in_b"] >= 0).any()
                                or (ex["out_b"] >= 0).any())


def ge_meta(app_pid: int, threads) -> list[str]:
    return thread_meta(app_pid, "GE", [(t, f"Thread {t}")
                                       for t in sorted(int(t) for t in threads)])


def ge_layers(scope: Scope, app_pid: int) -> list[TR.Layer]:
    """The GE events of every execution in scope (no metadata)."""
    ex = scope.execs
    if len(ex) == 0:
        return []
    mname = np.array([scope.model_names.get(int(m), NA) for m in ex["model_id"]], dtype=object)
    args = ('{"Model Name": ' + TR.jstr(mname) + ', "Model Id": '
            + int_str(ex["model_id"].to_numpy(np.int64)) + '}')
    args = np.asarray(args, dtype=object)
    layers = []
    for name, b, e in (("Input", "in_b", "in_e"), ("Infer", "begin_local", "end_local"),
                       ("Output", "out_b", "out_e")):
        ok = (ex[b] >= 0).to_numpy()
        sub = ex[ok]
        layers.append(x_events(obj_full(len(sub), name), app_pid, sub["thread_id"],
                               sub[b], sub[e] - sub[b], args[ok]))
    return layers


# --- runtime_api -------------------------------------------------------------------------------

def runtime_api(scope: Scope, app_pid: int) -> Table | None:
    """Per (Name, Stream ID, thread): Time = Σ duration ns, Time(%) of the file's total
    (rounded to 3), Avg rounded to 3; rows by Time descending (ties: Name, Stream, thread)."""
    agg = runtime_agg(scope)
    return None if agg is None else runtime_api_of(agg, app_pid)


def runtime_agg(scope: Scope) -> pd.DataFrame | None:
    """Per (name, stream, thread), sorted: time (sum), calls, min, max of the durations --
    exact, so the aggregates of several windows combine (`combine_runtime`)."""
    rt = scope.runtime
    if len(rt) == 0:
        return None
    d = pd.DataFrame({"name": rt["type_name"].to_numpy(object),
                      "stream": rt["stream_id"].to_numpy(np.int64),
                      "thread": rt["thread_id"].to_numpy(np.int64),
                      "dur": rt["dur_ns"].to_numpy(np.int64)})
    g = d.groupby(["name", "stream", "thread"], sort=True)["dur"]
    return pd.DataFrame({"time": g.sum(), "calls": g.size(), "min": g.min(),
                         "max": g.max()}).reset_index()


def combine_runtime(aggs: list[pd.DataFrame]) -> pd.DataFrame:
    if len(aggs) == 1:  # one window: already the aggregate (grouped, sorted)
        return aggs[0]
    g = pd.concat(aggs, ignore_index=True).groupby(["name", "stream", "thread"], sort=True)
    return pd.DataFrame({"time": g["time"].sum(), "calls": g["calls"].sum(),
                         "min": g["min"].min(), "max": g["max"].max()}).reset_index()


def runtime_api_of(agg: pd.DataFrame, app_pid: int) -> Table:
    agg = agg.sort_values("time", ascending=False, kind="stable", ignore_index=True)
    total = int(agg["time"].sum())
    time = agg["time"].to_numpy(np.int64)
    calls = agg["calls"].to_numpy(np.int64)
    stream = agg["stream"].to_numpy(np.int64)
    df = pd.DataFrame({
        "Name": agg["name"].to_numpy(object),
        "Stream ID": np.where(stream >= 0, int_str(stream), NA),
        "Time(%)": float_str(py_round(time / total * 100 if total else np.zeros(len(time)), 3)),
        "Time(ns)": int_str(time),
        "Calls": int_str(calls),
        "Avg(ns)": float_str(py_round(time / calls, 3)),
        "Min(ns)": int_str(agg["min"].to_numpy(np.int64)),
        "Max(ns)": int_str(agg["max"].to_numpy(np.int64)),
        "Process ID": str(app_pid),
        "Thread ID": int_str(agg["thread"].to_numpy(np.int64)),
    })
    return RUNTIME_API, df


def runtime_meta(app_pid: int, threads) -> list[str]:
    return thread_meta(app_pid, "Runtime", [(t, f"Thread {t}")
                                            for t in sorted(int(t) for t in threads)])


def runtime_layer(scope: Scope, app_pid: int) -> TR.Layer:
    rt = scope.runtime
    if len(rt) == 0:
        return TR.Layer()
    thread = rt["thread_id"].to_numpy(np.int64)
    args = ArgsTemplate('{"Thread Id": %d}', lambda idx: [thread[idx].tolist()])
    return x_events(rt["type_name"].to_numpy(object), app_pid, thread, rt["begin_local"],
                    rt["dur_ns"], args)


# --- thread_group (dynamic shape only) -----------------------------------------------------------

def thread_group_layer(scope: Scope) -> tuple[list[int], TR.Layer] | None:
    """The thread_group events of the scope's APIs (lazy layer) and their threads; None
    without an API of those levels.  The windowed export writes a layer per window and
    the metadata of every window's threads at the end."""
    a = scope.apis
    if len(a) == 0:
        return None
    lvl = a["level"].to_numpy()
    a = a[np.isin(lvl, list(GROUP_TID))]
    if len(a) == 0:
        return None
    lvl = a["level"].to_numpy()
    lane = np.array([GROUP_TID[int(v)] for v in np.unique(lvl)])[np.unique(lvl,
                                                                            return_inverse=True)[1]]
    threads = sorted(int(t) for t in a["thread_id"].unique())
    name = np.where(lvl == L.LEVEL_HCCL, a["item_name"].to_numpy(object),
                    a["type_name"].to_numpy(object))
    lname = np.array([L.LEVEL_NAMES.get(int(v), str(int(v))) for v in np.unique(lvl)],
                     dtype=object)[np.unique(lvl, return_inverse=True)[1]]
    args = ('{"Thread Id": ' + int_str(a["thread_id"].to_numpy(np.int64)) + ', "Level": '
            + TR.jstr(lname) + '}')
    return threads, x_events(name, a["thread_id"].to_numpy(np.int64), lane, a["begin_local"],
                             a["dur_ns"], args)


def thread_group_meta(threads) -> list[str]:
    """The thread_group processes of `threads` (sorted)."""
    meta: list[str] = []
    for t in sorted(int(x) for x in threads):
        meta += thread_meta(t, f"Thread {t}", [(0, "AscendCL"), (1, "GE"), (2, "Runtime")],
                            sort_index=t)
    return meta


