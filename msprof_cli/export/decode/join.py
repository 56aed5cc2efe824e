"""The (group, occurrence) join of the device tasks to their launches and to their PMU
records (docs/formats/raw-format.md 4.12), on numpy columns.

It is the left merge of two frames on (key columns, groupby-cumcount) that dataset.py did
with pandas: the k-th row of a group on the left meets the k-th row of that group on the
right.  The frames' merge and cumcount cost ~25 ms at 50k tasks (a ~50k-row frame built and
taken apart per join); the same match on int64 columns is two stable sorts and two binary
searches.  `sorted_positions` is the left join on one unique key, the same way.
"""
from __future__ import annotations

import numpy as np

from .host import unique_rows

__all__ = ["group_codes", "last_of_each", "occurrence_match", "sorted_groups",
           "sorted_positions", "stable_order"]


def sorted_groups(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The rows grouped by one integer key, as a ``groupby(sort=True)``: (the rows' stable
    order by key, each group's key ascending, its first and end position in that order);
    ``ufunc.reduceat(values[order], starts)`` then aggregates each group."""
    codes = np.asarray(codes)
    order = np.argsort(codes, kind="stable")
    groups, starts = np.unique(codes[order], return_index=True)
    return order, groups, starts, np.r_[starts[1:], len(order)].astype(np.intp)


def last_of_each(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(each distinct key ascending, the row of its last occurrence): a
    ``drop_duplicates(keep="last")`` by key."""
    keys = np.asarray(keys)
    uniq, first_rev = np.unique(keys[::-1], return_index=True)
    return uniq, len(keys) - 1 - first_rev


def sorted_positions(keys: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Per value of `want`, its position in `keys` (sorted, unique), -1 where it is absent
    (NaN never matches): a left merge on one unique key column, on numpy (the frames of a
    pandas merge cost ~1-2 ms a call, however few the rows)."""
    if len(keys) == 0:
        return np.full(len(want), -1, np.int64)
    pos = np.minimum(np.searchsorted(keys, want), len(keys) - 1)
    return np.where(keys[pos] == want, pos, -1)


def group_codes(cols: list[np.ndarray]) -> tuple[np.ndarray, int]:
    """(one int64 per row of the int64 columns, equal iff the rows are equal; its bits):
    the columns less their minimum packed into one word when they fit 62 bits together
    (ids and batch numbers always do), else first-appearance group numbers (exact,
    slower)."""
    n = len(cols[0])
    if n == 0:
        return np.zeros(0, np.int64), 1
    lows = [int(c.min()) for c in cols]
    bits = [max((int(c.max()) - lo).bit_length(), 1) for c, lo in zip(cols, lows)]
    if sum(bits) <= 62:
        key = cols[0] - np.int64(lows[0])
        for c, lo, b in zip(cols[1:], lows[1:], bits[1:]):
            key = (key << np.int64(b)) | (c - np.int64(lo))
        return key, sum(bits)
    codes, _ = unique_rows(np.stack(cols, axis=1))
    return codes, max(int(codes.max()).bit_length(), 1)


def stable_order(key: np.ndarray, bits: int) -> np.ndarray:
    """``np.argsort(key, kind="stable")`` of non-negative int64 keys below 2**bits: a least
    significant digit radix sort, 16 bits a pass (numpy sorts 16-bit ints stably in O(n);
    its stable sort of int64 is a merge sort, ~4 ms for 50k shuffled keys against 0.2 ms a
    pass)."""
    order = np.argsort((key & 0xFFFF).astype(np.uint16), kind="stable")
    for shift in range(16, bits, 16):
        digit = ((key[order] >> np.int64(shift)) & 0xFFFF).astype(np.uint16)
        order = order[np.argsort(digit, kind="stable")]
    return order


def occurrence_match(left: list[np.ndarray], right: list[np.ndarray]) -> np.ndarray:
    """Per left row, the right row with equal key columns and the same occurrence (its rank
    among the rows of its group, in row order on each side), or -1.

    The right rows of a group are unique per occurrence, so this is what
    ``left.merge(right, on=keys + [cumcount], how="left")`` pairs, in left row order.  Both
    sides are sorted together, once: a group is then its left rows in order followed by its
    right rows in order, and left occurrence k meets the group's (left rows + k)-th row."""
    n = len(left[0])
    out = np.full(n, -1, np.int64)
    if n == 0 or len(right[0]) == 0:
        return out
    codes, bits = group_codes([np.concatenate([a, b]).astype(np.int64, copy=False)
                               for a, b in zip(left, right)])
    order = stable_order(codes, bits)
    total = len(order)
    cs = codes[order]
    new = np.r_[True, cs[1:] != cs[:-1]]
    gid = np.cumsum(new) - 1  # per sorted position, its group
    first = np.flatnonzero(new)
    end = np.r_[first[1:], total]
    is_left = order < n
    seen = np.cumsum(is_left)
    lefts = seen[end - 1] - seen[first] + is_left[first]  # left rows per group
    # a left row's occurrence is its position less its group's start: its partner sits
    # `lefts` rows further on, if the group has that many right rows
    pl = np.flatnonzero(is_left)
    g = gid[pl]
    target = pl + lefts[g]
    ok = target < end[g]
    out[order[pl[ok]]] = order[target[ok]] - n
    return out
