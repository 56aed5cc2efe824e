"""Windowed export (decode/windows.py, plan.py, pipeline.py): a PROF dir decoded and written window by
window gives exactly the tables and the byte-identical files of its one-window plan."""
from __future__ import annotations

import hashlib
import json
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from msprof_cli.errors import ExportError
from msprof_cli.export.api import run_export
from msprof_cli.export.decode import quiet as QP
from msprof_cli.export.decode import time_index as TI
from msprof_cli.export.decode import window_load as WLD
from msprof_cli.export.decode import windows as WN
from msprof_cli.export.decode.dataset import load_prof
from msprof_cli.export.layouts import mindstudio as WD
from msprof_cli.export.sinks import files as FS
from msprof_cli.export.sinks import writers as W
from tests.rich_prof import build_prof

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import gen_prof  # noqa: E402

OUT = "mindstudio_profiler_output"


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> Path:
    """A one-device PROF of ~6,000 tasks: AI Core with PMU, AI CPU, ts memcpy, two models."""
    root = tmp_path_factory.mktemp("windows")
    return gen_prof.generate(6000, root, batch_tasks=1500, quiet=True)


@pytest.fixture(scope="module")
def rich(tmp_path_factory) -> Path:
    """Hand-made iterations with msproftx markers (the msprof_tx outputs)."""
    return build_prof(tmp_path_factory.mktemp("rich"), n_iter=12)


def _export(src: Path, dest: Path, monkeypatch, window: int, layout: str = "mindstudio",
            **kw) -> dict[str, str]:
    """sha256 of every output file (and, legacy, of the console advice) by name."""
    monkeypatch.setenv(WN.WINDOW_TASKS_ENV, str(window))
    prof = dest / src.name
    shutil.copytree(src, prof)
    res = run_export(prof, layout=layout, quiet=True, **kw)
    out = {}
    dirs = [prof / OUT] if layout == "mindstudio" else \
        sorted([*prof.glob("device_*/summary"), *prof.glob("device_*/timeline")])
    for d in dirs:
        for p in sorted(d.iterdir()):
            assert not p.name.startswith("."), f"temporary file left: {p.name}"
            name = re.sub(r"_\d{14}", "", p.name if layout == "mindstudio"
                          else str(p.relative_to(prof)))
            out[name] = hashlib.sha256(p.read_bytes()).hexdigest()
    for a in res.advice:
        out["advice " + a.path.name] = a.text
    return out


def _windows_used(monkeypatch) -> list[int]:
    """Record the window count of every windowed export (both layouts)."""
    from msprof_cli.export.layouts import legacy as WL

    seen: list[int] = []
    for mod, name in ((WD, "export_mindstudio"), (WL, "export_legacy")):
        def spy(plan, _real=getattr(mod, name), **kw):
            seen.append(len(plan))
            return _real(plan, **kw)
        monkeypatch.setattr(mod, name, spy)
    return seen


def test_plan_cuts_at_quiet_points(big):
    plan = WN.plan_windows(big, 1000)
    assert plan is not None and len(plan) >= 4
    assert sum(plan.window_tasks) == plan.tasks
    assert all(a < b for a, b in zip(plan.cuts, plan.cuts[1:]))
    assert WN.plan_windows(big, 0) == WN.Whole("windows off")
    assert WN.plan_windows(big, 10**9) == WN.Whole("small")


def test_window_tables_are_the_whole_tables_cut(big):
    plan = WN.plan_windows(big, 1000)
    whole = load_prof(big)
    dev = whole.devices[0]
    assert dev.pmu_events  # the PMU match crosses windows: it is checked here too
    parts, apis = [], []
    for k in range(len(plan)):
        w = WLD.load_window(plan, k)
        parts.append(w.devices[0].tasks)
        apis.append(w.host.apis)
        pd.testing.assert_frame_equal(w.devices[0].iterations, dev.iterations)
        assert w.devices[0].pmu_events == dev.pmu_events
    pd.testing.assert_frame_equal(pd.concat(parts, ignore_index=True), dev.tasks)
    got = pd.concat(apis, ignore_index=True).sort_values("connection_id", ignore_index=True)
    pd.testing.assert_frame_equal(got, whole.host.apis.sort_values("connection_id",
                                                                   ignore_index=True))
    assert (dev.tasks["pmu_ok"].to_numpy()).sum() > 0


