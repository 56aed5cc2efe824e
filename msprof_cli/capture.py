"""What the collector captured: the contract between `collect/` and `device/`.

The framework adapter (TensorFlow today) turns what the script really executed into these
plain objects; the emulated device (`msprof_cli.device`) turns them into device tasks and raw
records.  Nothing here knows about TensorFlow or about the raw layout.

All times are host CLOCK_MONOTONIC_RAW nanoseconds (the clock of the raw host records,
docs/formats/raw-format.md section 8).  Only the standard library is used: this module is imported
inside
the profiled process.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

SINGLE_OP_MODEL_ID = 4294967295  # model id of ops run outside any model (single-op mode)

# bytes per element of each TensorSpec.dtype name (string: the Ascend TensorDesc size of a
# string element; resource / variant: a handle)
DTYPE_BYTES: dict[str, int] = {
    "float32": 4, "float": 4, "float16": 2, "half": 2, "int8": 1, "int32": 4, "uint8": 1,
    "int16": 2, "uint16": 2, "uint32": 4, "int64": 8, "uint64": 8, "float64": 8, "double": 8,
    "bool": 1, "string": 16, "complex64": 8, "complex128": 16, "qint8": 1, "qint16": 2,
    "qint32": 4, "quint8": 1, "quint16": 2, "resource": 8, "variant": 8, "bfloat16": 2,
    "int4": 1,
}


@dataclass(frozen=True)
class TensorSpec:
    """One input or output tensor of an op, as the graph declares it."""

    shape: tuple[int, ...]  # -1 for a dimension that is not known statically
    dtype: str  # TensorFlow dtype name, e.g. "float32", "int64"
    format: str = "ND"  # Ascend format name (docs/formats/raw-format.md 4.9)


@dataclass
class OpRun:
    """One execution of one op on the host."""

    name: str  # node name (TF long_name before the last ':'); eager ops: their type
    tf_type: str  # op type as TF ran it, e.g. "_MklNativeFusedConv2D", "MatMul"
    start_ns: int
    end_ns: int
    thread_id: int  # OS thread id (or the TF thread id when the OS tid is unknown)
    inputs: tuple[TensorSpec, ...] = ()
    outputs: tuple[TensorSpec, ...] = ()
    fused_ops: tuple[str, ...] = ()  # names of the original ops a fusion absorbed
    device_id: int = 0  # logical device (replica) the op ran on
    eager: bool = False  # launched on its own by the host (single-op mode), not by a graph


@dataclass(eq=False)
class OpSchedule:
    """The op schedule of one sampled step, which unsampled steps of the same graph replay.

    `ops` holds one plain tuple per op in `OpRun` field order, its start and end relative to
    the sampled step's start: (name, tf_type, start, end, thread_id, inputs, outputs,
    fused_ops, device_id, eager).  A schedule is shared by every step replayed from it and
    never changes, so the device can turn it into columns once and lay those over each
    replayed step (`Iteration.schedule`) instead of walking thousands of `OpRun`s per step.
    """

    duration: int  # ns of the sampled step (>= 1)
    ops: tuple[tuple, ...] = ()

    def scale(self, start_ns: int, end_ns: int) -> float:
        """Stretch of a replayed step [start_ns, end_ns] relative to the sampled one."""
        return max(end_ns - start_ns, 1) / self.duration

    def runs(self, start_ns: int, end_ns: int) -> list[OpRun]:
        """The schedule laid over [start_ns, end_ns]: relative times scaled, truncated to
        int, added to the start (an op ending before it starts ends at its start).  The
        device's columnar replay (device/replay_columns.py) computes exactly this."""
        scale = self.scale(start_ns, end_ns)
        return [OpRun(name, typ, start_ns + int(s * scale), start_ns + int(max(e, s) * scale),
                      tid, ins, outs, fused, dev, eager)
                for name, typ, s, e, tid, ins, outs, fused, dev, eager in self.ops]

    @cached_property
    def device_ids(self) -> tuple[int, ...]:
        """The logical devices the schedule's ops ran on, sorted."""
        return tuple(sorted({op[8] for op in self.ops}))


