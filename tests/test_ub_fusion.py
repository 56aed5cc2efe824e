"""GE's UB fusion of element-wise chains (msprof_cli.device.ub_fusion, device-model.md 3.1)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from msprof_cli.capture import CaptureChunk, Iteration, ModelInfo, OpRun
from msprof_cli.capture import TensorSpec as T
from msprof_cli.device import Device
from msprof_cli.device import readback as R
from msprof_cli.device.chip import ASCEND910
from msprof_cli.device.cost_model import evaluate
from msprof_cli.device.op_table import Interner, SignatureRegistry, build_tables
from msprof_cli.device.ub_fusion import MAX_FUSED_OPS, UbFuser, fused_name, plan_chains
from msprof_cli.options import ProfilingConfig
from msprof_cli.raw.control import ClockPair
from msprof_cli.raw.hashing import name_hash

CLOCK = ClockPair(wall_us=1_700_000_000_000_000, mono_ns=5_000_000_000_000)
T0 = CLOCK.mono_ns + 1_000_000
F = "float32"
X = T((32, 56, 56, 256), F)  # a ResNet-sized activation (102 MB fp32)
C = T((256,), F)  # a per-channel operand


def chain_ops(n: int, prefix: str = "bn") -> tuple[list[tuple], dict[str, tuple[str, ...]]]:
    """conv -> n element-wise ops (Mul, Add, Relu, Mul, ...) -> a MatMul-free consumer."""
    ops = [("conv/Conv2D", "Conv2D", (X, T((3, 3, 256, 256), F)), (X,))]
    producers: dict[str, tuple[str, ...]] = {"conv/Conv2D": ("input", "w")}
    prev = "conv/Conv2D"
    kinds = ["Mul", "AddV2", "Relu"]
    for i in range(n):
        tf = kinds[i % 3]
        name = f"{prefix}/{tf}_{i}"
        ins = (X,) if tf == "Relu" else (X, C)
        ops.append((name, tf, ins, (X,)))
        producers[name] = (prev,) if tf == "Relu" else (prev, f"{prefix}/const_{i}")
        prev = name
    ops.append(("pool/MaxPool", "MaxPool", (X,), (T((32, 28, 28, 256), F),)))
    producers["pool/MaxPool"] = (prev,)
    return ops, producers


def make_chunk(ops, producers, n_iter=2, fp_op=None) -> CaptureChunk:
    its = []
    t = T0
    for i in range(n_iter):
        runs = []
        for name, tf, ins, outs in ops:
            runs.append(OpRun(name, tf, t, t + 20_000, 77, ins, outs))
            t += 30_000
        its.append(Iteration(1, i + 1, runs[0].start_ns - 5_000, t + 5_000, 77, runs))
        t += 100_000
    info = {1: ModelInfo(1, "m", "k", op_order={o[0]: i for i, o in enumerate(ops)},
                         producers=producers, fp_op=fp_op)}
    return CaptureChunk(models=info, iterations=its)


def run(tmp: Path, chunk: CaptureChunk, **kw) -> Path:
    prof = tmp / "PROF_000001_20250101120000123_ABCDEFGHIJKLMNOP"
    kw.setdefault("boundary_tasks", False)  # the fusion alone (trans_ops.py: test_trans_ops)
    dev = Device(prof, ProfilingConfig(output="/tmp", training_trace=True, task_time="l1"),
                 clock=CLOCK, pid=1, app=["python3", "t.py"], **kw)
    dev.consume(chunk)
    dev.close(ClockPair(CLOCK.wall_us + 10_000_000, CLOCK.mono_ns + 10_000_000_000))
    return prof


# --- planning ------------------------------------------------------------------------------

def test_chain_splits_at_the_documented_maximum():
    names = [f"e{i}" for i in range(8)]
    prod = {n: (names[i - 1],) if i else ("x",) for i, n in enumerate(names)}
    chains = plan_chains(prod, set(names), {n: i for i, n in enumerate(names)})
    assert [len(c) for c in chains] == [MAX_FUSED_OPS, 8 - MAX_FUSED_OPS]
    assert chains[0] == names[:6] and chains[1] == names[6:]


def test_multi_consumer_intermediate_breaks_the_chain():
    # a -> b -> c, and a also feeds d: a's value must reach global memory, a ends its chain
    prod = {"a": ("x",), "b": ("a",), "c": ("b",), "d": ("a", "y")}
    chains = plan_chains(prod, {"a", "b", "c", "d"}, {"a": 0, "b": 1, "c": 2, "d": 3})
    assert ["a", "b"] not in chains and ["b", "c"] in chains
    # the same graph without the second consumer fuses a-b-c
    prod.pop("d")
    assert plan_chains(prod, {"a", "b", "c"}, {"a": 0, "b": 1, "c": 2}) == [["a", "b", "c"]]


def test_non_elementwise_op_breaks_the_chain():
    prod = {"a": ("x",), "r": ("a",), "b": ("r",)}
    assert plan_chains(prod, {"a", "b"}, {"a": 0, "r": 1, "b": 2}) == []


def test_fused_name_is_the_concatenation_or_first_name():
    assert fused_name(["a/Mul", "a/Add"]) == "a/Mula/Add"
    long = ["x" * 300, "y" * 300]
    assert fused_name(long) == "x" * 300 + "_ub_fusion"


# --- the fused kernel ----------------------------------------------------------------------

def fused_table(n: int):
    ops, producers = chain_ops(n)
    chunk = make_chunk(ops, producers, n_iter=1)
    sigs, names = SignatureRegistry(), Interner()
    table, _ = build_tables(chunk, sigs, names)
    out = UbFuser().apply(table, chunk.models, sigs, names)
    return sigs, names, table, out


def test_fused_task_moves_fewer_bytes_and_takes_less_time_than_its_members():
    sigs, names, before, after = fused_table(3)
    assert len(after) == len(before) - 2  # 3 members -> 1 task
    cost = evaluate(sigs.arrays(), ASCEND910)
    member = before.sig[1:4]
    fused = after.sig[1]
    a = sigs.arrays()
    assert a["bytes_in"][fused] + a["bytes_out"][fused] < \
        (a["bytes_in"][member] + a["bytes_out"][member]).sum() / 2
    assert a["vec_elems"][fused] == a["vec_elems"][member].sum()
    assert cost.dur_ticks[fused] < cost.dur_ticks[member].sum() / 2
    assert names.items[after.name_idx[1]] == "bn/Mul_0bn/AddV2_1bn/Relu_2"
    assert sigs.ge_type[fused] == "Mul"  # the first member's type
    assert after.fused[after.fused_idx[1]] == ("bn/Mul_0", "bn/AddV2_1", "bn/Relu_2")


def test_seven_ops_become_two_tasks():
    _, _, before, after = fused_table(7)
    assert len(before) - len(after) == 7 - 2


def test_incomplete_or_repeated_chain_is_not_fused():
    ops, producers = chain_ops(3)
    chunk = make_chunk(ops, producers, n_iter=2)
    chunk.iterations[1].ops.pop(2)  # the second iteration misses a member
    chunk.iterations[0].ops.append(chunk.iterations[0].ops[1])  # the first runs one twice
    sigs, names = SignatureRegistry(), Interner()
    table, _ = build_tables(chunk, sigs, names)
    out = UbFuser().apply(table, chunk.models, sigs, names)
    assert len(out) == len(table)


def test_device_writes_one_task_and_fusion_op_info(tmp_path):
    ops, producers = chain_ops(3)
    prof = run(tmp_path, make_chunk(ops, producers, fp_op="bn/Mul_0"))
    fused = "bn/Mul_0bn/AddV2_1bn/Relu_2"
    nbi = R.host_records(prof, "node_basic_info")
    assert set(nbi["op_name"].tolist()) == {name_hash("conv/Conv2D"), name_hash(fused),
                                             name_hash("pool/MaxPool")}
    assert np.all(nbi[nbi["op_name"] == name_hash(fused)]["op_type"] == name_hash("Mul"))
    fus = R.host_records(prof, "fusion_op_info")
    assert len(fus) == 1 and fus["op_name"][0] == name_hash(fused)
    assert fus["fusion_op_num"][0] == 3
    assert fus["fusion_op_id"][0][:3].tolist() == [name_hash(n) for n in
                                                  ("bn/Mul_0", "bn/AddV2_1", "bn/Relu_2")]
    dic = dict(line.split(":", 1) for line in R.host_lines(prof, "hash_dic"))
    assert dic[str(name_hash(fused))] == fused
    # 2 iterations x 3 AI Core tasks in hwts; the FP marker found the fused task
    hw = R.device_records(prof, "hwts", 0)
    assert (hw["flags"] & 7 == 0).sum() == 6
    steps, _ = R.ts_track(prof)
    assert (steps["tag_id"] == 2).sum() == 2  # FP named a member: marked at the fused task


def test_fusion_off_keeps_every_op(tmp_path):
    ops, producers = chain_ops(3)
    prof = run(tmp_path, make_chunk(ops, producers), ub_fusion=False)
    assert len(R.host_records(prof, "node_basic_info")) == 2 * 5


def test_data_edges_look_through_no_op_nodes_and_keep_sinks():
    from msprof_cli.collect.tf_graphs import StaticGraph, StaticOp, data_edges
    g = StaticGraph()
    s = (T((4,), F),)
    g.add("x", StaticOp("Placeholder", (), s, ()))
    g.add("a", StaticOp("Mul", s + s, s, ("x", "x")))
    g.add("r", StaticOp("Reshape", s, s, ("a",)))
    g.add("b", StaticOp("Relu", s, s, ("r",)))
    g.add("shape", StaticOp("Shape", s, s, ("b",)))  # metadata only: not a consumer
    g.add("out", StaticOp("Identity", s, s, ("b",)))  # a return value: consumer of b
    edges = data_edges(g)
    assert edges["b"] == ("a",)  # through the Reshape
    assert "shape" not in edges and "r" not in edges
    assert edges["out"] == ("b",)
    # b has a consumer outside any chain (the sink), a has only b: a-b fuse, b ends the chain
    assert plan_chains(edges, {"a", "b"}, g.order) == [["a", "b"]]
