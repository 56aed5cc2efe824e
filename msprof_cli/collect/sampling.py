"""Which executions run under the tracer (tensorflow-capture.md section 13, "sampled tracing").

A graph runs the same op schedule every time it executes, so by default only a sample of the
executions of each graph is traced and the others replay the schedule of the last sampled
one (their `Iteration.replayed` is True).  Traced: the first `WARMUP` executions of every
graph (the first one builds the graph), every `EVERY`-th execution after that, at least one
execution every `MAX_GAP_S` seconds, any execution that retraces its graph and the one after
it, and every execution whose duration drifts from the sampled median by more than a factor `DRIFT_RATIO`.
`full_trace` (msprof collect --full-trace) traces everything.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

WARMUP = 3
EVERY = 50
MAX_GAP_S = 10.0
# an unsampled step this many times slower/faster than the sampled median forces a new
# sample (wide on purpose: sampled steps carry the tracer's own +10-20% and warm-up noise)
DRIFT_RATIO = 2.5


@dataclass
class _GraphStats:
    count: int = 0
    last_sample_s: float = 0.0
    sampled_ns: list[int] = field(default_factory=list)
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
        """Called after the execution; updates the drift and retrace guards."""
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
            med = sorted(g.sampled_ns)[len(g.sampled_ns) // 2]
            if med > 0 and not med / DRIFT_RATIO <= duration_ns <= med * DRIFT_RATIO:
                g.force_next = True