@dataclass
class Iteration:
    """One step (one execution of a model) with the ops that ran inside it.

    A replayed step may carry its ops as `schedule` (laid over [start_ns, end_ns]) instead of
    `ops`: then `ops` is empty; `op_runs()` gives the ops either way."""

    model_id: int  # 1-based id of the model (graph key) this step executed
    index: int  # 1-based iteration number within the model
    start_ns: int  # host step start (the ModelExecute API begin)
    end_ns: int  # host step end
    thread_id: int  # thread that drove the step
    ops: list[OpRun] = field(default_factory=list)
    replayed: bool = False  # True when the op schedule was replayed from a sampled step
    # measured host time the step waited for its input batch (TF's IteratorGetNext blocked
    # on the tf.data pipeline); host-only work the emulated step keeps (device-model.md 5.2)
    input_wait_ns: int = 0
    # measured host time the input pipeline took to make the batch(es) the step took from a
    # prefetch (collect/input_pipeline.py); the time model derives the emulated wait from it
    input_production_ns: int = 0
    # msprof's own agent time just before the step (its flushes and tracer toggles): measured
    # but not the script's, so the emulated timeline leaves it out
    agent_before_ns: int = 0
    # replayed steps: the sampled schedule their ops are, scaled onto [start_ns, end_ns]
    # (None: the ops are in `ops`)
    schedule: OpSchedule | None = None
    # the call (re)traced its graph (TF's tracing, Grappler): a warm-up step, which summaries
    # leave out of their statistics (the model's first step is one too)
    warmup: bool = False
    # a replayed step whose ops were laid out as objects: its schedule's length (ns)
    sampled_duration: int = 0

    def sampled_ns(self) -> int:
        """A replayed step's sampled step length (0: not replayed from a schedule)."""
        return self.schedule.duration if self.schedule is not None else self.sampled_duration

    def op_runs(self) -> list[OpRun]:
        """The step's ops as objects (a replayed step's schedule laid over its span)."""
        if self.schedule is None:
            return self.ops
        return self.schedule.runs(self.start_ns, self.end_ns)


# what a variable holds, for the device memory's split (docs/formats/device-memory.md 3)
VAR_WEIGHT = "weight"  # a trainable variable: the model's parameters
VAR_OPTIMIZER = "optimizer"  # an optimizer's slots and counters
VAR_STATE = "state"  # any other non-trainable variable (BatchNorm moving statistics, metrics)


# the name scope of an optimizer's variables and update ops (Keras 2/3 optimizer names, lower
# case): what a name under it holds or computes is the optimizer's
OPTIMIZER_SCOPES = frozenset({
    "sgd", "adam", "adamw", "adagrad", "adadelta", "adamax", "nadam", "rmsprop", "ftrl",
    "lion", "lamb", "adafactor", "loss_scale_optimizer", "lossscaleoptimizer", "momentum",
    "gradientdescent", "optimizer"})


def in_optimizer_scope(name: str) -> bool:
    """An op or variable under an optimizer's name scope (`.../adam/Sub_3`, `SGD/m/...`)."""
    return any(part.lower() in OPTIMIZER_SCOPES for part in name.split("/")[:-1])


@dataclass(frozen=True)
class VariableSpec:
    """One variable a model's graph uses (GE keeps it in the session's variable memory)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    role: str = VAR_STATE  # VAR_WEIGHT / VAR_OPTIMIZER / VAR_STATE
    device: int = -1  # logical device holding it (a replica's copy); -1: not placed


@dataclass
class ModelInfo:
    """A model = one graph key (a tf.function concrete function, a TF1 fetch signature...)."""

    model_id: int
    name: str  # human name, e.g. the Keras model name or the tf.function name
    graph_key: str  # stable key: "__inference_train_step_974", "tf1:<graph id>:<fetches>"
    fp_op: str | None = None  # op name after which FP starts (None: auto/unknown)
    bp_op: str | None = None  # op name after which BP ends (None: auto/unknown)
    op_order: dict[str, int] = field(default_factory=dict)  # op name -> topological op id
    # host<->device transfers of one step (docs/device-model.md 5.1): the graph inputs the
    # host feeds (outputs of the data-source ops: iterator reads, placeholders / arguments)
    # and the outputs the host fetches (the function's return values, e.g. the loss).
    # Empty = unknown: the device falls back to the data-source ops it sees in the step.
    feeds: tuple[TensorSpec, ...] = ()
    fetches: tuple[TensorSpec, ...] = ()
    # data-flow edges of the graph (docs/device-model.md 3.1, GE's UB fusion needs them):
    # op name -> the op producing each of its data inputs, looked through the nodes GE turns
    # into no-ops (Identity, Reshape...).  A no-op node that nothing consumes (a function's
    # return value) is listed too, as one more consumer of its source.  Empty = unknown: the
    # device fuses nothing.
    producers: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # the variables the graph reads or updates (collect/tf_variables.py); empty = unknown
    variables: tuple[VariableSpec, ...] = ()
    # the graph's constants a device task reads (Const op name -> bytes of its value): GE
    # copies them to the device when the model loads (docs/device-model.md 12)
    constants: dict[str, int] = field(default_factory=dict)


@dataclass
class TxMarker:
    """An msproftx-style user annotation (mark = zero length, range = start..end)."""

    message: str
    start_ns: int
    end_ns: int
    thread_id: int
    category: int = 0
    event_type: int = 0  # 0 mark, 1 push/pop range, 2 start/end range
    domain: str = "default"


@dataclass
class CaptureChunk:
    """Everything captured since the previous flush."""

    models: dict[int, ModelInfo] = field(default_factory=dict)
    iterations: list[Iteration] = field(default_factory=list)
    single_ops: list[OpRun] = field(default_factory=list)  # ops outside any step
    markers: list[TxMarker] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what could not be captured and why
    # the agent's own work on the script's threads outside steps, (begin, end) ns (e.g. the
    # eager op callbacks that record shapes): measured, but not the script's host time
    agent_spans: list[tuple[int, int]] = field(default_factory=list)

    def is_empty(self) -> bool:
        return not (self.iterations or self.single_ops or self.markers)
