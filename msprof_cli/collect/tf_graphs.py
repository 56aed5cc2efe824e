"""Static op shapes, dtypes and order from a traced graph (docs/formats/tensorflow-capture.md 7.4,
7.5, 7.7).

The host tracer gives names and times but no shapes, so each graph is walked once when it is
traced: every op with its qualified name (nested `StatefulPartitionedCall` bodies get the
call op's name as prefix, which is exactly how the runtime `long_name`s look once Grappler has
inlined them), its type, input/output specs and its producers.  The converter joins the trace
to this map by name.  Fusions are recovered from the same map: a fused runtime node carries
the name of the last op of its chain, so walking back through first inputs while the op type
is the base op or a fusable activation gives the absorbed ops (7.7).
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

from msprof_cli.capture import TensorSpec, VariableSpec
from msprof_cli.device.avg_pool import POOL_TYPES, assist_filter

CALL_OPS = ("StatefulPartitionedCall", "PartitionedCall")
# ops Grappler/oneDNN fold into the tail of a Conv2D/MatMul chain
FUSABLE = frozenset({"BiasAdd", "Add", "AddV2", "Relu", "Relu6", "Elu", "Selu", "LeakyRelu",
                     "Sigmoid", "Tanh", "Sigmoid", "FusedBatchNorm", "FusedBatchNormV3",
                     "_FusedBatchNormEx", "Mul", "Swish", "_MklSwish", "GeLU", "Gelu"})
# runtime fused type (oneDNN prefixes stripped) -> base op types of the chain head
FUSED_BASES = {
    "FusedConv2D": ("Conv2D",),
    "FusedConv3D": ("Conv3D",),
    "FusedDepthwiseConv2dNative": ("DepthwiseConv2dNative",),
    "FusedMatMul": ("MatMul",),
    "FusedBatchMatMulV2": ("BatchMatMulV2", "BatchMatMul"),
    "FusedBatchMatMulV3": ("BatchMatMulV3",),
}
MAX_WALK_OPS = 200_000  # a runaway graph is truncated rather than stalling the script


@dataclass
class StaticOp:
    type: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    producers: tuple[str, ...]  # qualified producer op name per input
    slots: tuple[int, ...] = ()  # output index of the producer, per input
    device: int = -1  # index N of the op's placement `.../device:CPU:N` (-1: not placed)
    cpu_pinned: bool = False  # the script asked for the CPU (`with tf.device("/cpu:0")`)
    # the filter GE's AvgPoolFusionPass gives a windowed AvgPool (device/avg_pool.py)
    assist: tuple[TensorSpec, ...] = ()


@dataclass
class StaticGraph:
    """Qualified op name -> static info, plus the topological op order (1-based)."""

    ops: dict[str, StaticOp] = field(default_factory=dict)
    order: dict[str, int] = field(default_factory=dict)
    inputs: set[str] = field(default_factory=set)  # ops that produce the graph's input data
    # specs of the values the top-level graph returns (tf.function outputs; TF1 graphs: none)
    outputs: tuple[TensorSpec, ...] = ()
    truncated: bool = False
    # the variables the top-level graph uses (collect/tf_variables.py)
    variables: tuple[VariableSpec, ...] = ()
    version: int = 0  # bumped when runtime shapes replace unknown dims (caches key on it)

    def add(self, name: str, op: StaticOp) -> None:
        self.ops[name] = op
        self.order.setdefault(name, len(self.order) + 1)
        self._pinned = None

    def host_pinned(self) -> frozenset[str]:
        """The ops the script pinned to the CPU where the rest of the graph is not pinned:
        the TF adapter keeps them on the host (docs/device-model.md 2).  A graph whose ops
        are mostly pinned to CPUs is a strategy's replica placement (MirroredStrategy over
        logical CPUs), not a host placement: none."""
        if getattr(self, "_pinned", None) is None:
            pinned = frozenset(n for n, op in self.ops.items() if op.cpu_pinned)
            self._pinned = pinned if 2 * len(pinned) < len(self.ops) else frozenset()
        return self._pinned


def tensor_spec(tensor: Any) -> TensorSpec:
    dtype = tensor.dtype
    dname = getattr(dtype, "name", str(dtype))
    # a TF1 ref variable's tensor ("float32_ref") holds the same data as its base dtype
    dname = dname[:-4] if dname.endswith("_ref") else dname
    shape = tensor.shape
    if getattr(shape, "rank", None) is None:
        return TensorSpec(shape=(), dtype=dname, format="ND") if dname == "resource" else \
            TensorSpec(shape=(-2,), dtype=dname)  # -2: unknown rank (Ascend convention)
    dims = tuple(-1 if d is None else int(d) for d in shape.as_list())
    return TensorSpec(shape=dims, dtype=dname, format=default_format(len(dims)))


def default_format(rank: int) -> str:
    # TF's default layout; the device decides the Ascend format (NC1HWC0...) per op
    return "NHWC" if rank == 4 else "ND"


DATA_SOURCES = frozenset({"IteratorGetNext", "IteratorGetNextSync", "OptionalGetValue",
                          "IteratorGetNextAsOptional"})


_DEVICE_RE = re.compile(r"device:[A-Za-z_]+:(\d+)$")
_REPLICA_RE = re.compile(r"(?:^|/)replica_(\d+)/")


def device_index(device: str) -> int:
    """`/job:localhost/replica:0/task:0/device:CPU:1` -> 1; unplaced ("") -> -1.

    A tf.distribute strategy places each replica's ops on its own (logical) device, so the
    index is the replica's device id (MirroredStrategy over logical CPUs: CPU:0, CPU:1...)."""
    m = _DEVICE_RE.search(device) if device else None
    return int(m.group(1)) if m else -1


