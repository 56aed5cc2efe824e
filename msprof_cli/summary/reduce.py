"""The summary's reduction of one window of a device to small frames (summary.build adds
them up): per model and op, task count and time; per op type, PMU cycles; per iteration, the
device's busy, compute and communication time; per stream, activity on a fine grid.  No loop
runs per task.

Choices (docs/summary.md):
* A task belongs to the iteration of its own model whose [start, end) holds its start; the
  model's per-step numbers are its tasks' totals over those iterations / their count.
* Tasks outside any model (eager ops, initialisation) form the "outside models" entry, with
  totals instead of per-step numbers.
* An op's `position` is the smallest, over the iterations, index of its first task within a
  step (tasks of the step in start order, every stream).
* The device busy share of a model is the union of *all* the device's task intervals inside
  its iterations over their summed length: what the device did while the step ran.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd

from . import intervals as I
from . import model as M
from .intervals import covered, merged

NO_MODEL = 4294967295
PIPE_EVENTS = {"cube": 0xA, "vector": 0x8, "scalar": 0x9, "mte1": 0xB, "mte2": 0xC,
               "mte3": 0xD}  # PipeUtilization counters (docs/formats/export-files.md §6)
HCCL = "HCCL"
# the counters of each pipe: the 910's PipeUtilization events, and the Atlas A2 AI Cube
# core's PipeUtilizationExct ones (mac = 0x416 + 0x417, MTE1 = 0x302;
# docs/formats/ascend910b.md 1.4)
PIPE_CODES = {"cube": (0xA, 0x416, 0x417), "vector": (0x8,), "scalar": (0x9,),
              "mte1": (0xB, 0x302), "mte2": (0xC,), "mte3": (0xD,)}
MEMCPY_SOURCE = "memcpy"
COPY_SOURCES = [MEMCPY_SOURCE, "sdma"]  # the 910's ts memcpy and the Atlas A2's copies
KINDS = np.array(["memcpy", "comm", "op"], dtype=object)  # a task's kind, by its code
# task rows -> their (input shapes, output shapes): the task table's columns, or the
# summary decode's lookup of the launches (summary.decode.Shapes)
ShapesOf = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]

# -- per window reductions -------------------------------------------------------------------
@dataclass
class DeviceAcc:
    """What the windows of one device add up to."""

    prof: str
    device_id: int
    rank_id: int
    ops: list[pd.DataFrame] = field(default_factory=list)
    pipes: list[pd.DataFrame] = field(default_factory=list)
    iterations: list[pd.DataFrame] = field(default_factory=list)
    busy: list[pd.DataFrame] = field(default_factory=list)  # per iteration: busy, compute...
    comm: list[pd.DataFrame] = field(default_factory=list)  # model_id, dur (HCCL op runs)
    overlap: list[int] = field(default_factory=lambda: [0, 0, 0])  # compute, comm, both (ns)
    bin_ns: int = 0  # the activity grid (set by the first window)
    activity: dict[int, list[tuple[np.ndarray, np.ndarray]]] = field(default_factory=dict)
    links: list[pd.DataFrame] = field(default_factory=list)  # hccl_info sends, per window
    max_steps: int = M.MAX_STEPS
    tasks: int = 0
    first: int | None = None
    last: int | None = None
    busy_total: int = 0
    pmu_events: list[int] = field(default_factory=list)
    advice: list[str] = field(default_factory=list)
    advice_note: str = ""
    advice_model: int | None = None  # the model the advice covers (msprof export's choice)


def _iteration_of(tasks: pd.DataFrame, its: pd.DataFrame) -> np.ndarray:
    """Per task, the row index (in `its`) of its own model's iteration holding its start;
    -1 outside."""
    out = np.full(len(tasks), -1, np.int64)
    start = tasks["start_local"].to_numpy(np.int64)
    model = tasks["model_id"].to_numpy(np.int64)
    for m, grp in its.groupby("model_id", sort=False):  # a loop over models
        g = grp.sort_values("step_start_ns")
        s = g["step_start_ns"].to_numpy(np.int64)
        e = g["step_end_ns"].to_numpy(np.int64)
        sel = np.flatnonzero(model == int(m))
        k = np.searchsorted(s, start[sel], side="right") - 1
        ok = (k >= 0) & (start[sel] < e[np.maximum(k, 0)])
        out[sel[ok]] = g.index.to_numpy()[k[ok]]
    return out


def _comm(acc: DeviceAcc, dev, data, its: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The device's communication op executions (hccl_info, else its HCCL tasks: the
    export's Communication rows), each in the iteration (of any model) holding its start."""
    from msprof_cli.export.derive.communication import hccl_rows

    rows = hccl_rows(dev, data)
    if len(rows) == 0:
        return I.EMPTY
    start = rows["start_local"].to_numpy(np.int64)
    model = np.full(len(rows), NO_MODEL, np.int64)
    if len(its):
        g = its.sort_values("step_start_ns")
        s, e = g["step_start_ns"].to_numpy(np.int64), g["step_end_ns"].to_numpy(np.int64)
        k = np.searchsorted(s, start, side="right") - 1
        ok = (k >= 0) & (start < e[np.maximum(k, 0)])
        model[ok] = g["model_id"].to_numpy(np.int64)[k[ok]]
    acc.comm.append(pd.DataFrame({"model_id": model,
                                  "dur": rows["dur_ns"].to_numpy(np.int64)}))
    return merged(start, rows["end_local"].to_numpy(np.int64))


