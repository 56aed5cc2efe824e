"""The Da Vinci cube's data layouts: what a matrix or convolution task really computes and
moves (docs/device-model.md 3, "Fractal layouts").

The cube multiplies 16 x 16 fractals (fp16; int8: 16 x 32): every operand of a cube task is
stored and fed in those blocks, so each matrix dimension is padded up to a multiple of the
block.  Feature maps of convolutions are NC1HWC0 ("5HD": C split into C1 blocks of C0 = 16
channels), filters FRACTAL_Z (Cin and Cout both in blocks of 16), matmul operands FRACTAL_NZ
(both dimensions in blocks of 16).  So a first convolution over 3 input channels computes and
moves 16, a 1000-class head computes 1008 columns.  Sources: the CANN TBE operator sources
(`te_compute/depthwise_conv2d_compute.py`, `conv2d_compute.py`: im2col into (M = Ho*Wo padded
to 16) x (K = kh*kw*C1*C0) fractals against a (K x Cout padded to 16) filter) and the Ascend
format documentation (NC1HWC0, FRACTAL_Z, FRACTAL_NZ).

A depthwise convolution also runs on the cube there: its filter is laid out as a C0 x C0 block
per group of 16 channels (`[C1, H, W, Co = 16, C0]`) with the channel's weight on the
diagonal, so each output element costs kh*kw*C0 multiply-adds of which kh*kw are useful.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

C0 = 16  # channels per block of NC1HWC0, fractal side (fp16)
C0_INT8 = 32  # the K side of an int8 fractal


def pad(n: float, block: int = C0) -> float:
    """`n` rounded up to a multiple of `block` (an unknown or empty dim stays)."""
    return float(math.ceil(n / block) * block) if n > 0 else n


def _dims(shape: Sequence[int], default: int) -> list[int]:
    return [default if d is None or d < 0 else int(d) for d in shape]


def matmul_macs(a: Sequence[int], out: Sequence[int], default: int, k_block: int) -> float:
    """Multiply-adds of a (batched) matmul on padded fractals: batch x pad(M) x pad(K) x
    pad(N); `a` is the first operand (its last two dims are M and K in either order), `out`
    the result (its last dim N)."""
    a_, o = _dims(a, default), _dims(out, default)
    if len(a_) < 2 or not o:
        return 0.0
    batch = math.prod(a_[:-2]) if len(a_) > 2 else 1
    m, k = (a_[-2], a_[-1])
    # the transpose flags are not captured: pad both with the larger block
    return float(batch) * pad(m, C0) * pad(k, k_block) * pad(o[-1], C0)


def conv_macs(spatial_out: float, kernel: Sequence[int], c_in: float, c_out: float,
              k_block: int) -> float:
    """Multiply-adds of a convolution as the cube runs it: M = the output positions (padded
    to 16 per image: `spatial_out` is already N x pad(Ho*Wo)), K = kh x kw x pad(Cin), N =
    pad(Cout)."""
    kh, kw = (kernel[0], kernel[1]) if len(kernel) >= 2 else (3, 3)
    return spatial_out * kh * kw * pad(c_in, k_block) * pad(c_out, C0)


def positions(shape: Sequence[int], default: int) -> float:
    """N x pad(H*W) of an NHWC feature map (the cube's M side)."""
    d = _dims(shape, default)
    if len(d) != 4:
        return float(math.prod(d[:-1])) if d else 1.0
    return float(d[0]) * pad(d[1] * d[2], C0)


def padded_elems(shape: Sequence[int], default: int, filt: bool = False,
                 depthwise_filter: bool = False) -> float:
    """Elements a 4-D NHWC feature map (C padded to C0) or an HWIO filter (Cin and Cout
    padded; a depthwise filter is C0 wide per channel block) occupies on the device."""
    d = _dims(shape, default)
    if len(d) != 4:
        return float(math.prod(d)) if d else 1.0
    if depthwise_filter:  # [kh, kw, C, multiplier] -> [C1, kh, kw, Co = 16, C0]
        return d[0] * d[1] * pad(d[2] * d[3], C0) * C0
    if filt:
        return d[0] * d[1] * pad(d[2], C0) * pad(d[3], C0)
    return d[0] * d[1] * d[2] * pad(d[3], C0)


def matmul_k(a: Sequence[int], out: Sequence[int], default: int) -> float:
    """The reduced (inner) axis of a matmul whose first operand is `a` and result `out`: of
    a's last two dims, the one that is not M (out's second-to-last); the transpose flags are
    not captured, so when both equal M, a's last."""
    a_, o = _dims(a, default), _dims(out, default)
    if len(a_) < 2 or len(o) < 2:
        return 0.0
    m = o[-2]
    return float(a_[-2] if a_[-1] == m and a_[-2] != m else a_[-1])


# kernels that keep NC1HWC0 on feature maps (canndev, public mirror
# github.com/dengguojie/vue-element-admin@3f8601f6ee7a, `ops/built-in/tbe/impl/`): PadD when
# it pads neither N nor C (`pad_d.py` check_support_5hd); SliceD when its C slice starts on a
# C0 boundary and is a multiple of C0 long or runs to the end (`slice_d.py`
# op_select_format); ConcatV2D when it joins along another axis or every input's C is a
# multiple of C0 (`concat_v2_d.py` op_select_format)
SPATIAL_5HD_TYPES = frozenset({"PadD", "SliceD", "ConcatV2D"})


def keeps_5hd(ge_type: str, in_shapes: Sequence[Sequence[int]], out_shape: Sequence[int]
              ) -> bool:
    """Whether the kernel's NHWC output of NC1HWC0 inputs stays NC1HWC0.  A slice's begin is
    not captured: one whose input and output channel counts are multiples of C0 is taken to
    start on a block boundary (a concatenation's gradient slices do)."""
    maps = [s for s in in_shapes if len(s) == 4]
    if ge_type not in SPATIAL_5HD_TYPES or not maps or len(out_shape) != 4:
        return False
    if ge_type == "PadD":
        return maps[0][0] == out_shape[0] and maps[0][3] == out_shape[3]
    if all(s[3] == out_shape[3] for s in maps):  # whole channels: another axis changes
        return True
    return out_shape[3] % C0 == 0 and all(s[3] % C0 == 0 for s in maps)
