"""Where a windowed export may cut (windows.py): the quiet points -- local times that no host API
span, no device task, no host launch -> device task flow and no HCCL op execution (or the
computing gap around one) crosses -- and the cuts chosen among them for a target window size.
"""
from __future__ import annotations

import numpy as np

from ..fmt import ts_sort_key

# the open ends of the first and last window
INT64_MIN, INT64_MAX = np.iinfo(np.int64).min, np.iinfo(np.int64).max


def count_before(sorted_times: np.ndarray, at: np.ndarray) -> np.ndarray:
    return np.searchsorted(sorted_times, at, side="left")


def task_groups(stream: np.ndarray, task: np.ndarray, batch: np.ndarray) -> np.ndarray:
    """One int64 per (stream, task, batch): u16 ids, batch < 2**31."""
    return ((stream.astype(np.int64) << 16 | task.astype(np.int64)) << 31) \
        | batch.astype(np.int64)


def by_occurrence(group: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                             np.ndarray, np.ndarray]:
    """Rows given in time order -> (group, occurrence, time, row order) sorted by (group,
    occurrence): occurrence = the row's rank among the rows of its group
    (groupby.cumcount); row order = the given rows' positions in that order."""
    order = np.argsort(group, kind="stable")
    g = group[order]
    new = np.r_[True, g[1:] != g[:-1]] if len(g) else np.zeros(0, bool)
    first = np.flatnonzero(new)
    occ = np.arange(len(g)) - np.repeat(first, np.diff(np.r_[first, len(g)]))
    return g, occ, t[order], order


def matched_launches(host: tuple[np.ndarray, ...], dev: tuple[np.ndarray, ...]
             ) -> tuple[np.ndarray, np.ndarray]:
    """The task_track join of dataset.build_device on (stream, task, batch, occurrence),
    both sides given as `by_occurrence` tuples -- the device rows of a group are its
    occurrences 0, 1, ... in order, so host row i matches device row lo(group) +
    occurrence(i): (host rows with a match, their device rows), positions in those orders."""
    hg, ho = host[0], host[1]
    dg = dev[0]
    lo = np.searchsorted(dg, hg, side="left")
    n = np.searchsorted(dg, hg, side="right") - lo
    ok = ho < n
    return np.flatnonzero(ok), (lo + ho)[ok]


