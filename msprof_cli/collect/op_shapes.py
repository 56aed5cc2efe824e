"""The tensor shapes of a step's ops (docs/collect.md, docs/formats/tensorflow-capture.md 7.4).

`attach_shapes` gives an op the static shapes, fusion and placement of its graph's op of the
same name (tf_graphs.resolve); where the graph left the batch dimension unknown (Keras traces
it as -1), `step_batch` finds the batch the step really received from the bytes TF's
iterator delivered, and `with_batch` / `model_batch` put it into the op's and the model's
tensor specs.
"""
from __future__ import annotations

from msprof_cli.capture import DTYPE_BYTES, ModelInfo, OpRun, TensorSpec
from msprof_cli.collect.converter_state import ConverterState
# at import, not at first use: the first use can be the exit flush after a Ctrl-C, where a
# module's dataclasses (exec'd source) reset CPython's unhandled-KeyboardInterrupt flag and
# the script exits 1 instead of 130
from msprof_cli.device.layer_norm_fusion import plan
from msprof_cli.collect.tf_graphs import (DATA_SOURCES, PASS_THROUGH, StaticGraph, data_edges,
                                         lowered_name, replica_of_name, resolve)


def attach_shapes(op: OpRun, static: StaticGraph | None, state: ConverterState,
                  key: str = "") -> None:
    """The op's shapes, fused ops and device from its graph's op of the same name."""
    version = static.version if static is not None else 0
    shape = resolve(static, op.name, op.tf_type,
                    state.shape_caches.setdefault(f"{key}@{version}", {}))
    if shape is not None:
        op.inputs, op.outputs, op.fused_ops = shape.inputs, shape.outputs, shape.fused_ops
    if state.dropout == "npu":
        from msprof_cli.device.npu_dropout import migrated_type

        op.tf_type = migrated_type(op.name, op.tf_type)
    if static is not None:
        fused = layer_norm_plan(static)
        rewrite = fused.get(op.name) or fused.get(lowered_name(op.name)) if fused else None
        if rewrite is not None:  # GE's LayerNorm fusion (docs/device-model.md 3.5)
            op.tf_type = rewrite.tf_type
            if rewrite.inputs or rewrite.outputs:
                op.inputs, op.outputs, op.fused_ops = rewrite.inputs, rewrite.outputs, ()
    if static is not None and op.name in static.host_pinned():
        # pinned to the CPU by the script: the TF adapter runs it on the host
        op.tf_type = host_pinned_type(op.tf_type)
    # replica = the op's placement; else MirroredStrategy's `replica_N/` scope; else device 0
    dev = shape.device if shape is not None else -1
    if dev < 0:
        dev = replica_of_name(op.name)
    op.device_id = max(dev, 0)


def layer_norm_plan(static: StaticGraph) -> dict:
    """What GE's LayerNorm training fusion makes of the graph's ops (op name -> Rewrite,
    device/layer_norm_fusion.py), cached on the graph per version."""
    cached = getattr(static, "_layer_norm", None)
    if cached is not None and cached[0] == static.version:
        return cached[1]
    ops = static.ops
    # the edges GE sees: no pass-through node (one the runtime graph bypassed stays in the
    # walked graph as a consumer of its source)
    edges = {n: p for n, p in data_edges(static).items() if ops[n].type not in PASS_THROUGH}
    got = plan({n: o.type for n, o in ops.items()}, edges,
               {n: o.inputs for n, o in ops.items()}, {n: o.outputs for n, o in ops.items()})
    static._layer_norm = (static.version, got)  # type: ignore[attr-defined]
    return got


def host_pinned_type(tf_type: str) -> str:
    from msprof_cli.device.op_map import HOST_PINNED_PREFIX

    return tf_type if tf_type.startswith(HOST_PINNED_PREFIX) else HOST_PINNED_PREFIX + tf_type


def has_unknown(op: OpRun) -> bool:
    return specs_unknown(op.inputs, op.outputs)


def specs_unknown(inputs: tuple[TensorSpec, ...], outputs: tuple[TensorSpec, ...]) -> bool:
    """Whether any dimension of these specs is unknown (-1)."""
    return any(d < 0 for t in inputs + outputs for d in t.shape)


def _dtype_size(dtype: str) -> int | None:
    """Bytes per element of a dense dtype (strings and handles have no fixed size here)."""
    return None if dtype in ("string", "resource", "variant") else DTYPE_BYTES.get(dtype)


def step_batch(static: StaticGraph | None, sizes: list[int], state: ConverterState,
               key: str) -> int | None:
    """The batch size a step really received, when its graph left it unknown (Keras traces
    the batch dimension as -1): the bytes of the element TF's iterator delivered
    (`IteratorGetNextOp::DoCompute` element_size) = batch x the bytes of one sample of the
    graph's input tensors (exactly one unknown dimension each).  None if it cannot tell."""
    if static is None or not sizes:
        return None
    feeds = [t for name in static.inputs if (op := static.ops.get(name)) is not None
             and op.type in DATA_SOURCES for t in op.outputs
             if t.dtype not in ("resource", "variant")]
    unknown = [t for t in feeds if any(d < 0 for d in t.shape)]
    if not unknown or any(sum(d < 0 for d in t.shape) != 1 for t in unknown):
        return None
    per_sample = fixed = 0
    for t in feeds:
        size = _dtype_size(t.dtype)
        if size is None:
            return None
        n = size
        for d in t.shape:
            n *= d if d >= 0 else 1
        if t in unknown:
            per_sample += n
        else:
            fixed += n
    for size in sizes:
        batch, rest = divmod(size - fixed, per_sample) if per_sample else (0, 1)
        if rest == 0 and batch > 0:
            state.batches[key] = batch
            return batch
    return None


def model_batch(model: ModelInfo, batch: int, state: ConverterState) -> None:
    """The model's host<->device copies with the real batch (after model_graph's transfers)."""
    probe = OpRun("", "", 0, 0, 0, model.feeds, model.fetches)
    with_batch(probe, batch, state)
    model.feeds, model.fetches = probe.inputs, probe.outputs


def with_batch(op: OpRun, batch: int, state: ConverterState) -> None:
    """Unknown dimensions of a step's op = the batch its input delivered (documented rule,
    docs/collect.md: Keras / tf.data leave only the batch dimension unknown)."""
    if not has_unknown(op):
        return
    k = (op.inputs, op.outputs, batch)
    hit = state.batch_shapes.get(k)
    if hit is None:
        def fix(specs: tuple[TensorSpec, ...]) -> tuple[TensorSpec, ...]:
            return tuple(TensorSpec(tuple(batch if d < 0 else d for d in t.shape), t.dtype,
                                    t.format) if any(d < 0 for d in t.shape) else t
                         for t in specs)
        hit = state.batch_shapes[k] = (fix(op.inputs), fix(op.outputs))
    op.inputs, op.outputs = hit
