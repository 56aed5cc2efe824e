"""GE's TransData / Cast tasks at layout and precision boundaries (msprof_cli.device.trans_ops,
docs/device-model.md 3.4)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from msprof_cli.capture import CaptureChunk, Iteration, ModelInfo, OpRun
from msprof_cli.capture import TensorSpec as T
from msprof_cli.device import Device
from msprof_cli.device import op_map
from msprof_cli.device import readback as R
from msprof_cli.device.trans_ops import Node, plan
from msprof_cli.options import ProfilingConfig
from msprof_cli.raw.control import ClockPair
from msprof_cli.raw.hashing import name_hash

F, H = "float32", "float16"
X = T((32, 28, 28, 3), F)
W = T((3, 3, 3, 16), F)
Y = T((32, 28, 28, 16), F)
FLAT = T((32, 28 * 28 * 16), F)
WD = T((28 * 28 * 16, 10), F)
LOGITS = T((32, 10), F)
AIC, CPU, NONE = op_map.KIND_AI_CORE, op_map.KIND_AI_CPU, op_map.KIND_NONE


def node(tf: str, ge: str, ins, outs, kind=AIC, half=False) -> Node:
    return Node(tf, ge, kind, half, tuple(ins), tuple(outs))


def cnn(half_relu: bool = False) -> tuple[dict, dict, dict]:
    """input -> conv (variable filter) -> relu -> flatten (a reshape) -> matmul -> loss."""
    nodes = {
        "it/GetNext": node("IteratorGetNext", "IteratorGetNext", [], [X], kind=NONE),
        "w/read": node("ReadVariableOp", "ReadVariableOp", [], [W], kind=NONE),
        "wd/read": node("ReadVariableOp", "ReadVariableOp", [], [WD], kind=NONE),
        "conv": node("Conv2D", "Conv2D", [X, W], [Y], half=True),
        "relu": node("Relu", "Relu", [Y], [Y], half=half_relu),
        "dense": node("MatMul", "MatMulV2", [FLAT, WD], [LOGITS], half=True),
        "loss": node("Softmax", "SoftmaxV2", [LOGITS], [LOGITS]),
    }
    producers = {"it/GetNext": ("iterator",), "w/read": ("w",), "wd/read": ("wd",),
                 "conv": ("it/GetNext", "w/read"), "relu": ("conv",),
                 "dense": ("relu", "wd/read"), "loss": ("dense",)}
    order = {n: i for i, n in enumerate(["iterator", "w", "wd", "it/GetNext", "w/read",
                                         "wd/read", "conv", "relu", "dense", "loss"])}
    return producers, order, nodes


def kinds(p) -> list[tuple[str, str, str, str, str]]:
    return [(b.tf_type, b.anchor, b.source.format, b.target.format, b.target.dtype)
            for b in p.boundaries]


def test_a_graph_input_is_cast_and_converted_to_5hd_a_variable_only_cast():
    producers, order, nodes = cnn()
    p = plan(producers, order, nodes)
    got = kinds(p)
    # the fed batch: fp32 -> fp16 for the cube, then ND -> NC1HWC0 (4D to 5D before Conv2D)
    assert got[0] == ("Cast", "conv", "ND", "ND", H)
    assert got[1] == ("TransData", "conv", "ND", "NC1HWC0", H)
    # the filter: GE stores the variable in the conv's format (no TransData), cast every step
    assert got[2] == ("Cast", "conv", "ND", "ND", H)
    assert p.producers["conv"] == (p.boundaries[1].name, p.boundaries[2].name)
    # inserted nodes sit just before their consumer in GE's task order
    for b in p.boundaries:
        assert order[b.anchor] - 1 < p.order[b.name] < order[b.anchor]
    assert sorted(p.order.values()) == [p.order[b.name] for b in p.boundaries]


def test_a_reshape_of_a_5hd_tensor_into_a_matmul_is_a_transdata_to_nz():
    p = plan(*cnn())
    dense = [k for k in kinds(p) if k[1] == "dense"]
    # the default mode: relu keeps fp32 (vector), the cube wants fp16; flatten crosses a
    # reshape, so the ND view goes to FRACTAL_NZ; the weight only needs its Cast
    assert ("TransData", "dense", "ND", "FRACTAL_NZ", H) in dense
    assert sum(k[0] == "TransData" for k in dense) == 1
    assert sum(k[0] == "Cast" for k in dense) == 2
    # conv -> relu: the cube's fp16 output back to fp32 for the vector op, layout kept
    assert ("Cast", "relu", "NC1HWC0", "NC1HWC0", F) in kinds(p)


def test_mixed_precision_keeps_the_fp16_chain_without_casts():
    p = plan(*cnn(half_relu=True))
    assert not [k for k in kinds(p) if k[1] == "relu"]
    # the loss (fp32 softmax here) gets the matmul's fp16 result cast back
    assert ("Cast", "loss", "FRACTAL_NZ", "FRACTAL_NZ", F) in kinds(p)


def test_one_conversion_serves_every_consumer_and_ai_cpu_reads_nd():
    producers, order, nodes = cnn()
    nodes["conv2"] = node("Conv2D", "Conv2D", [X, W], [Y], half=True)
    producers["conv2"] = ("it/GetNext", "w/read")
    order["conv2"] = 6.5
    nodes["topk"] = node("TopKV2", "TopK", [Y], [Y], kind=CPU)
    producers["topk"] = ("conv2",)
    order["topk"] = 6.7
    p = plan(producers, order, nodes)
    assert [b.anchor for b in p.boundaries[:3]] == ["conv"] * 3
    assert p.producers["conv2"] == p.producers["conv"]  # the same Cast/TransData nodes
    # the AI CPU works on ND in fp32: conv2's 5HD fp16 output is cast and converted back
    assert ("Cast", "topk", "NC1HWC0", "NC1HWC0", F) in kinds(p)
    assert ("TransData", "topk", "NC1HWC0", "ND", F) in kinds(p)


def test_a_pad_or_slice_of_h_and_w_keeps_5hd_between_convolutions():
    """PadD and SliceD run on NC1HWC0 when only H and W change (canndev pad_d.py
    check_support_5hd, slice_d.py op_select_format): no TransData around a ZeroPadding2D
    between convolutions; padding the channels gives ND, which the next conv converts."""
    padded, chans = T((32, 29, 29, 16), H), T((32, 28, 28, 32), H)
    w2 = T((3, 3, 16, 16), H)
    producers, order, nodes = cnn(half_relu=True)
    for name, out, ge in (("pad", padded, "PadD"), ("cpad", chans, "PadD")):
        nodes[name] = node("Pad", ge, [Y, T((4, 2), "int32")], [out], half=True)
        producers[name] = ("relu", "paddings")
    nodes["conv2"] = node("Conv2D", "Conv2D", [padded, w2], [T((32, 14, 14, 16), H)], half=True)
    nodes["conv3"] = node("Conv2D", "Conv2D", [chans, T((3, 3, 32, 16), H)], [Y], half=True)
    producers.update({"conv2": ("pad", "w/read"), "conv3": ("cpad", "w/read")})
    order.update({"pad": 7.2, "conv2": 7.4, "cpad": 7.5, "conv3": 7.7})
    got = kinds(plan(producers, order, nodes))
    assert not [k for k in got if k[1] == "conv2" and k[0] == "TransData"], got
    assert ("TransData", "conv3", "ND", "NC1HWC0", H) in got


def test_a_channel_concatenation_and_its_gradient_slices_keep_5hd():
    """DenseNet's pattern: ConcatV2D of feature maps whose channels are multiples of 16 runs
    on NC1HWC0 (concat_v2_d.py op_select_format), so does the SliceD of its gradient; a
    concatenation of 8 + 16 channels cannot, and its consumer converts it."""
    both, odd = T((32, 28, 28, 48), H), T((32, 28, 28, 24), H)
    narrow = T((32, 28, 28, 8), H)
    producers, order, nodes = cnn(half_relu=True)
    nodes["cat"] = node("ConcatV2", "ConcatV2D", [Y, T((32, 28, 28, 32), H)], [both], True)
    nodes["cat8"] = node("ConcatV2", "ConcatV2D", [narrow, Y], [odd], True)
    nodes["cut"] = node("Slice", "SliceD", [both, T((4,), "int32")], [Y], True)
    for name, x in (("conv_cat", both), ("conv_cut", Y), ("conv_cat8", odd)):
        nodes[name] = node("Conv2D", "Conv2D", [x, W], [Y], half=True)
    producers.update({"cat": ("relu", "conv"), "cat8": ("relu", "conv"), "cut": ("cat",),
                      "conv_cat": ("cat", "w/read"), "conv_cut": ("cut", "w/read"),
                      "conv_cat8": ("cat8", "w/read")})
    order.update({"cat": 7.1, "cut": 7.2, "cat8": 7.3, "conv_cat": 7.4, "conv_cut": 7.5,
                  "conv_cat8": 7.6})
    got = kinds(plan(producers, order, nodes))
    assert not [k for k in got if k[1] in ("conv_cat", "conv_cut") and k[0] == "TransData"]
    assert ("TransData", "conv_cat8", "ND", "NC1HWC0", H) in got


def test_the_filter_gradient_is_fp32_and_needs_no_cast_before_the_optimizer():
    dy = Y
    nodes = {
        "bpf": node("Conv2DBackpropFilter", "Conv2DBackpropFilter",
                    [X, T((4,), "int32"), dy], [W], half=True),
        "apply": node("ResourceApplyGradientDescent", "ApplyGradientDescent",
                      [W, T((), F), W], [W]),
    }
    producers = {"bpf": ("x", "sizes", "dy"), "apply": ("var", "lr", "bpf")}
    p = plan(producers, {"x": 0, "sizes": 1, "dy": 2, "bpf": 3, "apply": 4}, nodes)
    assert not [k for k in kinds(p) if k[1] == "apply"]


def test_a_grappler_fusion_reads_through_its_fused_nodes():
    """A fused conv carries its last node's name (Relu), whose producers are the fused
    BiasAdd and convolution: the inputs are found through them."""
    nodes = {"it/GetNext": node("IteratorGetNext", "IteratorGetNext", [], [X], kind=NONE),
             "w/read": node("ReadVariableOp", "ReadVariableOp", [], [W], kind=NONE),
             "relu": node("_FusedConv2D", "Conv2D", [X, W, T((16,), F)], [Y], half=True)}
    producers = {"relu": ("bias_add",), "bias_add": ("convolution", "b/read"),
                 "convolution": ("it/GetNext", "w/read"), "b/read": ("b",),
                 "it/GetNext": ("iterator",), "w/read": ("w",)}
    p = plan(producers, {"relu": 9}, nodes)
    assert ("TransData", "relu", "ND", "NC1HWC0", H) in kinds(p)
    assert sum(k[0] == "TransData" for k in kinds(p)) == 1


# --- the device ---------------------------------------------------------------------------
CLOCK = ClockPair(wall_us=1_700_000_000_000_000, mono_ns=5_000_000_000_000)
T0 = CLOCK.mono_ns + 1_000_000


def chunk(n_iter: int = 2) -> CaptureChunk:
    producers, order, nodes = cnn()
    graph = ["it/GetNext", "w/read", "wd/read", "conv", "relu", "dense", "loss"]
    its, t = [], T0
    for i in range(n_iter):
        runs = []
        for name in graph:
            nd = nodes[name]
            runs.append(OpRun(name, nd.tf_type, t, t + 20_000, 77, nd.inputs, nd.outputs))
            t += 30_000
        its.append(Iteration(1, i + 1, runs[0].start_ns - 5_000, t + 5_000, 77, runs))
        t += 100_000
    info = {1: ModelInfo(1, "m", "k", op_order=dict(order), producers=dict(producers))}
    return CaptureChunk(models=info, iterations=its)


def run(tmp: Path, mode: str = "allow_fp32_to_fp16", **kw) -> Path:
    prof = tmp / mode / "PROF_000001_20250101120000123_ABCDEFGHIJKLMNOP"
    cfg = ProfilingConfig(output="/tmp", training_trace=True, task_time="l1",
                          precision_mode=mode)
    dev = Device(prof, cfg, clock=CLOCK, pid=1, app=["python3", "t.py"], **kw)
    dev.consume(chunk())
    dev.consume(chunk())  # a second chunk: the plan is kept, the names stay the same
    dev.close(ClockPair(CLOCK.wall_us + 10_000_000, CLOCK.mono_ns + 10_000_000_000))
    return prof


def test_the_device_runs_the_boundary_tasks_before_their_consumer(tmp_path):
    prof = run(tmp_path, ub_fusion=False)  # (with it, the Cast before relu fuses into it)
    nbi = R.host_records(prof, "node_basic_info")
    names = nbi["op_name"].tolist()
    trans = [n for n in names if n not in {name_hash(x) for x in
                                            ("conv", "relu", "dense", "loss")}]
    assert len(trans) == len(names) - 4 * 4  # 4 steps of 4 graph ops + their trans nodes
    assert names.count(name_hash("trans_TransData_1")) == 4  # once a step, both chunks
    # the step's task order: Cast, TransData, Cast, conv, ...
    step = names[:len(names) // 4]
    assert step.index(name_hash("trans_TransData_1")) < step.index(name_hash("conv"))
    plain = run(tmp_path / "off", ub_fusion=False, boundary_tasks=False)
    assert len(R.host_records(plain, "node_basic_info")) == 16
    # the boundary tasks take device time: the step is longer with them
    hw = R.device_records(prof, "hwts", 0)
    hw_plain = R.device_records(plain, "hwts", 0)
    assert len(hw) > len(hw_plain)


def test_mixed_precision_runs_fewer_casts_than_the_default_mode(tmp_path):
    def casts(mode: str) -> int:
        nbi = R.host_records(run(tmp_path, mode), "node_basic_info")
        return sum(1 for h in nbi["op_name"].tolist()
                   if h in {name_hash(f"trans_Cast_{i}") for i in range(16)})
    assert casts("allow_mix_precision") < casts("allow_fp32_to_fp16")


def test_a_training_batchnorm_not_fed_by_a_convolution_runs_as_two_kernels():
    """GE splits a training BatchNorm into BNTrainingReduce + BNTrainingUpdate (its gradient
    into BNTrainingUpdateGrad + BNTrainingReduceGrad); after a convolution the reduce folds
    into the convolution's epilogue. A DenseNet-style BatchNorm after a concatenation stays
    two kernels; inference graphs (no BatchNorm gradient) are not split."""
    c = T((32,), F)
    cat = T((32, 28, 28, 32), F)
    nodes = {
        "conv": node("Conv2D", "Conv2D", [X, W], [Y], half=True),
        "bn1": node("FusedBatchNormV3", "BatchNorm", [Y, T((16,), F)] + [T((16,), F)] * 3,
                    [Y], half=True),  # mixed precision: fp16 straight from the conv
        "concat": node("ConcatV2", "ConcatV2D", [Y, Y, T((), "int32")], [cat]),
        "bn2": node("FusedBatchNormV3", "BatchNorm", [cat] + [c] * 4, [cat]),
        "bn2_grad": node("FusedBatchNormGradV3", "BatchNormGrad", [cat, cat] + [c] * 4,
                         [cat] + [c] * 2),
    }
    producers = {"conv": ("x", "w"), "bn1": ("conv", "g", "b", "m", "v"),
                 "concat": ("bn1", "bn1", "axis"), "bn2": ("concat", "g2", "b2", "m2", "v2"),
                 "bn2_grad": ("dy", "concat", "g2", "m2", "v2", "r")}
    order = {n: i for i, n in enumerate(producers)}
    p = plan(producers, order, nodes)
    assert p.splits == {"bn2": "BNTrainingReduce", "bn2_grad": "BNTrainingUpdateGrad"}
    inference = {k: v for k, v in nodes.items() if k != "bn2_grad"}
    assert plan(producers, order, inference).splits == {}
    # the default precision mode: bn1 keeps fp32, so a Cast sits between it and the conv
    # and the fusion pattern (Conv2D -> BNTrainingReduce) does not match
    nodes["bn1"] = node("FusedBatchNormV3", "BatchNorm", [Y] + [T((16,), F)] * 4, [Y])
    assert "bn1" in plan(producers, order, nodes).splits


def test_a_batchnorm_after_a_depthwise_convolution_runs_as_two_kernels():
    """TbeConvBnreduceFusionPass matches the "Convolution" op pattern; TBE gives a depthwise
    convolution "DepthwiseConvolution", so the reduce after it does not fold (MobileNets)."""
    nodes = {
        "dw": node("DepthwiseConv2dNative", "DepthwiseConv2D", [X, T((3, 3, 16, 1), F)], [Y],
                   half=True),
        "bn": node("FusedBatchNormV3", "BatchNorm", [Y] + [T((16,), F)] * 4, [Y], half=True),
        "bn_grad": node("FusedBatchNormGradV3", "BatchNormGrad", [Y, Y] + [T((16,), F)] * 4,
                        [Y] + [T((16,), F)] * 2, half=True),
    }
    producers = {"dw": ("x", "w"), "bn": ("dw", "g", "b", "m", "v"),
                 "bn_grad": ("dy", "dw", "g", "m", "v", "r")}
    order = {n: i for i, n in enumerate(producers)}
    assert plan(producers, order, nodes).splits == {"bn": "BNTrainingReduce",
                                                    "bn_grad": "BNTrainingUpdateGrad"}
    nodes["dw"] = node("Conv2D", "Conv2D", [X, W], [Y], half=True)
    assert plan(producers, order, nodes).splits == {}


def test_the_device_runs_a_split_batchnorm_as_two_tasks(tmp_path):
    from msprof_cli.device import readback as R

    c = T((32,), F)
    cat = T((32, 28, 28, 32), F)
    ops = [("concat", "ConcatV2", (Y, Y, T((), "int32")), (cat,)),
           ("bn", "FusedBatchNormV3", (cat, c, c, c, c), (cat, c, c)),
           ("bn_grad", "FusedBatchNormGradV3", (cat, cat, c, c, c, c), (cat, c, c))]
    producers = {"concat": ("a", "b", "axis"), "bn": ("concat", "g", "b", "m", "v"),
                 "bn_grad": ("dy", "concat", "g", "m", "v", "r")}
    dev, prof = _one_step(tmp_path, ops, producers)
    names = R.host_records(prof, "node_basic_info")["op_name"].tolist()
    assert names.index(name_hash("bn/BNTrainingReduce")) < names.index(name_hash("bn"))
    assert names.index(name_hash("bn_grad/BNTrainingUpdateGrad")) < \
        names.index(name_hash("bn_grad"))
    types = {dev.sigs.ge_type[s] for s in range(len(dev.sigs))}
    assert {"BNTrainingReduce", "BNTrainingUpdate", "BNTrainingUpdateGrad",
            "BNTrainingReduceGrad"} <= types


def _xent_device(tmp_path: Path, n: int, c: int) -> tuple[Device, Path]:
    """A dense layer into a sparse softmax cross-entropy over `c` classes, one step."""
    logits, labels = T((n, c), F), T((n,), "int64")
    ops = [("dense", "MatMul", (T((n, 128), F), T((128, c), F)), (logits,)),
           ("xent", "SparseSoftmaxCrossEntropyWithLogits", (logits, labels),
            (T((n,), F), logits))]
    producers = {"dense": ("x", "w"), "xent": ("dense", "it/GetNext:1")}
    return _one_step(tmp_path, ops, producers)


def _one_step(tmp_path: Path, ops: list, producers: dict) -> tuple[Device, Path]:
    """One graph step of `ops` (name, TF type, inputs, outputs) with data edges `producers`
    through a training device; the device and its PROF dir."""
    runs, t = [], T0
    for name, tf, ins, outs in ops:
        runs.append(OpRun(name, tf, t, t + 20_000, 77, ins, outs))
        t += 30_000
    chunk = CaptureChunk(models={1: ModelInfo(1, "m", "k", op_order={o[0]: i for i, o in
                                                                      enumerate(ops)},
                                              producers=producers)},
                         iterations=[Iteration(1, 1, T0 - 5_000, t + 5_000, 77, runs)])
    prof = tmp_path / "PROF_000001_20250101120000123_ABCDEFGHIJKLMNOP"
    dev = Device(prof, ProfilingConfig(output="/tmp", training_trace=True, task_time="l1"),
                 clock=CLOCK, pid=1, app=["t.py"])
    dev.consume(chunk)
    dev.close(ClockPair(CLOCK.wall_us + 10_000_000, CLOCK.mono_ns + 10_000_000_000))
    return dev, prof


def test_a_sparse_cross_entropy_runs_as_one_hot_and_the_dense_kernel(tmp_path):
    """GE's SparseSoftMaxFusionPass: the N labels become an N x C one-hot matrix (OneHotD)
    that SoftmaxCrossEntropyWithLogits reads, in training and inference graphs alike; the
    loss reads N x C more than the sparse op would (docs/device-model.md 3.4)."""
    n, c = 64, 1000
    dev, prof = _xent_device(tmp_path, n, c)
    names = R.host_records(prof, "node_basic_info")["op_name"].tolist()
    assert names.index(name_hash("xent/OneHotD")) < names.index(name_hash("xent"))
    by_type = {dev.sigs.ge_type[s]: s for s in range(len(dev.sigs))}
    assert "OneHotD" in by_type and "SoftmaxCrossEntropyWithLogits" in by_type
    one_hot, dense = by_type["OneHotD"], by_type["SoftmaxCrossEntropyWithLogits"]
    sparse = by_type["SparseSoftmaxCrossEntropyWithLogits"]
    assert dev.sigs.bytes_out[one_hot] == 4 * n * c  # int32 one-hot
    # the dense kernel reads the fp16 one-hot labels instead of the N int64 indices
    assert dev.sigs.bytes_in[dense] - dev.sigs.bytes_in[sparse] == 2 * n * c - 8 * n


def test_a_loss_over_a_large_vocabulary_plans_its_workspace(tmp_path):
    """SoftmaxCrossEntropyWithLogits over more than 19,999 classes keeps three N x C fp32
    intermediates in global memory (device/workspace.py): a block of the feature map for the
    node only, which sets this graph's peak; 1,000 classes need none."""
    from msprof_cli.device import memory_plan as MP
    from msprof_cli.raw import memory_plan as RM

    def model(n: int, c: int) -> RM.ModelMemory:
        d = tmp_path / f"c{c}"
        d.mkdir()
        _, prof = _xent_device(d, n, c)
        facts = RM.read(prof)
        assert facts is not None
        [mm] = facts.devices[0].models.values()
        return mm

    big, small = model(64, 30000), model(64, 1000)
    want = int(MP.ge_tensor_bytes(np.array([3 * 64 * 30000 * 4]))[0])
    assert big.workspace == want and small.workspace == 0
    assert big.feature_map >= want + 2 * 64 * 30000 * 4  # beside the logits and the one-hot
    assert any(t[4] == "workspace" and t[0] == "xent" for t in big.top)
