"""What a task's tensors occupy on the device and what a cube task computes: convolution
feature maps in NC1HWC0 and filters in FRACTAL_Z, matmul operands in FRACTAL_NZ, FLOPs on the
padded fractals (docs/device-model.md 3, "Fractal layouts"; fractal.py has the blocks).
"""
from __future__ import annotations

from typing import Sequence

from msprof_cli.capture import TensorSpec
from msprof_cli.device import fractal as FR
from msprof_cli.device import op_map

DEFAULT_DIM = 32  # a dimension captured as -1 (unknown) counts as 32 elements in the cost model


def dims_elems(shape: Sequence[int]) -> int:
    """Element count with unknown (-1 / None) dims replaced by DEFAULT_DIM; scalar = 1."""
    n = 1
    for d in shape:
        n *= DEFAULT_DIM if d is None or d < 0 else d
    return n


CONV_COSTS = (op_map.COST_CONV, op_map.COST_CONV_BP_INPUT, op_map.COST_CONV_BP_FILTER,
              op_map.COST_DEPTHWISE)


def filter_index(cost: int, tf_type: str) -> tuple[str, int]:
    """Where a convolution's filter is: ("in", i) or ("out", 0); the others are feature maps
    (TF: Conv2D(x, filter), Conv2DBackpropInput(sizes, filter, dy), Conv2DBackpropFilter(x,
    sizes, dy) -> dW, and the same for the depthwise ones)."""
    if cost == op_map.COST_CONV_BP_FILTER or (cost == op_map.COST_DEPTHWISE
                                              and "BackpropFilter" in tf_type):
        return ("out", 0)
    return ("in", 1)


def device_elems(cost: int, tf_type: str, inputs: tuple[TensorSpec, ...],
                  outputs: tuple[TensorSpec, ...]) -> tuple[list[int], list[int]]:
    """Elements of each input and output as the device holds them: a convolution's 4-D
    feature maps in NC1HWC0 and its filter in FRACTAL_Z, a matmul's operands in FRACTAL_NZ
    (fractal.py); every other tensor as TF shapes it."""
    if cost in CONV_COSTS:
        where = filter_index(cost, tf_type)
        depthwise = cost == op_map.COST_DEPTHWISE

        def conv(t: TensorSpec, role: tuple[str, int]) -> int:
            if len(t.shape) != 4:
                return dims_elems(t.shape)
            is_filter = role == where
            return int(FR.padded_elems(t.shape, DEFAULT_DIM, filt=is_filter,
                                       depthwise_filter=is_filter and depthwise))
        return ([conv(t, ("in", i)) for i, t in enumerate(inputs)],
                [conv(t, ("out", i)) for i, t in enumerate(outputs)])
    if cost == op_map.COST_MATMUL:
        def nz(t: TensorSpec) -> int:
            if len(t.shape) < 2:
                return dims_elems(t.shape)
            d = [DEFAULT_DIM if x is None or x < 0 else x for x in t.shape]
            lead = 1
            for x in d[:-2]:
                lead *= x
            return int(lead * FR.pad(d[-2]) * FR.pad(d[-1]))
        return [nz(t) for t in inputs], [nz(t) for t in outputs]
    return [dims_elems(t.shape) for t in inputs], [dims_elems(t.shape) for t in outputs]


def cube_flops(cost: int, tf_type: str, inputs: tuple[TensorSpec, ...],
                outputs: tuple[TensorSpec, ...], out_total: float, k_block: int) -> float:
    """FLOPs (2 per multiply-add) of cube ops as the cube runs them: on padded fractals
    (fractal.py), a depthwise convolution C0 multiply-adds per useful one; independent of
    transpose / data-format attributes (channels last)."""
    out = outputs[0].shape if outputs else ()
    if cost == op_map.COST_MATMUL:
        if not inputs or not outputs:
            return 2.0 * out_total * DEFAULT_DIM
        return 2.0 * FR.matmul_macs(inputs[0].shape, out, DEFAULT_DIM, k_block)
    if cost not in CONV_COSTS:
        return 0.0
    where = filter_index(cost, tf_type)
    specs = inputs if where[0] == "in" else outputs
    filt = specs[where[1]].shape if len(specs) > where[1] else ()
    if len(filt) != 4:  # no filter shape: a 3x3 convolution over DEFAULT_DIM channels
        return 2.0 * out_total * 9 * DEFAULT_DIM
    kh, kw, c_in, c_mult = (DEFAULT_DIM if d is None or d < 0 else d for d in filt)
    # the feature map that spans the cube's M side: the output of a forward conv or of a
    # backprop-input (dx: stride > 1 dilates dy to dx's size), dy of a backprop-filter
    if where[0] == "out":
        fmap = inputs[2].shape if len(inputs) >= 3 else out
    else:
        fmap = out
    m = FR.positions(fmap, DEFAULT_DIM)
    if cost == op_map.COST_DEPTHWISE:
        # [C1, kh, kw, Co = 16, C0] blocks: K = kh x kw x C0 for each padded channel
        return 2.0 * m * kh * kw * FR.C0 * FR.pad(c_in * c_mult)
    return 2.0 * FR.conv_macs(m, (kh, kw), c_in, c_mult, k_block)
