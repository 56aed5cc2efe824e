"""Interval arithmetic on task times (int64 ns), vectorised: the union of tasks, the time it
covers inside given ranges, the intersection of two unions (communication hidden behind
compute), and a per-stream activity minimap.  No loop per task."""
from __future__ import annotations

import numpy as np

EMPTY = (np.zeros(0, np.int64), np.zeros(0, np.int64))


def merged(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of [start, end) intervals as sorted disjoint intervals."""
    if len(start) == 0:
        return EMPTY
    s, e = np.asarray(start, np.int64), np.asarray(end, np.int64)
    if len(s) > 1 and not (s[1:] >= s[:-1]).all():  # task tables come sorted: no sort then
        order = np.argsort(s, kind="stable")
        s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > reach[:-1]
    idx = np.flatnonzero(new)
    ends = np.append(reach[idx[1:] - 1], reach[-1])
    return s[idx], ends


def covered(ms: np.ndarray, me: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Length of the union (ms, me) inside each [a, b)."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    if len(ms) == 0:
        return np.zeros(len(a), np.int64)
    cum = np.concatenate([[0], np.cumsum(me - ms)])

    def before(x: np.ndarray) -> np.ndarray:  # union time before x
        k = np.searchsorted(ms, x, side="right") - 1
        kk = np.maximum(k, 0)
        part = np.clip(np.minimum(x, me[kk]) - ms[kk], 0, None)
        return np.where(k >= 0, cum[kk] + part, 0)

    return np.maximum(before(b) - before(a), 0)


def _inside(ms: np.ndarray, me: np.ndarray, x: np.ndarray) -> np.ndarray:
    if len(ms) == 0:
        return np.zeros(len(x), bool)
    k = np.searchsorted(ms, x, side="right") - 1
    return (k >= 0) & (x < me[np.maximum(k, 0)])


def intersect(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]
              ) -> tuple[np.ndarray, np.ndarray]:
    """The intersection of two unions (each sorted, disjoint), as a union."""
    if len(a[0]) == 0 or len(b[0]) == 0:
        return EMPTY
    cuts = np.unique(np.concatenate([a[0], a[1], b[0], b[1]]))
    lo, hi = cuts[:-1], cuts[1:]
    both = _inside(*a, lo) & _inside(*b, lo)  # a segment lies wholly in or out of each
    return merged(lo[both], hi[both])


def stream_bins(start: np.ndarray, end: np.ndarray, bin_ns: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """(bin index, busy ns) of the union of one stream's tasks on a grid of `bin_ns`."""
    ms, me = merged(start, end)
    if len(ms) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    first, last = int(ms[0]) // bin_ns, int(me[-1] - 1) // bin_ns
    idx = np.arange(first, last + 1, dtype=np.int64)
    busy = covered(ms, me, idx * bin_ns, (idx + 1) * bin_ns)
    keep = busy > 0
    return idx[keep], busy[keep]


def rebin(idx: np.ndarray, busy: np.ndarray, bin_ns: int, lo: int, hi: int, n: int
          ) -> np.ndarray:
    """Busy share (0..1) of `n` equal bins over [lo, hi) from a finer grid."""
    width = max((hi - lo) / n, 1.0)
    mid = idx * bin_ns + bin_ns // 2
    k = np.clip(((mid - lo) / width).astype(np.int64), 0, n - 1)
    share = np.bincount(k, weights=busy.astype(np.float64), minlength=n)[:n] / width
    return np.round(np.clip(share, 0.0, 1.0), 3)
