"""Device streams, task ids and time (docs/device-model.md 5).

Each stream executes its tasks in launch order: a task starts at
`max(ready, previous end + gap)` where `ready` = host launch time + launch latency.  That
recurrence is evaluated for a whole chunk at once with a cumulative maximum (`run_stream`).
Device time is kept in hwts ticks relative to the host<->device sync point; the raw syscnt is
`dev_cntvct + ticks` (docs/formats/raw-format.md 8).

Task ids are u16 per stream; a per-stream 64-bit counter is kept and `id = counter % 65536`,
`flip number = counter // 65536` (docs/formats/raw-format.md 9).
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
# added to the event wait of a task on each stream: two tasks on different streams that wait
# for the same producer then never start at the same tick, nor at the tick an in-stream
# successor of the producer starts (gaps of 0.5, 1, 1.5 us); the real analysis orders equal
# starts across streams by a hash, so such a tie would make the export's order arbitrary
EVENT_WAIT_SKEW = {COMPUTE_STREAM: 10, AICPU_STREAM: 20, HCCL_STREAM: 30}
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


# what a task waits for besides its own launch and its producers (`StreamPlan.wait`)
WAIT_NONE, WAIT_SIDE_STREAMS, WAIT_BP_ANCHOR = 0, 1, 2


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
    # the op row whose producers the task waits for (-1: none; an op task: its own row, a
    # Reduce marker: its all-reduce's)
    dep_row: list[np.ndarray] = field(default_factory=list)
    wait: list[np.ndarray] = field(default_factory=list)  # WAIT_*

    def add(self, *, op_row, order_ns, sub, ready, dur, gap, tag, iter_row, dep_row=None,
            wait=WAIT_NONE) -> None:
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
        self.dep_row.append(full(op_row if dep_row is None else dep_row, np.int64))
        self.wait.append(full(wait, np.int64))


@dataclass
class OrderedStream:
    """A plan's tasks in launch order (order_ns, sub, op_row), ready to run."""

    stream_id: int
    op_row: np.ndarray
    order_ns: np.ndarray
    sub: np.ndarray
    ready: np.ndarray
    dur: np.ndarray
    gap: np.ndarray
    tag: np.ndarray
    iter_row: np.ndarray
    dep_row: np.ndarray
    wait: np.ndarray


def order(plan: StreamPlan, stream_id: int) -> OrderedStream:
    """Sort the plan by launch (order_ns, sub, op_row)."""
    def cat(parts: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)
    cols = [cat(c) for c in (plan.op_row, plan.order_ns, plan.sub, plan.ready, plan.dur,
                             plan.gap, plan.tag, plan.iter_row, plan.dep_row, plan.wait)]
    idx = np.lexsort((cols[0], cols[2], cols[1]))
    return OrderedStream(stream_id, *(c[idx] for c in cols))


def finish(o: OrderedStream, start: np.ndarray, end: np.ndarray, state: DeviceState
           ) -> ScheduledStream:
    """Commit a run of the ordered stream: the stream's free tick, its task ids."""
    st = state.stream(o.stream_id)
    if len(end):
        st.free_tick = int(end[-1])
    ids, flips, flip_start = allocate_ids(st, len(o.op_row))
    return ScheduledStream(o.stream_id, o.op_row, o.order_ns, o.sub, o.tag, o.iter_row,
                           start, end, ids, flips, flip_start)


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
    o = order(plan, stream_id)
    start, end = run_stream(o.ready, o.dur, o.gap, state.stream(stream_id).free_tick)
    return finish(o, start, end, state)


@dataclass
class Coupling:
    """What couples a device's streams (docs/device-model.md 5): data edges between op rows
    (`consumer` waits for the end of `producer`'s last task plus an event wait; both on
    different streams), the iteration-end markers' wait for the side streams, the BP
    marker's wait for its anchor tasks."""

    n_rows: int  # op rows of the chunk
    n_iters: int
    consumer: np.ndarray
    producer: np.ndarray
    side_streams: frozenset[int] = frozenset()
    # per iteration: the launch order of its end markers; side tasks launched after it are
    # not waited for (a launch pushed into the next step: waiting would be a cycle)
    end_order: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    bp_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    bp_iter: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    # per consumer edge: the event wait in ticks (None: EVENT_WAIT_TICKS)
    wait_ticks: np.ndarray | None = None


