"""End-to-end tests of msprof_cli.device.Device: build CaptureChunks by hand, run the device
into tmp_path and read the raw files back with the shared layouts."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from shared_paths import GOLDEN_RAW

from msprof_cli.capture import SINGLE_OP_MODEL_ID, CaptureChunk, Iteration, ModelInfo, OpRun
from msprof_cli.capture import TensorSpec as T
from msprof_cli.capture import TxMarker
from msprof_cli.device import Device
from msprof_cli.device import readback as R
from msprof_cli.device.chip import ASCEND910
from msprof_cli.device.cost_model import evaluate
from msprof_cli.device.op_table import SignatureRegistry
from msprof_cli.options import AIC_METRIC_EVENTS, ProfilingConfig
from msprof_cli.raw import enums as EN
from msprof_cli.raw import layouts as L
from msprof_cli.raw.control import ClockPair, read_ini, read_json_line
from msprof_cli.raw.hashing import name_hash

CLOCK = ClockPair(wall_us=1_700_000_000_000_000, mono_ns=5_000_000_000_000)
T0 = CLOCK.mono_ns + 1_000_000
STEP_THREAD = 4242
POOL_THREAD = 4250

# (name, tf_type, inputs, outputs, fused_ops) of one Keras-like training step
F = "float32"
STEP_OPS = [
    ("IteratorGetNext", "IteratorGetNext", (), (T((32, 28, 28, 1), F), T((32,), "int64")), ()),
    ("sequential/conv2d/Conv2D/ReadVariableOp", "ReadVariableOp", (), (T((3, 3, 1, 16), F),), ()),
    ("sequential/conv2d/Relu", "_MklNativeFusedConv2D",
     (T((32, 28, 28, 1), F), T((3, 3, 1, 16), F), T((16,), F)), (T((32, 26, 26, 16), F),),
     ("sequential/conv2d/Conv2D", "sequential/conv2d/BiasAdd", "sequential/conv2d/Relu")),
    ("sequential/max_pooling2d/MaxPool", "_MklNativeMaxPool", (T((32, 26, 26, 16), F),),
     (T((32, 13, 13, 16), F),), ()),
    ("sequential/flatten/Reshape", "Reshape", (T((32, 13, 13, 16), F), T((2,), "int32")),
     (T((32, 2704), F),), ()),
    ("sequential/dense/MatMul", "_MklMatMul", (T((32, 2704), F), T((2704, 10), F)),
     (T((32, 10), F),), ()),
    ("sequential/dense/Softmax", "Softmax", (T((32, 10), F),), (T((32, 10), F),), ()),
    ("compile_loss/sparse_categorical_crossentropy/SparseSoftmaxCrossEntropyWithLogits",
     "SparseSoftmaxCrossEntropyWithLogits", (T((32, 10), F), T((32,), "int64")),
     (T((32,), F), T((32, 10), F)), ()),
    ("gradient_tape/sequential/dense/MatMul/MatMul", "_MklMatMul",
     (T((32, 10), F), T((2704, 10), F)), (T((32, 2704), F),), ()),
    ("gradient_tape/sequential/dense/MatMul/MatMul_1", "_MklMatMul",
     (T((32, 2704), F), T((32, 10), F)), (T((2704, 10), F),), ()),
    ("gradient_tape/sequential/max_pooling2d/MaxPool/MaxPoolGrad", "MaxPoolGrad",
     (T((32, 26, 26, 16), F), T((32, 13, 13, 16), F), T((32, 13, 13, 16), F)),
     (T((32, 26, 26, 16), F),), ()),
    ("gradient_tape/sequential/conv2d/Relu/ReluGrad", "ReluGrad",
     (T((32, 26, 26, 16), F), T((32, 26, 26, 16), F)), (T((32, 26, 26, 16), F),), ()),
    ("gradient_tape/sequential/conv2d/Conv2D/Conv2DBackpropFilter", "Conv2DBackpropFilter",
     (T((32, 28, 28, 1), F), T((4,), "int32"), T((32, 26, 26, 16), F)),
     (T((3, 3, 1, 16), F),), ()),
    ("dropout/random_uniform/RandomUniform", "RandomUniform", (T((2,), "int32"),),
     (T((32, 10), F),), ()),
    ("adam/ResourceApplyAdam", "ResourceApplyAdam",
     (T((), "resource"), T((), "resource"), T((), "resource"), T((), F), T((), F), T((), F),
      T((), F), T((), F), T((), F), T((3, 3, 1, 16), F)), (), ()),
    ("adam/AssignAddVariableOp", "AssignAddVariableOp", (T((), "resource"), T((), "int64")),
     (), ()),
]
OP_SPACING = 40_000
OP_DUR = 25_000


def device_op_names(ops=STEP_OPS):
    from msprof_cli.device.op_map import KIND_NONE, map_op
    return [o[0] for o in ops if map_op(o[1]).kind != KIND_NONE]


def make_iteration(model_id: int, index: int, start: int, *, ops=STEP_OPS, device_id: int = 0,
                   thread: int = STEP_THREAD, spacing: int = OP_SPACING) -> Iteration:
    runs = []
    t = start + 5_000
    for name, tf_type, ins, outs, fused in ops:
        runs.append(OpRun(name, tf_type, t, t + OP_DUR, POOL_THREAD, ins, outs, fused,
                          device_id))
        t += spacing
    return Iteration(model_id, index, start, t + 5_000, thread, runs)


def make_chunk(n_iter: int = 3, first_index: int = 1, start: int = T0, models=True,
               ops=STEP_OPS, **kw) -> CaptureChunk:
    its = []
    t = start
    for i in range(n_iter):
        it = make_iteration(1, first_index + i, t, ops=ops, **kw)
        its.append(it)
        t = it.end_ns + 50_000
    info = {1: ModelInfo(1, "sequential", "__inference_train_step_974",
                         op_order={o[0]: i for i, o in enumerate(ops)})} if models else {}
    return CaptureChunk(models=info, iterations=its)


def config(**kw) -> ProfilingConfig:
    base = dict(output="/tmp", training_trace=True, task_time="l1", aicpu=True)
    base.update(kw)
    return ProfilingConfig(**base)


def run(tmp: Path, chunks, cfg=None, **kw) -> Path:
    prof = tmp / "PROF_000001_20250101120000123_ABCDEFGHIJKLMNOP"
    dev = Device(prof, cfg or config(), clock=CLOCK, pid=4242, app=["python3", "train.py"],
                 **kw)
    for c in chunks:
        dev.consume(c)
    dev.close(ClockPair(CLOCK.wall_us + 10_000_000, CLOCK.mono_ns + 10_000_000_000))
    return prof


def hwts_tasks(prof: Path, dev: int = 0) -> np.ndarray:
    """(stream, task, start, end) per AI Core task from hwts.data."""
    hw = R.device_records(prof, "hwts", dev)
    st = hw[(hw["flags"] & 7) == 0]
    en = hw[(hw["flags"] & 7) == 1]
    assert len(st) == len(en)
    return np.rec.fromarrays([st["stream_id"], st["task_id"], st["syscnt"].astype(np.int64),
                              en["syscnt"].astype(np.int64)],
                             names="stream,task,start,end")


# --- tests ---------------------------------------------------------------------------------

def test_control_files_written_at_construction(tmp_path):
    prof = tmp_path / "PROF_000001_20250101120000123_ABCDEFGHIJKLMNOP"
    Device(prof, config(), clock=CLOCK, pid=4242, app=["python3", "train.py", "--x"],
           device_ids=(0, 1))
    # a SIGKILL right now still leaves a valid dir: all mandatory control files exist
    for d, suffix in (("host", ""), ("device_0", ".0"), ("device_1", ".1")):
        for name in ("start_info", "info.json", "host_start.log"):
            assert (prof / d / f"{name}{suffix}").is_file(), (d, name)
        assert (prof / d / "sample.json").is_file()
    assert (prof / "device_1" / "dev_start.log.1").is_file()
    info = read_json_line(prof / "device_1" / "info.json.1")
    assert info["devices"] == "1" and info["DeviceInfo"][0]["ai_core_num"] == 32
    assert info["platform_version"] == "1" and info["drvVersion"] >= 467473
    assert read_json_line(prof / "host" / "info.json")["DeviceInfo"] == []
    start = read_json_line(prof / "device_0" / "start_info.0")
    assert start["clockMonotonicRaw"] == str(CLOCK.mono_ns)
    assert read_ini(prof / "device_0" / "dev_start.log.0")["cntvct"] == "1000000000"
    golden = next(GOLDEN_RAW.glob("PROF_*"))
    gkeys = list(read_json_line(golden / "host" / "sample.json"))
    sample = read_json_line(prof / "device_0" / "sample.json")
    assert list(sample) == gkeys
    assert sample["devices"] == "0" and sample["ai_core_profiling"] == "on"
    assert sample["ai_core_profiling_events"] == "0x8,0xa,0x9,0xb,0xc,0xd,0x54,0x55"
    assert sample["aicpuTrace"] == "on" and sample["ts_keypoint"] == "on"
    assert sample["app_parameters"] == "train.py --x"
    assert read_json_line(prof / "host" / "sample.json")["devices"] == "64"
    types = (prof / "host/data/unaging.additional.type_info_dic.slice_0").read_text()
    assert "5000_0:KERNEL_AICORE" in types and "15000_1:ModelExecute" in types
    assert "5000_98:FLIP_TASK" in types and "10000_5:launch" in types


def test_record_sizes_magic_and_counters(tmp_path):
    prof = run(tmp_path, [make_chunk(3), make_chunk(2, first_index=4, start=T0 + 10**8)],
               config(l2=True))
    data = prof / "host" / "data"
    sizes = {"api_event.data": 40, "compact.task_track": 64, "compact.node_basic_info": 64,
             "additional.tensor_info": 256, "additional.graph_id_map": 256,
             "additional.fusion_op_info": 256}
    for kind, size in sizes.items():
        f = data / f"unaging.{kind}.slice_0"
        assert f.stat().st_size % size == 0 and f.stat().st_size > 0, kind
    for kind in ("api_event", "task_track", "node_basic_info", "tensor_info"):
        assert np.all(R.host_records(prof, kind)["magic"] == L.MAGIC)
    ddata = prof / "device_0" / "data"
    for kind, size in (("hwts", 64), ("aicore", 128), ("ts_track", 40), ("aicpu", 128),
                       ("l2_cache", 72)):
        f = ddata / f"{L.DEVICE_FILES[kind]}.0.slice_0"
        assert f.stat().st_size % size == 0 and f.stat().st_size > 0, kind
    hw = R.device_records(prof, "hwts")
    assert np.array_equal(hw["flags"] >> 4, np.arange(len(hw)) % 16)
    ac = R.device_records(prof, "aicore")
    assert np.array_equal(ac["flags"] >> 4, np.arange(len(ac)) % 16)
    assert len(ac) == len(hw) // 2
    assert np.all(R.device_records(prof, "aicpu")["magic"] == L.MAGIC)
    assert np.all(R.device_records(prof, "aicpu")["data_tag"] == 60)


def test_hwts_pairs_and_monotonic_streams(tmp_path):
    prof = run(tmp_path, [make_chunk(3), make_chunk(2, first_index=4, start=T0 + 10**8)])
    hw = R.device_records(prof, "hwts")
    for stream in np.unique(hw["stream_id"]):
        h = hw[hw["stream_id"] == stream]
        assert np.all(np.diff(h["syscnt"].astype(np.int64)) >= 0)
        types = h["flags"] & 7
        assert np.array_equal(types, np.tile([0, 1], len(h) // 2))  # start, end, start, end
        assert np.array_equal(h["task_id"][0::2], h["task_id"][1::2])
    t = hwts_tasks(prof)
    assert np.all(t.end > t.start)
    assert np.all(t.start[1:] > t.end[:-1])  # in order on the stream
    ai = R.device_records(prof, "aicpu")
    assert np.all(ai["run_end_tick"] > ai["run_start_tick"])
    assert np.all(np.diff(ai["run_start_tick"].astype(np.int64)) > 0)


def test_launch_windows_contain_compact_records(tmp_path):
    chunk = make_chunk(2)
    # a single eager op with a 1 ns host interval must be widened
    chunk.single_ops.append(OpRun("Add", "AddV2", T0 + 9 * 10**7, T0 + 9 * 10**7 + 1, 77,
                                  (T((10,), F),) * 2, (T((10,), F),)))
    prof = run(tmp_path, [chunk])
    api = R.host_records(prof, "api_event")
    launch = api[(api["level"] == L.LEVEL_NODE) & (api["type"] == L.NODE_LAUNCH)]
    assert np.all(launch["end_time"] > launch["begin_time"])
    assert np.all(launch["begin_time"] > 0)
    for kind in ("node_basic_info", "tensor_info", "task_track"):
        rec = R.host_records(prof, kind)
        if kind == "task_track":
            # flips and the GE input/output copies (inside InputCopy/OutputCopy, not a launch:
            # tests/test_device_memcpy.py) are not op launches
            rec = rec[~np.isin(rec["task_type"], [EN.RUNTIME_TASK_TYPE_IDS["FLIP_TASK"],
                                                  EN.RUNTIME_TASK_TYPE_IDS["MEMCPY_ASYNC"]])]
        name_field = "kernel_name" if kind == "task_track" else "op_name"
        for r in rec:
            w = launch[(launch["thread_id"] == r["thread_id"])
                       & (launch["begin_time"] <= r["timestamp"])
                       & (launch["end_time"] >= r["timestamp"])]
            assert len(w) == 1, (kind, r)
            assert w["item_id"][0] == r[name_field]
    # launch windows of one thread never overlap
    for thr in np.unique(launch["thread_id"]):
        w = np.sort(launch[launch["thread_id"] == thr], order="begin_time")
        assert np.all(w["begin_time"][1:] > w["end_time"][:-1])
    # iteration ops are recorded on the step thread (GE launches from ModelExecute's thread)
    assert set(np.unique(launch["thread_id"]).tolist()) == {STEP_THREAD, 77}


def test_model_execute_encloses_launches_and_matches_step_trace(tmp_path):
    prof = run(tmp_path, [make_chunk(3)])
    api = R.host_records(prof, "api_event")
    me = api[(api["level"] == L.LEVEL_MODEL) & (api["type"] == L.MODEL_EXECUTE)]
    launch = api[api["level"] == L.LEVEL_NODE]
    assert len(me) == 3 and np.all(me["item_id"] == 1)
    for w in launch:
        inside = me[(me["begin_time"] <= w["begin_time"]) & (me["end_time"] >= w["end_time"])]
        assert len(inside) == 1
    assert len(launch) == 3 * len(device_op_names())
    steps, _ = R.ts_track(prof)
    assert set(steps["model_id"].tolist()) == set(me["item_id"].tolist())
    # api records are written at their end: file order = end time order
    assert np.all(np.diff(api["end_time"].astype(np.int64)) >= 0)


def test_step_trace_tags(tmp_path):
    prof = run(tmp_path, [make_chunk(3)])
    steps, _ = R.ts_track(prof)
    assert np.all(steps["buf_size"] == 40) and np.all(steps["stream_id"] == 2)
    assert np.all(np.diff(steps["timestamp"].astype(np.int64)) >= 0)
    tasks = hwts_tasks(prof)
    names = {name_hash(n): n for n in device_op_names()}
    track = R.host_records(prof, "task_track")
    track = track[track["stream_id"] == 2]
    task_name = {int(r["task_id"]): names[int(r["kernel_name"])] for r in track}
    for idx in (1, 2, 3):
        s = steps[steps["index_id"] == idx]
        assert s["tag_id"].tolist() == [0, 2, 3, 4, 1]
        ts = dict(zip(s["tag_id"].tolist(), s["timestamp"].astype(np.int64).tolist()))
        it_tasks = tasks[(tasks.start > ts[0]) & (tasks.end <= ts[4])]
        # FP just before the first compute op, BP right after the last gradient op
        first = it_tasks[np.argmin(it_tasks.start)]
        assert task_name[int(first.task)] == "sequential/conv2d/Relu"
        assert ts[2] < first.start
        bp = [t for t in it_tasks if task_name[int(t.task)] ==
              "gradient_tape/sequential/conv2d/Conv2D/Conv2DBackpropFilter"][0]
        assert ts[3] >= bp.end and ts[3] - bp.end <= 100
        assert ts[4] >= it_tasks.end.max() and ts[1] >= ts[4]
    # marker tasks take task ids on the stream but are not in hwts
    assert not set(steps["task_id"].tolist()) & set(tasks.task.tolist())
    all_ids = sorted(steps["task_id"].tolist() + tasks.task.tolist())
    assert all_ids == list(range(1, len(all_ids) + 1))


def test_fp_bp_options(tmp_path):
    cfg = config(fp_point="sequential/dense/MatMul", bp_point="no/such/op")
    prof = tmp_path / "PROF_000001_20250101120000123_ABCDEFGHIJKLMNOP"
    dev = Device(prof, cfg, clock=CLOCK, pid=1, app=["python3"])
    dev.consume(make_chunk(1))
    dev.close(CLOCK)
    assert dev.fpbp[1].fp == "sequential/dense/MatMul" and dev.fpbp[1].fp_source == "option"
    assert dev.fpbp[1].bp_source == "auto"
    assert any("Last backward op name can't be found" in m for m in dev.messages)
    steps, _ = R.ts_track(prof)
    assert steps["tag_id"].tolist() == [0, 2, 3, 4, 1]


def test_training_trace_off_and_switch_mapping(tmp_path):
    prof = run(tmp_path, [make_chunk(2)],
               config(training_trace=False, aicpu=False, aic_metrics="", aic_events=()))
    ddata = prof / "device_0" / "data"
    names = {p.name for p in ddata.iterdir()}
    # ts_track holds only task_time data, not step trace: the input copies' "ts memcpy" and
    # the AI CPU tasks' "task type" records (both with --aicpu off: aicpu.data is not written)
    assert names == {"hwts.data.0.slice_0", "ts_track.data.0.slice_0"}
    ts = R.device_records(prof, "ts_track")
    assert set(ts["rpt_type"].tolist()) == {L.TS_RPT_MEMCPY, L.TS_RPT_TASK_TYPE}
    sample = read_json_line(prof / "device_0" / "sample.json")
    assert sample["ai_core_profiling"] == "off" and sample["ts_keypoint"] == "off"
    assert sample["aicpuTrace"] == "off" and sample["l2CacheTaskProfiling"] == "off"
    hnames = {p.name for p in (prof / "host" / "data").iterdir()}
    assert "unaging.compact.node_basic_info.slice_0" in hnames
    assert "unaging.additional.msproftx.slice_0" not in hnames


def test_task_time_l0_has_no_op_info(tmp_path):
    prof = run(tmp_path, [make_chunk(1)], config(task_time="l0", aic_metrics="",
                                                 aic_events=()))
    hnames = {p.name for p in (prof / "host" / "data").iterdir()}
    assert "unaging.compact.node_basic_info.slice_0" not in hnames
    assert "unaging.additional.tensor_info.slice_0" not in hnames
    assert "unaging.additional.fusion_op_info.slice_0" not in hnames
    assert "unaging.compact.task_track.slice_0" in hnames
    dnames = {p.name for p in (prof / "device_0" / "data").iterdir()}
    assert "aicore.data.0.slice_0" not in dnames and "hwts.data.0.slice_0" in dnames


def test_l2_and_msproftx_files(tmp_path):
    chunk = make_chunk(1)
    chunk.markers.append(TxMarker("epoch 1", T0 + 10, T0 + 500, STEP_THREAD))
    prof = run(tmp_path, [chunk], config(l2=True, msproftx=True))
    l2 = R.device_records(prof, "l2_cache")
    assert len(l2) == len(hwts_tasks(prof))
    req, hit, victim = l2["events"][:, 1], l2["events"][:, 0], l2["events"][:, 2]
    assert np.all(hit <= req) and np.all(victim <= req - hit) and np.all(req > 0)
    tx = R.host_records(prof, "msproftx")
    assert len(tx) == 1 and tx["message"][0] == b"epoch 1" and tx["data_tag"][0] == 120
    assert tx["level"][0] == L.LEVEL_TX


def _pmu_expectations(chunk: CaptureChunk):
    reg = SignatureRegistry()
    for op in chunk.iterations[0].ops:
        reg.intern(op.tf_type, tuple(op.inputs), tuple(op.outputs), len(op.fused_ops))
    return reg, evaluate(reg.arrays(), ASCEND910)


@pytest.mark.parametrize("group", list(AIC_METRIC_EVENTS) + ["Custom:0x8,0xa,0x1234"])
def test_pmu_ratios_reproduce_cost_model(tmp_path, group):
    events = AIC_METRIC_EVENTS.get(group) or (0x8, 0xA, 0x1234)
    chunk = make_chunk(1)
    prof = run(tmp_path, [chunk], config(aic_metrics=group, aic_events=events))
    ac = R.device_records(prof, "aicore")
    reg, cost = _pmu_expectations(chunk)
    ai_sigs = [i for i, k in enumerate(reg.kind) if k == 1]
    assert len(ac) == len(ai_sigs)  # one op per signature in one step, in launch order
    total = ac["total_cycles"].astype(np.float64)
    assert np.array_equal(ac["total_cycles"], cost.total_cycles[ai_sigs])
    sample = read_json_line(prof / "device_0" / "sample.json")
    assert sample["ai_core_metrics"] == group
    for col, ev in enumerate(events):
        got = ac["pmu"][:, col] / total
        assert np.all(got >= 0)
        model = {0x8: "vec", 0xA: "cube", 0x9: "scalar", 0xB: "mte1", 0xC: "mte2",
                 0xD: "mte3"}.get(ev)
        if model:
            want = cost.ratio(model)[ai_sigs]
            assert np.allclose(got, want, atol=1.0 / total.min() + 1e-12), (group, hex(ev))
        if ev in (0x8, 0xA, 0x9, 0xB, 0xC, 0xD, 0x49, 0x4A, 0x4B, 0x4E, 0x4F, 0x64, 0x65,
                  0x66):
            assert np.all(got <= 1.0)
    if group == "PipeUtilization":  # icache miss rate = r55 / r54 in (0, 1)
        miss = ac["pmu"][:, 7] / np.maximum(ac["pmu"][:, 6], 1)
        assert np.all((miss > 0) & (miss < 1))
    if group == "ArithmeticUtilization":  # cube_fops = r49 * 8192 = modelled FLOPs (fp16)
        fops = ac["pmu"][:, 0].astype(np.float64) * 8192
        flops = np.array(reg.flops)[ai_sigs]
        cube = flops > 0
        assert np.allclose(fops[cube], flops[cube], rtol=0.02)
    if group == "Memory":  # main memory read bandwidth ~ bytes_in*(1-hit) / core time
        bytes_mm = ac["pmu"][:, 6].astype(np.float64) * 64
        want = np.array(reg.bytes_in)[ai_sigs] * (1 - cost.l2_hit[ai_sigs])
        assert np.allclose(bytes_mm, want, atol=64)


def test_determinism_across_host_times(tmp_path):
    a = run(tmp_path / "a", [make_chunk(2)])
    b = run(tmp_path / "b", [make_chunk(2, start=T0 + 123_457_891, spacing=OP_SPACING * 3)])
    ta, tb = hwts_tasks(a), hwts_tasks(b)
    assert np.array_equal(ta.end - ta.start, tb.end - tb.start)
    assert not np.array_equal(ta.start, tb.start)
    pa, pb = R.device_records(a, "aicore"), R.device_records(b, "aicore")
    assert np.array_equal(pa["pmu"], pb["pmu"])
    assert np.array_equal(pa["total_cycles"], pb["total_cycles"])
    ca, cb = R.device_records(a, "aicpu"), R.device_records(b, "aicpu")
    assert np.array_equal(ca["run_end_tick"] - ca["run_start_tick"],
                          cb["run_end_tick"] - cb["run_start_tick"])


def test_device_time_follows_host_launch(tmp_path):
    prof = run(tmp_path, [make_chunk(1)])
    track = R.host_records(prof, "task_track")
    track = track[track["stream_id"] == 2]
    t = hwts_tasks(prof)
    order = np.argsort(track["task_id"])
    launch_ns = track["timestamp"][order].astype(np.int64)
    start_ns = (t.start[np.argsort(t.task)] - 1_000_000_000) * 10 + CLOCK.mono_ns
    assert np.all(start_ns >= launch_ns + 10_000)  # launch latency
    assert np.all(start_ns % 10 == CLOCK.mono_ns % 10)


def test_task_id_rollover_writes_flips(tmp_path):
    prof = run(tmp_path, [make_chunk(2), make_chunk(1, first_index=3, start=T0 + 10**8)],
               first_task_id=65530)
    steps, flips = R.ts_track(prof)
    t = hwts_tasks(prof)
    assert len(flips) == 1
    f = flips[0]
    assert f["stream_id"] == 2 and f["flip_num"] == 1 and f["task_id"] == 0
    assert f["rpt_type"] == 14 and f["buf_size"] == 40
    track = R.host_records(prof, "task_track")
    host_flip = track[track["task_type"] == EN.RUNTIME_TASK_TYPE_IDS["FLIP_TASK"]]
    assert len(host_flip) == 1 and host_flip["batch_id"][0] == 1
    assert host_flip["stream_id"][0] == 2 and host_flip["task_id"][0] == 0
    assert host_flip["type"][0] == L.RUNTIME_TASK_TRACK
    # every device event with a task id >= 65530 precedes the flip, small ids follow it
    ts = np.concatenate([t.start, steps["timestamp"].astype(np.int64)])
    ids = np.concatenate([t.task, steps["task_id"]]).astype(np.int64)
    flip_ts = int(f["timestamp"])
    assert np.all(ts[ids >= 65530] < flip_ts) and np.all(ts[ids < 65530] > flip_ts)
    # host side: task_track of ids >= 65530 before the host flip, the others after
    kern = track[track["stream_id"] == 2]
    kern = kern[kern["task_type"] != EN.RUNTIME_TASK_TYPE_IDS["FLIP_TASK"]]
    hf = int(host_flip["timestamp"][0])
    big = kern["task_id"] >= 65530
    assert np.all(kern["timestamp"][big] < hf) and np.all(kern["timestamp"][~big] > hf)
    # the AI CPU stream has its own ids (no flip: 3 tasks from 65530)
    ai = R.device_records(prof, "aicpu")
    assert ai["task_id"].tolist() == [65530, 65531, 65532]


def test_tensor_info_split_above_five(tmp_path):
    prof = run(tmp_path, [make_chunk(1)])
    ti = R.host_records(prof, "tensor_info")
    adam = ti[ti["op_name"] == name_hash("adam/ResourceApplyAdam")]
    assert adam["tensor_num"].tolist() == [5, 5]
    assert len(set(adam["timestamp"].tolist())) == 1 and len(set(adam["thread_id"])) == 1
    conv = ti[ti["op_name"] == name_hash("sequential/conv2d/Relu")][0]
    assert conv["tensor_num"] == 4
    assert conv["tensors"][0]["shape"].tolist() == [32, 28, 28, 1, 0, 0, 0, 0]
    assert conv["tensors"][3]["tensor_type"] == 1
    assert conv["tensors"][0]["data_type"] == 0 and conv["tensors"][0]["format"] == 2


def test_dictionaries_fusion_and_graph_map(tmp_path):
    prof = run(tmp_path, [make_chunk(2), make_chunk(1, first_index=3, start=T0 + 10**8)])
    lines = R.host_lines(prof, "hash_dic")
    assert len(lines) == len(set(lines))  # each entry once, across chunks
    dic = dict(line.split(":", 1) for line in lines)
    assert dic[str(name_hash("sequential/conv2d/Relu"))] == "sequential/conv2d/Relu"
    assert dic[str(name_hash("Conv2D"))] == "Conv2D"
    assert dic[str(name_hash("sequential"))] == "sequential"
    nbi = R.host_records(prof, "node_basic_info")
    conv = nbi[nbi["op_name"] == name_hash("sequential/conv2d/Relu")]
    assert np.all(conv["op_type"] == name_hash("Conv2D")) and np.all(conv["task_type"] == 0)
    rnd = nbi[nbi["op_name"] == name_hash("dropout/random_uniform/RandomUniform")]
    assert np.all(rnd["task_type"] == 1) and np.all(rnd["block_num"] == 1)
    track = R.host_records(prof, "task_track")
    # block dim written identically in node_basic_info and task_track
    for r in nbi:
        tt = track[track["kernel_name"] == r["op_name"]]
        assert np.all(tt["num_blocks"] == r["block_num"])
    fus = R.host_records(prof, "fusion_op_info")
    assert len(fus) == 1 and fus["op_name"][0] == name_hash("sequential/conv2d/Relu")
    assert fus["fusion_op_num"][0] == 3
    assert fus["fusion_op_id"][0][:3].tolist() == [name_hash("sequential/conv2d/Conv2D"),
                                                  name_hash("sequential/conv2d/BiasAdd"),
                                                  name_hash("sequential/conv2d/Relu")]
    gm = R.host_records(prof, "graph_id_map")
    assert len(gm) == 1 and gm["model_id"][0] == 1
    assert gm["model_name"][0] == name_hash("sequential")
    api = R.host_records(prof, "api_event")
    me = api[api["level"] == L.LEVEL_MODEL]
    launch = api[api["level"] == L.LEVEL_NODE]
    for rec in (gm[0], fus[0]):  # inside a ModelExecute, outside every launch window
        assert np.any((me["begin_time"] <= rec["timestamp"]) & (me["end_time"] >=
                                                                rec["timestamp"]))
        assert not np.any((launch["begin_time"] <= rec["timestamp"])
                          & (launch["end_time"] >= rec["timestamp"]))


def test_single_ops_and_multi_device(tmp_path):
    chunk = make_chunk(1)
    it1 = make_iteration(1, 1, T0, device_id=1)
    chunk.iterations[0].ops += it1.ops  # a replica of the step on device 1
    chunk.single_ops.append(OpRun("Add", "AddV2", T0 + 5 * 10**7, T0 + 5 * 10**7 + 2000, 9,
                                  (T((10,), F),) * 2, (T((10,), F),), device_id=2))
    prof = run(tmp_path, [chunk])
    assert {p.name for p in prof.iterdir()} == {"host", "device_0", "device_1", "device_2",
                                                "msprof_cli_sampling.json",
                                                "msprof_cli_memory.json"}
    assert (prof / "device_2" / "info.json.2").is_file()
    t0, t1, t2 = hwts_tasks(prof, 0), hwts_tasks(prof, 1), hwts_tasks(prof, 2)
    assert len(t0) == len(t1) > 0 and len(t2) == 1
    s1, _ = R.ts_track(prof, 1)
    assert s1["tag_id"].tolist() == [0, 2, 3, 4, 1]
    s2, _ = R.ts_track(prof, 2)
    assert len(s2) == 0  # single op: no iteration
    track = R.host_records(prof, "task_track")
    assert sorted(set(track["device_id"].tolist())) == [0, 1, 2]
    api = R.host_records(prof, "api_event")
    add = api[api["item_id"] == name_hash("Add")]
    me = api[api["level"] == L.LEVEL_MODEL]
    assert len(add) == 1 and not np.any((me["begin_time"] <= add["begin_time"][0])
                                        & (me["end_time"] >= add["end_time"][0]))
    assert SINGLE_OP_MODEL_ID == 4294967295


def test_allreduce_tags(tmp_path):
    ops = STEP_OPS[:13] + [("CollectiveReduceV2", "CollectiveReduceV2",
                            (T((3, 3, 1, 16), F),), (T((3, 3, 1, 16), F),), ())] + STEP_OPS[13:]
    prof = run(tmp_path, [make_chunk(2, ops=ops)])
    steps, _ = R.ts_track(prof)
    s = steps[steps["index_id"] == 1]
    tags = s["tag_id"].tolist()
    assert sorted(tags) == [0, 1, 2, 3, 4, 10000, 10001]
    red = s[np.isin(s["tag_id"], [10000, 10001])]
    assert np.all(red["stream_id"] == 4) and red["tag_id"].tolist() == [10000, 10001]
    assert red["timestamp"][1] > red["timestamp"][0]
    ts = dict(zip(tags, s["timestamp"].tolist()))
    assert ts[3] <= ts[10000]  # BP ends before the AllReduce (auto-detected BP)


def test_close_idempotent_and_consume_after_close(tmp_path):
    prof = tmp_path / "PROF_000001_20250101120000123_ABCDEFGHIJKLMNOP"
    dev = Device(prof, config(), clock=CLOCK, pid=1, app=["python3"])
    dev.consume(CaptureChunk())
    dev.close(CLOCK)
    dev.close(dataclasses.replace(CLOCK, wall_us=CLOCK.wall_us + 5))
    end = json.loads((prof / "host" / "end_info").read_text())
    assert end["collectionTimeEnd"] == str(CLOCK.wall_us)
    assert (prof / "device_0" / "end_info.0").is_file()
    with pytest.raises(RuntimeError):
        dev.consume(make_chunk(1))


def test_collective_outlasting_its_step_keeps_iterations_apart(tmp_path: Path) -> None:
    """An all-reduce whose host span outlasts its step pushes the launch of a later op on its
    thread past the next step's start (launch windows are serial per thread).  The step's end
    markers must still come before the next step's start marker on the stream, else the
    iterations overlap and the step loses its Reduce pair (seen in CI: Reduce N/A)."""
    from msprof_cli.export.decode.dataset import load_prof

    spec = (T((16,), F),)
    its = []
    t = T0
    for k in range(3):
        runs = []
        for dev in (0, 1):
            runs.append(OpRun(f"S/replica_{dev}/MatMul", "MatMul", t + 5_000, t + 30_000,
                              POOL_THREAD + dev, (T((4, 16), F), T((16, 16), F)),
                              (T((4, 16), F),), (), dev))
            runs.append(OpRun(f"S/sgd/CollectiveReduceV2{'_1' if dev else ''}",
                              "CollectiveReduceV2", t + 40_000, t + 60_000, 900 + dev, spec,
                              spec, (), dev))
        runs.append(OpRun("S/sgd/AssignAddVariableOp", "AssignAddVariableOp", t + 70_000,
                          t + 80_000, POOL_THREAD, (T((), "resource"), T((), "int64")), (), (),
                          0))
        its.append(Iteration(1, k + 1, t, t + 100_000, STEP_THREAD, runs))
        t += 150_000
    its[1].ops[1].end_ns = its[2].start_ns + 200_000  # outlasts the step, and the next start
    its[1].ops[-1].thread_id = 900  # a later op of the step on the collective's thread
    chunk = CaptureChunk(models={1: ModelInfo(1, "m", "k")}, iterations=its)
    prof = run(tmp_path, [chunk], config(hccl=True), device_ids=[0, 1])
    for dev in load_prof(prof).devices:
        red = dev.iterations["reduce_start_0"].to_numpy()
        assert len(red) == 3 and (red >= 0).all(), (dev.device_id, red)


def test_tasks_the_options_leave_out_are_counted_for_collect(tmp_path):
    """AI CPU tasks run with --aicpu off are counted by op type (collect
    names them and the flag at the end); with --aicpu on nothing is left out."""
    from msprof_cli.collect.collection import uncollected_notes

    seen = {}
    for on in (False, True):
        dev = Device(tmp_path / f"PROF_00000{int(on) + 1}_20250101120000123_ABCDEFGHIJKLMNOP",
                     config(aicpu=on), clock=CLOCK, pid=4242, app=["python3", "train.py"])
        dev.consume(make_chunk(3))
        dev.close(ClockPair(CLOCK.wall_us + 10_000_000, CLOCK.mono_ns + 10_000_000_000))
        seen[on] = dev.uncollected
    assert not seen[True]["aicpu"] and not seen[True]["hccl"]
    left = seen[False]["aicpu"]
    assert left and all(n % 3 == 0 for n in left.values())  # every step's AI CPU ops
    [note] = uncollected_notes(seen[False])
    assert note.startswith(f"The run had {sum(left.values())} AI CPU tasks (")
    assert note.endswith("not collected: add --aicpu on to collect them.")
    assert uncollected_notes({"aicpu": {}, "hccl": {}}) == []
