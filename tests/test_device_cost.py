"""Unit tests of the emulated device's op map and cost model (msprof_cli.device)."""
from __future__ import annotations

import numpy as np
import pytest

from msprof_cli.capture import TensorSpec as T
from msprof_cli.capture import TensorSpec as TS
from msprof_cli.device import op_map
from msprof_cli.device.chip import ASCEND910, get_chip
from msprof_cli.device.cost_model import evaluate
from msprof_cli.device.op_table import DEFAULT_DIM, SignatureRegistry
from msprof_cli.errors import OptionsError


def costs(*specs):
    """Cost table of signatures given as (tf_type, inputs, outputs[, n_fused])."""
    reg = SignatureRegistry()
    for spec in specs:
        tf_type, ins, outs, *rest = spec
        reg.intern(tf_type, tuple(ins), tuple(outs), rest[0] if rest else 0)
    return reg, evaluate(reg.arrays(), ASCEND910)


def matmul(m, k, n, dtype="float16"):
    return ("MatMul", [T((m, k), dtype), T((k, n), dtype)], [T((m, n), dtype)])


def dur_us(cost, i):
    return cost.dur_ticks[i] * ASCEND910.tick_ns / 1000


@pytest.mark.parametrize("tf_type,ge,kind", [
    ("_MklNativeFusedConv2D", "Conv2D", op_map.KIND_AI_CORE),
    ("_MklNativeFusedMatMul", "MatMulV2", op_map.KIND_AI_CORE),
    ("_FusedMatMul", "MatMulV2", op_map.KIND_AI_CORE),
    ("_MklMatMul", "MatMulV2", op_map.KIND_AI_CORE),
    ("_MklNativeFusedBatchNormV3", "BatchNorm", op_map.KIND_AI_CORE),
    ("Softmax", "SoftmaxV2", op_map.KIND_AI_CORE),
    ("AddV2", "Add", op_map.KIND_AI_CORE),
    ("ResourceApplyAdam", "ApplyAdamD", op_map.KIND_AI_CORE),
    ("Conv2DBackpropFilter", "Conv2DBackpropFilter", op_map.KIND_AI_CORE),
    ("RandomUniform", "RandomUniform", op_map.KIND_AI_CPU),
    ("Unique", "Unique", op_map.KIND_AI_CPU),
    ("NonMaxSuppressionV5", "NonMaxSuppressionV5", op_map.KIND_AI_CPU),
    ("NoOp", "NoOp", op_map.KIND_NONE),
    ("ReadVariableOp", "ReadVariableOp", op_map.KIND_NONE),
    ("_Arg", "_Arg", op_map.KIND_NONE),
    ("IteratorGetNext", "IteratorGetNext", op_map.KIND_NONE),
    ("TensorListPushBack", "TensorListPushBack", op_map.KIND_NONE),  # a loop's accumulators
    ("TensorListPopBack", "TensorListPopBack", op_map.KIND_NONE),
    ("CollectiveReduceV2", "HcomAllReduce", op_map.KIND_HCCL),
    ("SomethingNew", "SomethingNew", op_map.KIND_AI_CORE),
])
def test_op_map(tf_type, ge, kind):
    m = op_map.map_op(tf_type)
    assert (m.ge_type, m.kind) == (ge, kind)


def test_normalize_keeps_real_tf_ops():
    assert op_map.normalize_tf_type("_MklNativeFusedConv2D") == ("Conv2D", True)
    assert op_map.normalize_tf_type("_MklNativeFusedBatchNormV3") == ("FusedBatchNormV3", False)
    assert op_map.normalize_tf_type("MatMul") == ("MatMul", False)
    assert op_map.map_op("NcclAllReduce").allreduce
    assert not op_map.map_op("CollectiveGatherV2").allreduce


def test_chip_lookup_and_device_info():
    assert get_chip("ascend910") is ASCEND910
    with pytest.raises(OptionsError, match="Ascend910"):
        get_chip("Ascend310")
    info = ASCEND910.device_info(3)
    assert info["id"] == 3 and info["ai_core_num"] == 32 and info["aic_frequency"] == "1000"
    assert info["hwts_frequency"] == "100" and info["aiv_num"] == 0
    assert ASCEND910.cube_flops_per_cycle == 8192


