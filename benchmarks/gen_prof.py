"""Write a realistic Ascend910 PROF dir of N device tasks through the project's own device.

    python benchmarks/gen_prof.py --tasks 1000000 --out /tmp/bench [--devices 2] [--l2]
                                  [--soc-version Ascend910B3]

The data goes through ``msprof_cli.device.Device`` unchanged: the first chunk of each model
is a real ``CaptureChunk`` (so signatures, fp/bp choice, graph_id_map, fusion_op_info and
hash_dic come from layer (a) exactly as in a collection); after that the generator tiles the
op table of those template iterations (``OpTable`` / ``IterTable``, docs/device-model.md "Two
layers") in large batches with shifted host times and feeds layer (b) -- cost model,
scheduler, record builders, slice writer -- directly.  That is what makes 10,000,000 tasks
possible in minutes (layer (b) costs a few µs per op, layer (a) ~6 µs more).

What the PROF dir holds: host api_event (ModelExecute, GE Input/OutputCopy, node launch),
task_track (+ FLIP_TASK records), node_basic_info, tensor_info, graph_id_map,
fusion_op_info, hash_dic, type_info_dic; per device hwts, aicore (PipeUtilization PMU),
ts_track (step trace + task-id flips: ids roll over every 65,536 tasks per stream), aicpu
(AI CPU tasks), optionally l2_cache; two models (train: ~40 ops per step with AI Core, AI CPU
and HCCL all-reduce tasks; eval: every 10th step, forward only).  With ``--devices 2`` each
step runs on every device (data parallel) and hccl_info is written.  With ``--soc-version``
an Atlas A2 (docs/device-model.md 11): stars_soc / ffts_profile instead of hwts / aicore.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from msprof_cli.capture import (CaptureChunk, Iteration, ModelInfo,  # noqa: E402
                                        OpRun, TensorSpec)
from msprof_cli.device import Device  # noqa: E402
from msprof_cli.device.op_map import KIND_AI_CORE, KIND_AI_CPU  # noqa: E402
from msprof_cli.device.op_table import IterTable, OpTable, build_tables  # noqa: E402
from msprof_cli.options import ProfilingConfig  # noqa: E402
from msprof_cli.raw.control import ClockPair  # noqa: E402

PROF_NAME = "PROF_000001_20250101120000123_BENCHMARKPROFDIRX"
CLOCK = ClockPair(wall_us=1_700_000_000_000_000, mono_ns=5_000_000_000_000)
STEP_THREAD, POOL_THREAD = 4242, 4250
OP_SPACING = 60_000  # host ns between op launches (the device keeps up: no backlog)
STEP_GAP = 50_000
F = "float32"


def T(shape, dtype=F, fmt="ND") -> TensorSpec:
    return TensorSpec(tuple(shape), dtype, fmt)


def _conv(i: int, c_in: int, c_out: int, hw: int) -> list[tuple]:
    p = f"resnet/block{i}"
    x, w = T((32, hw, hw, c_in), F, "NHWC"), T((3, 3, c_in, c_out))
    y = T((32, hw, hw, c_out), F, "NHWC")
    return [
        (f"{p}/conv/Relu", "_MklNativeFusedConv2D", (x, w, T((c_out,))), (y,),
         (f"{p}/conv/Conv2D", f"{p}/conv/BiasAdd", f"{p}/conv/Relu")),
        (f"{p}/bn/FusedBatchNormV3", "FusedBatchNormV3",
         (y, T((c_out,)), T((c_out,)), T((c_out,)), T((c_out,))), (y,), ()),
    ]


def _conv_grad(i: int, c_in: int, c_out: int, hw: int) -> list[tuple]:
    p = f"gradient_tape/resnet/block{i}"
    x, w = T((32, hw, hw, c_in), F, "NHWC"), T((3, 3, c_in, c_out))
    dy = T((32, hw, hw, c_out), F, "NHWC")
    return [
        (f"{p}/bn/FusedBatchNormGradV3", "FusedBatchNormGradV3",
         (dy, dy, T((c_out,)), T((c_out,)), T((c_out,))), (dy,), ()),
        (f"{p}/conv/ReluGrad", "ReluGrad", (dy, dy), (dy,), ()),
        (f"{p}/conv/Conv2DBackpropInput", "Conv2DBackpropInput", (T((4,), "int32"), w, dy),
         (x,), ()),
        (f"{p}/conv/Conv2DBackpropFilter", "Conv2DBackpropFilter", (x, T((4,), "int32"), dy),
         (w,), ()),
    ]


BLOCKS = [(3, 16, 32), (16, 32, 16), (32, 64, 8), (64, 64, 8)]


def train_ops() -> list[tuple]:
    ops: list[tuple] = [("IteratorGetNext", "IteratorGetNext", (),
                         (T((32, 32, 32, 3)), T((32,), "int64")), ())]
    for i, (ci, co, hw) in enumerate(BLOCKS):
        ops += _conv(i, ci, co, hw)
    ops += [
        ("resnet/pool/MaxPool", "_MklNativeMaxPool", (T((32, 8, 8, 64)),), (T((32, 4, 4, 64)),),
         ()),
        ("resnet/flatten/Reshape", "Reshape", (T((32, 4, 4, 64)),), (T((32, 1024)),), ()),
        ("resnet/dropout/random_uniform/RandomUniform", "RandomUniform", (T((2,), "int32"),),
         (T((32, 1024)),), ()),
        ("resnet/dense/MatMul", "_MklMatMul", (T((32, 1024)), T((1024, 10))), (T((32, 10)),),
         ()),
        ("resnet/dense/Softmax", "Softmax", (T((32, 10)),), (T((32, 10)),), ()),
        ("loss/SparseSoftmaxCrossEntropyWithLogits", "SparseSoftmaxCrossEntropyWithLogits",
         (T((32, 10)), T((32,), "int64")), (T((32,)), T((32, 10))), ()),
        ("loss/Unique", "Unique", (T((32,), "int64"),), (T((32,), "int64"),
                                                         T((32,), "int32")), ()),
        ("gradient_tape/resnet/dense/MatMul/MatMul", "_MklMatMul",
         (T((32, 10)), T((1024, 10))), (T((32, 1024)),), ()),
        ("gradient_tape/resnet/dense/MatMul/MatMul_1", "_MklMatMul",
         (T((32, 1024)), T((32, 10))), (T((1024, 10)),), ()),
        ("gradient_tape/resnet/pool/MaxPoolGrad", "MaxPoolGrad",
         (T((32, 8, 8, 64)), T((32, 4, 4, 64)), T((32, 4, 4, 64))), (T((32, 8, 8, 64)),), ()),
    ]
    for i, (ci, co, hw) in reversed(list(enumerate(BLOCKS))):
        ops += _conv_grad(i, ci, co, hw)
    ops += [
        ("allreduce/CollectiveReduceV2", "CollectiveReduceV2", (T((1024, 10)),),
         (T((1024, 10)),), ()),
        ("allreduce/CollectiveReduceV2_1", "CollectiveReduceV2", (T((3, 3, 64, 64)),),
         (T((3, 3, 64, 64)),), ()),
    ]
    for i, (ci, co, _) in enumerate(BLOCKS):
        w = T((3, 3, ci, co))
        ops.append((f"adam/block{i}/ResourceApplyAdam", "ResourceApplyAdam",
                    (T((), "resource"), T((), "resource"), T((), "resource"), T(()), T(()),
                     T(()), T(()), T(()), T(()), w), (), ()))
    ops.append(("adam/AssignAddVariableOp", "AssignAddVariableOp",
                (T((), "resource"), T((), "int64")), (), ()))
    return ops


def eval_ops() -> list[tuple]:
    ops: list[tuple] = []
    for i, (ci, co, hw) in enumerate(BLOCKS):
        ops += _conv(i, ci, co, hw)
    ops += [("resnet/dense/MatMul", "_MklMatMul", (T((32, 1024)), T((1024, 10))),
             (T((32, 10)),), ()),
            ("resnet/dense/Softmax", "Softmax", (T((32, 10)),), (T((32, 10)),), ())]
    return ops


def iteration(model: int, index: int, start: int, ops: list[tuple], devices: tuple[int, ...]
              ) -> Iteration:
    runs, t = [], start + 5_000
    for name, tf_type, ins, outs, fused in ops:
        for d in devices:
            runs.append(OpRun(name, tf_type, t, t + 20_000, POOL_THREAD, ins, outs, fused, d))
        t += OP_SPACING
    return Iteration(model, index, start, t + 5_000, STEP_THREAD, runs)


def config(out: Path, l2: bool, hccl: bool) -> ProfilingConfig:
    return ProfilingConfig(output=str(out), training_trace=True, task_time="l1", aicpu=True,
                           l2=l2, hccl=hccl, aic_metrics="PipeUtilization",
                           aic_events=(0x8, 0xA, 0x9, 0xB, 0xC, 0xD, 0x55, 0x54))


def _tile(ops: OpTable, iters: IterTable, reps: int, shift_ns: np.ndarray,
          index_add: np.ndarray) -> tuple[OpTable, IterTable]:
    """`reps` copies of a template chunk, copy k shifted by shift_ns[k] host ns and its
    iteration numbers by index_add[k]."""
    n, m = len(ops), len(iters)
    sh_op = np.repeat(shift_ns, n)
    rows = np.tile(np.arange(n), reps)
    it_off = np.repeat(np.arange(reps, dtype=np.int64) * m, n)
    t_ops = OpTable(
        device_id=ops.device_id[rows], model_id=ops.model_id[rows],
        iter_row=np.where(ops.iter_row[rows] >= 0, ops.iter_row[rows] + it_off, -1),
        name_idx=ops.name_idx[rows], sig=ops.sig[rows], thread=ops.thread[rows],
        host_start=ops.host_start[rows] + sh_op, host_end=ops.host_end[rows] + sh_op,
        fused_idx=ops.fused_idx[rows], fused=ops.fused)
    irows = np.tile(np.arange(m), reps)
    sh_it = np.repeat(shift_ns, m)
    t_iters = IterTable(model_id=iters.model_id[irows],
                        index=iters.index[irows] + np.repeat(index_add, m),
                        start=iters.start[irows] + sh_it, end=iters.end[irows] + sh_it,
                        thread=iters.thread[irows])
    return t_ops, t_iters


def generate(tasks: int, out: Path, *, devices: int = 1, l2: bool = False,
             batch_tasks: int = 400_000, eval_every: int = 10, name: str = PROF_NAME,
             quiet: bool = False, chip: str = "Ascend910A") -> Path:
    """Write PROF dir `out/name` with about `tasks` device tasks (all devices together)."""
    out = Path(out)
    prof = out / name
    if prof.exists():
        raise SystemExit(f"{prof} exists; remove it or choose another --out")
    dev_ids = tuple(range(devices))
    dev = Device(prof, config(out, l2, devices > 1), clock=CLOCK, pid=4242,
                 app=["python3", "train.py"], device_ids=dev_ids, chip=chip)
    tr, ev = train_ops(), eval_ops()
    order_t = {o[0]: i for i, o in enumerate(tr)}
    order_e = {o[0]: i for i, o in enumerate(ev)}
    models = {1: ModelInfo(1, "resnet_train", "__inference_train_step_101", op_order=order_t),
              2: ModelInfo(2, "resnet_eval", "__inference_test_step_202", op_order=order_e)}
    # one "period" = (eval_every - 1) train steps + 1 eval step, as a real CaptureChunk
    its, t = [], CLOCK.mono_ns + 1_000_000
    for k in range(eval_every):
        is_eval = k == eval_every - 1
        it = iteration(2 if is_eval else 1, 1 if is_eval else k + 1, t,
                       ev if is_eval else tr, dev_ids)
        its.append(it)
        t = it.end_ns + STEP_GAP
    period_ns = t - its[0].start_ns
    chunk = CaptureChunk(models=models, iterations=its)
    dev.consume(chunk)  # layer (a) + (b) once: signatures, fp/bp, graph map, fusion info
    t_ops, t_iters = build_tables(CaptureChunk(models=models, iterations=its), dev.sigs,
                                  dev.names)
    kind = dev.sigs.arrays()["kind"][t_ops.sig]
    per_period = int(np.count_nonzero(np.isin(kind, [KIND_AI_CORE, KIND_AI_CPU])))  # hwts + aicpu
    written = per_period
    p = 1
    t0 = time.perf_counter()
    batch = max(1, batch_tasks // per_period)
    while written < tasks:
        reps = min(batch, -(-(tasks - written) // per_period))
        k = np.arange(p, p + reps, dtype=np.int64)
        ops, iters = _tile(t_ops, t_iters, reps, k * period_ns, np.zeros(reps, np.int64))
        # train steps advance by eval_every - 1 per period, eval steps by 1
        base = np.repeat(k, len(t_iters))
        iters.index = np.tile(t_iters.index, reps) + np.where(
            iters.model_id == 1, base * (eval_every - 1), base)
        dev.consume_tables(ops, iters)
        written += reps * per_period
        p += reps
        if not quiet:
            el = time.perf_counter() - t0
            print(f"\r{written:,} tasks, {p * eval_every:,} steps, {el:.1f} s", end="",
                  file=sys.stderr, flush=True)
    dev.close(ClockPair(CLOCK.wall_us + p * period_ns // 1000 + 1_000_000,
                        CLOCK.mono_ns + p * period_ns + 1_000_000_000))
    if not quiet:
        print(file=sys.stderr)
    return prof


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, required=True, help="device tasks to write (approx.)")
    ap.add_argument("--out", type=Path, required=True, help="directory to create the PROF in")
    ap.add_argument("--devices", type=int, default=1, help="devices (data parallel)")
    ap.add_argument("--l2", action="store_true", help="also write l2_cache.data")
    ap.add_argument("--batch", type=int, default=400_000, help="ops per layer-(b) batch")
    ap.add_argument("--soc-version", default="Ascend910A", help="the emulated chip")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    prof = generate(a.tasks, a.out, devices=a.devices, l2=a.l2, batch_tasks=a.batch,
                    chip=a.soc_version)
    size = sum(f.stat().st_size for f in prof.rglob("*") if f.is_file())
    print(f"{prof}: {a.tasks:,} tasks requested, {size / 2**20:.0f} MiB, "
          f"{time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
