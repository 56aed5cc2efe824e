"""The bytes a sparse op really moves (docs/device-model.md 3, "Sparse ops").

A gather, a scatter into a variable or a sparse optimizer update touches only the rows its
indices select: an embedding lookup of 128 ids reads 128 rows of a 50000-row table, a
`ScatterSub` of 128 rows read-modify-writes 128 rows.  Charging the whole table (its input
tensor's size) made a 128-row update cost as much as a pass over all 10 M elements.  Here the
table-shaped inputs are charged for the rows touched:

* gather (`sparse_ops.ACCESS_GATHER`): input 0 moves the output's bytes (the rows read), the
  indices move in full, the output is written;
* scatter (`ACCESS_SCATTER`, inputs: table, indices, updates): the table moves the updates'
  bytes (the rows read), the updates and indices move in full, the updates' bytes are written
  back (a ref output aliases the table: it is not copied);
* sparse apply (`ACCESS_SPARSE_APPLY`: var, its slots, hyper-parameters, grad, indices): every
  state input (input 0, a resource handle, or a tensor shaped like input 0) reads and writes
  the gradient's bytes;
* dense apply (`ACCESS_DENSE_APPLY`: `ApplyMomentum`, `ResourceApplyAdam`, ...): the same
  rule with the whole gradient.  A resource update has no output and its handles no shape,
  so without it a momentum update of a 4096 x 4096 weight moved its gradient only, a fifth of
  what the kernel moves (reads var, accum and grad, writes var and accum in place).

`work_elems` is the element count the kernel computes on (the updates' or the gradient's), the
vector work and the AI CPU cost scale with it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from msprof_cli.capture import TensorSpec
from msprof_cli.device import sparse_ops

HANDLE_DTYPES = frozenset({"resource", "variant"})


@dataclass(frozen=True)
class SparseTraffic:
    in_bytes: tuple[float, ...]  # per input, what the task reads of it
    bytes_out: float
    work_elems: float


def sparse_traffic(access: int, inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec],
                   in_elems: Sequence[int], out_elems: Sequence[int],
                   moved: Callable[[str], int]) -> SparseTraffic | None:
    """What a sparse op reads and writes (see the module doc); None for a dense op or
    one whose inputs do not have the expected layout. `moved(dtype)`: bytes per element."""
    if access == sparse_ops.ACCESS_DENSE or not inputs:
        return None
    in_b = [float(e * moved(t.dtype)) for e, t in zip(in_elems, inputs)]
    if access == sparse_ops.ACCESS_GATHER:
        rows = float(sum(e * moved(t.dtype) for e, t in zip(out_elems, outputs)))
        in_b[0] = rows
        return SparseTraffic(tuple(in_b), rows, float(sum(out_elems)))
    if access == sparse_ops.ACCESS_SCATTER:
        if len(inputs) < 3:
            return None
        upd = in_b[-1]
        in_b[0] = upd
        return SparseTraffic(tuple(in_b), upd, float(in_elems[-1]))
    if access == sparse_ops.ACCESS_DENSE_APPLY:
        return _dense_apply(inputs, in_elems, in_b)
    # sparse apply: the gradient is the largest non-state float input
    table = in_elems[0]
    state = [i for i, t in enumerate(inputs)
             if i == 0 or t.dtype in HANDLE_DTYPES or t.dtype.endswith("_ref")
             or (in_elems[i] == table and len(t.shape) == len(inputs[0].shape)
                 and inputs[0].dtype not in HANDLE_DTYPES)]
    grads = [i for i in range(len(inputs)) if i not in state
             and not inputs[i].dtype.startswith("int") and len(inputs[i].shape) > 0]
    if not grads:
        return None
    g = max(grads, key=lambda i: in_elems[i])
    for i in state:
        in_b[i] = in_b[g]
    return SparseTraffic(tuple(in_b), len(state) * in_b[g], float(in_elems[g]))


def _dense_apply(inputs: Sequence[TensorSpec], in_elems: Sequence[int],
                 in_b: list[float]) -> SparseTraffic | None:
    """Var and its slots (resource handles, or the ref tensors shaped like the gradient ahead
    of it) each read and write the gradient's bytes; the gradient is the last of the largest
    float inputs (it follows var, the slots and the hyper-parameters in every Apply op)."""
    floats = [i for i, t in enumerate(inputs) if t.dtype not in HANDLE_DTYPES
              and not t.dtype.startswith(("int", "uint", "bool")) and len(t.shape) > 0]
    if not floats:
        return None
    top = max(in_elems[i] for i in floats)
    g = max(i for i in floats if in_elems[i] == top)
    state = [i for i, t in enumerate(inputs) if i != g and (
        t.dtype in HANDLE_DTYPES or (i < g and i in floats and in_elems[i] == top))]
    if not state:
        return None
    for i in state:
        in_b[i] = in_b[g]
    return SparseTraffic(tuple(in_b), len(state) * in_b[g], float(in_elems[g]))
