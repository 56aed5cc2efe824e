"""Unit tests of the emulated system's time (device/time_model.py, docs/device-model.md 5.2)
on small hand-built chunks: the CPU's op time never stretches the timeline, measured gaps and
input waits are kept, ModelExecute encloses the device's work."""
from __future__ import annotations

import numpy as np
from test_device_records import STEP_OPS, T0, make_iteration, run

from msprof_cli.capture import CaptureChunk, Iteration, ModelInfo, OpRun, TensorSpec
from msprof_cli.collect.converter_state import ConverterState
from msprof_cli.collect.op_shapes import step_batch, with_batch
from msprof_cli.collect.tf_graphs import StaticGraph, StaticOp
from msprof_cli.device import readback as R
from msprof_cli.device import time_model as TM
from msprof_cli.raw import layouts as L

MS = 1_000_000


def _chunk(cpu_ns: int, gap_ns: int, n: int = 3, wait_ns: int = 0) -> CaptureChunk:
    its, t = [], T0
    for i in range(n):
        it = make_iteration(1, i + 1, t, ops=STEP_OPS)
        scale = cpu_ns / max(it.end_ns - it.start_ns, 1)
        for op in it.ops:  # stretch the step to `cpu_ns` of CPU time
            op.start_ns = t + int((op.start_ns - t) * scale)
            op.end_ns = t + int((op.end_ns - t) * scale)
        it.end_ns = t + cpu_ns
        it.input_wait_ns = wait_ns
        its.append(it)
        t = it.end_ns + gap_ns
    return CaptureChunk(models={1: ModelInfo(1, "m", "__inference_step_1")}, iterations=its)


def _model_executes(prof):
    """Each step's span on the host: GE's InputCopy begin to its OutputCopy end, the
    ModelExecute between them (they follow each other: docs/formats/raw-format.md 4.12)."""
    api = R.host_records(prof, "api_event")
    model = api[api["level"] == L.LEVEL_MODEL]
    me = model[model["type"] == L.MODEL_EXECUTE]
    ic = model[model["type"] == L.MODEL_INPUT_COPY]
    oc = model[model["type"] == L.MODEL_OUTPUT_COPY]
    assert len(ic) == len(me) == len(oc)
    b = np.sort(ic["begin_time"].astype(np.int64))
    e = np.sort(oc["end_time"].astype(np.int64))
    # never nested: InputCopy < ModelExecute < OutputCopy, 1 ns apart at least
    assert np.all(np.sort(ic["end_time"].astype(np.int64)) < np.sort(me["begin_time"]))
    assert np.all(np.sort(me["end_time"].astype(np.int64)) < np.sort(oc["begin_time"]))
    return b, e


def test_cpu_time_of_device_ops_is_not_host_time(tmp_path):
    """The same steps run 1 ms or 500 ms on the CPU: the emulated steps are identical."""
    spans = []
    for k, cpu in enumerate((1 * MS, 500 * MS)):
        prof = run(tmp_path / str(k), [_chunk(cpu, 2 * MS)])
        b, e = _model_executes(prof)
        spans.append((e - b).tolist())
        assert np.all(np.diff(b) >= e[:-1] - b[:-1] + 2 * MS - 20)  # the measured gap (tick grid)
    assert spans[0] == spans[1]
    assert max(spans[0]) < 1 * MS  # a small step on the 910 takes well under a millisecond


def test_measured_gap_and_input_wait_are_kept(tmp_path):
    prof = run(tmp_path / "a", [_chunk(5 * MS, 3 * MS)])
    prof_w = run(tmp_path / "b", [_chunk(5 * MS, 3 * MS, wait_ns=4 * MS)])
    b, e = _model_executes(prof)
    bw, ew = _model_executes(prof_w)
    # the wait sits inside the step (GE's GetNext blocks in the model), the gap between steps
    assert np.allclose((ew - bw) - (e - b), 4 * MS, atol=1_000)
    assert np.allclose(bw[1:] - ew[:-1], 3 * MS, atol=20)
    assert np.allclose(b[1:] - e[:-1], 3 * MS, atol=20)


def test_model_execute_encloses_the_device_work(tmp_path):
    from test_device_records import CLOCK
    prof = run(tmp_path, [_chunk(2 * MS, 1 * MS, n=4)])
    b, e = _model_executes(prof)
    steps, _ = R.ts_track(prof)
    end_tags = steps[steps["tag_id"] == 1]  # model end markers, after the step's last task
    ns = (end_tags["timestamp"].astype(np.int64) - 1_000_000_000) * 10 + CLOCK.mono_ns
    assert len(ns) == 4 and np.all(ns < e) and np.all(ns > b)


def test_time_warp_is_monotone_and_keeps_gaps():
    w = TM.TimeWarp(delta=5)
    es = w.place(np.array([100, 1_000]), np.array([600, 1_100]), np.array([50, 300]))
    assert es.tolist() == [105, 555]  # the first event lost 450 ns
    t = np.array([0, 100, 350, 600, 700, 1_000, 1_050, 1_100, 2_000])
    out = w(t)
    assert np.all(np.diff(out) >= 0)
    assert out[0] == 5 and out[1] == 105 and out[3] == 155 and out[4] == 255
    assert w.delta == 5 - 450 + 200


def test_layout_orders_launches_after_host_work():
    it = np.array([0, 0, 0, -1])
    launch = np.array([True, False, True, True])
    eager = np.array([False, False, False, True])
    work = np.array([False, True, False, False])
    hs = np.array([10, 20, 5, 0])
    he = np.array([12, 3_020, 9, 1])
    lay = TM.layout(it, launch, eager, work, hs, he, 1, np.array([1_000]), np.zeros(4, np.int64))
    entry = TM.MODEL_EXECUTE_ENTRY_NS + 1_000 + 3_000  # input wait + the host op
    # InputCopy starts with ModelExecute and spans the entry and the measured host work
    assert lay.in_copy[0][0] == 0 and lay.in_copy[1][0] == entry + TM.COPY_API_NS
    # op 2 started first on the CPU, so it is launched first
    assert lay.op_rel_start[2] == entry + TM.COPY_API_NS
    assert lay.op_rel_start[0] == entry + TM.COPY_API_NS + TM.GRAPH_LAUNCH_NS


def _graph(feed_shape):
    g = StaticGraph()
    g.add("IteratorGetNext", StaticOp("IteratorGetNext", (), (TensorSpec(feed_shape, "float32"),
                                      TensorSpec((-1,), "int64")), ()))
    g.inputs.add("IteratorGetNext")
    return g


def test_batch_from_the_iterators_element_size():
    state = ConverterState()
    # batch 48 of (28, 28, 1) float32 images + int64 labels
    size = 48 * (28 * 28 * 4 + 8)
    assert step_batch(_graph((-1, 28, 28, 1)), [size], state, "k") == 48
    assert step_batch(_graph((-1, 28, 28, 1)), [size + 1], state, "k") is None
    assert step_batch(_graph((-1, -1, 1)), [size], state, "k") is None  # two unknowns
    op = OpRun("m", "MatMul", 0, 1, 0, (TensorSpec((-1, 784), "float32"),),
               (TensorSpec((-1, 10), "float32"),))
    with_batch(op, 48, state)
    assert op.inputs[0].shape == (48, 784) and op.outputs[0].shape == (48, 10)
