"""What a model (`ModelInfo`) learns from its first traced step and its static graph: the op
order and data edges (UB fusion, FP/BP auto-detection on the device side), the FP and BP ops
(docs/formats/step-trace-and-advice.md 4; project mapping in docs/collect.md) and the host<->device
transfers of a step, feeds and fetches (docs/device-model.md 5.1).
"""
from __future__ import annotations

from msprof_cli.capture import CaptureChunk, ModelInfo, OpRun, TensorSpec
from msprof_cli.collect.tf_graphs import (CALL_OPS, CONTROL_FLOW_OPS, DATA_SOURCES,
                                          StaticGraph, data_edges, lowered_name)
from msprof_cli.device import op_map
from msprof_cli.device.memory import spec_bytes


def learn_model(model: ModelInfo, ops: list[OpRun], static: StaticGraph | None,
                fp_point: str, bp_point: str, chunk: CaptureChunk) -> None:
    """FP/BP ops of a model (docs/formats/step-trace-and-advice.md 4); project mapping in
    docs/collect.md.
    With a static graph also its op order, data edges and transfers (module doc)."""
    if static is not None:
        model.op_order = dict(static.order)
        model.producers = data_edges(static)
        model.variables = static.variables
        ran = {lowered_name(o.name) for o in ops} | {f for o in ops for f in o.fused_ops}
        model.constants = _device_constants(static, model.producers, ran)
    names = {o.name for o in ops}
    if fp_point:
        if fp_point in names or any(fp_point in o.fused_ops for o in ops):
            model.fp_op = fp_point
        else:
            chunk.notes.append("First forward op name can't be found in graph for training "
                               f"trace. ({fp_point!r}, model {model.name})")
    if bp_point:
        if bp_point in names or any(bp_point in o.fused_ops for o in ops):
            model.bp_op = bp_point
        else:
            chunk.notes.append("Last backward op name can't be found in graph for training "
                               f"trace. ({bp_point!r}, model {model.name})")
    if static is None:
        return
    _transfers(model, static)
    order = static.order
    big = len(order) + 1
    # runtime names of ops in lowered While/If bodies carry `/_<N>/`: static names without
    static_name = {o.name: lowered_name(o.name) for o in ops}
    if not fp_point:
        feeds = _data_consumers(static)
        cands = [o for o in ops if (static_name[o.name] in feeds or
                 any(f in feeds for f in o.fused_ops)) and not _host_only(o.tf_type)]
        if cands:
            model.fp_op = min(cands, key=lambda o: order.get(static_name[o.name], big)).name
    if not bp_point:
        # a gradient op that launches a task (one GE folds into a fused kernel, such as a
        # layer norm's, launches none: docs/device-model.md 3.5)
        grads = [o for o in ops if ("gradient" in o.name) and static_name[o.name] in order
                 and _launches(o.tf_type)]
        if grads:
            model.bp_op = max(grads, key=lambda o: order[static_name[o.name]]).name


def _transfers(model: ModelInfo, static: StaticGraph) -> None:
    """Host<->device copies of a step (docs/device-model.md 5.1): feeds = outputs of the graph's
    data sources, except a called body's arguments (they repeat their caller's source);
    fetches = the top-level graph's return values."""
    calls = {n + "/" for n, op in static.ops.items()
             if op.type in CALL_OPS or op.type in CONTROL_FLOW_OPS}
    feeds = []
    for name in sorted(static.inputs, key=lambda n: static.order.get(n, 0)):
        op = static.ops.get(name)
        if op is None or (op.type not in DATA_SOURCES
                          and any(name.startswith(c) for c in calls)):
            continue
        feeds.extend(op.outputs)
    model.feeds = tuple(feeds)
    fetches = [t for t in static.outputs if t.dtype != "variant"]
    if any(t.dtype == "variant" for t in static.outputs):
        # Keras 3 returns its logs wrapped in an Optional (a variant handle): what is copied
        # back are the values the top-level OptionalFromValue ops wrap
        for name, op in static.ops.items():
            if op.type == "OptionalFromValue" and not any(name.startswith(c) for c in calls):
                fetches.extend(t for t in op.inputs if t.dtype not in ("resource", "variant"))
    model.fetches = tuple(fetches)


# data-handling ops that read the input but launch no device task (FP must be a compute op)
_HOST_DATA_OPS = frozenset({"Identity", "Shape", "ShapeN", "Size", "Rank", "StridedSlice"})


def _device_constants(static: StaticGraph, producers: dict[str, tuple[str, ...]],
                      ran: set[str]) -> dict[str, int]:
    """The Const ops whose value a device task of the step (`ran`: the static names of its
    ops) reads, through the nodes GE turns into no-ops, with their bytes: GE copies them into
    the model's weight memory at load (davinci_model.cc, docs/formats/device-memory.md 3).
    A constant only shape arithmetic reads is folded away; one of another fetch of the same
    TF1 graph is not this model's."""
    out: dict[str, int] = {}
    for name, prods in producers.items():
        op = static.ops.get(name)
        if op is None or name not in ran or not _launches(op.type):
            continue
        for p in prods:
            c = static.ops.get(p)
            if c is not None and c.type in _CONST_OPS and p not in out:
                out[p] = sum(_nbytes(t) for t in c.outputs)
    return out


_CONST_OPS = frozenset({"Const", "HostConst"})
_NO_DEVICE_VALUE = frozenset({"string", "resource", "variant"})


def _nbytes(t: TensorSpec) -> int:
    """Bytes of a constant's value (no device tensor for a string, a handle or a variant)."""
    return 0 if t.dtype in _NO_DEVICE_VALUE else spec_bytes(t.shape, t.dtype)


def _launches(tf_type: str) -> bool:
    """Whether an op of this type launches a device task (op_map)."""
    return op_map.map_op(tf_type).kind != op_map.KIND_NONE


def _host_only(tf_type: str) -> bool:
    return tf_type in _HOST_DATA_OPS or tf_type.startswith(("Optional", "Iterator"))


def _data_consumers(static: StaticGraph) -> set[str]:
    """Ops reading the graph's input data (directly or through untraced host ops)."""
    sources = set(static.inputs)
    out: set[str] = set()
    passthrough = {"Identity", "Cast", "Reshape", "ExpandDims", "Squeeze", "OptionalGetValue",
                   "OptionalFromValue"}
    for _ in range(3):
        grew = False
        for name, op in static.ops.items():
            if any(p in sources for p in op.producers):
                if op.type in passthrough and name not in sources:
                    sources.add(name)
                    grew = True
                out.add(name)
        if not grew:
            break
    return out
