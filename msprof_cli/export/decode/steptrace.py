"""Iterations from step-trace markers (docs/formats/step-trace-and-advice.md 2), vectorised.

The analysis runs a per-model state machine over tags 0 (model start), 4 (iteration end) and
1 (model end) sorted by time, initial state "model ended" (M):

    M --0--> S        S --0--> S (restart)   S --4--> E, emit [start, t]   S --1--> M, emit
    M --4,1--> M      E --0--> S             E --4--> E, emit [prev 4, t]  E --1--> E

Closed form used here (no loop per record): the state before event i is S iff event i-1 is a
0; otherwise it is E if the event right after the last 0 before i is a 4, and M if it is a 1
or there is no 0 yet.  An event emits an iteration if it is a 4 in S/E or a 1 in S; the
iteration starts at the latest 0-or-4 before it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

if TYPE_CHECKING:  # pandas is imported lazily: `msprof query` uses iteration_spans without it
    import pandas as pd

TAG_MODEL_START, TAG_MODEL_END, TAG_FP, TAG_BP, TAG_ITER_END = 0, 1, 2, 3, 4
TAG_REDUCE_BASE = 10000

ITER_COLUMNS = ["model_id", "iteration_id", "step_start_ns", "step_end_ns", "fp_ns", "bp_ns",
                "data_aug_ns", "iter_id"]


class StepColumns(NamedTuple):
    """The times of iterations (local ns; FP / BP / Data Aug Bound -1 where missing)."""

    start: np.ndarray
    end: np.ndarray
    fp: np.ndarray
    bp: np.ndarray
    aug: np.ndarray
    has_fp: np.ndarray
    has_bp: np.ndarray


def step_columns(its: "pd.DataFrame") -> StepColumns:
    """The columns of an iterations table (ITER_COLUMNS) every step-trace output reads."""
    fp = its["fp_ns"].to_numpy(np.int64)
    bp = its["bp_ns"].to_numpy(np.int64)
    return StepColumns(its["step_start_ns"].to_numpy(np.int64),
                       its["step_end_ns"].to_numpy(np.int64), fp, bp,
                       its["data_aug_ns"].to_numpy(np.int64), fp >= 0, bp >= 0)


def iteration_spans(tags: np.ndarray, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) of the iterations closed by one model's sorted 0/1/4 events."""
    n = len(tags)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    idx = np.arange(n)
    # index of the last 0 strictly before i (-1 if none)
    zero_at = np.where(tags == TAG_MODEL_START, idx, -1)
    last0_incl = np.maximum.accumulate(zero_at)
    last0 = np.concatenate([[-1], last0_incl[:-1]])
    prev_tag = np.concatenate([[-1], tags[:-1]])
    after0 = np.where(last0 >= 0, tags[np.minimum(last0 + 1, n - 1)], -1)
    state_s = prev_tag == TAG_MODEL_START
    state_e = ~state_s & (last0 >= 0) & (after0 == TAG_ITER_END)
    emit = ((tags == TAG_ITER_END) & (state_s | state_e)) | ((tags == TAG_MODEL_END) & state_s)
    # latest 0-or-4 strictly before i
    z4 = np.where((tags == TAG_MODEL_START) | (tags == TAG_ITER_END), idx, -1)
    last04 = np.concatenate([[-1], np.maximum.accumulate(z4)[:-1]])
    e = np.nonzero(emit)[0]
    return times[last04[e]], times[e]