def test_string_tensors_run_on_aicpu():
    reg, _ = costs(("Cast", [T((4,), "string")], [T((4,), "float32")]))
    assert reg.kind[0] == op_map.KIND_AI_CPU


def test_matmul_flops_ignore_transpose():
    reg, _ = costs(matmul(64, 784, 256),
                   ("MatMul", [T((784, 64), "float16"), T((256, 784), "float16")],
                    [T((64, 256), "float16")]))
    assert reg.flops[0] == reg.flops[1] == 2 * 64 * 784 * 256


def test_conv_flops():
    reg, _ = costs(("Conv2D", [T((8, 56, 56, 64), "float16"), T((3, 3, 64, 128), "float16")],
                    [T((8, 56, 56, 128), "float16")]))
    assert reg.flops[0] == 2 * 8 * 56 * 56 * 128 * 3 * 3 * 64


def test_matmul_8x_flops_takes_8x_when_compute_bound():
    reg, c = costs(matmul(4096, 4096, 4096), matmul(8192, 4096, 8192))
    assert reg.flops[1] == 4 * reg.flops[0]
    reg, c = costs(matmul(2048, 4096, 4096), matmul(4096, 8192, 8192))
    assert reg.flops[1] == 8 * reg.flops[0]
    assert c.block_dim.tolist() == [32, 32]
    ratio = dur_us(c, 1) / dur_us(c, 0)
    assert 7.5 < ratio < 8.2
    assert c.ratio("cube")[1] > 0.8  # compute bound


def test_durations_monotonic_in_size():
    sizes = [16, 64, 256, 1024, 4096]
    _, c = costs(*[matmul(s, s, s) for s in sizes])
    assert np.all(np.diff(c.dur_ticks) >= 0) and c.dur_ticks[-1] > c.dur_ticks[0]
    _, c = costs(*[("Relu", [T((s, s), "float32")], [T((s, s), "float32")]) for s in sizes])
    assert np.all(np.diff(c.dur_ticks) >= 0) and c.dur_ticks[-1] > 10 * c.dur_ticks[2]


def test_memory_to_compute_crossover():
    """Skinny matmuls (low arithmetic intensity) are MTE2 bound, square ones cube bound."""
    _, c = costs(matmul(16, 8192, 16), matmul(4096, 4096, 4096))
    assert c.ratio("mte2")[0] > c.ratio("cube")[0]
    assert c.ratio("cube")[1] > c.ratio("mte2")[1]
    # element-wise ops never use the cube
    _, c = costs(("AddV2", [T((1024, 1024), "float32")] * 2, [T((1024, 1024), "float32")]))
    assert c.cube[0] == 0 and c.vec[0] > 0


def test_reads_and_writes_share_the_memory_bandwidth():
    """A memory-bound element-wise op moves its whole traffic at no more than the chip's
    bandwidth (for a working set far beyond L2 the 965 GB/s a streaming kernel sustains of
    the HBM's 1.2 TB/s): reads and writes do not each get the full bandwidth."""
    n = 64 * 1024 * 1024  # 128 MiB fp16 in, 128 MiB out: L2 hits ~0.1
    _, c = costs(("Relu", [T((n,), "float16")], [T((n,), "float16")]))
    moved = 2 * n * 2
    seconds = dur_us(c, 0) * 1e-6
    sustained = ASCEND910.hbm_bytes_per_s * ASCEND910.hbm_efficiency
    assert moved / seconds <= sustained * 1.3  # the L2 hits help a little
    assert moved / seconds >= sustained * 0.9


def test_block_dim_limits():
    _, c = costs(("Relu", [T((4,), "float32")], [T((4,), "float32")]),
                 ("Relu", [T((1 << 26,), "float32")], [T((1 << 26,), "float32")]),
                 matmul(8, 8, 8), matmul(8192, 8192, 8192),
                 ("RandomUniform", [T((2,), "int32")], [T((64, 64), "float32")]),
                 ("NoOp", [], []))
    assert c.block_dim.tolist() == [1, 32, 1, 32, 1, 0]
    assert np.all(c.block_dim <= ASCEND910.ai_core_num)
    assert c.dur_ticks[-1] == 0 and np.all(c.dur_ticks[:-1] >= 1)


