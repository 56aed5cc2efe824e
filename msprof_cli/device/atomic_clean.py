"""GE's AtomicAddrClean task (docs/device-model.md 3.4, "Atomic outputs").

A kernel whose cores add their partial results into one output (an atomic add: a filter
gradient summed over the batch's positions, a BatchNorm's per-channel sums) needs that output
zeroed before it runs.  GE's `AtomicAddrCleanPass` (graphengine
`ge/graph/passes/atomic_addr_clean_pass.cc`) inserts an `AtomicAddrClean` node for them: in a
graph without a loop (one step per execution, as TensorFlow runs a `tf.function` or a
session step here) one node at the front of the graph (`AddNodeFront`), named
`atomic_addr_clean` + the graph's session-graph id, with a control edge to every atomic node;
it zeroes all their atomic outputs at once.  (A graph that loops over steps on the device,
`iterations_per_loop` > 1, gets one per atomic node instead: not emulated.)

Which kernels add atomically is decided when TBE compiles them (`atomic_output_index`); the
rules below are the kernels that real 910 profiles show preceded by an AtomicAddrClean every
time (a ResNet-50, an Inception-v3 and a BERT training step of the Huawei-Performance-Model
dataset, docs/device-model.md "Calibration"): every Conv2DBackpropFilter (its fp32 filter
gradient), every convolution + BNTrainingReduce (the two per-channel sums; the one BatchNorm
task of a training BatchNorm here, or its BNTrainingReduce), the BatchNorm gradient's
BNTrainingUpdateGrad (the scale and offset gradients) and UnsortedSegmentSum (a sparse
gradient's dense sum).  Kernels that add atomically only for some shapes there (reductions,
TransData, LayerNorm) are not counted.
"""
from __future__ import annotations

from typing import Sequence

from msprof_cli.capture import TensorSpec
from msprof_cli.device import op_map
from msprof_cli.device.cube_shapes import dims_elems
from msprof_cli.device.op_table import SignatureRegistry

NAME = "atomic_addr_clean"  # GE's NODE_NAME_ATOMIC_ADDR_CLEAN (ge/common/types.cc)
GE_TYPE = "AtomicAddrClean"
SESSION = 0  # the emulated GE session of every graph
FP32 = 4  # the atomic outputs accumulate in fp32
BN_TYPES = ("BatchNorm", "BatchNormGrad")  # op_map's training BatchNorm and its gradient


def atomic_bytes(ge_type: str, training: bool, inputs: Sequence[TensorSpec],
                 outputs: Sequence[TensorSpec]) -> float:
    """Bytes of a node's outputs its kernel adds into atomically (0: none)."""
    if ge_type in ("Conv2DBackpropFilter", "UnsortedSegmentSum") and outputs:
        return FP32 * float(dims_elems(outputs[0].shape))
    if ge_type in BN_TYPES and training and inputs and inputs[0].shape:
        chans = inputs[0].shape[-1]
        return 2.0 * FP32 * (chans if chans is not None and chans > 0 else 1)
    return 0.0


def node_name(model_id: int) -> str:
    """`atomic_addr_clean` + the graph's session-graph id (`<session>_<graph>`)."""
    return f"{NAME}{SESSION}_{model_id}"


def signature(sigs: SignatureRegistry, total_bytes: float) -> int:
    """The clean kernel: it writes zeros over every atomic output (one vector pass)."""
    return sigs.add_features(
        tf_type=GE_TYPE, ge_type=GE_TYPE, kind=op_map.KIND_AI_CORE,
        cost=op_map.COST_VECTOR, flops=0.0, vec_elems=total_bytes / FP32, bytes_in=0.0,
        bytes_out=total_bytes, max_elems=total_bytes / FP32)