# the unsliced files of 700-task windows: tests/corpus (mindstudio-w700, legacy-w700)
@pytest.mark.parametrize("kw", [{"csv_slice_rows": 700, "json_slice_events": 2500}],
                         ids=["sliced"])
def test_windowed_files_are_byte_identical(big, tmp_path, monkeypatch, kw):
    whole = _export(big, tmp_path / "whole", monkeypatch, 0, **kw)
    seen = _windows_used(monkeypatch)
    monkeypatch.setattr(W, "CHUNK_ROWS", 97)
    monkeypatch.setattr(W, "EVENT_CHUNK", 61)
    windowed = _export(big, tmp_path / "win", monkeypatch, 700, **kw)
    assert seen and seen[0] >= 6
    assert len(whole) >= 9
    if kw:
        assert any("_slice_" in n for n in whole)
    assert windowed == whole


@pytest.mark.parametrize("switches", ['{"overlap_analyse": false}',
                                      '{"cann": false, "step_trace": false}'])
def test_windowed_layer_switches(big, tmp_path, monkeypatch, switches):
    reports = tmp_path / "reports.json"
    reports.write_text('{"json_process": ' + switches + '}')
    whole = _export(big, tmp_path / "whole", monkeypatch, 0, reports=reports)
    windowed = _export(big, tmp_path / "win", monkeypatch, 1000, reports=reports)
    assert windowed == whole


@pytest.mark.parametrize("window", [20, 3])
def test_msproftx_and_small_windows(rich, tmp_path, monkeypatch, window):
    """Markers (msprof_tx csv/json, their msprof json layer) split by the window cuts; with
    tiny windows a window holds the iterations of one model only (its step-trace lane is
    still the model's lane among all models)."""
    whole = _export(rich, tmp_path / "whole", monkeypatch, 0)
    assert any(n.startswith("msprof_tx") for n in whole)
    seen = _windows_used(monkeypatch)
    windowed = _export(rich, tmp_path / "win", monkeypatch, window)
    assert seen and seen[0] >= 3
    assert windowed == whole


def test_a_window_whose_decode_finds_damage_is_replanned_as_one_window(
        big, tmp_path, monkeypatch):
    from msprof_cli.export import plan as PL

    whole = _export(big, tmp_path / "whole", monkeypatch, 0)
    real = WLD.load_window

    def failing(plan, k):
        if k == 2:
            raise WN.NotWindowable("test")
        return real(plan, k)
    monkeypatch.setattr(PL, "load_window", failing)
    assert _export(big, tmp_path / "win", monkeypatch, 1000) == whole


def test_damaged_or_uncovered_data_is_exported_whole(big, tmp_path, rich):
    damaged = tmp_path / big.name
    shutil.copytree(big, damaged)
    hwts = sorted((damaged / "device_0" / "data").glob("hwts.data*"))[0]
    with open(hwts, "ab") as fh:
        fh.write(b"\0" * 5)  # a truncated tail: the whole decode warns about it
    assert WN.plan_windows(damaged, 1000) == WN.Whole("decode warnings")
    two = build_prof(tmp_path / "two", device_ids=(0, 1))
    assert WN.plan_windows(two, 1) == WN.Whole("not one host and one device directory")


def test_pmu_index_carries_occurrences():
    ix = TI.PmuIndex.build(np.array([1, 1, 2, 1]), np.array([5, 5, 7, 5]))
    hit, rec = ix.records(np.array([1, 2]), np.array([5, 7]))
    assert hit.tolist() == [0, 1] and rec.tolist() == [0, 2]
    hit, rec = ix.records(np.array([1, 1, 1]), np.array([5, 5, 5]))
    assert hit.tolist() == [0, 1] and rec.tolist() == [1, 3]  # the third has no record


def test_task_id_rollover_across_windows(tmp_path_factory, tmp_path, monkeypatch):
    """Task ids roll over every 65,536 tasks per stream (FLIP records, batch ids): the batch
    of a window's tasks comes from the flips of the whole collection."""
    src = gen_prof.generate(140_000, tmp_path_factory.mktemp("rollover"), batch_tasks=20_000,
                            quiet=True)
    plan = WN.plan_windows(src, 30_000)
    assert plan is not None and len(plan) >= 4
    # batch ids count the flips of the whole collection, not those since the window start
    assert WLD.load_window(plan, len(plan) - 1).devices[0].tasks["batch_id"].max() == 2
    whole = _export(src, tmp_path / "whole", monkeypatch, 0)
    windowed = _export(src, tmp_path / "win", monkeypatch, 30_000)
    assert windowed == whole


