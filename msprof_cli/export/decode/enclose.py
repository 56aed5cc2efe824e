"""The host join's primitive: which span (a launch, a ModelExecute ...) of the same thread
encloses each record's time (docs/formats/raw-format.md 4.12, dataset.py)."""
from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["enclose", "enclosing", "payload_at"]


def enclosing(thread: np.ndarray, ts: np.ndarray, s_thread: np.ndarray, begin: np.ndarray,
              end: np.ndarray) -> np.ndarray:
    """Per record (thread, ts), the index of the latest span of its thread with begin <= ts
    <= end, or -1.  Per host thread (a loop over the distinct threads) one ``searchsorted``
    over its spans sorted by begin, ties in span order (the last of equal begins wins)."""
    thread = np.asarray(thread, np.int64)
    ts = np.asarray(ts, np.int64)
    at = np.full(len(ts), -1, np.int64)  # each record's span (-1: none begins before it)
    if len(ts) == 0 or len(begin) == 0:
        return at
    s_thread = np.asarray(s_thread, np.int64)
    begin = np.asarray(begin, np.int64)
    order = np.lexsort((begin, s_thread))  # by thread, then begin (stable: span order)
    threads, first = np.unique(s_thread[order], return_index=True)
    bounds = np.append(first, len(order))
    for k, t in enumerate(threads.tolist()):
        rows = np.flatnonzero(thread == t)
        mine = order[bounds[k]:bounds[k + 1]]
        i = np.searchsorted(begin[mine], ts[rows], side="right") - 1
        at[rows[i >= 0]] = mine[i[i >= 0]]
    inside = at >= 0
    inside[inside] = ts[inside] <= np.asarray(end, np.int64)[at[inside]]
    at[~inside] = -1
    return at


def payload_at(values: np.ndarray, at: np.ndarray) -> np.ndarray:
    """`values[at]`, NaN where `at` is -1: an int payload is then float64 (and any other
    object), as a pandas ``merge_asof`` by thread + ``where`` gives it."""
    inside = at >= 0
    got = np.asarray(values)[np.where(inside, at, 0)]
    if not inside.all():
        got = got.astype(np.float64 if got.dtype.kind in "iuf" else object)
        got[~inside] = np.nan
    return got


def enclose(records: pd.DataFrame, spans: pd.DataFrame, ts_col: str, payload: list[str]
            ) -> pd.DataFrame:
    """For each record, payload of the latest span on the same thread with begin <= ts <= end.

    Returns a frame aligned to `records` (NaN where no span encloses: an int payload is then
    float64, as a pandas ``merge_asof`` by thread + ``where`` gives it).  `enclosing` finds
    the spans: the frame join cost ~1 ms a call even on a handful of records, a dozen calls
    per export."""
    out = pd.DataFrame(index=records.index)
    if len(records) == 0 or len(spans) == 0:
        for p in payload:
            out[p] = np.nan
        return out
    at = enclosing(records["thread_id"].to_numpy(np.int64), records[ts_col].to_numpy(np.int64),
                   spans["thread_id"].to_numpy(np.int64), spans["begin_ns"].to_numpy(np.int64),
                   spans["end_ns"].to_numpy(np.int64))
    for p in payload:
        out[p] = payload_at(spans[p].to_numpy(), at)
    return out
