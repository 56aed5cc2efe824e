"""GE's static memory plan of one graph's feature map, emulated (docs/device-model.md 12).

GE plans a static graph's device memory at compile time (`BlockMemAssigner`; the steps and
rules are in docs/formats/device-memory.md 4): every op output is a tensor whose
lifetime runs from its producer's node index to its last consumer's, tensors whose lifetimes
do not overlap share memory, and the model allocates the plan's total as one feature-map block
when it loads.  Here:

* sizes: GE's tensor size rule, `((bytes + 2 * 32 - 1) // 32) * 32` (32 B rounding with at
  least 32 B of padding; `graph_metadef/graph/utils/tensor_utils.cc` in hicann/ge), each
  tensor at a 512 B aligned offset (`MEM_ALIGN_SIZE`, `compiler/graph/build/memory/mem_assigner.h`);
* placement: greedy by size -- tensors in decreasing size, each at the lowest 512 B aligned
  offset where it overlaps no tensor already placed whose lifetime overlaps its own (GE runs
  several assigners and keeps the smallest plan; this one is never below the live peak);
* the live peak: the largest sum of the (aligned) sizes of the tensors live at one node index,
  the least memory any plan needs, which GE logs as `theory_min`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TENSOR_ALIGN = 32  # GE's tensor size granularity (bytes)
BLOCK_ALIGN = 512  # GE's MEM_ALIGN_SIZE: every block starts on this boundary


def ge_tensor_bytes(nbytes: np.ndarray) -> np.ndarray:
    """GE's size of tensors of `nbytes` bytes: 32 B rounding with >= 32 B of padding, then
    whole 512 B blocks (a zero-byte tensor takes none)."""
    b = np.asarray(nbytes, np.int64)
    padded = (b + 2 * TENSOR_ALIGN - 1) // TENSOR_ALIGN * TENSOR_ALIGN
    blocks = (padded + BLOCK_ALIGN - 1) // BLOCK_ALIGN * BLOCK_ALIGN
    return np.where(b > 0, blocks, 0)


@dataclass
class Plan:
    """Where each tensor lives in the feature-map block, and the block's size."""

    offset: np.ndarray  # i8 per tensor (-1: a zero-size tensor, not placed)
    size: np.ndarray  # i8 per tensor: its aligned size
    total: int  # the feature-map block (the plan's TOTAL)
    live_peak: int  # the largest live sum over node indices
    peak_at: int  # the node index where it is reached (-1: no tensor)


def live_sum(size: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Bytes live at each node index 0..max(end): a tensor is live from `start` to `end`,
    both included."""
    if not len(size):
        return np.zeros(0, np.int64)
    n = int(end.max()) + 2
    delta = np.zeros(n, np.int64)
    np.add.at(delta, start, size)
    np.add.at(delta, end + 1, -size)
    return np.cumsum(delta)[:-1]


def plan(nbytes: np.ndarray, start: np.ndarray, end: np.ndarray) -> Plan:
    """The plan of tensors of `nbytes` live over [start, end] (node indices, end >= start)."""
    size = ge_tensor_bytes(nbytes)
    start = np.asarray(start, np.int64)
    end = np.maximum(np.asarray(end, np.int64), start)
    n = len(size)
    offset = np.full(n, -1, np.int64)
    order = np.lexsort((start, -size))  # biggest first, then earliest
    order = order[size[order] > 0]
    p_off = np.empty(len(order), np.int64)
    p_end = np.empty(len(order), np.int64)
    p_s = np.empty(len(order), np.int64)
    p_e = np.empty(len(order), np.int64)
    k = 0
    total = 0
    for t in order.tolist():
        s, e, sz = int(start[t]), int(end[t]), int(size[t])
        if k:
            hit = (p_s[:k] <= e) & (p_e[:k] >= s)
            lo = p_off[:k][hit]
            hi = p_end[:k][hit]
        else:
            lo = hi = p_off[:0]
        off = _lowest_gap(lo, hi, sz)
        offset[t] = off
        p_off[k], p_end[k], p_s[k], p_e[k] = off, off + sz, s, e
        k += 1
        total = max(total, off + sz)
    live = live_sum(size, start, end)
    peak_at = int(live.argmax()) if len(live) else -1
    return Plan(offset, size, int(total), int(live.max(initial=0)), peak_at)


def _lowest_gap(lo: np.ndarray, hi: np.ndarray, size: int) -> int:
    """The lowest offset >= 0 where [off, off + size) misses every [lo, hi) interval (all
    of them multiples of BLOCK_ALIGN, so the answer is too)."""
    if not len(lo):
        return 0
    o = np.argsort(lo, kind="stable")
    lo, hi = lo[o], hi[o]
    reach = np.maximum.accumulate(hi)  # the end of everything placed below each interval
    # a gap before interval i: from the reach of intervals < i (0 for the first) to lo[i]
    before = np.r_[0, reach[:-1]]
    fits = np.flatnonzero(lo - before >= size)
    return int(before[fits[0]]) if len(fits) else int(reach[-1])