def test_a_failing_window_leaves_no_temporary_file(big, tmp_path, monkeypatch):
    """A window's CSV rows are written by a forked worker: when it fails, the slices it
    started are removed with the rest, and no final file appears."""
    monkeypatch.setenv(WN.WINDOW_TASKS_ENV, "1000")
    prof = tmp_path / big.name
    shutil.copytree(big, prof)
    from msprof_cli.export.outputs import summaries as S
    real = S.task_time
    from_window_3 = WN.plan_windows(prof, 1000).cuts[3]

    def failing(d, tasks):  # runs in the worker: fails in window 3, when slices exist
        if len(tasks) and tasks["start_local"].iloc[-1] >= from_window_3:
            raise RuntimeError("boom")
        return real(d, tasks)
    monkeypatch.setattr(S, "task_time", failing)
    monkeypatch.setattr(W, "CHUNK_ROWS", 97)
    with pytest.raises(Exception, match="boom"):
        run_export(prof, layout="mindstudio", quiet=True, csv_slice_rows=700)
    out = prof / OUT
    assert not out.exists() or list(out.iterdir()) == []


@pytest.mark.parametrize("layout", ["mindstudio", "legacy"])
def test_a_failing_final_timeline_copy_leaves_no_temporary_file(big, tmp_path, monkeypatch,
                                                                 layout):
    """The final timeline files of a windowed plan are assembled by parallel jobs (body
    copied behind the metadata): a full disk in one of them stops the export with a clear
    error and leaves no temporary body or partial file behind."""
    import errno

    monkeypatch.setenv(WN.WINDOW_TASKS_ENV, "1000")
    prof = tmp_path / big.name
    shutil.copytree(big, prof)
    real = FS.append_file
    calls = []

    def full(fh, src):
        calls.append(src)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fh, src)
    monkeypatch.setattr(FS, "append_file", full)  # the streams' copies of the bodies
    monkeypatch.setenv("MSPROF_EXPORT_WORKERS", "1")  # the counter lives in this process
    with pytest.raises(ExportError, match="disk .or quota. is full"):
        run_export(prof, layout=layout, quiet=True, json_slice_events=2500)
    assert len(calls) == 2
    left = [p for p in prof.rglob("*") if p.is_file() and (".tmp" in p.name or (
        p.suffix == ".json" and p.parent.name in ("timeline", OUT)))]
    assert not [p for p in left if ".tmp" in p.name]
    for p in left:  # a file written before the failure is whole
        json.loads(p.read_text())


def test_cuts_about_target_tasks_apart():
    ds = np.arange(100) * 10  # task starts
    # cut at the first quiet point with >= 30 tasks before it, then >= 30 more after that
    cuts, sizes = QP.cuts_at(np.array([5, 255, 305, 505, 905, 975]), ds, 30)
    assert cuts == [QP.INT64_MIN, 305, 905, QP.INT64_MAX]
    assert sizes == [31, 60, 9]
    # a rest below a quarter of the target joins the last window
    cuts, sizes = QP.cuts_at(np.array([305, 995]), ds, 30)
    assert cuts == [QP.INT64_MIN, 305, QP.INT64_MAX] and sizes == [31, 69]


# --- the legacy layout (layouts/legacy.py, windowed) ----------------------------------------------------

@pytest.mark.parametrize("kw", [{"csv_slice_rows": 700, "json_slice_events": 2500},
                                {"model_id": 2, "iteration_id": 2, "iteration_count": 3}],
                         ids=["sliced", "selection"])
def test_windowed_legacy_files_are_byte_identical(big, tmp_path, monkeypatch, kw):
    """Every legacy file (op_summary, ai_stack_time, runtime_api, ge, task_time json, ...)
    and the console advice equal the whole export's, for the default model and a selection."""
    whole = _export(big, tmp_path / "whole", monkeypatch, 0, "legacy", **kw)
    seen = _windows_used(monkeypatch)
    monkeypatch.setattr(W, "CHUNK_ROWS", 97)
    monkeypatch.setattr(W, "EVENT_CHUNK", 61)
    windowed = _export(big, tmp_path / "win", monkeypatch, 700, "legacy", **kw)
    assert seen and seen[0] >= 6
    for stem in ("summary/op_summary", "summary/ai_stack_time",
                 "timeline/task_time", "timeline/ge", "timeline/ai_stack_time",
                 "summary/prof_rule_0.json"):
        assert any(n.startswith("device_0/" + stem) for n in whole), stem
    assert any(n.startswith("advice ") for n in whole)
    if "csv_slice_rows" in kw:
        assert any("_slice_" in n for n in whole)
    assert windowed == whole