MAX_ROUNDS = 10_000  # a guard: every wait points at an earlier launch, so rounds end


def run_coupled(streams: list[OrderedStream], state: DeviceState, c: Coupling
                ) -> tuple[dict[int, ScheduledStream], int]:
    """Run several streams whose tasks wait for each other (`Coupling`), then commit them.

    Each stream is still in-order (`run_stream`, one cumulative maximum); a task's ready
    time is raised to what it waits for on the other streams, and the streams are run again
    until nothing moves (a fixed point: ends only grow, and every wait points at a task
    launched earlier, so each round settles one more cross-stream hop of the longest chain).
    Returns the scheduled streams and the number of rounds."""
    order_e = np.argsort(c.consumer, kind="stable")
    cons, prod = c.consumer[order_e], c.producer[order_e]
    ucons, first = np.unique(cons, return_index=True) if len(cons) else (cons, cons)
    wait = EVENT_WAIT_TICKS if c.wait_ticks is None else c.wait_ticks[order_e][first]
    op_end = np.full(c.n_rows, NEVER, np.int64)
    dep_of_row = np.full(c.n_rows, NEVER, np.int64)
    free = {o.stream_id: state.stream(o.stream_id).free_tick for o in streams}
    ends: dict[int, np.ndarray] = {}
    starts: dict[int, np.ndarray] = {}
    last = {}
    for o in streams:
        is_op = np.flatnonzero(o.op_row >= 0)
        # the last task of each op row (an HCCL op runs as several tasks)
        r = o.op_row[is_op]
        _, back = np.unique(r[::-1], return_index=True)
        idx = is_op[len(r) - 1 - back]
        last[o.stream_id] = (o.op_row[idx], idx)
    n_it = max(c.n_iters, 1)
    side_end = np.full(n_it, NEVER, np.int64)
    bp_end = np.full(n_it, NEVER, np.int64)
    rounds = 0
    for rounds in range(1, MAX_ROUNDS + 1):
        moved = False
        for o in streams:
            rd = o.ready
            dep = o.dep_row >= 0
            if len(ucons) and dep.any():
                rd = rd.copy()
                rd[dep] = np.maximum(rd[dep], dep_of_row[o.dep_row[dep]])
            w = o.wait == WAIT_SIDE_STREAMS
            if w.any():
                rd = rd.copy() if rd is o.ready else rd
                rd[w] = np.maximum(rd[w], side_end[o.iter_row[w]])
            w = o.wait == WAIT_BP_ANCHOR
            if w.any():
                rd = rd.copy() if rd is o.ready else rd
                rd[w] = np.maximum(rd[w], bp_end[o.iter_row[w]])
            start, end = run_stream(rd, o.dur, o.gap, free[o.stream_id])
            prev = ends.get(o.stream_id)
            if prev is None or not np.array_equal(prev, end):
                moved = True
                ends[o.stream_id], starts[o.stream_id] = end, start
                rows, idx = last[o.stream_id]
                op_end[rows] = end[idx]
                if len(ucons):
                    got = np.maximum.reduceat(op_end[prod], first)
                    dep_of_row[ucons] = np.where(got > NEVER, got + wait, NEVER)
                if o.stream_id in c.side_streams and c.n_iters:
                    _side_ends(side_end, streams, ends, c)
                if len(c.bp_rows):
                    bp_end[:] = NEVER
                    np.maximum.at(bp_end, c.bp_iter, op_end[c.bp_rows])
        if not moved:
            break
    out = {o.stream_id: finish(o, starts[o.stream_id], ends[o.stream_id], state)
           for o in streams}
    return out, rounds


def _side_ends(side_end: np.ndarray, streams: list[OrderedStream],
               ends: dict[int, np.ndarray], c: Coupling) -> None:
    """Per iteration: the end of its last side-stream task launched before its end markers."""
    side_end[:] = NEVER
    for o in streams:
        if o.stream_id not in c.side_streams or o.stream_id not in ends:
            continue
        sel = o.iter_row >= 0
        if len(c.end_order):
            sel &= o.order_ns <= c.end_order[np.maximum(o.iter_row, 0)]
        if sel.any():
            np.maximum.at(side_end, o.iter_row[sel], ends[o.stream_id][sel])