def test_total_cycles_convention():
    _, c = costs(matmul(1024, 1024, 1024), ("Relu", [T((100,), "float32")],
                                            [T((100,), "float32")]))
    cyc_per_tick = ASCEND910.aic_mhz / ASCEND910.hwts_mhz
    expect = c.dur_ticks * cyc_per_tick * c.block_dim / c.waves
    assert np.array_equal(c.total_cycles, expect.astype(np.uint64))
    for pipe in ("cube", "vec", "scalar", "mte1", "mte2", "mte3"):
        r = c.ratio(pipe)
        assert np.all((r >= 0) & (r <= 1))


def test_unknown_dims_use_default():
    reg, c = costs(("Relu", [T((-1, 128), "float32")], [T((-1, 128), "float32")]),
                   ("Relu", [T((DEFAULT_DIM, 128), "float32")],
                    [T((DEFAULT_DIM, 128), "float32")]))
    assert reg.bytes_in[0] == reg.bytes_in[1] == DEFAULT_DIM * 128 * 4
    assert c.dur_ticks[0] == c.dur_ticks[1]


def test_deterministic():
    specs = [matmul(100, 200, 300), ("Softmax", [T((32, 1000), "float32")],
                                     [T((32, 1000), "float32")]),
             ("_MklNativeFusedConv2D", [T((8, 28, 28, 32), "float32"),
                                        T((3, 3, 32, 64), "float32")],
              [T((8, 28, 28, 64), "float32")], 2)]
    _, a = costs(*specs)
    _, b = costs(*specs)
    for name in ("dur_ticks", "block_dim", "total_cycles", "cube", "vec", "mte2"):
        assert np.array_equal(getattr(a, name), getattr(b, name))


def test_fused_epilogue_costs_vector_time():
    conv = ("Conv2D", [T((8, 28, 28, 32), "float32"), T((3, 3, 32, 64), "float32")],
            [T((8, 28, 28, 64), "float32")])
    reg, c = costs(conv, (*conv, 2))
    assert c.vec[1] > c.vec[0] > 0  # the epilogue on top of the 910's output drain
    assert c.dur_ticks[1] >= c.dur_ticks[0]


def test_pmu_counters_per_signature_equal_per_task():
    """event_counters / l2_counters compute once per distinct signature: every task's
    counters are the ones it gets computed on its own."""
    from msprof_cli.device.pmu import event_counters, l2_counters
    from msprof_cli.options import AIC_METRIC_EVENTS, L2_CACHE_EVENTS

    reg, cost = costs(matmul(64, 128, 32), matmul(8, 8, 8, "float32"),
                      ("Relu", [T((32, 64), "float32")], [T((32, 64), "float32")]),
                      ("Add", [T((7, 3), "float16")] * 2, [T((7, 3), "float16")]),
                      ("Conv2D", [T((2, 8, 8, 3), "float32"), T((3, 3, 3, 16), "float32")],
                       [T((2, 6, 6, 16), "float32")]))
    tasks = np.random.default_rng(5).integers(0, len(reg), 300)
    sig = reg.arrays()
    for events in AIC_METRIC_EVENTS.values():
        batch = event_counters(cost, tasks, sig, events)
        alone = np.concatenate([event_counters(cost, tasks[i:i + 1], sig, events)
                                for i in range(len(tasks))])
        assert batch.tobytes() == alone.tobytes()
    batch = l2_counters(cost, tasks, sig, 64, L2_CACHE_EVENTS)
    alone = np.concatenate([l2_counters(cost, tasks[i:i + 1], sig, 64, L2_CACHE_EVENTS)
                            for i in range(len(tasks))])
    assert batch.tobytes() == alone.tobytes()


def test_placement_of_input_pipeline_samplers_and_unknown_types() -> None:
    from msprof_cli.device import op_map as OM

    for t in ("DatasetCardinality", "GetOptions", "ComputeBatchSize", "TensorSliceDataset",
              "IteratorGetNext", "AnonymousMultiDeviceIteratorV3"):
        assert OM.map_op(t).kind == OM.KIND_NONE, t
    assert OM.map_op("LogUniformCandidateSampler").kind == OM.KIND_AI_CPU
    unknown = OM.map_op("BesselI0e")
    assert unknown.kind == OM.KIND_AI_CORE and unknown.fallback
    assert not OM.map_op("Conv2D").fallback and not OM.map_op("ScatterSub").fallback