@functools.lru_cache(maxsize=1 << 16)  # every traced step asks again for the same names
def replica_of_name(name: str) -> int:
    """Replica id from the `replica_N/` scope MirroredStrategy gives replicas N >= 1 (else -1)."""
    m = _REPLICA_RE.search(name)
    return int(m.group(1)) if m else -1


def walk_graph(graph: Any, into: StaticGraph | None = None, prefix: str = "",
               depth: int = 0, data_args: frozenset[int] | None = None,
               device: int = -1) -> StaticGraph:
    """Record every op of `graph` (a tf.Graph / FuncGraph), recursing into call bodies.

    Data sources (for FP detection) are iterator reads, the non-resource placeholders of
    the top-level graph (TF1 feeds, tf.function arguments), and, inside a called body, the
    arguments that the call op fed from a data source (`data_args`, by position)."""
    out = into if into is not None else StaticGraph()
    if depth > 8:
        return out
    if depth == 0 and not out.outputs:
        try:  # a FuncGraph's return values = what the step fetches back to the host
            out.outputs = tuple(tensor_spec(t) for t in (getattr(graph, "outputs", None) or ()))
        except Exception:
            out.outputs = ()
    arg_names: set[str] = set()
    if data_args:
        for i, t in enumerate(getattr(graph, "inputs", ()) or ()):
            if i in data_args:
                arg_names.add(t.op.name)
    for op in graph.get_operations():
        if len(out.ops) >= MAX_WALK_OPS:
            out.truncated = True
            return out
        name = prefix + op.name
        try:
            inputs = tuple(tensor_spec(t) for t in op.inputs)
            outputs = tuple(tensor_spec(t) for t in op.outputs)
            producers = tuple(prefix + t.op.name for t in op.inputs)
            slots = tuple(t.value_index for t in op.inputs)
        except Exception:  # a broken tensor must not lose the whole graph
            inputs, outputs, producers, slots = (), (), (), ()
        # an unplaced op in a called body runs on the call op's device (TF's placer)
        dev = device_index(getattr(op, "device", "") or "")
        if dev < 0:
            dev = device
        out.add(name, StaticOp(op.type, inputs, outputs, producers, slots, dev,
                               script_pinned_to_cpu(op), _assist_inputs(op, inputs, outputs)))
        if op.type in DATA_SOURCES or op.name in arg_names or (
                depth == 0 and op.type == "Placeholder" and outputs
                and outputs[0].dtype != "resource"):
            out.inputs.add(name)
        if op.type in CALL_OPS:
            body = _called_graph(graph, op)
            if body is not None:
                fed = frozenset(i for i, p in enumerate(producers) if p in out.inputs)
                walk_graph(body, out, name + "/", depth + 1, fed, dev)
        elif op.type in CONTROL_FLOW_OPS:
            # lowered control flow: the runtime names a branch/body op
            # `<op>/<part>/_<N>/<body op>`; walked as `<op>/<part>/<body op>` and matched
            # after `lowered_name` drops the `_<N>` (N is a node id only known at runtime)
            shift = 1 if op.type.endswith("If") else 0  # If's input 0 is the predicate
            fed = frozenset(i - shift for i, p in enumerate(producers)
                            if p in out.inputs and i >= shift)
            for attr, part in CONTROL_FLOW_OPS[op.type]:
                body = _called_graph(graph, op, attr)
                if body is not None:
                    walk_graph(body, out, f"{name}/{part}/", depth + 1, fed, dev)
    return out