def iterations(steps: pd.DataFrame) -> pd.DataFrame:
    """One row per iteration: model_id, iteration_id (per-model counter), step start/end,
    last FP/BP inside, Data Aug Bound source, and the global iter_id (rank by step_end).

    On numpy columns, a loop over the models (not the records): the per-model frames,
    groupby and concat were ~5 ms of pandas call costs on a small export."""
    import pandas as pd

    if steps is None or len(steps) == 0:
        return pd.DataFrame({c: np.zeros(0, np.int64) for c in ITER_COLUMNS})
    model = steps["model_id"].to_numpy(np.int64)
    ts = steps["ts_ns"].to_numpy(np.int64)
    tag = steps["tag_id"].to_numpy(np.int64)
    order = np.lexsort((ts, model))  # by model, then time (stable)
    model, ts, tag = model[order], ts[order], tag[order]
    bounds = np.flatnonzero(np.r_[True, model[1:] != model[:-1], True])
    parts: list[dict[str, np.ndarray]] = []
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):  # a loop over models
        mt, mts = tag[lo:hi], ts[lo:hi]
        sel = np.isin(mt, [TAG_MODEL_START, TAG_MODEL_END, TAG_ITER_END])
        start, end = iteration_spans(mt[sel], mts[sel])
        if len(start) == 0:
            continue
        it = {"model_id": np.full(len(start), model[lo], np.int64),
              "iteration_id": np.arange(1, len(start) + 1, dtype=np.int64),
              "step_start_ns": start, "step_end_ns": end}
        for want, col in ((TAG_FP, "fp_ns"), (TAG_BP, "bp_ns")):
            it[col] = _marker_column(mts[mt == want], start, end)
        it.update(_reduce_columns(mt, mts, start, end))
        parts.append(it)
    if not parts:
        return pd.DataFrame({c: np.zeros(0, np.int64) for c in ITER_COLUMNS})
    extra = sorted({c for it in parts for c in it if c.startswith(REDUCE_PREFIX)},
                   key=_reduce_key)
    cols = {c: np.concatenate([it[c] if c in it else np.full(len(it["model_id"]), -1, np.int64)
                               for it in parts])  # a model without the k-th AllReduce: -1
            for c in ["model_id", "iteration_id", "step_start_ns", "step_end_ns", "fp_ns",
                      "bp_ns"] + extra}
    # Data Aug Bound: FP - step_end of the closest earlier iteration (any model) ending before FP
    step_end = cols["step_end_ns"]
    ends_sorted = np.sort(step_end)
    fp = cols["fp_ns"]
    k = np.searchsorted(ends_sorted, fp, side="left") - 1
    prev_end = np.where(k >= 0, ends_sorted[np.maximum(k, 0)], -1)
    cols["data_aug_ns"] = np.where((fp >= 0) & (k >= 0), fp - prev_end, -1)
    iter_id = np.empty(len(step_end), np.int64)  # rank by step_end, ties in row order
    iter_id[np.argsort(step_end, kind="stable")] = np.arange(1, len(step_end) + 1)
    cols["iter_id"] = iter_id
    return pd.DataFrame({c: cols[c] for c in ITER_COLUMNS + extra})


def _marker_column(m: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per iteration, the last marker time `m` (sorted) inside its [start, end], -1 none."""
    pos = np.searchsorted(start, m, side="right") - 1
    ok = (pos >= 0) & (m <= end[np.maximum(pos, 0)])
    val = np.full(len(start), -1, dtype=np.int64)
    val[pos[ok]] = m[ok]  # later markers overwrite earlier ones (numpy keeps the last)
    return val


REDUCE_PREFIX = "reduce_"  # reduce_start_{k} / reduce_end_{k}: k-th AllReduce, -1 = none


def _reduce_key(col: str) -> tuple[int, int]:
    _, side, k = col.split("_")
    return int(k), 0 if side == "start" else 1


def _reduce_columns(tags: np.ndarray, ts: np.ndarray, start: np.ndarray, end: np.ndarray
                    ) -> dict[str, np.ndarray]:
    """AllReduce pairs (tags 10000+2k / 10001+2k, docs/formats/step-trace-and-advice.md 2) of one
    model's
    sorted markers: `reduce_start_{k}` / `reduce_end_{k}` of the iteration whose [start, end]
    holds them (the last marker wins, as for FP/BP); -1 when the iteration has no k-th
    pair."""
    sel = tags >= TAG_REDUCE_BASE
    out: dict[str, np.ndarray] = {}
    if not sel.any():
        return out
    tags, ts = tags[sel], ts[sel]
    pos = np.searchsorted(start, ts, side="right") - 1
    ok = (pos >= 0) & (ts <= end[np.maximum(pos, 0)])
    k = (tags - TAG_REDUCE_BASE) // 2
    for kk in np.unique(k).tolist():
        for side, odd in (("start", 0), ("end", 1)):
            m = ok & (k == kk) & ((tags - TAG_REDUCE_BASE) % 2 == odd)
            val = np.full(len(start), -1, dtype=np.int64)
            val[pos[m]] = ts[m]
            out[f"{REDUCE_PREFIX}{side}_{kk}"] = val
    return out