def test_sparse_ops_cost_the_rows_they_touch() -> None:
    """A 128-row gather / scatter / sparse update of a 50000 x 200 table moves the rows, not
    the table: about as fast as a dense op on the rows, far faster than one on the table."""
    from msprof_cli.capture import TensorSpec as TS
    from msprof_cli.device.chip import get_chip
    from msprof_cli.device.cost_model import evaluate
    from msprof_cli.device.op_table import SignatureRegistry

    table, rows, ids = TS((50000, 200), "float32"), TS((128, 200), "float32"), TS((128,), "int32")
    reg = SignatureRegistry()
    dense_table = reg.intern("Square", (table,), (table,), 0)
    dense_rows = reg.intern("Square", (rows,), (rows,), 0)
    gather = reg.intern("GatherV2", (table, ids, TS((), "int32")), (rows,), 0)
    scatter = reg.intern("ScatterSub", (table, ids, rows), (table,), 0)
    res_scatter = reg.intern("ResourceScatterAdd", (TS((), "resource"), ids, rows), (), 0)
    apply = reg.intern("ResourceSparseApplyAdagradV2",
                       (TS((), "resource"), TS((), "resource"), TS((), "float32"),
                        TS((), "float32"), rows, ids), (), 0)
    dur = evaluate(reg.arrays(), get_chip("Ascend910")).dur_ticks
    for sg in (gather, scatter, res_scatter, apply):
        assert dur[sg] < dur[dense_table] / 5, (sg, dur[sg], dur[dense_table])
        assert dur[sg] <= 4 * dur[dense_rows]
    arr = reg.arrays()
    assert arr["bytes_in"][scatter] == 128 * 200 * 4 * 2 + 128 * 4
    assert arr["bytes_out"][apply] == 2 * 128 * 200 * 4


def test_a_dense_optimizer_update_reads_and_writes_its_variable_and_slots() -> None:
    """ResourceApplyKerasMomentum / ResourceApplyAdam: the handles have no shape, yet the
    kernel reads var and its slots and writes them back in place, each the gradient's size;
    a TF1 ApplyMomentum on ref tensors moves the same bytes."""
    w = TS((4096, 4096), "float32")
    handle, scalar = TS((), "resource"), TS((), "float32")
    reg = SignatureRegistry()
    momentum = reg.intern("ResourceApplyKerasMomentum", (handle, handle, scalar, w, scalar), (), 0)
    adam = reg.intern("ResourceApplyAdam", (handle,) * 3 + (scalar,) * 6 + (w,), (), 0)
    ref = reg.intern("ApplyMomentum", (w, w, scalar, w, scalar), (w,), 0)
    arr = reg.arrays()
    size = 4096 * 4096 * 4
    assert arr["bytes_in"][momentum] == 3 * size + 8 and arr["bytes_out"][momentum] == 2 * size
    assert arr["bytes_in"][adam] == 4 * size + 24 and arr["bytes_out"][adam] == 3 * size
    assert arr["bytes_in"][ref] == 3 * size + 8 and arr["bytes_out"][ref] == 2 * size
    dur = evaluate(arr, get_chip("Ascend910")).dur_ticks
    # a real 910A ran this update (AlexNet's 4096 x 4096 fp32 weight) in 347.71 us
    # (docs/device-model.md 1, the sustained HBM rate): within 10 %
    assert 0.9 * 34771 <= dur[momentum] <= 1.1 * 34771, dur[momentum]


def test_onednn_filter_gradient_with_bias_is_a_cube_op() -> None:
    """Keras CNN training on CPU runs `_MklNativeConv2DBackpropFilterWithBias` (the filter
    gradient with BiasAddGrad folded in): a cube filter gradient, not an unknown vector op."""
    from msprof_cli.device import op_map as OM

    m = OM.map_op("_MklNativeConv2DBackpropFilterWithBias")
    assert (m.ge_type, m.kind, m.cost, m.fallback) == ("Conv2DBackpropFilter", OM.KIND_AI_CORE,
                                                       OM.COST_CONV_BP_FILTER, False)


# --- fractal layouts (device/fractal.py, docs/device-model.md 3 "Fractal layouts") ----------

