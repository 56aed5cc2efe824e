"""Python-side records of step executions (one per top-level graph execution).

The step hooks (steps.py) create one `ExecRecord` per top-level `tf.function` call or
`Session.run`, timed on CLOCK_MONOTONIC_RAW.  When the tracer ran during the execution, a
`msprof_step` TraceMe marker with the same `seq` ties the record to its trace events; when it
did not (sampled tracing), the record alone carries the step and the converter replays the
op schedule of a sampled execution of the same graph.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class ExecRecord:
    seq: int  # process-wide sequence number, also the marker's `seq` stat
    kind: str  # "tf2" (tf.function call) or "tf1" (Session.run)
    name: str  # model name: Keras model name, tf.function name, TF1 fetch summary
    fn_name: str  # python function name (tf2) or "" (tf1)
    model_key: str | None  # graph key when known on the Python side
    static_key: str | None  # key of the static shape map (tf1: the graph; tf2: = model_key)
    start_ns: int
    end_ns: int = 0
    thread_id: int = 0  # OS thread id of the caller
    traced_now: bool = False  # the call (re)traced its graph: a graph-building step
    profiled: bool = False  # the tracer was running for the whole execution
    is_train_step: bool = False  # a Keras train_function call
    # Keras steps_per_execution > 1: how many training steps this call ran (0: not split).
    # The converter splits the call back into that many Iterations (convert.py).
    sub_steps: int = 0
    # the agent's own time (flushes, tracer toggles) between the previous step and this one
    agent_before_ns: int = 0
    # the step marker when the tracer was started inside the step (Agent.trace_now): a
    # call whose input signature the graph had not run yet
    late_marker: Any = None
    late_tracer: Any = None
