"""Shapes of eager ops (single-op mode): TF's op callbacks see each eagerly executed op's real
input and output tensors (docs/collect.md).

TF's host tracer gives eager ops no shapes (its verbose level cannot be set from Python in TF
2.21), so while the tracer runs an op callback (`op_callbacks.add_op_callback`, the hook
`tf.debugging` uses) records (op type, CLOCK_MONOTONIC_RAW ns, input specs, output specs) per
eager op; the converter gives each traced eager op the first record of its type made after
its kernel ended (`match`).  TF keeps op callbacks per thread: the callback is installed on
the thread that starts the tracer (the training loop's), and removed when the tracer stops,
so unsampled steps pay nothing.
"""
from __future__ import annotations

import bisect
import threading
import time
from typing import Any

from msprof_cli.capture import OpRun, TensorSpec

MAX_RECORDS = 200_000  # per chunk: a runaway eager loop cannot grow the agent without bound
MATCH_WINDOW_NS = 5_000_000  # a record later than this after the op's kernel is not its own

Record = tuple[str, int, tuple[TensorSpec, ...], tuple[TensorSpec, ...]]


class EagerShapes:
    """Records of the eager ops run while installed (see module doc)."""

    def __init__(self) -> None:
        self.records: list[Record] = []
        # the callback's own time, (begin, end) CLOCK_MONOTONIC_RAW ns: the agent's work,
        # not the script's host time (the time model takes it out, CaptureChunk.agent_spans)
        self.spans: list[tuple[int, int]] = []
        self._thread: int | None = None
        self.dropped = 0

    def _callback(self, op_type: str, inputs: Any, attrs: Any, outputs: Any,
                  op_name: Any = None, graph: Any = None) -> None:
        if graph is not None:  # an op being added to a graph (tracing), not executed
            return None
        if len(self.records) >= MAX_RECORDS:
            self.dropped += 1
            return None
        begin = time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)
        try:
            from msprof_cli.collect.tf_graphs import tensor_spec

            self.records.append((op_type, begin,
                                 tuple(tensor_spec(t) for t in inputs or ()),
                                 tuple(tensor_spec(t) for t in outputs or ())))
        except Exception:  # a tensor without a static shape or dtype: no record
            pass
        self.spans.append((begin, time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)))
        return None

    def install(self) -> None:
        if self._thread is not None:
            return
        try:
            from tensorflow.python.framework import op_callbacks

            op_callbacks.add_op_callback(self._callback)
            self._thread = threading.get_ident()
        except Exception:
            self._thread = None

    def remove(self) -> None:
        """Remove the callback (only possible from the thread that installed it)."""
        if self._thread is None or self._thread != threading.get_ident():
            return
        try:
            from tensorflow.python.framework import op_callbacks

            op_callbacks.remove_op_callback(self._callback)
        except Exception:
            pass
        self._thread = None

    def take(self) -> list[Record]:
        records, self.records = self.records, []
        return records

    def take_spans(self) -> list[tuple[int, int]]:
        spans, self.spans = self.spans, []
        return spans


def match(ops: list[OpRun], records: list[Record]) -> int:
    """Give each eager op without shapes the first unused record of its type made after its
    kernel ended (within MATCH_WINDOW_NS); returns how many got shapes."""
    by_type: dict[str, list[Record]] = {}
    for rec in sorted(records, key=lambda r: r[1]):
        by_type.setdefault(rec[0], []).append(rec)
    times = {k: [r[1] for r in v] for k, v in by_type.items()}
    used: dict[str, int] = {}
    got = 0
    for op in sorted((o for o in ops if o.eager and not o.inputs and not o.outputs),
                     key=lambda o: o.end_ns):
        recs = by_type.get(op.tf_type)
        if not recs:
            continue
        i = max(bisect.bisect_left(times[op.tf_type], op.end_ns), used.get(op.tf_type, 0))
        if i < len(recs) and recs[i][1] - op.end_ns <= MATCH_WINDOW_NS:
            op.inputs, op.outputs = recs[i][2], recs[i][3]
            used[op.tf_type] = i + 1
            got += 1
    return got