def conv(c_in, c_out, hw=56, k=3, batch=8, dtype="float16"):
    return ("Conv2D", [T((batch, hw, hw, c_in), dtype), T((k, k, c_in, c_out), dtype)],
            [T((batch, hw, hw, c_out), dtype)])


def test_a_conv_over_3_channels_computes_and_moves_16():
    reg, cost = costs(conv(3, 64), conv(16, 64), conv(17, 64), conv(32, 64))
    flops = reg.arrays()["flops"]
    assert flops[0] == flops[1] == 2 * 8 * 56 * 56 * 64 * 9 * 16
    assert flops[2] == flops[3]  # 17 channels: two blocks of 16
    b_in = reg.arrays()["bytes_in"]
    assert b_in[0] == b_in[1]  # the NC1HWC0 feature map and the FRACTAL_Z filter, padded
    assert cost.dur_ticks[0] == cost.dur_ticks[1] and cost.dur_ticks[2] == cost.dur_ticks[3]


def test_output_channels_pad_too():
    reg, _ = costs(conv(64, 10), conv(64, 16))
    flops = reg.arrays()["flops"]
    assert flops[0] == flops[1]


def test_a_depthwise_conv_runs_on_the_cube_at_c0_multiply_adds_per_useful_one():
    """TBE's depthwise kernel lays each 16-channel group's filter out as a 16 x 16 block with
    the weights on the diagonal (filter [C1, H, W, Co = 16, C0])."""
    dw = ("DepthwiseConv2dNative", [T((8, 56, 56, 64), "float16"), T((3, 3, 64, 1), "float16")],
          [T((8, 56, 56, 64), "float16")])
    full = conv(64, 64)
    reg, cost = costs(dw, full)
    useful = 2 * 8 * 56 * 56 * 64 * 9
    assert reg.arrays()["flops"][0] == 16 * useful
    assert cost.cube[0] > 0 and cost.ratio("cube")[0] > 0
    # a dense 64 -> 64 conv does 64 useful multiply-adds per output for the depthwise's 16:
    # 4x the cube work, far from the 64x its useful FLOPs suggest
    assert reg.arrays()["flops"][1] == 4 * reg.arrays()["flops"][0]


def test_a_depthwise_conv_is_bound_by_its_im2col_as_real_avgpool_kernels_are() -> None:
    """TBE runs a 3 x 3 AvgPool as a depthwise convolution on the cube; on a real 910 those
    kernels (Inception-v3 at batch 32, 16 blocks) take 187.5 / 163.8 / 120.6 us at
    35 x 35 x 192, 17 x 17 x 768 and 8 x 8 x 2048: per core the emulated depthwise
    convolution of the same shapes is within 25 % of them, and bound by its im2col (MTE1),
    not by its diagonal cube work (docs/device-model.md 3)."""
    real = {(35, 192): 187.5, (17, 768): 163.8, (8, 2048): 120.6}
    specs = [("DepthwiseConv2dNative", [T((32, hw, hw, c), "float16"),
                                        T((3, 3, c, 1), "float16")],
              [T((32, hw, hw, c), "float16")]) for hw, c in real]
    _, cost = costs(*specs)
    for i, want in enumerate(real.values()):
        per_core = dur_us(cost, i) * cost.block_dim[i] / 16
        assert 0.8 <= per_core / want <= 1.25, (i, per_core, want)
        assert cost.mte1[i] > 4 * cost.cube[i]


def test_a_depthwise_filter_gradient_moves_the_forward_im2col() -> None:
    """dW multiplies dy by the same im2col of x that the forward convolution builds, so it
    is bound by it too; the input gradient keeps its cube bound (docs/device-model.md 3)."""
    x, f = T((32, 56, 56, 96), "float16"), T((3, 3, 96, 1), "float16")
    _, cost = costs(("DepthwiseConv2dNative", [x, f], [x]),
                    ("DepthwiseConv2dNativeBackpropFilter", [x, T((4,), "int32"), x], [f]),
                    ("DepthwiseConv2dNativeBackpropInput", [T((4,), "int32"), f, x], [x]))
    assert cost.mte1[1] == pytest.approx(cost.mte1[0], rel=0.01)
    assert 0.7 <= cost.dur_ticks[1] / cost.dur_ticks[0] <= 1.3
    assert cost.mte1[2] < cost.mte1[0] / 4


