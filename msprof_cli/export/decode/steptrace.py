"""Iterations from step-trace markers (step-trace-and-advice.md 2), vectorised.

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
    last FP/BP inside, Data Aug Bound source, and the global iter_id (rank by step_end)."""
    import pandas as pd

    if steps is None or len(steps) == 0:
        return pd.DataFrame({c: np.zeros(0, np.int64) for c in ITER_COLUMNS})
    s = steps.sort_values(["model_id", "ts_ns"], kind="stable")
    frames = []
    for model_id, grp in s.groupby("model_id", sort=True):  # loop over models, not records
        g = grp[grp["tag_id"].isin([TAG_MODEL_START, TAG_MODEL_END, TAG_ITER_END])]
        start, end = iteration_spans(g["tag_id"].to_numpy(np.int64), g["ts_ns"].to_numpy(np.int64))
        if len(start) == 0:
            continue
        it = pd.DataFrame({"model_id": int(model_id), "iteration_id": np.arange(1, len(start) + 1),
                           "step_start_ns": start, "step_end_ns": end})
        for tag, col in ((TAG_FP, "fp_ns"), (TAG_BP, "bp_ns")):
            m = grp[grp["tag_id"] == tag]["ts_ns"].to_numpy(np.int64)
            # iteration whose [start, end] holds the marker; the last marker wins
            pos = np.searchsorted(start, m, side="right") - 1
            ok = (pos >= 0) & (m <= end[np.maximum(pos, 0)])
            val = np.full(len(start), -1, dtype=np.int64)
            val[pos[ok]] = m[ok]  # later markers overwrite earlier ones (numpy keeps the last)
            it[col] = val
        _reduce_columns(it, grp, start, end)
        frames.append(it)
    if not frames:
        return pd.DataFrame({c: np.zeros(0, np.int64) for c in ITER_COLUMNS})
    its = pd.concat(frames, ignore_index=True)
    # Data Aug Bound: FP - step_end of the closest earlier iteration (any model) ending before FP
    ends_sorted = np.sort(its["step_end_ns"].to_numpy(np.int64))
    fp = its["fp_ns"].to_numpy(np.int64)
    k = np.searchsorted(ends_sorted, fp, side="left") - 1
    prev_end = np.where(k >= 0, ends_sorted[np.maximum(k, 0)], -1)
    its["data_aug_ns"] = np.where((fp >= 0) & (k >= 0), fp - prev_end, -1)
    its["iter_id"] = its["step_end_ns"].rank(method="first").astype(np.int64)
    extra = sorted((c for c in its.columns if c.startswith(REDUCE_PREFIX)), key=_reduce_key)
    for c in extra:  # a model without the k-th AllReduce: -1 (N/A)
        its[c] = its[c].fillna(-1).astype(np.int64)
    return its[ITER_COLUMNS + extra]


REDUCE_PREFIX = "reduce_"  # reduce_start_{k} / reduce_end_{k}: k-th AllReduce, -1 = none


def _reduce_key(col: str) -> tuple[int, int]:
    _, side, k = col.split("_")
    return int(k), 0 if side == "start" else 1


def _reduce_columns(it: pd.DataFrame, grp: pd.DataFrame, start: np.ndarray,
                    end: np.ndarray) -> None:
    """AllReduce pairs (tags 10000+2k / 10001+2k, step-trace-and-advice.md 2) of one model:
    `reduce_start_{k}` / `reduce_end_{k}` of the iteration whose [start, end] holds them
    (the last marker wins, as for FP/BP); -1 when the iteration has no k-th pair."""
    tags = grp["tag_id"].to_numpy(np.int64)
    sel = tags >= TAG_REDUCE_BASE
    if not sel.any():
        return
    tags, ts = tags[sel], grp["ts_ns"].to_numpy(np.int64)[sel]
    pos = np.searchsorted(start, ts, side="right") - 1
    ok = (pos >= 0) & (ts <= end[np.maximum(pos, 0)])
    k = (tags - TAG_REDUCE_BASE) // 2
    for kk in np.unique(k).tolist():
        for side, odd in (("start", 0), ("end", 1)):
            m = ok & (k == kk) & ((tags - TAG_REDUCE_BASE) % 2 == odd)
            val = np.full(len(start), -1, dtype=np.int64)
            val[pos[m]] = ts[m]
            it[f"{REDUCE_PREFIX}{side}_{kk}"] = val
