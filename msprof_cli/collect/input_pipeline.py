"""The input pipeline's production time per step, from tf.data's iterator events.

A step that reads its batch from a prefetched `tf.data` pipeline (`...prefetch(n)`, which
Keras' adapters and most input functions end with) takes an element the prefetch's
background thread made.  TF's tracer shows the take inside the step's
`IteratorGetNextOp::DoCompute` (`Iterator::...::Prefetch`, with the prefetch's `id`), and the
pipeline's own work on its tf.data threads.

The wait a step sees depends on how fast its consumer comes back for the next element, and
the emulated NPU runs a step far faster than the CPU that measured it: a pipeline that kept
pace with the CPU can starve the device.  So the collector measures how long the pipeline
takes to make an element, and the device's time model derives the emulated wait from it
(docs/device-model.md 5.2).

The measure: the time some tf.data thread was busy (the union of the events of the work on
the pipeline's threads: the ops of its map functions and their executor runs; a prefetch's
calls into its input wait on another stage, and are not counted) between the
first and the last element a prefetch's producer finished (its calls into its input,
`Iterator::...::Prefetch::<input>`, `parent_id` = the prefetch), per element finished.  A
pipeline that cannot keep up is busy all along; one that is ahead makes its elements and
idles with a full buffer: either way the busy time per element is its cost, whatever buffers,
nested prefetches (tf.distribute and Keras add one after the user's), look-ahead (a batch
started before the previous one was handed over) or parallel calls sit inside it (parallel
threads count once).  It is a mean over many elements, not a median of single intervals:
work done in one interval for the next element moves between intervals, never out of the
sum; work before the first element (a shuffle buffer's first fill) is outside.  Kept across
the collection's chunks (the last `KEEP` intervals); intervals that overlap
a warm-up step are left out when at least `MIN_CLEAR` others exist (tracing holds the GIL
a Python map function needs, so the pipeline crawls then).
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field

import numpy as np

from msprof_cli.collect.xspace import Event


# intervals kept per prefetch (the latest)
KEEP = 64
# intervals clear of warm-up steps needed before the others are left out
MIN_CLEAR = 3


@dataclass
class PipelineHistory:
    """Busy time per element of each prefetch a step took from (ids are stable while an
    iterator lives), over the collection's chunks."""

    # prefetch id -> (busy ns, overlaps a warm-up step) per interval between two elements
    per_element: dict[object, list[tuple[int, bool]]] = field(default_factory=dict)


@dataclass
class PipelineEvents:
    """The input pipeline's events of one traced chunk."""

    history: PipelineHistory
    consumer_lines: set[int] = field(default_factory=set)  # lines with a step's GetNext
    taken: list[tuple[int, int, object]] = field(default_factory=list)  # (line, start, id)
    busy: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # per line
    made: dict[object, list[int]] = field(default_factory=dict)  # prefetch id -> produce ends

    def add(self, ev: Event, data_line: bool) -> None:
        """An event of a tf.data thread (`data_line`) or a prefetch event anywhere."""
        if ev.kind == "prefetch" and (ev.stats or {}).get("id") is not None:
            self.taken.append((ev.line, ev.start, ev.stats["id"]))
        if ev.kind == "produce" and (ev.stats or {}).get("parent_id") is not None:
            self.made.setdefault(ev.stats["parent_id"], []).append(max(ev.end, ev.start))
        if data_line and ev.kind not in ("prefetch", "produce"):
            # the work of the pipeline's threads: the ops of its functions; an iterator call
            # that waits on another stage (or on a CPU the machine's load keeps from it) is
            # not work
            self.busy.setdefault(ev.line, []).append((ev.start, max(ev.end, ev.start)))

    def production(self, warmup: list[tuple[int, int]] = ()) -> "Production":
        """Per element a step's GetNext took: its prefetch's busy time per element.
        Intervals that overlap a warm-up step (`warmup`: tracing holds the GIL a Python map
        function needs, so the pipeline crawls then) are not measured."""
        spans = [sp for line, sps in self.busy.items() if line not in self.consumer_lines
                 for sp in sps]
        covered = _Union(spans)
        takes: dict[object, list[int]] = {}
        for line, start, pid in self.taken:
            if line in self.consumer_lines:
                takes.setdefault(pid, []).append(start)
        for pid in takes:
            t = np.sort(np.asarray(self.made.get(pid, ()), np.int64))
            if len(t) > 1:
                got = self.history.per_element.setdefault(pid, [])
                busy = np.diff(covered.upto(t))
                clear = np.ones(len(busy), bool)
                for b, e in warmup:
                    clear &= (t[1:] < b) | (t[:-1] > e)
                got += zip(busy.tolist(), (~clear).tolist())
                del got[:-KEEP]
        cost = {pid: _mean_cost(v) for pid, v in self.history.per_element.items() if v}
        rows = sorted((start, cost[pid]) for pid, times in takes.items() if pid in cost
                      for start in times)
        return Production([t for t, _ in rows], [c for _, c in rows])


def _mean_cost(intervals: list[tuple[int, bool]]) -> int:
    clear = [b for b, warm in intervals if not warm]
    use = clear if len(clear) >= MIN_CLEAR else [b for b, _ in intervals]
    return int(sum(use) / len(use))


class _Union:
    """The union of spans, as the covered length up to given times."""

    def __init__(self, spans: list[tuple[int, int]]) -> None:
        if not spans:
            self.a = self.b = self.before = np.zeros(0, np.int64)
            return
        arr = np.asarray(spans, np.int64)
        arr = arr[np.argsort(arr[:, 0], kind="stable")]
        start, end = arr[:, 0], np.maximum.accumulate(arr[:, 1])
        new = np.r_[True, start[1:] > end[:-1]]  # a span after every earlier one ended
        idx = np.flatnonzero(new)
        self.a = start[idx]
        self.b = end[np.r_[idx[1:] - 1, len(end) - 1]]
        self.before = np.r_[0, np.cumsum(self.b - self.a)[:-1]]

    def upto(self, t: np.ndarray) -> np.ndarray:
        """Covered length in (-inf, t] for each t."""
        if not len(self.a):
            return np.zeros(len(t), np.int64)
        i = np.searchsorted(self.a, t, side="right") - 1
        j = np.maximum(i, 0)
        inside = np.clip(t - self.a[j], 0, self.b[j] - self.a[j])
        return np.where(i >= 0, self.before[j] + inside, 0)


@dataclass
class Production:
    """Elements taken from prefetched pipelines, by time, with their production time."""

    times: list[int]
    costs: list[int]

    def in_span(self, start: int, end: int) -> int:
        """Production time (ns) of the elements taken inside [start, end]."""
        i = bisect.bisect_left(self.times, start)
        j = bisect.bisect_right(self.times, end)
        return sum(self.costs[i:j])