@pytest.mark.parametrize("kw", [{"model_id": 1, "iteration_id": 1},
                                {"model_id": 2, "iteration_id": 2, "iteration_count": 3}],
                         ids=["first", "range"])
def test_a_step_export_stops_decoding_after_its_steps(big, tmp_path, monkeypatch, kw):
    """A step export (--iteration-id) decodes no window after its steps and its CANN rows
    (LegacyExport.ended), and writes the same bytes as the whole export."""
    from msprof_cli.export import plan as PL

    whole = _export(big, tmp_path / "whole", monkeypatch, 0, "legacy", **kw)
    loaded: list[int] = []
    real = PL.load_window
    monkeypatch.setattr(PL, "load_window",
                        lambda plans, k: (loaded.append(k), real(plans, k))[1])
    seen = _windows_used(monkeypatch)
    assert _export(big, tmp_path / "win", monkeypatch, 300, "legacy", **kw) == whole
    assert seen and loaded == list(range(len(loaded)))
    assert 1 <= len(loaded) < seen[0], (loaded, seen)


def test_windowed_legacy_switches_and_markers(rich, tmp_path, monkeypatch):
    # layer switches in windows: tests/corpus legacy-reports-w700
    for window in (20, 3):  # msprof_tx, one model per window
        whole = _export(rich, tmp_path / f"rw{window}", monkeypatch, 0, "legacy")
        assert any("msprof_tx" in n for n in whole)
        seen = _windows_used(monkeypatch)
        assert _export(rich, tmp_path / f"rn{window}", monkeypatch, window, "legacy") == whole
        assert seen and seen[0] >= 3


def test_scan_finds_the_host_models_of_the_whole_decode(big, rich):
    from msprof_cli.export.layouts.legacy import host_models

    for src in (big, rich):
        plan = WN.plan_windows(src, 50, models=True)
        assert plan is not None
        assert plan.host_models == host_models(load_prof(src).devices[0])
    assert WN.plan_windows(big, 700).host_models is None  # mindstudio: not looked for


def test_a_bad_selection_in_window_mode_writes_nothing(big, tmp_path, monkeypatch):
    from msprof_cli.errors import ExportError

    monkeypatch.setenv(WN.WINDOW_TASKS_ENV, "700")
    prof = tmp_path / big.name
    shutil.copytree(big, prof)
    with pytest.raises(ExportError, match="model id 9 is invalid"):
        run_export(prof, layout="legacy", quiet=True, model_id=9, iteration_id=1)
    assert not [p for p in prof.rglob("*") if p.parent.name in ("summary", "timeline")]


def test_windowed_legacy_runtime_api_and_markers(tmp_path, tmp_path_factory, monkeypatch):
    """The device writer's own PROF with runtime APIs, AI CPU and msproftx markers:
    runtime_api json / csv (aggregates of several windows), ai_stack_time with runtime
    rows, msprof_tx."""
    from test_device_records import run
    from test_export_files import cfg, chunk_with_markers

    src_root = tmp_path_factory.mktemp("rt")
    src = run(src_root, [chunk_with_markers(8)],
              cfg(src_root, aicpu="on", runtime_api="on", msproftx="on"))
    whole = _export(src, tmp_path / "whole", monkeypatch, 0, "legacy")
    for stem in ("timeline/runtime_api", "summary/runtime_api", "timeline/msprof_tx",
                 "summary/aicpu"):
        assert any(n.startswith("device_0/" + stem) for n in whole), stem
    for window in (7, 25):
        seen = _windows_used(monkeypatch)
        got = _export(src, tmp_path / f"w{window}", monkeypatch, window, "legacy")
        assert seen and seen[0] >= 3
        assert got == whole


