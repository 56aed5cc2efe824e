"""TensorFlow ops GE runs as two kernels (docs/device-model.md 3.4, "Ops GE runs as two
kernels"): the first kernel runs just before the op, reads one of its inputs and feeds it;
the op itself runs under another GE type.

- **A training BatchNorm** is BNTrainingReduce (the sums) + BNTrainingUpdate, and its
  gradient BNTrainingUpdateGrad + BNTrainingReduceGrad.  After a convolution the 910's fusion
  passes fold the reduce into the convolution's epilogue (`tbe_conv_bnreduce_fusion_pass`:
  Conv2D + BNTrainingReduce), which leaves one kernel: the BatchNorm task of the op map
  (docs/device-model.md 2).  The pass matches the "Convolution" op pattern only, which a
  depthwise convolution does not have (TBE gives it "DepthwiseConvolution"): fed by one, or by
  anything else (a concatenation, an add, a Cast), the two kernels run, each reading the
  feature map.
- **A sparse softmax cross-entropy** (`SparseSoftmaxCrossEntropyWithLogits`, which has no AI
  Core kernel of its own on the 910) is OneHotD + SoftmaxCrossEntropyWithLogits: GE's graph
  pass `SparseSoftMaxFusionPass` (canndev `ops/built-in/fusion_pass/graph_fusion/ai_core/
  sparse_softmax_cross_entropy_with_logits_fusion_pass.cc`, registered BUILT_IN_GRAPH_PASS)
  expands the N labels into an N x C one-hot matrix (OneHotD, int32 out, axis -1) that the
  dense kernel reads as its fp16 labels.  So the loss reads and writes N x C more than the
  sparse op would, and the one-hot matrix is a tensor of the graph's feature map.
"""
from __future__ import annotations

from msprof_cli.capture import TensorSpec
from msprof_cli.device import op_map
from msprof_cli.device.cube_shapes import dims_elems
from msprof_cli.device.op_table import SignatureRegistry, tensor_records

BN, BN_GRAD = "BatchNorm", "BatchNormGrad"
SPARSE_XENT = "SparseSoftmaxCrossEntropyWithLogits"
# the input the first kernel reads: FusedBatchNormV3 (x, ...), its grad (dy, x, ...), the
# sparse cross-entropy (logits, labels)
SPLIT_INPUT = {BN: 0, BN_GRAD: 1, SPARSE_XENT: 1}
PARTNER = {BN: "BNTrainingReduce", BN_GRAD: "BNTrainingUpdateGrad", SPARSE_XENT: "OneHotD"}
RETYPE = {BN: "BNTrainingUpdate", BN_GRAD: "BNTrainingReduceGrad",
          SPARSE_XENT: "SoftmaxCrossEntropyWithLogits"}
CONV_FORWARD_TYPES = frozenset({"Conv2D"})
ONE_HOT_BYTES = 4  # OneHotD's int32 output
LABEL_BYTES = 2  # ... which the dense kernel reads as fp16 labels


def splits(ge_type: str, training: bool, fed_by: str | None) -> bool:
    """Whether GE runs an op of `ge_type` as two kernels; `fed_by` = the GE type of the
    producer of the input the first kernel reads (None: not a launched op)."""
    if ge_type == SPARSE_XENT:
        return True
    return training and ge_type in (BN, BN_GRAD) and fed_by not in CONV_FORWARD_TYPES


def _classes(inputs: tuple[TensorSpec, ...]) -> tuple[float, float]:
    """(N, C) of a sparse cross-entropy's 2-D logits (1, 1 when unknown)."""
    shape = inputs[0].shape if inputs else ()
    dims = [d if d is not None and d > 0 else 1 for d in shape]
    return (float(dims[0]), float(dims[-1])) if len(dims) >= 2 else (1.0, 1.0)