def _activity(acc: DeviceAcc, stream: np.ndarray, start: np.ndarray, end: np.ndarray) -> None:
    """Per stream, busy ns on a fine grid (the first window's span / 400, at least 1 µs);
    rebinned to the minimap's bins at the end (a loop over streams)."""
    if acc.bin_ns == 0:
        acc.bin_ns = max(1000, int(end.max() - start.min()) // 400 + 1)
    for sid in np.unique(stream).tolist():
        sel = stream == sid
        acc.activity.setdefault(int(sid), []).append(I.stream_bins(start[sel], end[sel],
                                                                   acc.bin_ns))


def _links(acc: DeviceAcc, dev, data) -> None:
    """The device's hccl_info steps where it sends (role src), summed per op name and link."""
    from msprof_cli.export.derive import hccl as H

    h = H.hccl_records(data, dev)
    if len(h) == 0:
        return
    h = h[h["role"].to_numpy(np.int64) == 1]
    if len(h) == 0:
        return
    f = pd.DataFrame({
        "op_name": h["op_name"].to_numpy(object),
        "src": h["local_rank"].to_numpy(np.int64), "dst": h["remote_rank"].to_numpy(np.int64),
        "transport": [H.TRANSPORT_TYPES.get(int(v), str(v)) for v in h["transport_type"]],
        "link": [H.LINK_TYPES.get(int(v), str(v)) for v in h["link_type"]],
        "bytes": h["data_size"].to_numpy(np.uint64).astype(np.int64),
        "dur": h["dur_ns"].to_numpy(np.int64)})
    acc.links.append(f.groupby(["op_name", "src", "dst", "transport", "link"], sort=False)
                     .agg(count=("dur", "size"), bytes=("bytes", "sum"), dur=("dur", "sum"))
                     .reset_index())


def _factorize(col: pd.Series, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """pd.factorize of a text column's values at `rows` (codes by first appearance, the
    distinct values as objects); a categorical column (summary.decode) by its codes."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        cc = col.cat.codes.to_numpy()[rows]
        if len(cc) == 0 or cc.min() >= 0:  # no missing values
            codes, u = pd.factorize(cc)
            return codes, np.asarray(col.cat.categories, dtype=object)[u]
    return pd.factorize(col.to_numpy(object)[rows])


def _op_groups(t: pd.DataFrame, sel: np.ndarray, model: np.ndarray, it_row: np.ndarray,
               start: np.ndarray, kind: np.ndarray, shapes: ShapesOf) -> pd.DataFrame:
    """Per (model, op name, OP Type, Task Type, kind) of the tasks `sel` (in start order):
    task count, summed duration, the smallest position within a step, the first shapes.
    Each text column is factorized once and the groups are integer keys (a groupby on five
    object columns was most of the summary's time at 1M tasks).  `kind`: codes into KINDS."""
    codes, u = pd.factorize(kind[sel])
    uniques = {"model_id": pd.factorize(model[sel]),
               **{c: _factorize(t[c], sel) for c in ("op_name", "op_type", "task_type")},
               "kind": (codes, KINDS[u])}
    key = np.zeros(len(sel), np.int64)
    for codes, uniq in uniques.values():
        key = key * max(len(uniq), 1) + codes
    # position within the step: rank in start order among the tasks of the same (model, step)
    step_key = uniques["model_id"][0].astype(np.int64) * (int(it_row.max(initial=-1)) + 2) \
        + it_row[sel] + 1
    order = np.argsort(step_key, kind="stable")  # start order kept inside a step
    sk = step_key[order]
    first = np.flatnonzero(np.r_[True, sk[1:] != sk[:-1]])
    pos = np.empty(len(sel), np.int64)
    pos[order] = np.arange(len(sel)) - np.repeat(first, np.diff(np.r_[first, len(sel)]))
    ukey, first_idx, inv = np.unique(key, return_index=True, return_inverse=True)
    by = np.argsort(inv, kind="stable")
    bounds = np.flatnonzero(np.r_[True, inv[by][1:] != inv[by][:-1]])
    dur = t["dur_ns"].to_numpy(np.int64)[sel]
    in_shapes, out_shapes = shapes(sel[first_idx])
    return pd.DataFrame({
        **{name: uniq[codes[first_idx]] if len(first_idx) else uniq[:0]
           for name, (codes, uniq) in uniques.items()},
        "count": np.bincount(inv, minlength=len(ukey)).astype(np.int64),
        "dur": np.bincount(inv, weights=dur, minlength=len(ukey)).astype(np.int64),
        "pos": np.minimum.reduceat(pos[by], bounds) if len(bounds) else np.zeros(0, np.int64),
        "in_shapes": in_shapes, "out_shapes": out_shapes})


def reduce_window(acc: DeviceAcc, dev, data=None, shapes: ShapesOf | None = None) -> None:
    """Add one window of a device (export.decode.data.DeviceData of `data`, a ProfData) to its
    accumulator (`shapes`: where the shapes of task rows come from, by default the task
    table's in_shapes / out_shapes)."""
    t = dev.tasks
    if shapes is None:
        def shapes(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            return (t["in_shapes"].to_numpy(object)[rows],
                    t["out_shapes"].to_numpy(object)[rows])
    its = dev.iterations.reset_index(drop=True)
    acc.tasks += len(t)
    comm = _comm(acc, dev, data, its) if data is not None else I.EMPTY
    if data is not None:
        _links(acc, dev, data)
    if len(its):
        acc.iterations.append(its[["model_id", "iteration_id", "step_start_ns", "step_end_ns",
                                   "fp_ns", "bp_ns", "data_aug_ns"]].copy())
    if len(t) == 0:
        return
    start = t["start_local"].to_numpy(np.int64)
    end = t["end_local"].to_numpy(np.int64)
    acc.first = int(start.min()) if acc.first is None else min(acc.first, int(start.min()))
    acc.last = int(end.max()) if acc.last is None else max(acc.last, int(end.max()))
    ms, me = merged(start, end)
    acc.busy_total += int((me - ms).sum())
    src = t["source"].to_numpy(object)
    hccl = (t["task_type"] == HCCL).to_numpy(bool)
    kind = np.where(np.isin(src, COPY_SOURCES), 0, np.where(hccl, 1, 2))  # codes into KINDS
    is_op = kind == 2
    compute = merged(start[is_op], end[is_op])
    both = I.intersect(compute, comm)
    for k, (a, b) in enumerate((compute, comm, both)):
        acc.overlap[k] += int((b - a).sum())
    if len(its):
        a = its["step_start_ns"].to_numpy(np.int64)
        b = its["step_end_ns"].to_numpy(np.int64)
        comm_in = covered(*comm, a, b)
        acc.busy.append(pd.DataFrame({
            "model_id": its["model_id"].to_numpy(np.int64),
            "iteration_id": its["iteration_id"].to_numpy(np.int64),
            "busy_ns": covered(ms, me, a, b), "compute_ns": covered(*compute, a, b),
            "comm_ns": comm_in, "exposed_ns": comm_in - covered(*both, a, b)}))
    _activity(acc, t["stream_id"].to_numpy(np.int64), start, end)
    it_row = _iteration_of(t, its) if len(its) else np.full(len(t), -1, np.int64)
    model = t["model_id"].to_numpy(np.int64)
    in_model = model != NO_MODEL
    # tasks of a model outside its iterations are not counted per step (before the first
    # step's start: graph loading); tasks outside every model are the "outside" entry
    keep = ~in_model | (it_row >= 0)
    acc.ops.append(_op_groups(t, np.flatnonzero(keep), model, it_row, start, kind, shapes))
    if dev.pmu_events and "pmu_ok" in t:
        ok = t["pmu_ok"].to_numpy(bool) & keep
        if ok.any():
            types, names = _factorize(t["op_type"], np.flatnonzero(ok))
            cols = {"model_id": model[ok], "op_type": types,
                    "dur": t["dur_ns"].to_numpy(np.int64)[ok],
                    "cycles": t["total_cycles"].to_numpy(np.float64)[ok]}
            cols.update(_pipe_counters(dev, t, ok))
            g = pd.DataFrame(cols).groupby(["model_id", "op_type"], sort=False).sum() \
                .reset_index()
            g["op_type"] = names[g["op_type"].to_numpy()]
            acc.pipes.append(g)
        acc.pmu_events = list(dev.pmu_events)


def _pipe_counters(dev, t: pd.DataFrame, ok: np.ndarray) -> dict[str, np.ndarray]:
    """Per pipe (column ``e<910 event>``) the counter of each PMU row `ok`, read through
    the event list of the core kind that ran the task (an Atlas A2 task on its AI Vector
    cores counts the aiv_profiling_events)."""
    aic = list(dev.pmu_events[:8])
    aiv_list = list(dev.rd.aiv_events[:8]) if dev.rd.stars else aic
    on_aiv = t["pmu_aiv"].to_numpy(bool)[ok] if "pmu_aiv" in t else np.zeros(int(ok.sum()),
                                                                               bool)
    out: dict[str, np.ndarray] = {}
    for pipe, codes in PIPE_CODES.items():
        total = None
        for k in range(8):
            if f"pmu_{k}" not in t:
                continue
            sel = np.where(on_aiv, k < len(aiv_list) and aiv_list[k] in codes,
                           k < len(aic) and aic[k] in codes)
            if sel.any():
                v = np.where(sel, t[f"pmu_{k}"].to_numpy(np.float64)[ok], 0.0)
                total = v if total is None else total + v
        if total is not None:
            out[f"e{PIPE_EVENTS[pipe]}"] = total
    return out
