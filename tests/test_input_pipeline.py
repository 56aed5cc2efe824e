"""The input pipeline on the emulated system (collect/input_pipeline.py,
time_model.pipeline_waits, docs/device-model.md 5.2 "Input pipeline")."""
from __future__ import annotations

import numpy as np
import pytest

from msprof_cli.collect.input_pipeline import PipelineEvents, PipelineHistory
from msprof_cli.collect.xspace import Event
from msprof_cli.device import time_model as TM

MS = 1_000_000


def brute_force(production: list[int], cycle: list[int]) -> list[int]:
    """A prefetch of one element, event by event: the producer starts element k once element
    k-1 has left the buffer (TF's prefetch waits for a free slot before calling its input),
    the consumer asks for element k `cycle[k-1]` after it took element k-1.  Element 0 is
    ready when first asked."""
    waits, took, made = [0], 0, 0
    for k in range(1, len(production)):
        start = max(made, took)
        made = start + production[k]
        ask = took + cycle[k - 1]
        took = max(ask, made)
        waits.append(took - ask)
    return waits


def steps(busy: list[int], gap: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Real spans of consecutive steps: step k's emulated length without wait is busy[k], the
    measured host gap after it gap[k] (the real spans are longer: the CPU's execution)."""
    start, end, t = [], [], 0
    for b, g in zip(busy, gap):
        start.append(t)
        t += 10 * b + MS  # the CPU ran the step far slower than the emulated device
        end.append(t)
        t += g
    return np.array(start, np.int64), np.array(end, np.int64)


def waits_of(busy, gap, production, wait=None, warmup=None, state=None, model=None):
    n = len(busy)
    start, end = steps(busy, gap)
    return TM.pipeline_waits(
        np.ones(n, np.uint64) if model is None else np.asarray(model, np.uint64),
        np.ones(n, np.uint32), start, end, np.zeros(n, np.int64),
        np.asarray(busy, np.int64) + (0 if wait is None else np.asarray(wait)),
        np.zeros(n, np.int64) if wait is None else np.asarray(wait, np.int64),
        np.asarray(production, np.int64),
        np.zeros(n, bool) if warmup is None else np.asarray(warmup, bool),
        state if state is not None else TM.PipelineState())


@pytest.mark.parametrize("seed", range(6))
def test_waits_match_an_event_simulation_of_a_one_element_prefetch(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 40
    busy = rng.integers(0, 20, n) * MS // 4
    gap = rng.integers(0, 8, n) * MS // 4
    prod = rng.integers(0, 25, n) * MS // 4
    got = waits_of(busy, gap, prod)
    want = brute_force(prod.tolist(), (busy + gap).tolist())
    assert got.tolist()[1:] == want[1:]
    assert got[0] == 0  # nothing before the first step: no claim


def test_a_pipeline_faster_than_the_device_adds_no_wait() -> None:
    assert not waits_of([5 * MS] * 8, [MS] * 8, [3 * MS] * 8).any()


def test_the_measured_wait_is_kept_when_it_is_larger() -> None:
    got = waits_of([MS] * 4, [0] * 4, [5 * MS] * 4, wait=[0, 9 * MS, 0, 2 * MS])
    # modelled: 5 - 1 = 4 ms after each step; measured 9 ms stays, 2 ms gets 2 more
    assert got.tolist() == [0, 0, 4 * MS, 2 * MS]


def test_a_warm_up_step_gave_the_producer_its_real_length() -> None:
    got = waits_of([MS] * 4, [0] * 4, [5 * MS] * 4, warmup=[True, False, False, False])
    assert got.tolist() == [0, 0, 4 * MS, 4 * MS]


def test_chunks_continue_each_other() -> None:
    busy, gap, prod = [MS] * 6, [MS // 2] * 6, [4 * MS] * 6
    whole = waits_of(busy, gap, prod)
    state = TM.PipelineState()
    start, end = steps(busy, gap)
    parts = []
    for lo, hi in ((0, 2), (2, 6)):
        n = hi - lo
        parts += TM.pipeline_waits(
            np.ones(n, np.uint64), np.ones(n, np.uint32), start[lo:hi], end[lo:hi],
            np.zeros(n, np.int64), np.asarray(busy[lo:hi], np.int64), np.zeros(n, np.int64),
            np.asarray(prod[lo:hi], np.int64), np.zeros(n, bool), state).tolist()
    assert parts == whole.tolist() and whole[2] == int(2.5 * MS)


def test_models_do_not_share_a_cycle() -> None:
    # a validation step between two training steps: each model follows its own last step
    got = waits_of([MS] * 4, [0] * 4, [5 * MS, 5 * MS, 0, 5 * MS], model=[1, 1, 2, 1])
    assert got[1] == 4 * MS and got[2] == 0
    # training step 3 follows step 1 with the validation step's emulated time in between
    # (1 ms, not the 11 ms the CPU took)
    assert got[3] == 3 * MS


# --- production time from tf.data's events ----------------------------------------------

def ev(kind: str, name: str, line: int, start: int, end: int, **stats) -> Event:
    return Event(line, kind, name, "", start, end, stats)


def take(events: PipelineEvents, t: int, pid: int = 1, line: int = 0) -> None:
    events.add(ev("prefetch", "Iterator::Root::Prefetch", line, t, t + 1, id=pid), False)


def made(events: PipelineEvents, start: int, end: int, pid: int = 1, line: int = 2) -> None:
    """The prefetch's producer finished an element (its call into its input)."""
    events.add(ev("produce", "Iterator::Root::Prefetch::Map", line, start, end,
                  parent_id=pid), True)


def test_waiting_iterator_calls_are_not_work() -> None:
    """A fast pipeline on a loaded machine: the prefetch's producer waits long in its input
    call (the CPU was busy elsewhere), but the pipeline's own work is 1 ms an element."""
    events = PipelineEvents(PipelineHistory())
    events.consumer_lines.add(0)
    for k in range(6):
        t = k * 10 * MS
        take(events, t)
        events.add(ev("op", "map/Cast", 3, t, t + MS), True)
        made(events, t, t + 9 * MS)  # the producer's call: 9 ms, mostly waiting
    assert events.production().in_span(0, MS) == MS


def test_a_slow_pipeline_costs_its_busy_time_per_element() -> None:
    """Busy the whole interval: a pipeline slower than its consumer (16 ms of map work a
    batch, in four map calls on a worker thread; the prefetch's producer waits on it)."""
    events = PipelineEvents(PipelineHistory())
    events.consumer_lines.add(0)
    for k in range(6):
        t = k * 16 * MS
        take(events, t)
        made(events, t, t + 16 * MS)
        for j in range(4):
            events.add(ev("op", "map/PyFunc", 3, t + j * 4 * MS, t + (j + 1) * 4 * MS), True)
    assert events.production().in_span(0, 100 * MS) == 6 * 16 * MS


def test_a_pipeline_ahead_of_its_consumer_costs_its_work_not_the_consumer_pace() -> None:
    """The CPU consumer took 50 ms a step; the pipeline made each batch in 16 ms and idled
    with a full buffer (its producer only finished once a slot was free)."""
    events = PipelineEvents(PipelineHistory())
    events.consumer_lines.add(0)
    for k in range(6):
        t = k * 50 * MS
        take(events, t)
        events.add(ev("op", "map/PyFunc", 3, t + MS, t + 17 * MS), True)
        made(events, t + 17 * MS, t + 17 * MS + 1000)
    assert events.production().in_span(0, 10 * MS) == 16 * MS


def test_a_drained_buffer_does_not_hide_the_work() -> None:
    """Steps right after the warm-up take batches made during it, back to back; the pipeline
    made them one after the other, 16 ms each."""
    events = PipelineEvents(PipelineHistory())
    events.consumer_lines.add(0)
    for k in range(6):
        events.add(ev("op", "map/PyFunc", 3, k * 16 * MS, (k + 1) * 16 * MS), True)
        made(events, k * 16 * MS, (k + 1) * 16 * MS)
    for k in range(4):
        take(events, 100 * MS + k * MS)  # four fast steps
    assert events.production().in_span(0, 200 * MS) == 4 * 16 * MS


def test_parallel_threads_count_once() -> None:
    events = PipelineEvents(PipelineHistory())
    events.consumer_lines.add(0)
    for k in range(5):
        t = k * 10 * MS
        take(events, t)
        for line in (3, 4, 5, 6):  # four map threads, each 8 ms on its own element
            events.add(ev("op", "map/Conv", line, t, t + 8 * MS), True)
        made(events, t + 8 * MS, t + 8 * MS + 1)
    assert events.production().in_span(0, MS) == 8 * MS


def test_one_off_work_and_other_lines_do_not_count() -> None:
    events = PipelineEvents(PipelineHistory())
    events.consumer_lines.add(0)
    # a shuffle buffer's first fill: before the pipeline's first element
    events.add(ev("op", "shuffle/fill", 3, -900 * MS, 2 * MS), True)
    for k in range(8):
        t = k * 10 * MS
        take(events, t)
        events.add(ev("op", "map/Cast", 3, t + MS, t + 3 * MS), True)
        made(events, t + 3 * MS, t + 3 * MS)
        # the consumer's own GetNext line and the Python thread are not the pipeline's
        events.add(ev("wait", "IteratorGetNextOp::DoCompute", 0, t, t + 9 * MS), True)
        events.add(ev("op", "dense/MatMul", 7, t, t + 9 * MS), False)
    assert events.production().in_span(0, MS) == 2 * MS


def test_history_spans_chunks_and_only_a_steps_takes_count() -> None:
    history = PipelineHistory()
    first = PipelineEvents(history)
    first.consumer_lines.add(0)
    for k in range(5):
        take(first, k * 10 * MS)
        first.add(ev("op", "map/Cast", 3, k * 10 * MS, k * 10 * MS + 7 * MS), True)
        made(first, k * 10 * MS + 7 * MS, k * 10 * MS + 7 * MS)
    assert first.production().in_span(0, MS) == 7 * MS
    # a later chunk that traced one step: one element made, no interval of its own
    later = PipelineEvents(history)
    later.consumer_lines.add(5)
    take(later, 500 * MS, line=5)
    take(later, 501 * MS, line=6)  # an inner prefetch taken on a producer thread: no step's
    made(later, 499 * MS, 500 * MS)
    got = later.production()
    assert got.times == [500 * MS] and got.costs == [7 * MS]


def test_intervals_during_a_warm_up_step_are_not_measured() -> None:
    """While the first step traces its graph, the main thread holds the GIL a Python map
    function needs: those elements took longer than the pipeline's pace."""
    events = PipelineEvents(PipelineHistory())
    events.consumer_lines.add(0)
    t = 0
    for k in range(8):
        cost = 40 * MS if k < 3 else 16 * MS
        events.add(ev("op", "map/PyFunc", 3, t, t + cost), True)
        t += cost
        made(events, t, t)
        take(events, t)
    assert events.production([(0, 120 * MS)]).in_span(0, MS) == 0  # no take that early
    assert events.production([(0, 120 * MS)]).in_span(120 * MS, 121 * MS) == 16 * MS