@pytest.mark.parametrize("which", ["all", "api_event only", "node_basic_info only"])
def test_dynamic_shape_data_is_windowed_with_its_thread_group(tmp_path, monkeypatch, which):
    """Dynamic-shape host data (aging.* files): every window writes the thread_group json
    events of its APIs, the metadata of all their threads at the end, byte-identical to the
    whole export -- also when only some host records are aging (the whole decode's flag)."""
    from test_device_records import make_chunk, run
    from test_export_files import cfg

    prof = run(tmp_path, [make_chunk(6)], cfg(tmp_path))
    for p in (prof / "host" / "data").iterdir():
        kind = p.name[len("unaging."):]
        if p.name.startswith("unaging.") and (which == "all" or which.split()[0] in kind):
            p.rename(p.with_name("aging." + kind))
    plan = WN.plan_windows(prof, 5, models=True)
    assert plan is not None and plan.aging
    whole = _export(prof, tmp_path / "whole", monkeypatch, 0, "legacy")
    assert any("thread_group" in n for n in whole)
    for window in (5, 17):
        seen = _windows_used(monkeypatch)
        assert _export(prof, tmp_path / f"win{window}", monkeypatch, window, "legacy") == whole
        assert seen and seen[0] >= 3


def test_static_host_data_has_no_thread_group_in_windows(big):
    plan = WN.plan_windows(big, 700, models=True)
    assert plan is not None and not plan.aging


# --- several devices (legacy: device by device, HCCL data included) --------------------------

@pytest.fixture(scope="module")
def two_devices(tmp_path_factory) -> Path:
    """Data parallel on two devices: hccl_info steps, HCCL op executions on every step --
    as the device writer of older msprof_cli versions wrote them (the frozen corpus case
    two_devices_hccl): host-time steps, which the windowed export cuts around."""
    from tests.corpus import build as corpus

    return corpus.unpack(tmp_path_factory.mktemp("two"))["two_devices_hccl"]


@pytest.fixture(scope="module")
def two_devices_steps(tmp_path_factory) -> Path:
    """The same run by today's writer: each HCCL step a device task."""
    return gen_prof.generate(6000, tmp_path_factory.mktemp("two_steps"), devices=2,
                             batch_tasks=1500, quiet=True)


def test_hccl_steps_as_tasks_export_whole(two_devices_steps, tmp_path, monkeypatch):
    """HCCL steps that are device tasks make their collectives only in the host join
    (dataset.comm_ops): a device of such data is exported whole, as the whole export."""
    plan = WN.plan_windows(two_devices_steps, 50, models=True, device=1)
    assert isinstance(plan, WN.Whole) and "HCCL steps" in plan.why
    whole = _export(two_devices_steps, tmp_path / "whole", monkeypatch, 0, "legacy")
    got = _export(two_devices_steps, tmp_path / "win", monkeypatch, 50, "legacy")
    assert got == whole


@pytest.mark.parametrize("window", [50])  # 700: tests/corpus two_devices_hccl legacy-w700
def test_windowed_legacy_of_several_devices_with_hccl(two_devices, tmp_path, monkeypatch,
                                                      window):
    """Each device is windowed on its own (hccl json, the Communication layer and the
    Overlap Analysis with communication in msprof json), byte-identical to the whole export
    of both devices; mindstudio (devices mixed in its files) stays whole."""
    whole = _export(two_devices, tmp_path / "whole", monkeypatch, 0, "legacy")
    for dev in (0, 1):
        assert any(n.startswith(f"device_{dev}/timeline/hccl") for n in whole)
    seen = _windows_used(monkeypatch)
    got = _export(two_devices, tmp_path / "win", monkeypatch, window, "legacy")
    assert len(seen) == 2 and min(seen) >= 4
    assert got == whole
    assert isinstance(WN.plan_windows(two_devices, window), WN.Whole)  # one device only, or given


def test_scan_cuts_outside_hccl_executions(two_devices):
    """No cut falls inside an HCCL op execution nor in a computing gap that holds one."""
    from msprof_cli.export.decode.host import decode_hccl
    from msprof_cli.export.decode.rawread import DecodeLog
    from msprof_cli.export.derive.hccl import rank_steps

    plan = WN.plan_windows(two_devices, 50, models=True, device=1)
    assert plan is not None and len(plan) > 5
    steps = rank_steps(decode_hccl(two_devices / "host" / "data", DecodeLog()), 1,
                       plan.host_rd.offset_ns)
    g = steps.groupby("op")
    s, e = g["start_local"].min().to_numpy(), g["end_local"].max().to_numpy()
    tasks = load_prof(two_devices).devices[1].tasks
    ends = np.sort(tasks["end_local"].to_numpy(np.int64))
    starts = np.sort(tasks["start_local"].to_numpy(np.int64))
    for c in plan.cuts[1:-1]:
        assert not ((s < c) & (e >= c)).any()
        lce = ends[np.searchsorted(ends, c) - 1]
        fcs = starts[np.searchsorted(starts, c)]
        assert not ((e > lce) & (s < fcs)).any()


