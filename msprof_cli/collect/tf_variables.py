"""The variables a traced graph uses: name, shape, dtype, device and what they hold.

GE keeps every TensorFlow variable in the session's variable memory
(docs/formats/device-memory.md 3), so the device's memory plan needs them: the weights, the
optimizer's slots and counters, the other state (BatchNorm moving statistics, metric totals).

Where they come from:

* a `tf.function` graph (`FuncGraph`): the resource handles it captures (`graph.captures`).
  The variables the graph tracks (`graph.variables`) give name, shape, dtype and `trainable`;
  a captured handle of a variable the graph does not track (the legacy Keras optimizers'
  slots) gives its shape and dtype from the handle data TensorFlow attaches to it.
* a TF1 graph: its `variables` and `local_variables` collections.

What a variable holds (`role`), in this order:
1. trainable: a weight;
2. fed to an optimizer's apply op (`ResourceApplyAdam`, `ApplyMomentum`...) at an input other
   than the first (the first is the variable being updated): an optimizer slot;
3. a name whose scope or leaf is an optimizer's (Keras 3 `adam/dense_kernel_momentum`,
   `sgd/iteration`; Keras 2 `SGD/m/dense/kernel`, `Adam/iter`; TF1 `dense/kernel/Momentum`):
   optimizer state;
4. anything else: state.
"""
from __future__ import annotations

import re
from typing import Any

from msprof_cli.capture import (VAR_OPTIMIZER, VAR_STATE, VAR_WEIGHT, VariableSpec,
                                in_optimizer_scope)
from msprof_cli.collect.tf_graphs import device_index

MAX_VARIABLES = 100_000  # a runaway graph is truncated rather than stalling the script

# an optimizer slot's or counter's leaf name (Keras 2 `/m`, `/v`, `/vhat`; Keras 3
# `_momentum`, `_velocity`; TF1 `Momentum`, `Adam`, `Adam_1`, `beta1_power`)
_SLOT_LEAF = re.compile(
    r"(?:^|[/_])(?:m|v|vhat|momentum|velocity|velocity_hat|accumulator|accum|accum_update|"
    r"rms|mg|linear|squared_accum|Momentum|Adam(?:_\d+)?|Adagrad|RMSProp(?:_\d+)?|Ftrl(?:_\d+)?|"
    r"beta1_power|beta2_power|iter|iterations|iteration)(?::\d+)?$")
# apply-op types whose inputs 1.. that are resources are slots (TF's training ops)
_APPLY = re.compile(r"^(?:Resource)?(?:Sparse)?Apply")


def graph_variables(graph: Any) -> tuple[VariableSpec, ...]:
    """The variables `graph` uses (module doc); () when none can be read."""
    try:
        if hasattr(graph, "captures"):
            found = _captured(graph)
        else:
            found = _collections(graph)
    except Exception:  # an unusual graph must not lose the capture
        return ()
    slots = _slot_names(graph)
    out = []
    for name, shape, dtype, trainable, dev, inner in found[:MAX_VARIABLES]:
        out.append(VariableSpec(name=name, shape=shape, dtype=dtype,
                                role=_role(name, dtype, trainable, inner in slots), device=dev))
    return tuple(out)


def _role(name: str, dtype: str, trainable: bool, slot: bool) -> str:
    if trainable and dtype.startswith(("float", "bfloat", "half", "complex")):
        return VAR_WEIGHT  # (Keras 2's int64 step counter is "trainable")
    if slot or in_optimizer_scope(name) or "/" in name and _SLOT_LEAF.search(name):
        return VAR_OPTIMIZER
    return VAR_STATE


def _dims(shape: Any) -> tuple[int, ...]:
    try:
        return tuple(-1 if d is None else int(d) for d in shape.as_list())
    except Exception:  # unknown rank
        return ()


def _dtype(dtype: Any) -> str:
    name = getattr(dtype, "name", str(dtype))
    return name[:-4] if name.endswith("_ref") else name


def _captured(graph: Any) -> list[tuple]:
    """(name, shape, dtype, trainable, device, inner op name) per captured resource."""
    tracked = {}
    for v in getattr(graph, "variables", ()) or ():
        try:
            tracked[id(v.handle)] = v
        except Exception:
            continue
    out = []
    for outer, inner in list(graph.captures):
        if getattr(inner.dtype, "name", "") != "resource":
            continue
        v = tracked.get(id(outer))
        if v is not None:
            out.append((v.name, _dims(v.shape), _dtype(v.dtype), bool(v.trainable),
                        device_index(getattr(v, "device", "") or ""), inner.op.name))
            continue
        spec = _handle_spec(outer) or _handle_spec(inner)
        if spec is None:
            continue  # a resource that is no variable (an iterator, a table)
        out.append((inner.op.name, spec[0], spec[1], False,
                    device_index(getattr(outer, "device", "") or ""), inner.op.name))
    return out


def _handle_spec(tensor: Any) -> tuple[tuple[int, ...], str] | None:
    """Shape and dtype of the variable behind a resource handle (its handle data)."""
    try:
        from tensorflow.python.ops import handle_data_util

        data = handle_data_util.get_resource_handle_data(tensor)
    except Exception:
        return None
    if data is None or not data.is_set or not data.shape_and_type:
        return None
    st = data.shape_and_type[0]
    try:
        from tensorflow.python.framework import dtypes

        dtype = dtypes.as_dtype(st.dtype).name
    except Exception:
        return None
    if dtype == "variant":
        return None  # a TensorList / dataset, not a variable
    if st.shape.unknown_rank:
        return (), dtype
    return tuple(-1 if d.size < 0 else int(d.size) for d in st.shape.dim), dtype


def _collections(graph: Any) -> list[tuple]:
    """A TF1 graph's global and local variables."""
    seen: dict[str, tuple] = {}
    trainable = {v.name for v in graph.get_collection("trainable_variables")}
    for coll in ("variables", "local_variables"):
        for v in graph.get_collection(coll):
            if v.name in seen:
                continue
            op = getattr(v, "op", None)
            seen[v.name] = (v.name, _dims(v.shape), _dtype(v.dtype), v.name in trainable,
                            device_index(getattr(v, "device", "") or ""),
                            op.name if op is not None else v.name)
    return list(seen.values())


def _slot_names(graph: Any) -> set[str]:
    """Op names of the resources (or ref variables) an apply op takes at inputs 1..: the
    graph's captured placeholders / variable ops that are optimizer slots."""
    out: set[str] = set()
    try:
        ops = graph.get_operations()
    except Exception:
        return out
    for op in ops:
        if not _APPLY.match(op.type):
            continue
        for t in list(op.inputs)[1:]:
            if getattr(t.dtype, "name", "") in ("resource",) or \
                    getattr(t.dtype, "name", "").endswith("_ref"):
                out.add(_source(t.op).name)
    return out


def _source(op: Any) -> Any:
    """Through the Identity ops between a variable and its use."""
    for _ in range(8):
        if op.type not in ("Identity", "ReadVariableOp") or not op.inputs:
            return op
        op = op.inputs[0].op
    return op
