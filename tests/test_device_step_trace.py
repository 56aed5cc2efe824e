"""Placement of the step-trace FP / BP markers (docs/device-model.md 7) in iterations whose host
launch order is not the device's: a Keras GRU's while loops, whose counter and condition ops TF
runs ahead of the data.  A real 910 writes tag 2 (FP) before tag 3 (BP) in every iteration."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from test_device_records import OP_SPACING, T0, config, hwts_tasks, make_iteration, run

from msprof_cli.capture import CaptureChunk, ModelInfo
from msprof_cli.capture import TensorSpec as T
from msprof_cli.device import readback as R
from msprof_cli.device.step_trace import NameClasses, is_backward, loop_scope
from msprof_cli.raw import layouts as L
from msprof_cli.raw.hashing import name_hash

F = "float32"
X = T((32, 12, 8), F)
H = T((32, 16), F)
GRAD_LOOP = "gradient_tape/gru/while/gru/while_grad"
GRAD_COND = f"{GRAD_LOOP}/cond/_10/gradient_tape/gru/while/Less"  # the collector's BP op
GRAD_BODY = f"{GRAD_LOOP}/body/_11/gradient_tape/gru/while/gradients"
FWD_BODY = "gru/while/body/_3/gru/while/gru_cell"


def _gru_step(steps: int = 3) -> list[tuple]:
    """One training step in the order TF's executor ran it: the loops' condition ops first
    (they depend on no data), then the forward pass from its first data consumer, the
    backward loop's bodies (a MatMul, and a recurrent-dropout mask drawn on the AI CPU), the
    optimizer."""
    ops: list[tuple] = []
    ops += [("gru/while/cond/_2/gru/while/Less", "Less", (T((), "int32"),) * 2,
             (T((), "bool"),), ())] * steps
    ops += [(GRAD_COND, "Less", (T((), "int32"),) * 2, (T((), "bool"),), ())] * steps
    ops.append(("gru/transpose", "_MklTranspose", (X,), (T((12, 32, 8), F),), ()))
    ops += [(f"{FWD_BODY}/MatMul", "_MklMatMul", (T((32, 8), F), T((8, 48), F)),
             (T((32, 48), F),), ())] * steps
    ops.append(("dense/MatMul", "_MklMatMul", (H, T((16, 1), F)), (T((32, 1), F),), ()))
    ops.append(("gradient_tape/dense/MatMul/MatMul", "_MklMatMul", (T((32, 1), F),
                T((16, 1), F)), (H,), ()))
    for _ in range(steps):
        # a mask large enough that the AI CPU's stream lags behind the compute stream's
        ops.append((f"{GRAD_BODY}/StatelessRandomUniformV2", "StatelessRandomUniformV2",
                    (T((2,), "int32"),), (T((64, 1024), F),), ()))
        ops.append((f"{GRAD_BODY}/MatMul", "_MklMatMul", (H, T((16, 48), F)),
                    (T((32, 48), F),), ()))
    ops.append(("rm_sprop/Mul", "Mul", (T((8, 48), F), T((), F)), (T((8, 48), F),), ()))
    return ops


def _chunk(ops: list[tuple], *, fp: str, bp: str, n_iter: int = 3,
           spacing: int = OP_SPACING,
           producers: dict[str, tuple[str, ...]] | None = None) -> CaptureChunk:
    its, t = [], T0
    for i in range(n_iter):
        it = make_iteration(1, i + 1, t, ops=ops, spacing=spacing)
        its.append(it)
        t = it.end_ns + 50_000
    # the collector's choice (collect/model_graph.py: the gradient op with the largest op
    # id, here the backward loop's condition, as for the Keras GRU)
    info = {1: ModelInfo(1, "sequential", "__inference_train_function_1", fp_op=fp, bp_op=bp,
                         op_order={o[0]: k for k, o in enumerate(ops)},
                         producers=producers or {})}
    return CaptureChunk(models=info, iterations=its)


def _tags(prof: Path) -> dict[int, dict[int, tuple[int, int]]]:
    """iteration -> tag -> (timestamp, task id); asserts the tag order of each iteration."""
    steps, _ = R.ts_track(prof)
    out = {}
    for idx in sorted(set(steps["index_id"].tolist())):
        s = steps[steps["index_id"] == idx]
        assert s["tag_id"].tolist() == [0, 2, 3, 4, 1], (idx, s["tag_id"].tolist())
        out[idx] = {int(r["tag_id"]): (int(r["timestamp"]), int(r["task_id"])) for r in s}
    return out


def _task_ends(prof: Path, name: str) -> np.ndarray:
    """End times (syscnt) of the AI Core tasks of one op, in task order."""
    track = R.host_records(prof, "task_track")
    ids = {int(r["task_id"]) for r in track
           if int(r["kernel_name"]) == name_hash(name) and int(r["stream_id"]) == 2}
    tasks = hwts_tasks(prof)
    return np.sort(tasks.end[np.isin(tasks.task, list(ids))])


def test_loop_scope_and_classes() -> None:
    assert loop_scope(GRAD_COND) == GRAD_LOOP
    assert loop_scope(f"{GRAD_BODY}/MatMul") == GRAD_LOOP
    assert loop_scope("gru/transpose") is None
    nested = "a/while/body/_1/a/while/inner/cond/_7/Less"
    assert loop_scope(nested) == "a/while"  # the outermost loop: GE's view from the root
    assert is_backward(GRAD_COND) and not is_backward("gru/transpose")
    nc = NameClasses()
    loop, bwd = nc.of(["gru/transpose", GRAD_COND])
    loop2, bwd2 = nc.of(["gru/transpose", GRAD_COND, f"{GRAD_BODY}/MatMul", "x/cond/_1/y"])
    assert loop.tolist() == [-1, 0] and bwd.tolist() == [False, True]
    assert loop2.tolist() == [-1, 0, 0, 1] and bwd2.tolist() == [False, True, True, False]


def test_bp_op_in_a_loop_ends_after_the_loop(tmp_path: Path) -> None:
    """The Keras GRU case: the BP op is the backward loop's condition, whose executions TF
    ran before the forward pass began; the BP marker used to come before the FP marker
    (ts_track tags 0, 3, 2, 4, 1; FP to BP Time negative, N/A in the real analysis)."""
    prof = run(tmp_path, [_chunk(_gru_step(), fp="gru/transpose", bp=GRAD_COND)],
               config(aicpu=False))
    tags = _tags(prof)
    transpose = _task_ends(prof, "gru/transpose")
    grad_mm = _task_ends(prof, f"{GRAD_BODY}/MatMul")
    for k, idx in enumerate(sorted(tags)):
        fp, bp = tags[idx][2][0], tags[idx][3][0]
        assert fp < bp
        # FP before the first forward task; BP after the backward loop's last task
        assert fp < transpose[k] <= bp
        assert bp >= grad_mm[3 * k + 2]
        assert tags[idx][2][1] < tags[idx][3][1]  # and before it on the stream


def test_bp_op_run_ahead_moves_to_the_last_backward_task(tmp_path: Path) -> None:
    """A BP op outside loops that depends on no forward data (a gradient-scope Fill TF runs
    first): the BP marker goes after the iteration's last backward task instead."""
    ops = [("gradient_tape/gru/zeros", "Fill", (T((2,), "int32"), T((), F)), (H,), ())]
    ops += [o for o in _gru_step() if o[0] != GRAD_COND]
    prof = run(tmp_path, [_chunk(ops, fp="gru/transpose", bp="gradient_tape/gru/zeros")],
               config(aicpu=False))
    tags = _tags(prof)
    grad_mm = _task_ends(prof, f"{GRAD_BODY}/MatMul")
    opt = _task_ends(prof, "rm_sprop/Mul")
    for k, idx in enumerate(sorted(tags)):
        bp = tags[idx][3][0]
        assert tags[idx][2][0] < bp and grad_mm[3 * k + 2] <= bp < opt[k]


def test_bp_marker_waits_for_the_loops_ai_cpu_tasks(tmp_path: Path) -> None:
    """Launched close together, the loop's AI CPU tasks end after its last compute task (the
    AI CPU stream lags: the graph's data edges say no compute task consumes the masks): the
    BP marker waits for them (GE: a loop ends when all its body's tasks have)."""
    edges = {f"{GRAD_BODY}/MatMul": ("gru/transpose",)}
    prof = run(tmp_path, [_chunk(_gru_step(), fp="gru/transpose", bp=GRAD_COND, n_iter=1,
                                 spacing=2_000, producers=edges)], config(aicpu=False))
    tags = _tags(prof)
    raw = R.device_records(prof, "ts_track", 0)
    tt = raw[raw["rpt_type"] == L.TS_RPT_TASK_TYPE].view(L.TS_TRACK_TASK_TYPE)
    ends = tt["timestamp"][tt["task_state"] == L.TS_STATE_END].astype(np.int64)
    assert len(ends) == 3 and ends.max() > _task_ends(prof, f"{GRAD_BODY}/MatMul").max()
    assert tags[1][3][0] >= ends.max()
