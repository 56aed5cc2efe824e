"""GE's precision_mode on the emulated device (msprof_cli.device.precision, device-model.md 3.2)."""
from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from msprof_cli.capture import CaptureChunk, OpRun
from msprof_cli.capture import TensorSpec as T
from msprof_cli.collect.routes import session_precision
from msprof_cli.device import Device
from msprof_cli.device import readback as R
from msprof_cli.device.chip import ASCEND910
from msprof_cli.device.cost_model import evaluate
from msprof_cli.device.op_table import DT_FP16, Interner, SignatureRegistry, build_tables
from msprof_cli.device.precision import PrecisionPass, blocked, reduced_ops
from msprof_cli.errors import OptionsError
from msprof_cli.options import ProfilingConfig, normalize_precision_mode
from msprof_cli.raw.control import ClockPair
from msprof_cli.raw.hashing import name_hash
from test_ub_fusion import make_chunk as ops_chunk

CLOCK = ClockPair(wall_us=1_700_000_000_000_000, mono_ns=5_000_000_000_000)
T0 = CLOCK.mono_ns + 1_000_000
F = "float32"
X = T((32, 56, 56, 256), F)
C = T((256,), F)
# conv -> BiasAdd (gray) -> Relu (gray) -> Mean (block) -> Mul (gray after a blocked op)
OPS = [("conv/Conv2D", "Conv2D", (X, T((3, 3, 256, 256), F)), (X,)),
       ("conv/BiasAdd", "BiasAdd", (X, C), (X,)),
       ("relu/Relu", "Relu", (X,), (X,)),
       ("stats/Mean", "Mean", (X, T((3,), "int32")), (C,)),
       ("stats/Mul", "Mul", (C, C), (C,))]
PRODUCERS = {"conv/Conv2D": ("input", "kernel"), "conv/BiasAdd": ("conv/Conv2D", "bias"),
             "relu/Relu": ("conv/BiasAdd",), "stats/Mean": ("relu/Relu", "axes"),
             "stats/Mul": ("stats/Mean", "stats/Mean")}


def make_chunk(n_iter: int = 2) -> CaptureChunk:
    """The precision graph (OPS, PRODUCERS) as a capture chunk (test_ub_fusion's builder)."""
    return ops_chunk(OPS, dict(PRODUCERS), n_iter)


def durations(mode: str) -> dict[str, float]:
    """Modelled task duration (ticks) of each op of the chunk under `mode`."""
    chunk = make_chunk(1)
    sigs, names = SignatureRegistry(), Interner()
    table, _ = build_tables(chunk, sigs, names)
    table = PrecisionPass(normalize_precision_mode(mode)).apply(table, chunk.models, sigs, names)
    cost = evaluate(sigs.arrays(), ASCEND910)
    return {names.items[n]: float(cost.dur_ticks[s])
            for n, s in zip(table.name_idx.tolist(), table.sig.tolist())}


def test_modes_aliases_and_refusals():
    assert normalize_precision_mode("") == "allow_fp32_to_fp16"
    assert normalize_precision_mode("allow_mix_precision_fp16") == "allow_mix_precision"
    with pytest.raises(OptionsError, match="no fp32 kernels"):
        normalize_precision_mode("must_keep_origin_dtype")
    with pytest.raises(OptionsError, match="unknown mode \"fp8\".*allow_mix_precision"):
        normalize_precision_mode("fp8", "--precision-mode")


def test_gray_ops_follow_their_first_producer():
    lists = {"a": 1, "b": 0, "c": -1, "d": 0, "e": 0}
    producers = {"b": ("a",), "c": ("b",), "d": ("c",), "e": ("x", "a")}
    assert reduced_ops(producers, lists, {"a": 0, "b": 1, "c": 2, "d": 3, "e": 4}) == {"a", "b"}
    # nodes without an AI Core kernel pass their first producer's precision on (a node
    # Grappler rewrote under another name, a host-only op); a source is fp32
    producers = {"add": ("conv", "x"), "relu": ("add",), "read": ("var",), "mul": ("read",)}
    lists = {"conv": 1, "relu": 0, "mul": 0}
    order = {"conv": 0, "add": 1, "relu": 2, "var": 3, "read": 4, "mul": 5}
    assert reduced_ops(producers, lists, order) == {"conv", "relu"}
    # a producer not decided yet (a loop's back edge) counts as fp32
    assert reduced_ops({"b": ("c",), "c": ("b",)}, {"b": 0, "c": 0}, {}) == set()


def test_blocklist_keeps_reductions_losses_and_optimizer_updates():
    for ge in ("ReduceMeanD", "BiasAddGrad", "SoftmaxGrad", "Log", "L2Loss",
               "SparseSoftmaxCrossEntropyWithLogits", "ApplyAdamD", "ApplyGradientDescent",
               "AssignAdd"):
        assert blocked(ge), ge
    # unset in the 910's ops-info: graylist
    for ge in ("Mul", "Add", "Relu", "BiasAdd", "SoftmaxV2", "BatchNorm", "ReduceSumD", "Exp"):
        assert not blocked(ge), ge