def _assist_inputs(op: Any, inputs: tuple[TensorSpec, ...],
                   outputs: tuple[TensorSpec, ...]) -> tuple[TensorSpec, ...]:
    """The constant inputs a GE graph pass adds to the op from its attributes: a windowed
    AvgPool's filter (device/avg_pool.py)."""
    if op.type not in POOL_TYPES or not inputs or not outputs:
        return ()
    try:
        fmt = op.get_attr("data_format")
        filt = assist_filter(inputs[0], outputs[0], op.get_attr("ksize"),
                             op.get_attr("strides"),
                             fmt.decode() if isinstance(fmt, bytes) else str(fmt))
    except Exception:  # an op without these attributes keeps its own inputs
        return ()
    return (filt,) if filt is not None else ()


def script_pinned_to_cpu(op: Any) -> bool:
    """Whether the script asked for the CPU for `op` (`with tf.device("/cpu:0")`).

    The device string alone does not say: an op colocated with a variable
    (`colocate_with`) takes the variable's device, and on a CPU-only machine every eagerly
    created variable lives on `CPU:0`.  That is how an optimizer's update op
    (`ResourceApplyKerasMomentum`, `ResourceApplyAdam`, ... of the Keras 2 optimizers:
    tf.distribute's `update` colocates it with its variable) reads `device:CPU:0` though no
    script asked; under the TF adapter the variable lives in device memory and its updates
    run on the device.  So an op counts as pinned when a `tf.device` scope placed it (TF
    records the scopes that applied, `_device_assignments`), or when it is colocated with an
    op of its graph that a scope placed (an embedding lookup under `tf.device("/cpu:0")`
    is colocated with its table's handle, which the scope placed)."""
    requested = getattr(op, "device", "") or ""
    if "device:CPU" not in requested.replace("cpu", "CPU"):
        return False
    try:  # TF's private records: the device scopes applied, the ops colocated with
        if op._device_assignments:
            return True
        graph = op.graph
        for name in op._colocation_dict:
            try:
                if graph.get_operation_by_name(name)._device_assignments:
                    return True
            except (KeyError, ValueError):  # colocated with an op outside this graph
                continue
        return False
    except AttributeError:  # a TF without these records: the device string decides
        return True


# functional control-flow op -> (function attr, name part of the lowered body)
CONTROL_FLOW_OPS = {
    "While": (("body", "body"), ("cond", "cond")),
    "StatelessWhile": (("body", "body"), ("cond", "cond")),
    "If": (("then_branch", "then"), ("else_branch", "else")),
    "StatelessIf": (("then_branch", "then"), ("else_branch", "else")),
}
_LOWERED = re.compile(r"/(body|cond|then|else)/_\d+/")


def lowered_name(name: str) -> str:
    """Runtime name of an op in a lowered While/If body -> the name the walk recorded."""
    return _LOWERED.sub(r"/\1/", name) if "/_" in name else name


def _called_graph(graph: Any, op: Any, attr: str = "f") -> Any:
    try:
        fname = op.get_attr(attr).name
    except Exception:
        return None
    g = graph
    while g is not None:  # the function may be defined in an outer graph
        fn = g._get_function(fname) if hasattr(g, "_get_function") else None
        if fn is not None:
            return getattr(fn, "graph", None)
        g = getattr(g, "outer_graph", None)
    return None


def strip_onednn(tf_type: str) -> str:
    for pre in ("_MklNative", "_Mkl"):
        if tf_type.startswith(pre):
            return tf_type[len(pre):]
    return tf_type.lstrip("_")


@dataclass(frozen=True)
class OpShape:
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    fused_ops: tuple[str, ...] = ()
    device: int = -1  # placement of the op (StaticOp.device)


def resolve(graph: StaticGraph | None, name: str, tf_type: str,
            cache: dict[tuple[str, str], OpShape]) -> OpShape | None:
    """Shapes (and absorbed ops, for a fused runtime node) of the runtime op `name`."""
    if graph is None:
        return None
    key = (name, tf_type)
    hit = cache.get(key)
    if hit is not None:
        return hit
    op = graph.ops.get(name)
    if op is None:
        name = lowered_name(name)
        op = graph.ops.get(name)
        if op is None:
            return None
    base = FUSED_BASES.get(strip_onednn(tf_type).lstrip("_"))
    result = OpShape(op.inputs + op.assist, op.outputs, (), op.device)
    if base and op.type not in base:
        chain = [name]
        cur = op
        extra: list[TensorSpec] = []
        while cur.type not in base and cur.type in FUSABLE and cur.producers:
            extra = list(cur.inputs[1:]) + extra  # side inputs (bias, scale...) of the tail
            prev = cur.producers[0]
            nxt = graph.ops.get(prev)
            if nxt is None:
                break
            chain.append(prev)
            cur = nxt
        if cur.type in base:
            chain.reverse()
            result = OpShape(tuple(cur.inputs) + tuple(extra), op.outputs, tuple(chain),
                             op.device)
    cache[key] = result
    return result


