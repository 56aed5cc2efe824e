"""Host<->device copies of feeds and fetches (docs/device-model.md 5.1): MEMCPY_ASYNC tasks on
the memcpy streams, ts_track "ts memcpy" records, ordering with the compute stream, and their
export (task_time and the Ascend Hardware lane, never op_summary / op_statistic)."""
from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from test_device_records import STEP_OPS, STEP_THREAD, config, make_chunk, run

from msprof_cli.capture import TensorSpec as T
from msprof_cli.device import memcpy as MC
from msprof_cli.device.chip import ASCEND910
from msprof_cli.device import readback as R
from msprof_cli.device import scheduler as S
from msprof_cli.export.api import run_export
from msprof_cli.raw import enums as EN
from msprof_cli.raw import layouts as L

MEMCPY = EN.RUNTIME_TASK_TYPE_IDS["MEMCPY_ASYNC"]
BATCH_BYTES = 32 * 28 * 28 * 1 * 4 + 32 * 8  # IteratorGetNext outputs of STEP_OPS


def ticks_for(nbytes: int) -> int:
    return math.ceil((MC.MEMCPY_LATENCY_NS + nbytes * 1e9 / MC.PCIE_BYTES_PER_S) / 10)


def chunk_with(n_iter=3, feeds=(), fetches=(T((), "float32"),), **kw):
    c = make_chunk(n_iter, **kw)
    c.models[1] = dataclasses.replace(c.models[1], feeds=tuple(feeds), fetches=tuple(fetches))
    return c


def copies(prof):
    """(stream, task, start, end) per copy from the ts memcpy records: received (taskState
    0), started (1), ended (2) -- the three states the real analysis needs per copy
    (Ascend/msprof memcpy_state_machine.py), received never after started."""
    mc = R.ts_memcpy(prof)
    assert set(mc["buf_size"].tolist()) == {40}
    assert set(mc["task_state"].tolist()) == {0, 1, 2}
    rc = np.sort(mc[mc["task_state"] == 0], order=["stream_id", "task_id"])
    st, en = mc[mc["task_state"] == 1], mc[mc["task_state"] == 2]
    assert len(rc) == len(st) == len(en)
    assert (rc["timestamp"] <= np.sort(st, order=["stream_id", "task_id"])["timestamp"]).all()
    st = np.sort(st, order=["stream_id", "task_id"])
    en = np.sort(en, order=["stream_id", "task_id"])
    assert np.array_equal(st["task_id"], en["task_id"])
    return (st["stream_id"].astype(int), st["task_id"].astype(int),
            st["timestamp"].astype(np.int64), en["timestamp"].astype(np.int64))


def test_copies_records_and_durations(tmp_path):
    prof = run(tmp_path, [chunk_with(3)])
    stream, task, start, end = copies(prof)
    h2d, d2h = stream == MC.H2D_STREAM, stream == MC.D2H_STREAM
    assert h2d.sum() == 3 and d2h.sum() == 3  # one input and one output copy per iteration
    assert task[h2d].tolist() == [1, 2, 3] and task[d2h].tolist() == [1, 2, 3]
    # duration from bytes: fixed latency + bytes at the PCIe bandwidth
    assert (end - start)[h2d].tolist() == [ticks_for(BATCH_BYTES)] * 3
    assert (end - start)[d2h].tolist() == [ticks_for(4)] * 3
    # not AI Core work: never in hwts
    hw = R.device_records(prof, "hwts")
    assert not np.isin(hw["stream_id"], [MC.H2D_STREAM, MC.D2H_STREAM]).any()
    # host: one MEMCPY_ASYNC task_track per copy, on the step thread, inside GE's copy APIs
    tt = R.host_records(prof, "task_track")
    tt = tt[tt["task_type"] == MEMCPY]
    assert len(tt) == 6 and set(tt["thread_id"].tolist()) == {STEP_THREAD}
    assert set(tt["type"].tolist()) == {L.RUNTIME_TASK_TRACK}
    api = R.host_records(prof, "api_event")
    for typ, sid in ((L.MODEL_INPUT_COPY, MC.H2D_STREAM), (L.MODEL_OUTPUT_COPY, MC.D2H_STREAM)):
        spans = api[(api["level"] == L.LEVEL_MODEL) & (api["type"] == typ)]
        ts = np.sort(tt[tt["stream_id"] == sid]["timestamp"])
        spans = np.sort(spans, order="begin_time")
        assert len(spans) == 3
        assert np.all((spans["begin_time"] <= ts) & (ts <= spans["end_time"]))


