"""GE's AvgPoolFusionPass: a windowed AvgPool runs as a depthwise convolution on the cube.

canndev `ops/built-in/fusion_pass/graph_fusion/ai_core/avg_pool_pass.cc` (public mirror
github.com/dengguojie/vue-element-admin@3f8601f6ee7a) gives a TensorFlow `AvgPool` a constant
filter input of shape (C, 1, kh, kw) holding 1/(kh*kw), and TBE's `avg_pool.py` computes it
with `conv2d_compute(..., groups=C)`: the depthwise convolution of docs/device-model.md 3.
The pass leaves the pooling alone (a vector reduction) when its window is 1 x 1 with stride 1
or when the pooling is global or its output one column wide.  Collect calls `assist_filter`
with the op's attributes (the capture carries shapes, not attributes), so the device sees
the task GE builds: the feature map and the filter, as a `DepthwiseConv2dNative` has them.
"""
from __future__ import annotations

from typing import Sequence

from msprof_cli.capture import TensorSpec

POOL_TYPES = frozenset({"AvgPool"})  # TensorFlow's op type, and GE's


def runs_on_cube(ge_type: str, inputs: Sequence[TensorSpec]) -> bool:
    """An AvgPool task that carries GE's filter (input 1): costed as a depthwise convolution."""
    return ge_type in POOL_TYPES and len(inputs) == 2 and len(inputs[1].shape) == 4


def assist_filter(x: TensorSpec, y: TensorSpec, ksize: Sequence[int], strides: Sequence[int],
                  data_format: str) -> TensorSpec | None:
    """The filter GE adds to a windowed AvgPool, HWCN like a depthwise filter (kh, kw, C, 1);
    None where the pass leaves the pooling a vector kernel."""
    if len(x.shape) != 4 or len(y.shape) != 4 or len(ksize) != 4 or len(strides) != 4:
        return None
    h, w, c = (1, 2, 3) if data_format != "NCHW" else (2, 3, 1)
    kh, kw = int(ksize[h]), int(ksize[w])
    if kh == 1 and kw == 1 and int(strides[h]) == 1 and int(strides[w]) == 1:
        return None
    if y.shape[w] == 1 or (kh == x.shape[h] and kw == x.shape[w]):
        return None  # global pooling, or an output one column wide
    if x.shape[c] < 1:
        return None  # channels unknown: no filter to size
    return TensorSpec(shape=(kh, kw, int(x.shape[c]), 1), dtype=x.dtype, format="HWCN")
