"""GE's ReLU with a bit mask (docs/device-model.md 3.4, "ReLU with a bit mask").

GE's graph pass `DreluFusionPass` (canndev `ops/built-in/fusion_pass/graph_fusion/ai_core/
derelu_fusion_pass.cc`) rewrites a `Relu` whose output one `ReluGrad` reads as its features:
the Relu becomes `ReluV2`, which also writes a mask of one bit per element (TBE
`relu_v2.py`: `vrelu`, then `vcmp(x, 0, "gt", "bit")`), and the ReluGrad becomes
`ReluGradV2`, which reads that mask instead of the activations (`relu_grad_v2.py`: one
`vsel`).  A Relu read by more than one ReluGrad keeps its type (the pass returns
NOT_CHANGED), as does one whose last axis is not a multiple of 8 (`relu_v2` rejects it).

A ReLU that Grappler fused on the CPU into the op before it (`_FusedBatchNormEx`,
`_FusedConv2D`: op_map.py) reaches GE as that op and a Relu (the TF 1.15 porting guide's
session config turns Grappler's remapper off: `rewrite_options.remapping =
RewriterConfig.OFF`, hiascend.com TensorFlowCommercial 800 `tfmigr1_000074`), which the 910
fuses back (BNUpdateEltwiseFusionPass, `conv2d_reluv2_pass.cc`): the fused op stays one task
and writes the mask too (EPILOGUE).

So the backward reads 1/16 of what it read (an fp16 activation is 16 bits, its mask 1), and
the forward writes that much more.  In NC1HWC0 (C0 = 16) the mask of a 4-D feature map is
N x C1 x H x W x 2 bytes.  The ReluGradV2 is what the 910's fusion passes fuse into an input
gradient's convolution (ub_fusion.py).
"""
from __future__ import annotations

import math

from msprof_cli.capture import TensorSpec
from msprof_cli.device import op_map
from msprof_cli.device.cube_shapes import dims_elems
from msprof_cli.device.op_table import SignatureRegistry, tensor_records

RELU, RELU_GRAD = "Relu", "ReluGrad"
RELU_V2, RELU_GRAD_V2 = "ReluV2", "ReluGradV2"
RETYPE = {RELU: RELU_V2, RELU_GRAD: RELU_GRAD_V2}
EPILOGUE = "ReluV2 epilogue"  # a fused op whose ReLU gets the mask: keeps its own GE type
FEATURES_INPUT = 1  # ReluGrad(gradients, features)
# vector instructions per element (the TBE computes above)
VECTOR_OPS = {RELU_V2: 2.0, RELU_GRAD_V2: 1.0, EPILOGUE: 1.0}
C0 = 16  # fp16 channels per NC1HWC0 block: the mask's bits per block


def pairs(features_of: dict[str, str | None], ge_type: dict[str, str],
          shapes: dict[str, tuple[int | None, ...]], fused: set[str]) -> dict[str, str]:
    """The nodes the pass retypes (name -> new GE type, or EPILOGUE).  `features_of`: each
    ReluGrad node -> the node its features input reads (None: unknown); `shapes`: each
    node's first output shape; `fused`: the Grappler-fused ops."""
    readers: dict[str, list[str]] = {}
    for grad, src in features_of.items():
        if src is not None and (ge_type.get(src) == RELU or src in fused):
            readers.setdefault(src, []).append(grad)
    out: dict[str, str] = {}
    for relu, grads in readers.items():
        shape = shapes.get(relu, ())
        if len(grads) != 1 or not _supported(shape):
            continue
        out[relu] = RELU_V2 if ge_type.get(relu) == RELU else EPILOGUE
        out[grads[0]] = RELU_GRAD_V2
    return out


def is_fused_norm(tf_type: str) -> bool:
    """Grappler's BatchNorm + activation (`_FusedBatchNormEx`, oneDNN `_MklNative...`): the
    op map runs it as its BatchNorm, the activation not counted."""
    return tf_type.endswith("FusedBatchNormEx")


def _supported(shape: tuple[int | None, ...]) -> bool:
    if not shape or any(d is None or d < 0 for d in shape):
        return False  # the pass skips unknown shapes
    return len(shape) == 4 or shape[-1] % 8 == 0  # 4-D: NC1HWC0, C0 = 16


def mask_spec(shape: tuple[int, ...]) -> TensorSpec:
    """The mask of a ReLU of output `shape` (TensorFlow's NHWC or ND), as uint8 bytes."""
    if len(shape) == 4:
        return TensorSpec((*shape[:3], math.ceil(shape[3] / C0) * C0 // 8), "uint8")
    return TensorSpec((*shape[:-1], math.ceil(shape[-1] / 8)), "uint8")


def retyped(sigs: SignatureRegistry, s: int, ge_type: str) -> int:
    """Signature `s` (a Relu, a fused op with a ReLU epilogue, a ReluGrad) as the pass leaves
    it: ReluV2 (and the epilogue) also writes the mask; ReluGradV2 reads the mask where it
    read the features."""
    ins, outs = sigs.specs[s]
    elems = sigs.max_elems[s]
    bytes_in, bytes_out, in_bytes = sigs.bytes_in[s], sigs.bytes_out[s], sigs.in_bytes[s]
    vec = VECTOR_OPS[ge_type] * elems
    if ge_type in (RELU_V2, EPILOGUE):
        mask = mask_spec(outs[0].shape) if outs else TensorSpec((1,), "uint8")
        outs = (*outs, mask) if ge_type == EPILOGUE else (*outs[:1], mask)
        bytes_out += float(dims_elems(mask.shape))
        if ge_type == EPILOGUE:  # the op's own work, plus the compare (and the ReLU itself
            # where the op map did not count a fused epilogue)
            vec += sigs.vec_elems[s] + (0.0 if sigs.n_fused[s] else elems)
            ge_type = sigs.ge_type[s]
    else:
        shape = ins[FEATURES_INPUT].shape if len(ins) > FEATURES_INPUT else ()
        mask = mask_spec(shape) if shape else TensorSpec((1,), "uint8")
        old = in_bytes[FEATURES_INPUT] if len(in_bytes) > FEATURES_INPUT else 0.0
        bytes_in = bytes_in - old + float(dims_elems(mask.shape))
        if len(in_bytes) > FEATURES_INPUT:
            in_bytes = (*in_bytes[:FEATURES_INPUT], float(dims_elems(mask.shape)),
                        *in_bytes[FEATURES_INPUT + 1:])
        ins = (*ins[:FEATURES_INPUT], mask, *ins[FEATURES_INPUT + 1:])
    idx = sigs.add_features(
        tf_type=sigs.tf_type[s], ge_type=ge_type, kind=op_map.KIND_AI_CORE,
        cost=sigs.cost[s], flops=sigs.flops[s], vec_elems=vec,
        bytes_in=bytes_in, bytes_out=bytes_out, max_elems=elems,
        dtype_class=sigs.dtype_class[s], dtype_bytes=sigs.dtype_bytes[s],
        n_fused=sigs.n_fused[s], tensors=tensor_records(ins, outs), in_bytes=in_bytes)
    sigs.specs[idx] = (ins, outs)
    return idx