def test_bigger_feed_takes_longer(tmp_path):
    feed = (T((256, 1024, 1024), "float32"),)  # 1 GiB
    prof = run(tmp_path, [chunk_with(1, feeds=feed)])
    stream, _, start, end = copies(prof)
    nbytes = 256 * 1024 * 1024 * 4
    assert (end - start)[stream == MC.H2D_STREAM].tolist() == [ticks_for(nbytes)]
    assert ticks_for(nbytes) > 100 * ticks_for(BATCH_BYTES)


def test_ordering_with_compute_stream(tmp_path):
    # a feed big enough to delay the first kernel: the compute stream waits for the copy
    feed = (T((64, 1024, 1024), "float32"),)  # 256 MiB ~ 11 ms at 24 GB/s
    prof = run(tmp_path, [chunk_with(2, feeds=feed)])
    stream, _, start, end = copies(prof)
    hw = R.device_records(prof, "hwts")
    hw_start = np.sort(hw[(hw["flags"] & 7) == 0]["syscnt"].astype(np.int64))
    hw_end = np.sort(hw[(hw["flags"] & 7) == 1]["syscnt"].astype(np.int64))
    ai = R.device_records(prof, "aicpu")
    steps, _ = R.ts_track(prof)
    model_end = np.sort(steps[steps["tag_id"] == 1]["timestamp"].astype(np.int64))
    h_end = np.sort(end[stream == MC.H2D_STREAM])
    d_start = np.sort(start[stream == MC.D2H_STREAM])
    for i in range(2):
        it_lo = h_end[i]
        it_hi = d_start[i]
        # the iteration's first kernel starts after its input copy ended ...
        first = hw_start[(hw_start >= (d_start[i - 1] if i else 0)) & (hw_start < it_hi)]
        assert first[0] >= it_lo
        # ... and was really delayed by it (the copy lasts far longer than the launch gap)
        assert first[0] - it_lo <= ASCEND910.kernel_gap_ticks
        # the output copy waits for every task of the iteration (kernels, AI CPU, model end)
        done = hw_end[hw_end <= it_hi]
        assert len(done) == 12 * (i + 1)
        assert it_hi >= model_end[i]
        assert it_hi >= ai["run_end_tick"].astype(np.int64)[i]


def test_task_time_off_writes_no_copies(tmp_path):
    prof = run(tmp_path, [chunk_with(2)], config(task_time="off", aic_metrics="",
                                                 aic_events=()))
    assert len(R.ts_memcpy(prof)) == 0
    tt = R.host_records(prof, "task_track")
    assert not (tt["task_type"] == MEMCPY).any()


def test_no_data_source_no_fetch_no_copies(tmp_path):
    ops = [o for o in STEP_OPS if o[1] != "IteratorGetNext"]
    prof = run(tmp_path, [make_chunk(2, ops=ops)])
    assert len(R.ts_memcpy(prof)) == 0


def test_runtime_api_memcpy(tmp_path):
    prof = run(tmp_path, [chunk_with(2)], config(runtime_api=True))
    api = R.host_records(prof, "api_event")
    from msprof_cli.device.host_records import RT_MEMCPY_ASYNC
    rt = api[(api["level"] == L.LEVEL_RUNTIME) & (api["type"] == RT_MEMCPY_ASYNC)]
    tt = R.host_records(prof, "task_track")
    tt = np.sort(tt[tt["task_type"] == MEMCPY]["timestamp"])
    rt = np.sort(rt, order="begin_time")
    assert len(rt) == len(tt) == 4
    assert np.all((rt["begin_time"] < tt) & (tt <= rt["end_time"]))
    types = (prof / "host" / "data").glob("*type_info_dic*")
    assert any("5000_1002:rtMemcpyAsync" in p.read_text() for p in types)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("memcpy_export")
    prof = run(tmp, [chunk_with(2)], config(runtime_api=True))
    run_export(prof, quiet=True)
    run_export(prof, layout="mindstudio", quiet=True)
    return prof


def _csv(prof, pattern):
    (path,) = list(prof.glob(pattern))
    return path.read_text().splitlines()