def test_mixed_precision_halves_the_gray_ops_downstream_of_the_cube():
    base, mix, force = (durations(m) for m in
                        ("allow_fp32_to_fp16", "allow_mix_precision", "force_fp16"))
    assert mix["conv/Conv2D"] == base["conv/Conv2D"]  # the cube already ran fp16
    for op in ("conv/BiasAdd", "relu/Relu"):  # memory bound: about half the time
        assert 0.4 * base[op] < mix[op] < 0.65 * base[op], op
    assert mix["stats/Mean"] == base["stats/Mean"]  # blocklist
    assert mix["stats/Mul"] == base["stats/Mul"]  # gray after a blocked op: fp32
    assert force["stats/Mean"] < base["stats/Mean"]  # force_fp16 reduces every op
    assert force["relu/Relu"] == mix["relu/Relu"]


def test_reduced_signature_is_an_fp16_variant_and_ints_are_kept():
    sigs = SignatureRegistry()
    s = sigs.intern("Relu", (X,), (X,), 0)
    h = sigs.reduced(s)
    assert h != s and sigs.reduced(s) == h and sigs.reduced(h) == h
    assert sigs.dtype_class[h] == DT_FP16
    assert sigs.bytes_in[h] == sigs.bytes_in[s] / 2 and sigs.bytes_out[h] == sigs.bytes_out[s] / 2
    assert sigs.vec_elems[h] == sigs.vec_elems[s]
    assert np.array_equal(sigs.tensors[h], sigs.tensors[s])  # tensor_info keeps TF's dtypes
    i = sigs.intern("Add", (T((1024,), "int32"),) * 2, (T((1024,), "int32"),), 0)
    assert sigs.reduced(i) == i


def test_eager_ops_reduce_only_the_cube():
    chunk = CaptureChunk(single_ops=[OpRun(n, tf, T0 + k * 50_000, T0 + k * 50_000 + 20_000, 77,
                                           ins, outs, eager=True)
                                     for k, (n, tf, ins, outs) in enumerate(OPS[:2])])
    sigs, names = SignatureRegistry(), Interner()
    table, _ = build_tables(chunk, sigs, names)
    out = PrecisionPass("allow_mix_precision").apply(table, {}, sigs, names)
    assert out.sig[0] == sigs.reduced(int(table.sig[0]))  # Conv2D (no bytes to change)
    assert out.sig[1] == table.sig[1]  # BiasAdd: no upstream op to follow


def test_device_writes_shorter_tasks_and_the_same_records(tmp_path):
    def run(mode: str):
        prof = tmp_path / mode / "PROF_000001_20250101120000123_ABCDEFGHIJKLMNOP"
        cfg = ProfilingConfig(output="/tmp", training_trace=True, task_time="l1",
                              precision_mode=mode)
        dev = Device(prof, cfg, clock=CLOCK, pid=1, app=["python3", "t.py"], ub_fusion=False,
                     boundary_tasks=False)
        dev.consume(make_chunk())
        dev.close(ClockPair(CLOCK.wall_us + 10_000_000, CLOCK.mono_ns + 10_000_000_000))
        nbi = R.host_records(prof, "node_basic_info")
        hw = R.device_records(prof, "hwts", 0)
        return nbi, hw

    nbi0, hw0 = run("allow_fp32_to_fp16")
    nbi1, hw1 = run("allow_mix_precision")
    assert nbi0["op_name"].tolist() == nbi1["op_name"].tolist()  # same tasks, same names
    assert len(hw0) == len(hw1)
    relu = name_hash("relu/Relu")
    assert relu in nbi1["op_name"].tolist()
    def busy(hw) -> int:  # ticks between each task's start and end record
        kind = hw["flags"] & 7
        return int(hw["syscnt"][kind == 1].astype(np.int64).sum()
                   - hw["syscnt"][kind == 0].astype(np.int64).sum())

    # the two memory-bound gray ops are shorter, by what the cost model says, each iteration
    # (to a few ticks: in the device the mean's read of the ReLU's output finds the share of
    # it the graph left in L2, which follows the ReLU's bytes, docs/device-model.md 3.6)
    base, mix = durations("allow_fp32_to_fp16"), durations("allow_mix_precision")
    saved = sum(base[op] - mix[op] for op in ("conv/BiasAdd", "relu/Relu"))
    assert saved > 0 and busy(hw0) - busy(hw1) == pytest.approx(2 * saved, rel=1e-3)


def test_session_config_precision_mode_is_read():
    def cfg(params):
        opt = SimpleNamespace(name="NpuOptimizer", parameter_map=params)
        return SimpleNamespace(graph_options=SimpleNamespace(
            rewrite_options=SimpleNamespace(custom_optimizers=[opt])))

    assert session_precision(cfg({"precision_mode": SimpleNamespace(
        s=b"allow_mix_precision")})) == "allow_mix_precision"
    assert session_precision(cfg({})) is None
    assert session_precision(None) is None


def test_collect_refuses_a_mode_the_910_cannot_run(tmp_path):
    marker = tmp_path / "ran"
    res = subprocess.run([sys.executable, "-m", "msprof_cli", "collect", "--output",
                          str(tmp_path), "--precision-mode", "must_keep_origin_dtype", "--",
                          sys.executable, "-c", f"open({str(marker)!r}, 'w')"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2
    assert '--precision-mode "must_keep_origin_dtype"' in res.stderr
    assert "no fp32 kernels" in res.stderr
    assert not marker.exists() and not list(tmp_path.glob("PROF_*"))