def test_matmul_dimensions_pad_to_fractals():
    reg, _ = costs(matmul(32, 2048, 1000), matmul(32, 2048, 1008), matmul(1, 64, 64),
                   matmul(16, 64, 64))
    flops = reg.arrays()["flops"]
    assert flops[0] == flops[1] == 2 * 32 * 2048 * 1008  # a 1000-class head computes 1008
    assert flops[2] == flops[3]  # one row fills a 16-row fractal


def test_backprop_input_of_a_strided_conv_covers_the_input_positions():
    """Stride 2: the cube runs dy dilated to dx's size, 4x the positions of dy."""
    dx, dy = (8, 56, 56, 64), (8, 28, 28, 64)
    bpi = ("Conv2DBackpropInput", [T((4,), "int32"), T((3, 3, 64, 64), "float16"),
                                   T(dy, "float16")], [T(dx, "float16")])
    fwd = ("Conv2D", [T(dx, "float16"), T((3, 3, 64, 64), "float16")], [T(dy, "float16")])
    reg, _ = costs(bpi, fwd)
    flops = reg.arrays()["flops"]
    assert flops[0] == 4 * flops[1]


# --- dropout as npu_ops.dropout runs it (device/npu_dropout.py) -----------------------------

@pytest.mark.parametrize("name,tf_type,want", [
    ("sequential/dropout/stateless_dropout/stateless_random_uniform/StatelessRandomUniformV2",
     "StatelessRandomUniformV2", "DropOutGenMask"),
    ("model/dropout_3/stateless_dropout/stateless_random_uniform/StatelessRandomGetKeyCounter",
     "StatelessRandomGetKeyCounter", "NoOp"),
    ("model/dropout_3/stateless_dropout/GreaterEqual", "GreaterEqual", "NoOp"),
    ("model/dropout_3/stateless_dropout/Mul", "Mul", "DropOutDoMask"),
    ("gradient_tape/model/dropout_3/stateless_dropout/SelectV2", "SelectV2", "DropOutDoMask"),
    ("dropout/random_uniform/RandomUniform", "RandomUniform", "DropOutGenMask"),  # tf.nn
    ("dropout/Mul_1", "_MklMul", "DropOutDoMask"),
    ("model/dense/Mul", "Mul", "Mul"),  # not a dropout scope
    ("model/dropout_layer_helper/Mul", "Mul", "Mul"),
    ("model/drop/stateless_dropout/Mul", "Mul", "DropOutDoMask"),  # Keras' inner scope
])
def test_dropout_ops_as_the_migration_runs_them(name, tf_type, want):
    from msprof_cli.device.npu_dropout import migrated_type
    assert migrated_type(name, tf_type) == want


def test_the_migrated_dropout_runs_on_the_ai_core_with_a_bit_mask():
    x = T((32, 128, 768), "float32")
    reg, cost = costs(("StatelessRandomUniformV2", [T((3,), "int32"), T((2,), "uint64"),
                                                    T((2,), "uint64"), T((), "int32")], [x]),
                      ("DropOutGenMask", [T((3,), "int32"), T((2,), "uint64"),
                                          T((2,), "uint64"), T((), "int32")], [x]),
                      ("DropOutDoMask", [x, x], [x]), ("Mul", [x, x], [x]))
    a = reg.arrays()
    assert a["kind"].tolist() == [op_map.KIND_AI_CPU, op_map.KIND_AI_CORE, op_map.KIND_AI_CORE,
                                  op_map.KIND_AI_CORE]
    n = 32 * 128 * 768
    assert a["bytes_out"][1] == n / 8 and a["bytes_in"][1] == 0  # one bit per element
    assert a["bytes_in"][2] == n * 4 + n / 8 < a["bytes_in"][3]  # the tensor and the bits
    assert dur_us(cost, 1) < dur_us(cost, 0) / 10  # the AI CPU's random draw is the cost


