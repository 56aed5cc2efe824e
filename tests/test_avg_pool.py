"""GE's AvgPoolFusionPass (device/avg_pool.py): a windowed AvgPool gets a (kh, kw, C, 1)
filter and runs as a depthwise convolution on the cube, bound by its im2col; a 1 x 1
stride-1, global or one-column pooling stays a vector kernel."""
from __future__ import annotations

from pathlib import Path

from e2e_runs import collect_and_export

from msprof_cli.capture import TensorSpec as T
from msprof_cli.device.avg_pool import assist_filter
from msprof_cli.device.chip import get_chip
from msprof_cli.device.cost_model import evaluate
from msprof_cli.device.op_table import SignatureRegistry

NHWC = (1, 3, 3, 1)
STRIDE1 = (1, 1, 1, 1)


def test_the_pass_adds_a_filter_to_a_windowed_pooling_only() -> None:
    x = T((32, 35, 35, 192), "float16")
    assert assist_filter(x, x, NHWC, STRIDE1, "NHWC") == T((3, 3, 192, 1), "float16", "HWCN")
    half = T((32, 17, 17, 192), "float16")
    assert assist_filter(x, half, (1, 2, 2, 1), (1, 2, 2, 1), "NHWC").shape == (2, 2, 192, 1)
    nchw = T((32, 192, 35, 35), "float16")
    assert assist_filter(nchw, nchw, (1, 1, 3, 3), STRIDE1, "NCHW").shape == (3, 3, 192, 1)
    assert assist_filter(x, x, (1, 1, 1, 1), STRIDE1, "NHWC") is None  # 1 x 1, stride 1
    one = T((32, 1, 1, 192), "float16")
    assert assist_filter(x, one, (1, 35, 35, 1), STRIDE1, "NHWC") is None  # global
    column = T((32, 17, 1, 192), "float16")
    assert assist_filter(x, column, (1, 2, 35, 1), (1, 2, 1, 1), "NHWC") is None


def test_a_windowed_avg_pool_costs_its_depthwise_convolution() -> None:
    """Inception-v3's 3 x 3 AvgPool over 35 x 35 x 192 at batch 32: a real 910 ran it in
    187.5 us on 16 blocks; as a vector pass over the map it would take a fifth of that."""
    x = T((32, 35, 35, 192), "float16")
    reg = SignatureRegistry()
    cube = reg.intern("AvgPool", (x, T((3, 3, 192, 1), "float16")), (x,), 0)
    vector = reg.intern("AvgPool", (x,), (x,), 0)
    depthwise = reg.intern("DepthwiseConv2dNative", (x, T((3, 3, 192, 1), "float16")), (x,), 0)
    arr = reg.arrays()
    cost = evaluate(arr, get_chip("Ascend910"))
    assert arr["flops"][cube] == arr["flops"][depthwise] > 0 and arr["flops"][vector] == 0
    assert cost.dur_ticks[cube] == cost.dur_ticks[depthwise]
    per_core_us = cost.dur_ticks[cube] / 100 * cost.block_dim[cube] / 16
    assert 0.8 <= per_core_us / 187.5 <= 1.25
    assert cost.dur_ticks[vector] < cost.dur_ticks[cube] / 3


def test_a_keras_average_pooling_runs_on_the_cube(tmp_path: Path) -> None:
    rows, _, _ = collect_and_export(tmp_path, "avg_pool.py")
    pools = {r["Input Shapes"].strip('"') for r in rows if r["OP Type"] == "AvgPool"}
    assert pools == {"16,35,35,64;3,3,64,1", "16,35,35,64;2,2,64,1"}, pools
    windowed = [r for r in rows if r["OP Type"] == "AvgPool"]
    assert all(float(r["mac_ratio"]) > 0 for r in windowed)
    # the global pooling is Keras' mean: a reduction on the vector unit
    assert any(r["OP Type"] == "ReduceMeanD" for r in rows)
