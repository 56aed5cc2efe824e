"""Which executions run under the tracer (docs/formats/tensorflow-capture.md section 13, "sampled
tracing").

A graph runs the same op schedule every time it executes, so by default only a sample of the
executions of each graph is traced and the others replay the schedule of the last sampled
one (their `Iteration.replayed` is True).  Traced: the first `WARMUP` executions of every
graph (the first one builds the graph), every `EVERY`-th execution after that, at least one
execution every `MAX_GAP_S` seconds, any execution that retraces its graph and the one after
it, and the one after an execution whose duration drifts by more than a factor `DRIFT_RATIO`
(see `SamplingPolicy.done`).
`full_trace` (msprof collect --full-trace) traces everything.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

WARMUP = 3
EVERY = 50
MAX_GAP_S = 10.0
# an unsampled step this many times slower or faster than usual forces a new sample (wide on
# purpose: warm-up noise, a loaded machine)
DRIFT_RATIO = 2.5
# unsampled durations needed before "faster than usual" is judged against them
UNSAMPLED_MIN = 3


@dataclass
class _GraphStats:
    count: int = 0
    last_sample_s: float = 0.0
    sampled_ns: list[int] = field(default_factory=list)
    unsampled_ns: list[int] = field(default_factory=list)
    force_next: bool = False


class SamplingPolicy:
    def __init__(self, full_trace: bool) -> None:
        self.full_trace = full_trace
        self.graphs: dict[str, _GraphStats] = {}

    def should_trace(self, key: str | None) -> bool:
        """Called before an execution of graph `key` (None: not known yet -> trace)."""
        if self.full_trace or key is None:
            return True
        g = self.graphs.setdefault(key, _GraphStats())
        g.count += 1
        if g.count <= WARMUP or g.force_next or g.count % EVERY == 0:
            return True
        return time.monotonic() - g.last_sample_s >= MAX_GAP_S

    def done(self, key: str | None, traced: bool, retraced: bool, duration_ns: int) -> None:
        """Called after the execution; updates the drift and retrace guards.

        Drift of an unsampled execution: slower than `DRIFT_RATIO` x the larger of the sampled
        and the unsampled median, or faster than the unsampled median / `DRIFT_RATIO` (judged
        once `UNSAMPLED_MIN` unsampled durations exist).  A sampled step
        carries the tracer's own cost, which grows with the op events of a step (the
        Bidirectional-LSTM benchmark's sampled steps took 1.5-2x its untraced ones, more with
        TraceMe level 3): judged against the sampled median alone, untraced steps more than
        2.5x faster than traced ones all looked like drift and forced the next sample, so
        every second step was traced."""
        if self.full_trace or key is None:
            return
        g = self.graphs.setdefault(key, _GraphStats())
        g.force_next = retraced
        if traced:
            g.last_sample_s = time.monotonic()
            if not retraced:
                g.sampled_ns.append(duration_ns)
                del g.sampled_ns[:-8]
        elif g.sampled_ns:
            med = _median(g.sampled_ns)
            if len(g.unsampled_ns) >= UNSAMPLED_MIN:
                usual = _median(g.unsampled_ns)
                slow, fast = max(med, usual) * DRIFT_RATIO, usual / DRIFT_RATIO
            else:  # no baseline for "faster" yet: the sampled median says little about it
                slow, fast = med * DRIFT_RATIO, 0
            if med > 0 and not fast <= duration_ns <= slow:
                g.force_next = True
            g.unsampled_ns.append(duration_ns)
            del g.unsampled_ns[:-8]


def _median(values: list[int]) -> int:
    return sorted(values)[len(values) // 2]