def launch_flows(host: tuple[np.ndarray, ...], dev: tuple[np.ndarray, ...]
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sorted begins and ends of the launch -> task flows (`matched_launches` pairs), and the
    matched host rows."""
    hi, di = matched_launches(host, dev)
    a, b = host[2][hi], dev[2][di]
    return np.sort(np.minimum(a, b)), np.sort(np.maximum(a, b)), hi


def host_models_of(thread: np.ndarray, ts: np.ndarray, me: dict[str, np.ndarray]) -> set[int]:
    """legacy.host_models from the scan: the models of the launches matched to a device
    task (`thread`, `ts`: local ns), each the ModelExecute span of its thread enclosing it
    as dataset.enclose finds it (latest begin <= ts, ts <= its end), NO_MODEL where none
    does."""
    from .control_info import NO_MODEL

    models: set[int] = set()
    for th in np.unique(thread):
        t = ts[thread == th]
        on = me["thread"] == th
        order = np.argsort(me["begin"][on], kind="stable")
        b, e, m = me["begin"][on][order], me["end"][on][order], me["model"][on][order]
        i = np.searchsorted(b, t, side="right") - 1
        inside = (i >= 0) & (t <= e[np.maximum(i, 0)]) if len(b) else np.zeros(len(t), bool)
        models.update(int(x) for x in np.unique(m[i[inside]]))
        if not inside.all():
            models.add(NO_MODEL)
    return models


def quiet_points(ab: np.ndarray, ae: np.ndarray, ds: np.ndarray, de: np.ndarray,
                  flow_lo: np.ndarray, flow_hi: np.ndarray,
                  comm: tuple[np.ndarray, ...] | None = None) -> np.ndarray:
    """Sorted quiet points (all arguments sorted local ns: API begins / ends, task starts /
    ends, launch -> task flow begins / ends): API begins (a step begins with a host API;
    without host APIs, the task starts) where nothing is open, no flow is pending, and the
    float sort key of the last end before is smaller (a window's events all sort first).
    `comm`: (HCCL op execution starts, ends, computing task starts, ends): no execution is
    open either, and none lies in the computing gap around the point (the Overlap Analysis
    Free gap across a cut is then plain, as between two windows without HCCL)."""
    cand = ab if len(ab) else ds
    quiet = np.zeros(len(cand), bool)
    for lo in range(0, len(cand), 1 << 22):
        c = cand[lo:lo + (1 << 22)]
        # no API open first: it keeps about one candidate per step for the other tests
        ended_api = count_before(ae, c)
        at = np.flatnonzero(count_before(ab, c) == ended_api)
        c, ended_api = c[at], ended_api[at]
        started, ended = count_before(ds, c), count_before(de, c)
        q = started == ended
        q &= count_before(flow_lo, c) == count_before(flow_hi, c)
        last = np.maximum(np.where(ended_api > 0, ae[np.maximum(ended_api - 1, 0)], 0),
                          np.where(ended > 0, de[np.maximum(ended - 1, 0)], 0))
        if comm is not None and len(comm[0]):
            q &= comm_quiet(c, *comm)
            cended = count_before(comm[1], c)
            last = np.maximum(last, np.where(cended > 0, comm[1][np.maximum(cended - 1, 0)],
                                             0))
        q &= ts_sort_key(last) < ts_sort_key(c)
        quiet[lo + at] = q
    return np.unique(cand[quiet])


def comm_quiet(c: np.ndarray, ms: np.ndarray, me: np.ndarray, cs: np.ndarray,
                ce: np.ndarray) -> np.ndarray:
    """No HCCL op execution [ms, me] open at c, and none in the computing gap (last
    computing end before c, first computing start from c on)."""
    ok = count_before(ms, c) == count_before(me, c)
    n_ce, n_cs = count_before(ce, c), count_before(cs, c)
    n_me, n_ms = count_before(me, c), count_before(ms, c)
    big = np.iinfo(np.int64).max
    gap_lo = np.where(n_ce > 0, ce[np.maximum(n_ce - 1, 0)], -big)
    gap_hi = np.where(n_cs < len(cs), cs[np.minimum(n_cs, len(cs) - 1)], big)
    comm_before = np.where(n_me > 0, me[np.maximum(n_me - 1, 0)], -big)
    comm_after = np.where(n_ms < len(ms), ms[np.minimum(n_ms, len(ms) - 1)], big)
    # a gap exists only between two computing intervals
    in_gap = (n_ce > 0) & (n_cs < len(cs))
    return ok & (~in_gap | ((comm_before <= gap_lo) & (comm_after >= gap_hi)))


def cuts_at(quiet: np.ndarray, ds: np.ndarray, target: int) -> tuple[list[int], list[int]]:
    """Window bounds (INT64_MIN, quiet points ..., INT64_MAX) about `target` task starts
    (`ds`, sorted) apart, and the tasks per window; a small rest joins the last window."""
    return cuts_by(quiet, count_before(ds, quiet), len(ds), target)


def cuts_by(quiet: np.ndarray, before: np.ndarray, total: int, target: int
             ) -> tuple[list[int], list[int]]:
    """`cuts_at` given the tasks before each quiet point and the total (several devices)."""
    ds_len = total
    cuts, sizes, last = [INT64_MIN], [], 0
    while True:
        i = int(np.searchsorted(before, last + target))
        if i >= len(quiet) or ds_len - int(before[i]) < target // 4:
            break  # no quiet point further on, or the rest is small: one last window
        cuts.append(int(quiet[i]))
        sizes.append(int(before[i]) - last)
        last = int(before[i])
    return cuts + [INT64_MAX], sizes + [ds_len - last]