def _step_us(tmp_path, ops) -> float:
    """Iteration Time (us) of the middle step of a three-step chunk of `ops`."""
    from test_device_records import config, make_chunk, run

    from msprof_cli.device import readback as R
    from msprof_cli.raw import layouts as L

    prof = run(tmp_path, [make_chunk(3, ops=ops)], config())
    raw = R.device_records(prof, "ts_track", 0)
    st = raw[raw["rpt_type"] == L.TS_RPT_STEP_TRACE].view(L.TS_TRACK_STEP)
    ends = np.sort(st["timestamp"][st["tag_id"] == 4].astype(np.int64))
    return float(ends[2] - ends[1]) * ASCEND910.tick_ns / 1000


def test_a_model_of_many_tiny_ops_is_launch_bound(tmp_path):
    """200 element-wise ops on 16 elements: each occupies the stream for its dispatch gap and
    its one-core start-up, whatever its size (docs/device-model.md 5, per-task overheads); 4x
    the elements changes nothing, while 4x a large op's elements costs ~4x."""
    def chain(elems: int, n: int = 200):
        x = T((elems,), "float32")
        return [(f"add_{i}", "AddV2", (x, x), (x,), ()) for i in range(n)]

    tiny, tiny4 = _step_us(tmp_path / "a", chain(16)), _step_us(tmp_path / "b", chain(64))
    twice = _step_us(tmp_path / "e", chain(16, 400))
    per_task = (ASCEND910.kernel_dispatch_ns + ASCEND910.task_head_ns) / 1000  # one block
    assert tiny == pytest.approx(tiny4, rel=0.01)
    # 200 more tasks cost 200 gaps and start-ups (the step's own markers and copies cancel)
    assert 200 * per_task * 0.95 <= twice - tiny <= 200 * per_task * 1.3
    big, big4 = (_step_us(tmp_path / d, chain(e, 20)) for d, e in (("c", 1 << 22),
                                                                   ("d", 1 << 24)))
    assert big4 / big > 3.0


def test_atlas_a2_runs_cube_work_on_cube_cores_and_vector_work_on_vector_cores():
    """On an Ascend910B3 (20 AI Cube cores, 40 AI Vector cores, 1.8 GHz) a large conv's
    blocks fill the cube cores and a large element-wise op's the vector cores; the 910A runs
    both on its 32 AI Cores. The constants come from the chip table, none from the 910."""
    x = T((32, 56, 56, 256), "float16")
    specs = (("Conv2D", [x, T((3, 3, 256, 256), "float16")], [x]), ("AddV2", [x, x], [x]))
    reg = SignatureRegistry()
    for tf_type, ins, outs in specs:
        reg.intern(tf_type, tuple(ins), tuple(outs), 0)
    b3, a = get_chip("Ascend910B3"), get_chip("Ascend910A")
    on_b3, on_a = evaluate(reg.arrays(), b3), evaluate(reg.arrays(), a)
    assert on_b3.block_dim.tolist() == [20, 40] and on_a.block_dim.tolist() == [32, 32]
    # the conv: 20 cores x 16^3 MACs at 1.8 GHz x the measured efficiency against the 910A's
    # 32 cores at 1 GHz: compute-bound, ~1.27x faster
    conv_b3 = on_b3.dur_ticks[0] * b3.tick_ns
    conv_a = on_a.dur_ticks[0] * a.tick_ns
    assert 1.1 < conv_a / conv_b3 < 1.5
    # the add is memory-bound: its 154 MB fit the B3's 192 MiB L2 (not the 910A's 32 MiB),
    # and misses go to 1.6 TB/s HBM against 1.2 TB/s
    add_b3 = on_b3.dur_ticks[1] * b3.tick_ns
    add_a = on_a.dur_ticks[1] * a.tick_ns
    assert on_b3.l2_hit[1] > 4 * on_a.l2_hit[1]
    assert add_a / add_b3 > 1.5