def test_export_task_time_has_copies(exported):
    rows = _csv(exported, "device_0/summary/task_time_*.csv")
    mem = [r.split(",") for r in rows if ",MEMCPY_ASYNC," in r]
    # legacy exports the iterations' window: the last output copy runs after the last
    # iteration's end marker, so it is outside (docs/export.md)
    assert len(mem) == 3
    assert {(r[0], r[2]) for r in mem} == {(MC.H2D_NAME, "5"), (MC.D2H_NAME, "6")}
    # mindstudio: as the real analysis writes them -- after the other tasks, "MemcopyAsync",
    # type "other" (viewer/training/task_op_viewer.py _add_memcpy_data)
    ms = _csv(exported, "mindstudio_profiler_output/task_time_*.csv")
    assert not any(",MEMCPY_ASYNC," in r for r in ms)
    copies_ = [i for i, r in enumerate(ms) if ",MemcopyAsync,other," in r]
    assert len(copies_) == 4 and copies_ == list(range(len(ms) - 4, len(ms)))


def test_export_op_summary_excludes_copies(exported):
    for pattern in ("device_0/summary/op_summary_*.csv", "device_0/summary/op_statistic_*.csv",
                    "mindstudio_profiler_output/op_summary_*.csv",
                    "mindstudio_profiler_output/op_statistic_*.csv"):
        text = "\n".join(_csv(exported, pattern))
        assert "MEMCPY" not in text and "MemcpyAsync" not in text, pattern
    ops = _csv(exported, "device_0/summary/op_summary_*.csv")
    tasks = _csv(exported, "device_0/summary/task_time_*.csv")
    assert len(ops) == len(tasks) - sum(",MEMCPY_ASYNC," in r for r in tasks)


def test_export_timeline_lane_and_flow(exported):
    (path,) = list(exported.glob("mindstudio_profiler_output/msprof_*.json"))
    ev = json.loads(path.read_text())
    hw_pids = {e["pid"] for e in ev if e.get("ph") == "M" and e["name"] == "process_name"
               and e["args"]["name"] == "Ascend Hardware"}
    # mindstudio: the real analysis's memory-copy events (memory_copy_viewer.py): on the
    # stream's tid, without a lane name or a HostToDevice flow
    mem = [e for e in ev if e.get("ph") == "X" and e["pid"] in hw_pids
           and e["name"] == "MemcopyAsync"]
    assert len(mem) == 4 and {e["tid"] for e in mem} == {MC.H2D_STREAM, MC.D2H_STREAM}
    assert all(e["args"]["Task Type"] == "other" and e["args"]["Receive Time"]
               <= e["args"]["Start Time"] == e["ts"] < e["args"]["End Time"] for e in mem)
    lanes = {e["args"]["name"] for e in ev if e.get("ph") == "M" and e["pid"] in hw_pids
             and e["name"] == "thread_name"}
    assert not {"Stream 5", "Stream 6"} & lanes
    assert not [e for e in ev if e.get("cat") == "HostToDevice"
                and e["tid"] in (MC.H2D_STREAM, MC.D2H_STREAM)]
    # legacy: the copies are tasks of their stream's lane, with flows
    (path,) = list(exported.glob("device_0/timeline/msprof_*.json"))
    ev = json.loads(path.read_text())
    ev = ev if isinstance(ev, list) else ev["traceEvents"]
    hw_pids = {e["pid"] for e in ev if e.get("ph") == "M" and e["name"] == "process_name"
               and e["args"]["name"] == "Ascend Hardware"}
    mem = [e for e in ev if e.get("ph") == "X" and e["pid"] in hw_pids
           and e["args"].get("Task Type") == "MEMCPY_ASYNC"]
    assert {e["tid"] for e in mem} == {MC.H2D_STREAM, MC.D2H_STREAM}
    lanes = {e["args"]["name"] for e in ev if e.get("ph") == "M" and e["pid"] in hw_pids
             and e["name"] == "thread_name"}
    assert {"Stream 5", "Stream 6"} <= lanes
    flows = [e for e in ev if e.get("cat") == "HostToDevice" and e["ph"] == "f"
             and e["tid"] in (MC.H2D_STREAM, MC.D2H_STREAM)]
    assert len(flows) == len(mem)
    starts = {e["id"] for e in ev if e.get("cat") == "HostToDevice" and e["ph"] == "s"}
    assert {e["id"] for e in flows} <= starts
