"""Device streams, task ids and time (docs/device-model.md 5).

Each stream executes its tasks in launch order: a task starts at
`max(ready, previous end + gap)` where `ready` = host launch time + launch latency.  That
recurrence is evaluated for a whole chunk at once with a cumulative maximum (`run_stream`).
Device time is kept in hwts ticks relative to the host<->device sync point; the raw syscnt is
`dev_cntvct + ticks` (raw-format.md 8).

Task ids are u16 per stream; a per-stream 64-bit counter is kept and `id = counter % 65536`,
`flip number = counter // 65536` (raw-format.md 9).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

COMPUTE_STREAM = 2  # AI Core kernels and step-trace markers (the golden data uses stream 2)
AICPU_STREAM = 3
HCCL_STREAM = 4
LAUNCH_LATENCY_NS = 10_000  # host task_track -> earliest device start
TASK_GAP_TICKS = 100  # 1 us between two kernels on a stream (hwts dispatch)
MARKER_GAP_TICKS = 50  # 0.5 us before a step-trace marker task
# 1.5 us: a cross-stream wait (event record on one stream, wait on another); longer than the
# in-stream gap so that a task waiting on a producer does not start at the very tick the
# producer's stream starts its next task (the analysis orders such ties by a hash)
EVENT_WAIT_TICKS = 150
TASK_ID_SPACE = 1 << 16
NEVER = np.iinfo(np.int64).min // 4


@dataclass
class StreamState:
    counter: int  # task ids handed out so far, including the starting offset
    free_tick: int = NEVER  # end tick of the last task


@dataclass
class DeviceClock:
    """ns (host CLOCK_MONOTONIC_RAW) <-> hwts ticks around the sync point."""

    sync_ns: int
    dev_cntvct: int
    tick_ns: int

    def ticks(self, ns: np.ndarray) -> np.ndarray:
        """Ticks since the sync point, rounded up (a device event never precedes its cause)."""
        rel = np.asarray(ns, np.int64) - self.sync_ns
        return -((-rel) // self.tick_ns)

    def syscnt(self, ticks: np.ndarray) -> np.ndarray:
        return (np.asarray(ticks, np.int64) + self.dev_cntvct).astype(np.uint64)

    def ns(self, ticks: np.ndarray) -> np.ndarray:
        return np.asarray(ticks, np.int64) * self.tick_ns + self.sync_ns


@dataclass
class DeviceState:
    clock: DeviceClock
    first_task_id: int = 1
    streams: dict[int, StreamState] = field(default_factory=dict)
    hwts_count: int = 0  # records written so far (4-bit rolling counter source)
    aicore_count: int = 0

    def stream(self, stream_id: int) -> StreamState:
        st = self.streams.get(stream_id)
        if st is None:
            st = self.streams[stream_id] = StreamState(counter=self.first_task_id)
        return st


def run_stream(ready: np.ndarray, dur: np.ndarray, gap: np.ndarray, free: int
               ) -> tuple[np.ndarray, np.ndarray]:
    """Start/end ticks of in-order tasks: start_i = max(ready_i, end_{i-1} + gap_i).

    With c_i = sum_{j<=i}(gap_j + dur_j): end_i = c_i + max(free, max_{j<=i}(ready_j + dur_j
    - c_j)), one cumulative maximum for the whole stream.
    """
    if len(ready) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    c = np.cumsum(gap + dur)
    m = np.maximum(np.maximum.accumulate(ready + dur - c), free)
    end = c + m
    return end - dur, end


def allocate_ids(state: StreamState, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(task ids u16, flip number per task, mask of tasks that start a new flip)."""
    counter = state.counter + np.arange(n, dtype=np.int64)
    state.counter += n
    ids = (counter % TASK_ID_SPACE).astype(np.uint16)
    flips = counter // TASK_ID_SPACE
    flip_start = (ids == 0) & (counter > 0)
    return ids, flips, flip_start


@dataclass
class StreamPlan:
    """Tasks of one stream before scheduling (one element per task)."""

    op_row: list[np.ndarray] = field(default_factory=list)  # -1 for marker tasks
    order_ns: list[np.ndarray] = field(default_factory=list)
    sub: list[np.ndarray] = field(default_factory=list)
    ready: list[np.ndarray] = field(default_factory=list)
    dur: list[np.ndarray] = field(default_factory=list)
    gap: list[np.ndarray] = field(default_factory=list)
    tag: list[np.ndarray] = field(default_factory=list)
    iter_row: list[np.ndarray] = field(default_factory=list)

    def add(self, *, op_row, order_ns, sub, ready, dur, gap, tag, iter_row) -> None:
        n = len(order_ns)
        if n == 0:
            return
        full = lambda v, dt: np.broadcast_to(np.asarray(v, dt), (n,))  # noqa: E731
        self.op_row.append(full(op_row, np.int64))
        self.order_ns.append(full(order_ns, np.int64))
        self.sub.append(full(sub, np.int64))
        self.ready.append(full(ready, np.int64))
        self.dur.append(full(dur, np.int64))
        self.gap.append(full(gap, np.int64))
        self.tag.append(full(tag, np.int64))
        self.iter_row.append(full(iter_row, np.int64))


@dataclass
class ScheduledStream:
    stream_id: int
    op_row: np.ndarray
    order_ns: np.ndarray
    sub: np.ndarray
    tag: np.ndarray
    iter_row: np.ndarray
    start: np.ndarray
    end: np.ndarray
    task_id: np.ndarray
    flip: np.ndarray
    flip_start: np.ndarray

    def __len__(self) -> int:
        return len(self.op_row)


def schedule(plan: StreamPlan, state: DeviceState, stream_id: int) -> ScheduledStream:
    """Order the plan by launch (order_ns, sub, op_row), run the stream, hand out task ids."""
    def cat(parts: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)
    op_row, order_ns, sub = cat(plan.op_row), cat(plan.order_ns), cat(plan.sub)
    ready, dur, gap = cat(plan.ready), cat(plan.dur), cat(plan.gap)
    tag, iter_row = cat(plan.tag), cat(plan.iter_row)
    order = np.lexsort((op_row, sub, order_ns))
    op_row, order_ns, sub = op_row[order], order_ns[order], sub[order]
    ready, dur, gap, tag, iter_row = (ready[order], dur[order], gap[order], tag[order],
                                      iter_row[order])
    st = state.stream(stream_id)
    start, end = run_stream(ready, dur, gap, st.free_tick)
    if len(end):
        st.free_tick = int(end[-1])
    ids, flips, flip_start = allocate_ids(st, len(op_row))
    return ScheduledStream(stream_id, op_row, order_ns, sub, tag, iter_row, start, end, ids, flips,
                           flip_start)