def apply_runtime_shapes(graph: StaticGraph, runtime: dict[str, dict[int, tuple[int, ...]]]
                         ) -> int:
    """Fill unknown dims with the output shapes one FULL_TRACE run reported (TF1, 5/7.6).

    `runtime`: node name -> {output slot: shape}.  Inputs follow from their producers.
    Returns how many tensor specs changed."""
    changed = 0

    def merged(spec: TensorSpec, shape: tuple[int, ...] | None) -> TensorSpec:
        nonlocal changed
        if shape is None or -1 not in spec.shape and spec.shape != (-2,):
            return spec
        if spec.shape != (-2,) and len(shape) != len(spec.shape):
            return spec
        changed += 1
        return TensorSpec(shape=tuple(shape), dtype=spec.dtype, format=default_format(len(shape)))

    runtime = _through_views(graph, runtime)
    for name, op in graph.ops.items():
        rt = runtime.get(name)
        if rt:
            op.outputs = tuple(merged(o, rt.get(i)) for i, o in enumerate(op.outputs))
    for op in graph.ops.values():
        if op.inputs and op.slots:
            op.inputs = tuple(merged(spec, runtime.get(p, {}).get(slot))
                              for spec, p, slot in zip(op.inputs, op.producers, op.slots))
    if changed:
        graph.version += 1
    return changed


# ops whose output is their first input's value, shape included (Grappler often removes them
# before the run, so the run's step stats do not report their shapes)
SAME_SHAPE = frozenset({"Identity", "Snapshot", "StopGradient", "PreventGradient",
                        "EnsureShape", "RefIdentity"})


def _through_views(graph: StaticGraph, runtime: dict[str, dict[int, tuple[int, ...]]]
                   ) -> dict[str, dict[int, tuple[int, ...]]]:
    """`runtime` plus the shapes of SAME_SHAPE ops it lacks, from their inputs' producers
    (in topological order, so a chain of them resolves in one pass)."""
    out = dict(runtime)
    for name in sorted(graph.ops, key=lambda n: graph.order.get(n, 1 << 62)):
        op = graph.ops[name]
        if op.type not in SAME_SHAPE or 0 in out.get(name, {}) or not op.producers:
            continue
        slot = op.slots[0] if op.slots else 0
        shape = out.get(op.producers[0], {}).get(slot)
        if shape is not None:
            out[name] = {**out.get(name, {}), 0: shape}
    return out


def runtime_shapes_from_step_stats(step_stats: Any) -> dict[str, dict[int, tuple[int, ...]]]:
    out: dict[str, dict[int, tuple[int, ...]]] = {}
    for dev in step_stats.dev_stats:
        for ns in dev.node_stats:
            slots = out.setdefault(ns.node_name, {})
            for o in ns.output:
                shape = o.tensor_description.shape
                if shape.unknown_rank:
                    continue
                slots[o.slot] = tuple(int(d.size) for d in shape.dim)
    return out


# nodes GE turns into no-ops (a view of their first input): looked through for data edges
PASS_THROUGH = frozenset({"Identity", "Snapshot", "StopGradient", "PreventGradient",
                          "EnsureShape", "Reshape", "ExpandDims", "Squeeze"})
# consumers of a tensor's metadata only (static shapes: GE folds them at build time)
SHAPE_ONLY = frozenset({"Shape", "ShapeN", "Size", "Rank", "BroadcastGradientArgs"})


def data_edges(graph: StaticGraph) -> dict[str, tuple[str, ...]]:
    """`ModelInfo.producers` of a walked graph (docs/device-model.md 3.1): op -> the producer
    of each data input, looked through PASS_THROUGH nodes; shape-only consumers are left out;
    a PASS_THROUGH node nobody consumes (a function output) stays as a consumer of its source.
    One pass over the graph's nodes (cached on the graph per version)."""
    cached = getattr(graph, "_edges", None)
    if cached is not None and cached[0] == graph.version:
        return cached[1]
    ops = graph.ops

    def source(name: str) -> str:
        seen = 0
        op = ops.get(name)
        while op is not None and op.type in PASS_THROUGH and op.producers and seen < 64:
            name = op.producers[0]
            op = ops.get(name)
            seen += 1
        return name

    consumed: set[str] = set()
    for op in ops.values():
        if op.type not in SHAPE_ONLY:
            consumed.update(op.producers)
    edges: dict[str, tuple[str, ...]] = {}
    for name, op in ops.items():
        if op.type in SHAPE_ONLY or not op.producers:
            continue
        if op.type in PASS_THROUGH:
            if name not in consumed:  # a sink: its source's value leaves the graph here
                edges[name] = (source(op.producers[0]),)
            continue
        edges[name] = tuple(source(p) for p in op.producers)
    graph._edges = (graph.version, edges)  # type: ignore[attr-defined]
    return edges