def partner(sigs: SignatureRegistry, s: int, inputs: tuple[TensorSpec, ...], kind: str) -> int:
    """The signature of the kernel a split op runs before itself (PARTNER).
    BNTrainingReduce reads x and writes the per-channel sum and square sum;
    BNTrainingUpdateGrad reads dy and x and writes the scale and offset gradients; OneHotD
    reads the labels and writes the N x C one-hot matrix."""
    if kind == PARTNER[SPARSE_XENT]:
        n, c = _classes(inputs)
        labels = inputs[1] if len(inputs) > 1 else TensorSpec((int(n),), "int32")
        return sigs.add_features(
            tf_type=kind, ge_type=kind, kind=op_map.KIND_AI_CORE, cost=op_map.COST_VECTOR,
            flops=0.0, vec_elems=n * c, bytes_in=float(sigs.in_bytes[s][1])
            if len(sigs.in_bytes[s]) > 1 else 4.0 * n, bytes_out=ONE_HOT_BYTES * n * c,
            max_elems=n * c, tensors=tensor_records(
                (labels,), (TensorSpec((int(n), int(c)), "int32"),)))
    x = inputs[SPLIT_INPUT[BN if kind == PARTNER[BN] else BN_GRAD]]
    chans = x.shape[-1] if x.shape and x.shape[-1] and x.shape[-1] > 0 else 1
    sums = (TensorSpec((chans,), "float32"),) * 2
    moved = sigs.in_bytes[s]
    passes = op_map.BN_KERNEL_OPS[kind]
    elems = float(dims_elems(x.shape))
    if kind == PARTNER[BN]:
        ins, b_in = (x,), (moved[0] if moved else sigs.bytes_in[s])
    else:
        ins = tuple(inputs[:2])
        b_in = sum(moved[:2]) if len(moved) >= 2 else sigs.bytes_in[s]
    return sigs.add_features(
        tf_type=kind, ge_type=kind, kind=op_map.KIND_AI_CORE, cost=op_map.COST_VECTOR,
        flops=0.0, vec_elems=passes * elems, bytes_in=float(b_in),
        bytes_out=8.0 * chans, max_elems=elems, dtype_class=sigs.dtype_class[s],
        dtype_bytes=sigs.dtype_bytes[s], tensors=tensor_records(ins, sums))


def retyped(sigs: SignatureRegistry, s: int, ge_type: str) -> int:
    """Signature `s` run under another GE type: the same cost, except that the dense
    cross-entropy reads the N x C one-hot labels where the sparse op read N indices, and a
    split BatchNorm's second kernel does its own share of the vector work."""
    bytes_in, in_bytes = sigs.bytes_in[s], sigs.in_bytes[s]
    vec = sigs.vec_elems[s]
    if ge_type in op_map.BN_KERNEL_OPS:
        first = PARTNER[BN if ge_type == RETYPE[BN] else BN_GRAD]
        own = op_map.BN_KERNEL_OPS[ge_type]
        vec *= own / (own + op_map.BN_KERNEL_OPS[first])
    if ge_type == RETYPE[SPARSE_XENT] and sigs.ge_type[s] == SPARSE_XENT:
        n, c = _classes(sigs.specs[s][0])
        label = LABEL_BYTES * n * c
        old = in_bytes[1] if len(in_bytes) > 1 else 0.0
        bytes_in = bytes_in - old + label
        in_bytes = (*in_bytes[:1], label, *in_bytes[2:])
    idx = sigs.add_features(
        tf_type=sigs.tf_type[s], ge_type=ge_type, kind=sigs.kind[s], cost=sigs.cost[s],
        flops=sigs.flops[s], vec_elems=vec, bytes_in=bytes_in,
        bytes_out=sigs.bytes_out[s], max_elems=sigs.max_elems[s],
        dtype_class=sigs.dtype_class[s], dtype_bytes=sigs.dtype_bytes[s],
        n_fused=sigs.n_fused[s], tensors=sigs.tensors[s], in_bytes=in_bytes)
    sigs.specs[idx] = sigs.specs[s]
    return idx