def test_the_vector_unit_runs_at_its_measured_share_of_the_nominal_rate():
    """A vector-bound kernel (the fused LayerNorm: 12 vector element-ops per element over an
    L2-resident tensor) takes 1 / 0.828 of the time the nominal lanes would give (AIBench's
    3,390 of 4,096 GFLOPS on a 910, docs/device-model.md 1); a memory-bound one (a ReLU over
    128 MiB) does not change."""
    from dataclasses import replace

    x = T((2048, 1024), "float16")  # 4 MiB: its vector work well above the 32-core start-up
    reg = SignatureRegistry()
    reg.intern("LayerNorm", (x, T((1024,), "float16"), T((1024,), "float16")),
               (x, T((2048, 1), "float16"), T((2048, 1), "float16")), 0)
    reg.intern("Relu", (T((64 << 20,), "float16"),), (T((64 << 20,), "float16"),), 0)
    nominal = replace(ASCEND910, vector_efficiency=1.0)
    measured, ideal = evaluate(reg.arrays(), ASCEND910), evaluate(reg.arrays(), nominal)
    assert ASCEND910.vector_efficiency == pytest.approx(3390 / 4096)
    assert measured.vec[0] / ideal.vec[0] == pytest.approx(4096 / 3390)
    assert 1.1 < measured.dur_ticks[0] / ideal.dur_ticks[0] <= 4096 / 3390 + 0.01
    assert measured.dur_ticks[1] == pytest.approx(ideal.dur_ticks[1], rel=0.02)


def test_a_kernels_start_up_grows_with_the_cores_it_starts():
    """The floor of a kernel is its start-up, measured on a 910A at ~1.1 us on one core and
    ~3.7 us on 32 (docs/device-model.md 5): a tiny op on one block costs about the former,
    an op with 32 blocks of little work each about the latter."""
    _, c = costs(("Relu", [T((16,), "float16")], [T((16,), "float16")]),
                 ("Relu", [T((32 * 16384,), "float16")], [T((32 * 16384,), "float16")]))
    assert c.block_dim.tolist() == [1, 32]
    assert 1.1 <= dur_us(c, 0) <= 1.5
    head32 = (ASCEND910.task_head_ns + 31 * ASCEND910.task_head_ns_per_core) / 1000
    assert head32 <= dur_us(c, 1) <= head32 + 1.5


def test_batchnorm_kernels_compute_in_fp32_with_their_tbe_instruction_counts():
    """The 910's BNTraining* kernels cast fp16 inputs to fp32 (TBE bn_training_*.py), so a
    BatchNorm over fp16 tensors does the vector work of one over fp32 tensors (half the bytes
    moved): the forward's 10 instructions an element, the gradient's 19."""
    x16, x32 = T((32, 28, 28, 256), "float16"), T((32, 28, 28, 256), "float32")
    c = T((256,), "float32")
    reg, cost = costs(("FusedBatchNormV3", [x16, c, c, c, c], [x16, c, c]),
                      ("FusedBatchNormV3", [x32, c, c, c, c], [x32, c, c]),
                      ("FusedBatchNormGradV3", [x16, x16, c, c, c, c], [x16, c, c]))
    elems = 32 * 28 * 28 * 256
    assert reg.vec_elems[0] == pytest.approx(10 * elems, rel=1e-3)  # (+ the channel stats)
    assert reg.vec_elems[2] == pytest.approx(19 * elems, rel=1e-3)
    assert cost.vec[0] == pytest.approx(cost.vec[1], rel=0.05)  # fp32 width (tiles differ)
    assert reg.bytes_in[0] < reg.bytes_in[1]


def test_a_cube_kernels_output_leaves_through_the_vector_unit_on_the_910():
    """The 910 (coupled AI Core, no FixPipe): the vector unit copies each output element out
    of L0C and converts it (2 fp32-width instructions), after the cube's tile."""
    import dataclasses
    reg = SignatureRegistry()
    tf_type, ins, outs = conv(256, 256, hw=14, k=3, batch=32)
    s = reg.intern(tf_type, tuple(ins), tuple(outs), 0)
    sig = reg.arrays()
    fixpipe = dataclasses.replace(ASCEND910, cube_out_via_ub=False)
    coupled, separated = evaluate(sig, ASCEND910), evaluate(sig, fixpipe)
    out = 32 * 14 * 14 * 256
    block = int(coupled.block_dim[s])
    drain = 2 * out / (64 * ASCEND910.vector_efficiency * block)
    assert coupled.vec[s] == pytest.approx(drain)
    assert separated.vec[s] == 0.0
    # cube-bound: the drain adds to the cube time instead of hiding behind it
    assert coupled.core_cycles[s] - separated.core_cycles[s] == pytest.approx(drain, rel=0.2)
    assert coupled.dur_ticks[s] > separated.dur_ticks[s]
    # the Atlas A2 writes L0C out through its FixPipe
    assert not get_chip("Ascend910B2").cube_out_via_ub