def test_host_batches_count_the_flips_of_their_own_device():
    """A FLIP of device 1 does not move device 0's launches to a new batch (before, every
    device's flips counted: ~40 % of the tasks of a 2-device run lost their host info once
    task ids rolled over)."""
    from msprof_cli.export.decode.dataset import host_batches

    tt = pd.DataFrame({"ts_ns": [30, 10, 20, 40, 50], "stream_id": [3, 3, 3, 3, 3],
                       "task_id": [7, 5, 6, 8, 9], "device_id": [0, 0, 1, 1, 0]})
    flips = pd.DataFrame({"ts_ns": [25], "stream_id": [3], "task_id": [0], "device_id": [1]})
    assert host_batches(tt, flips).tolist() == [0, 0, 0, 1, 0]
    flips0 = flips.assign(device_id=0)
    # rows in file order, batches by time: ts 30 and 50 come after device 0's flip at 25
    assert host_batches(tt, flips0).tolist() == [1, 0, 0, 0, 1]


def test_two_devices_past_task_id_rollover_keep_their_host_info(tmp_path):
    """Task ids roll over (flips) on both devices: every task still finds its launch."""
    prof = gen_prof.generate(150_000, tmp_path, devices=2, batch_tasks=50_000, quiet=True)
    data = load_prof(prof)
    assert len(data.devices) == 2
    for dev in data.devices:
        t = dev.tasks
        assert t["batch_id"].max() >= 1  # rolled over
        assert bool(t["host_known"].all())
        names = t["op_name"].astype(str)
        assert not names.str.fullmatch(r"\d{12,}").any()  # no unresolved hash as a name


def test_a_device_that_cannot_be_windowed_is_one_window_beside_a_windowed_one(
        two_devices, tmp_path, monkeypatch):
    """Device 1's hwts file has a truncated record (a decode warning: not windowed), device
    0 is clean: device 0 is written window by window, device 1 as one window -- the same
    files as both in one window."""
    src = tmp_path / "src" / two_devices.name
    shutil.copytree(two_devices, src)
    hwts = sorted((src / "device_1" / "data").glob("hwts*"))[-1]
    with open(hwts, "ab") as fh:
        fh.write(b"\0" * 5)
    assert not isinstance(WN.plan_windows(src, 300, models=True, device=0), WN.Whole)
    assert isinstance(WN.plan_windows(src, 300, models=True, device=1), WN.Whole)
    whole = _export(src, tmp_path / "whole", monkeypatch, 0, "legacy")
    seen = _windows_used(monkeypatch)
    assert _export(src, tmp_path / "win", monkeypatch, 300, "legacy") == whole
    assert len(seen) == 2 and seen[0] > 1 and seen[1] == 1


def test_several_devices_check_the_selection_of_every_device_first(two_devices, tmp_path,
                                                                   monkeypatch):
    """A selection error of the second device is raised before the first device's files
    are written (as the whole export raises it before writing anything)."""
    from msprof_cli.errors import ExportError
    from msprof_cli.export.decode.dataset import load_prof as load
    from msprof_cli.export.decode.windows import check_selection

    its = load(two_devices).devices[1].iterations
    last = int(its[its["model_id"] == 1]["iteration_id"].max())
    with pytest.raises(ExportError, match="is invalid for model id 1"):
        check_selection(two_devices, 1, last, 2)
    check_selection(two_devices, 1, last, 1)
    monkeypatch.setenv(WN.WINDOW_TASKS_ENV, "700")
    prof = tmp_path / two_devices.name
    shutil.copytree(two_devices, prof)
    with pytest.raises(ExportError):
        run_export(prof, layout="legacy", quiet=True, model_id=1, iteration_id=last,
                   iteration_count=2)
    assert not [p for p in prof.rglob("*") if p.parent.name in ("summary", "timeline")]


# 700-task windows: tests/corpus two_devices_l2 mindstudio-w700
@pytest.mark.parametrize("kw", [{"window": 50},
                                {"window": 300, "csv_slice_rows": 900,
                                 "json_slice_events": 3000}],
                         ids=["50", "sliced"])
def test_windowed_mindstudio_of_several_devices(two_devices, tmp_path, monkeypatch, kw):
    """All devices are cut at the same points (plan_all_devices); the msprof json merges
    them by time (a Free carry per device), the CSVs stay device-major (the later devices'
    rows kept until the first's are written), communication_statistic included."""
    kw = dict(kw)
    window = kw.pop("window")
    whole = _export(two_devices, tmp_path / "whole", monkeypatch, 0, **kw)
    assert any(n.startswith("communication_statistic") for n in whole)
    seen = _windows_used(monkeypatch)
    monkeypatch.setattr(W, "CHUNK_ROWS", 97)
    monkeypatch.setattr(W, "EVENT_CHUNK", 61)
    got = _export(two_devices, tmp_path / "win", monkeypatch, window, **kw)
    assert len(seen) == 1 and seen[0] >= 4
    if kw:
        assert any("_slice_" in n for n in whole)
    assert got == whole


def test_plan_all_devices_cuts_every_device_at_the_same_points(two_devices, big):
    plans = WN.plan_all_devices(two_devices, 700)
    assert plans is not None and len(plans) == 2
    assert plans[0].cuts == plans[1].cuts and len(plans[0]) >= 4
    assert sum(plans[0].window_tasks) == plans[0].tasks + plans[1].tasks
    assert [p.dev_rd.device_id for p in plans] == [0, 1]
    assert WN.plan_all_devices(big, 700) == WN.Whole("not several devices")


@pytest.fixture(scope="module")
def with_l2(tmp_path_factory) -> Path:
    """Two devices with l2_cache records (no time of their own: read at the end) -- the
    frozen corpus case two_devices_l2 (HCCL steps as older msprof_cli versions wrote them:
    windowed; today's writer's HCCL steps are exported whole,
    test_hccl_steps_as_tasks_export_whole)."""
    from tests.corpus import build as corpus

    return corpus.unpack(tmp_path_factory.mktemp("l2"))["two_devices_l2"]


# (legacy in 700-task windows: tests/corpus two_devices_l2 legacy-w700)
@pytest.mark.parametrize("layout,kw", [
    ("mindstudio", {}),
    ("legacy", {"model_id": 1, "iteration_id": 2, "iteration_count": 3})],
    ids=["mindstudio", "legacy-selection"])
def test_windowed_l2_cache(with_l2, tmp_path, monkeypatch, layout, kw):
    """l2_cache: the records read in chunks after the windows, each named after the first
    exported task of its (stream, task) pair; a legacy selection keeps its pairs only."""
    whole = _export(with_l2, tmp_path / "whole", monkeypatch, 0, layout, **kw)
    assert any("l2_cache" in n for n in whole)
    seen = _windows_used(monkeypatch)
    monkeypatch.setattr(W, "CHUNK_ROWS", 97)
    assert _export(with_l2, tmp_path / "win", monkeypatch, 500, layout, **kw) == whole
    assert seen and min(seen) >= 4


@pytest.mark.parametrize("source,layout,kw", [
    ("big", "legacy", {"model_id": 2, "iteration_id": 2, "iteration_count": 3}),
    ("with_l2", "legacy", {}),
    ("with_l2", "mindstudio", {})],
    ids=["legacy-selection", "legacy-2dev-l2", "mindstudio-2dev-l2"])
def test_windowed_json_summaries(request, tmp_path, monkeypatch, source, layout, kw):
    """--summary-format json is windowed too: one file per summary (per device in the
    mindstudio layout, no Device_id), rows streamed, byte-identical to the whole export."""
    src = request.getfixturevalue(source)
    kw = {"summary_format": "json", **kw}
    whole = _export(src, tmp_path / "whole", monkeypatch, 0, layout, **kw)
    seen = _windows_used(monkeypatch)
    monkeypatch.setattr(W, "CHUNK_ROWS", 97)
    monkeypatch.setattr(W, "EVENT_CHUNK", 61)
    got = _export(src, tmp_path / "win", monkeypatch, 500, layout, **kw)
    assert seen and min(seen) >= 4
    summaries = [n for n in whole if n.endswith(".json") and ("summary/" in n or (
        layout == "mindstudio" and not n.startswith("msprof")))]
    assert any("op_summary" in n for n in summaries) and not any(
        n.endswith(".csv") for n in whole)
    if source == "with_l2":
        assert any("l2_cache" in n for n in summaries)
        if layout == "mindstudio":
            assert any("op_summary_device_1" in n for n in summaries)
    assert got == whole


def _db_tables(prof: Path) -> list:
    import sqlite3

    [dbp] = prof.glob("msprof_*.db")
    with sqlite3.connect(dbp) as conn:
        names = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master ORDER BY rowid")]
        return [(t, conn.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall()
                 if t != "TaskIndex" else None) for t in names]


# 700-task windows of one and two devices: tests/corpus db-w700
@pytest.mark.parametrize("source,window", [("two_devices", 50), ("rich", 10)])
def test_windowed_db_equals_the_one_window_db(request, tmp_path, monkeypatch, source, window):
    """--type db window by window: every table (rows, order, STRING_IDS numbering,
    OVERLAP_ANALYSIS ids, CANN_API order) equals the one-window plan's (the same db output,
    its other strategy), with several devices and HCCL data, and with msproftx markers."""
    from msprof_cli.export.layouts import db as WDB

    src = request.getfixturevalue(source)
    dbs = []
    for name, w in (("whole", 0), ("win", window)):
        monkeypatch.setenv(WN.WINDOW_TASKS_ENV, str(w))
        seen = []
        real = WDB.export_db
        monkeypatch.setattr(WDB, "export_db",
                            lambda plan, _r=real, **kw: seen.append(len(plan)) or
                            _r(plan, **kw))
        prof = tmp_path / name / src.name
        shutil.copytree(src, prof)
        run_export(prof, type_="db", quiet=True)
        assert (seen[0] >= 3) if w else (seen == [1])
        assert not [p for p in prof.iterdir() if ".tmp" in p.name]
        dbs.append(_db_tables(prof))
    whole, win = dbs
    if source == "two_devices":
        assert dict(whole)["COMMUNICATION_OP"]
    if source == "rich":
        assert dict(whole)["MSTX_EVENTS"]
    assert win == whole


def test_a_failing_db_window_leaves_nothing(big, tmp_path, monkeypatch):
    from msprof_cli.export.layouts import db as WDB

    monkeypatch.setenv(WN.WINDOW_TASKS_ENV, "700")
    prof = tmp_path / big.name
    shutil.copytree(big, prof)
    calls = []
    real = WDB.side_file

    def side(path, cols):
        calls.append(path)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return real(path, cols)
    monkeypatch.setattr(WDB, "side_file", side)
    monkeypatch.setenv("MSPROF_EXPORT_WORKERS", "1")  # the counter lives in this process
    with pytest.raises(ExportError, match="disk .or quota. is full"):
        run_export(prof, type_="db", quiet=True)
    assert len(calls) == 3
    assert not list(prof.glob("msprof_*.db"))
    assert not [p for p in prof.iterdir() if ".tmp" in p.name]


@pytest.mark.parametrize("layout", ["mindstudio", "legacy"])
def test_a_failing_in_place_timeline_end_leaves_no_temporary_file(big, tmp_path, monkeypatch,
                                                                   layout):
    """A one-window plan writes each timeline in place and ends it by a rename: a rename that
    fails (a full disk, a vanished directory) stops the export with a clear error; the
    temporary files are removed and a final file is whole or absent."""
    import errno
    import os as _os

    prof = tmp_path / big.name
    shutil.copytree(big, prof)
    real = _os.replace
    calls = []

    def failing(src, dst, *a, **kw):
        if str(dst).endswith(".json") and ".tmp" in str(src):
            calls.append(dst)
            if len(calls) == 2:
                raise OSError(errno.ENOSPC, "No space left on device")
        return real(src, dst, *a, **kw)
    monkeypatch.setattr(_os, "replace", failing)
    monkeypatch.setenv("MSPROF_EXPORT_WORKERS", "1")
    with pytest.raises(ExportError, match="disk .or quota. is full"):
        run_export(prof, layout=layout, quiet=True, json_slice_events=2500)
    assert len(calls) == 2
    monkeypatch.setattr(_os, "replace", real)
    left = [p for p in prof.rglob("*") if p.is_file() and (".tmp" in p.name or (
        p.suffix == ".json" and p.parent.name in ("timeline", OUT)))]
    assert not [p for p in left if ".tmp" in p.name]
    for p in left:
        json.loads(p.read_text())
