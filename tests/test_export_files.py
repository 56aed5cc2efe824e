"""Legacy export of PROF dirs written by the emulated device: the seed's tables 1 and 2.

* switch -> file mapping: for representative collection configs the exact set of files
  (present when the switch is on, absent when off) and every CSV header byte for byte
  against docs/formats/export-files.md;
* cross-checks between files (op_statistic vs op_summary, task_time vs hwts, step_trace vs
  iterations, ai_stack_time vs ModelExecute), timeline validity (JSON, numeric ts/dur,
  same-thread X events nested or disjoint), idempotence, --summary-format json;
* dynamic-shape (aging) data -> thread_group; multi-device hccl -> hccl json;
* the tuning advice file and its console report.
"""
from __future__ import annotations

import csv
import json
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import pytest
from test_device_records import STEP_OPS, F, T, hwts_tasks, make_chunk, make_iteration, run

from msprof_cli.capture import TxMarker
from msprof_cli.cli.collect import flags_to_options
from msprof_cli.export.api import run_export
from msprof_cli.options import validate_options

SUFFIX = "_0_1_1_3"
# docs/formats/export-files.md 3.x without Device_id, 4.1, 4.2 (with the project's `Block Dim`)
OP_SUMMARY_BASE = ("Model ID,Task ID,Stream ID,Op Name,OP Type,OP State,Task Type,"
                   "Task Start Time(us),Task Duration(us),Task Wait Time(us),Block Dim,"
                   "HF32 Eligible,Input Shapes,Input Data Types,Input Formats,Output Shapes,"
                   "Output Data Types,Output Formats")
PMU_TAILS = {
    "PipeUtilization": "aicore_time(us),total_cycles,vec_time(us),vec_ratio,mac_time(us),"
    "mac_ratio,scalar_time(us),scalar_ratio,mte1_time(us),mte1_ratio,mte2_time(us),mte2_ratio,"
    "mte3_time(us),mte3_ratio,icache_miss_rate,memory_bound,cube_utilization(%)",
    "ArithmeticUtilization": "aicore_time(us),total_cycles,mac_fp16_ratio,mac_int8_ratio,"
    "vec_fp32_ratio,vec_fp16_ratio,vec_int32_ratio,vec_misc_ratio,cube_fops,vector_fops",
    "Memory": "aicore_time(us),total_cycles,ub_read_bw(GB/s),ub_write_bw(GB/s),"
    "l1_read_bw(GB/s),l1_write_bw(GB/s),main_mem_read_bw(GB/s),main_mem_write_bw(GB/s)",
    "MemoryL0": "aicore_time(us),total_cycles,l0a_read_bw(GB/s),l0a_write_bw(GB/s),"
    "l0b_read_bw(GB/s),l0b_write_bw(GB/s),l0c_read_bw(GB/s),l0c_write_bw(GB/s),"
    "l0c_read_bw_cube(GB/s),l0c_write_bw_cube(GB/s)",
    "MemoryUB": "aicore_time(us),total_cycles,ub_read_bw_vector(GB/s),ub_write_bw_vector(GB/s),"
    "ub_read_bw_scalar(GB/s),ub_write_bw_scalar(GB/s)",
    "ResourceConflictRatio": "aicore_time(us),total_cycles,vec_bankgroup_cflt_ratio,"
    "vec_bank_cflt_ratio,vec_resc_cflt_ratio",
}
HEADERS = {
    "op_statistic": "OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),"
                    "Max Time(us),Ratio(%)",
    "task_time": "kernel_name,kernel_type,stream_id,task_id,task_time(us),task_start(us),"
                 "task_stop(us)",
    "step_trace": "Iteration ID,FP Start(us),BP End(us),Iteration End(us),Iteration Time(us),"
                  "FP to BP Time(us),Iteration Refresh(us),Data Aug Bound(us),Model ID",
    "fusion_op": "Model Name,Model ID,Fusion Op,Original Ops,Memory Input(KB),"
                 "Memory Output(KB),Memory Weight(KB),Memory Workspace(KB),Memory Total(KB)",
    "aicpu": "Timestamp(us),Node,Compute_time(us),Memcpy_time(us),Task_time(us),"
             "Dispatch_time(us),Total_time(us),Stream ID,Task ID",
    "l2_cache": "Stream Id,Task Id,Hit Rate,Victim Rate,Op Name",
    "msprof_tx": "pid,tid,category,event_type,payload_type,payload_value,Start_time(us),"
                 "End_time(us),message_type,message,domain,mark_id",
    "ai_stack_time": "Infer ID,Module,API,Start Time,Duration(ns)",
    "runtime_api": "Name,Stream ID,Time(%),Time(ns),Calls,Avg(ns),Min(ns),Max(ns),Process ID,"
                   "Thread ID",
}
DEFAULT_TIMELINES = {"msprof", "ai_stack_time", "task_time", "ge", "step_trace"}
DEFAULT_SUMMARIES = {"op_summary", "op_statistic", "step_trace", "ai_stack_time", "fusion_op",
                     "task_time"}


def cfg(tmp: Path, **flags):
    """ProfilingConfig of `msprof collect` with these flags (others at their defaults)."""
    return validate_options(flags_to_options(**flags), cwd=str(tmp))


def chunk_with_markers(n_iter: int = 3):
    ch = make_chunk(n_iter)
    it = ch.iterations
    ch.markers = [TxMarker("epoch", it[0].start_ns + 100, it[-1].end_ns - 100, 4242,
                           event_type=2),
                  TxMarker("step 2", it[1].start_ns + 50, it[1].start_ns + 50, 4242)]
    return ch


def export(tmp: Path, config, chunks=None, **kw) -> Path:
    prof = run(tmp, chunks or [chunk_with_markers()], config)
    run_export(prof, quiet=True, **kw)
    return prof


def files(prof: Path, sub: str, dev: int = 0) -> set[str]:
    d = prof / f"device_{dev}" / sub
    return {p.name for p in d.iterdir()} if d.is_dir() else set()


def named(names: set[str], suffix: str, ext: str) -> set[str]:
    return {f"{n}{suffix}.{ext}" for n in names}


def header(prof: Path, name: str, suffix: str = SUFFIX) -> str:
    path = prof / "device_0" / "summary" / f"{name}{suffix}.csv"
    return path.read_bytes().split(b"\n", 1)[0].decode()


def rows(prof: Path, name: str, suffix: str = SUFFIX) -> list[dict]:
    with open(prof / "device_0" / "summary" / f"{name}{suffix}.csv", newline="") as fh:
        return list(csv.DictReader(fh))


CASES = {
    # name: (collect flags, extra timelines, extra summaries, removed timelines/summaries)
    "default": ({}, set(), set(), set()),
    "aicpu": ({"aicpu": "on"}, set(), {"aicpu"}, set()),
    "l2": ({"l2": "on"}, set(), {"l2_cache"}, set()),
    "runtime_api": ({"runtime_api": "on"}, {"runtime_api"}, {"runtime_api"}, set()),
    "msproftx": ({"msproftx": "on"}, {"msprof_tx"}, {"msprof_tx"}, set()),
    "task_time_l0": ({"task_time": "l0"}, set(), set(), {"op_statistic", "fusion_op"}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_switch_to_file_mapping(tmp_path: Path, case: str) -> None:
    flags, more_t, more_s, less = CASES[case]
    prof = export(tmp_path, cfg(tmp_path, **flags))
    timelines = (DEFAULT_TIMELINES | more_t) - less
    summaries = (DEFAULT_SUMMARIES | more_s) - less
    assert files(prof, "timeline") == named(timelines, SUFFIX, "json")
    assert files(prof, "summary") == named(summaries, SUFFIX, "csv") | {"prof_rule_0.json"}
    tail = "" if case == "task_time_l0" else "," + PMU_TAILS["PipeUtilization"]
    assert header(prof, "op_summary") == OP_SUMMARY_BASE + tail
    for name in summaries - {"op_summary"}:
        assert header(prof, name) == HEADERS[name], name
    assert not (prof / "host" / "summary").exists() and not (prof / "host" / "timeline").exists()


def test_training_trace_off_and_task_time_off(tmp_path: Path) -> None:
    prof = export(tmp_path / "a", cfg(tmp_path, training_trace="off"))
    # no step trace: no model/iteration in the names, no step_trace files
    assert files(prof, "timeline") == named(DEFAULT_TIMELINES - {"step_trace"}, "_0", "json")
    assert files(prof, "summary") == named(DEFAULT_SUMMARIES - {"step_trace"}, "_0", "csv") \
        | {"prof_rule_0.json"}
    prof = export(tmp_path / "b", cfg(tmp_path, task_time="off", training_trace="on"))
    # no tasks at all: the host ModelExecute APIs and the step trace remain
    assert files(prof, "timeline") == {f"msprof{SUFFIX}.json", f"step_trace{SUFFIX}.json"}
    assert files(prof, "summary") == {f"step_trace{SUFFIX}.csv", "prof_rule_0.json"}


@pytest.mark.parametrize("group", list(PMU_TAILS))
def test_aic_metrics_groups(tmp_path: Path, group: str) -> None:
    prof = export(tmp_path, cfg(tmp_path, aic_metrics=group))
    assert files(prof, "summary") == named(DEFAULT_SUMMARIES, SUFFIX, "csv") | {"prof_rule_0.json"}
    assert header(prof, "op_summary") == OP_SUMMARY_BASE + "," + PMU_TAILS[group]
    rule = json.loads((prof / "device_0/summary/prof_rule_0.json").read_text())
    model = rule["data"]["Model Summary"][0]["result"]
    assert (len(model) == 1) == (group == "PipeUtilization")  # bottleneck needs PipeUtilization


# --- cross-checks ----------------------------------------------------------------------------

def _two_chunks():
    first = chunk_with_markers(3)
    second = make_chunk(3, first_index=4, start=first.iterations[-1].end_ns + 80_000)
    return [first, second]


@pytest.fixture(scope="module")
def full_prof(tmp_path_factory) -> Path:
    """6 iterations in 2 chunks with every single-device switch on."""
    tmp = tmp_path_factory.mktemp("full")
    config = cfg(tmp, aicpu="on", l2="on", runtime_api="on", msproftx="on")
    return export(tmp, config, _two_chunks())


SUFFIX6 = "_0_1_1_6"


def test_cross_checks(full_prof: Path) -> None:
    op = rows(full_prof, "op_summary", SUFFIX6)
    stat = rows(full_prof, "op_statistic", SUFFIX6)
    totals: dict[tuple[str, str], list[Decimal]] = defaultdict(list)
    for r in op:
        totals[(r["OP Type"], r["Task Type"])].append(Decimal(r["Task Duration(us)"]))
    assert len(stat) == len(totals)
    for r in stat:
        durs = totals[(r["OP Type"], r["Core Type"])]
        assert int(r["Count"]) == len(durs)
        assert abs(Decimal(r["Total Time(us)"]) - sum(durs)) <= Decimal("0.001")
    # task_time: one row per hwts task pair + one per AI CPU task (one timing record each)
    import numpy as np

    from msprof_cli.device import readback as R
    n_aicpu = len(R.device_records(full_prof, "aicpu", 0))
    task = rows(full_prof, "task_time", SUFFIX6)
    # (+ one MEMCPY_ASYNC input copy per iteration: ts_track "ts memcpy" tasks)
    n_copy = len(R.ts_memcpy(full_prof)) // 3  # received / started / ended records
    assert len(task) == len(hwts_tasks(full_prof)) + n_aicpu + n_copy and n_aicpu == 6
    assert n_copy == 6 and sum(r["kernel_type"] == "MEMCPY_ASYNC" for r in task) == n_copy
    assert len(rows(full_prof, "aicpu", SUFFIX6)) == n_aicpu
    assert len(rows(full_prof, "step_trace", SUFFIX6)) == 6
    assert len(op) == len(task) - n_copy  # copies are not ops
    # ai_stack_time: per iteration GE Input/Infer/Output, Runtime, Task Scheduler
    stack = rows(full_prof, "ai_stack_time", SUFFIX6)
    assert [(r["Module"], r["API"]) for r in stack[:5]] == [
        ("GE", "Input"), ("GE", "Infer"), ("GE", "Output"), ("Runtime", "N/A"),
        ("Task Scheduler", "N/A")]
    assert [r["Infer ID"] for r in stack] == [str(i) for i in range(1, 7) for _ in range(5)]
    by_iter = {(r["Infer ID"], r["API"]): r for r in stack}
    infer = by_iter[("1", "Infer")]
    inp, out = by_iter[("1", "Input")], by_iter[("1", "Output")]
    # GE's Input, Infer and Output follow each other (docs/formats/raw-format.md 4.12); the
    # runtime APIs and the device tasks lie within the step they span
    end = {k: int(r["Start Time"]) + int(r["Duration(ns)"]) for k, r in by_iter.items()}
    assert end[("1", "Input")] < int(infer["Start Time"]) < end[("1", "Infer")] < \
        int(out["Start Time"])
    for r in (by_iter[("1", "N/A")],):
        assert int(inp["Start Time"]) <= int(r["Start Time"])
    # runtime_api: one launch API per task_track, on the task's stream
    rt = {(r["Name"], r["Stream ID"]): int(r["Calls"]) for r in rows(full_prof, "runtime_api",
                                                                        SUFFIX6)}
    n_core = len(hwts_tasks(full_prof))
    assert rt == {("rtKernelLaunch", "2"): n_core, ("rtCpuKernelLaunchWithFlag", "3"): 6,
                  ("rtMemcpyAsync", "5"): n_copy}
    pct = [float(r["Time(%)"]) for r in rows(full_prof, "runtime_api", SUFFIX6)]
    assert abs(sum(pct) - 100) < 0.01
    # fusion_op: the fused Conv2D with its original ops, `;`-separated
    [fz] = rows(full_prof, "fusion_op", SUFFIX6)
    assert fz["Model Name"] == "sequential" and fz["Model ID"] == "1"
    assert fz["Original Ops"] == ("sequential/conv2d/Conv2D;sequential/conv2d/BiasAdd;"
                                  "sequential/conv2d/Relu")
    # msprof_tx: both markers; the range (a MarkEx record) with its domain resolved and its
    # mark id, the mark (a Mark record) with category and payload but neither (N/A)
    tx = rows(full_prof, "msprof_tx", SUFFIX6)
    assert [r["message"] for r in tx] == ["epoch", "step 2"]
    assert [(r["domain"], r["mark_id"], r["category"]) for r in tx] == [
        ("default", "0", "N/A"), ("N/A", "N/A", "0")] and tx[1]["event_type"] == "marker"
    assert np.all([r["Start_time(us)"].endswith("\t") for r in tx])


def _ns(ts) -> int:
    return int(Decimal(str(ts)) * 1000)


def test_timelines_valid_and_nested(full_prof: Path) -> None:
    tdir = full_prof / "device_0" / "timeline"
    names = {p.name for p in tdir.iterdir()}
    assert names == named({"msprof", "ai_stack_time", "task_time", "runtime_api", "ge",
                           "step_trace", "msprof_tx"}, SUFFIX6, "json")
    for path in tdir.iterdir():
        events = json.loads(path.read_text())
        assert isinstance(events, list) and any(e["ph"] != "M" for e in events), path.name
        phases = [e["ph"] for e in events]
        assert phases == sorted(phases, key=lambda p: p != "M"), path.name  # metadata first
        for e in events:
            if e["ph"] == "X":
                float(e["ts"]), float(e["dur"])
                assert float(e["dur"]) >= 0
    # msprof json: same-thread X events are nested or disjoint, never partially overlapping
    events = json.loads((tdir / f"msprof{SUFFIX6}.json").read_text())
    lanes: dict[tuple, list[tuple[int, int]]] = defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            b = _ns(e["ts"])
            lanes[(e["pid"], e["tid"])].append((b, b + round(float(e["dur"]) * 1000)))
    assert len(lanes) >= 5
    checked = 0
    for lane, spans in lanes.items():
        stack: list[int] = []
        for b, e in sorted(spans, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1] <= b:
                stack.pop()
            assert not stack or e <= stack[-1], (lane, b, e, stack[-1])
            stack.append(e)
            checked += 1
    assert checked > 100
    names = {e["name"] for e in events if e["ph"] == "X"}
    assert {"Model@InputCopy", "Model@OutputCopy", "Model@ModelExecute", "Node@launch",
            "Runtime@rtKernelLaunch", "epoch"} <= names


def test_export_is_idempotent(full_prof: Path) -> None:
    def snapshot() -> dict[str, bytes]:
        return {str(p.relative_to(full_prof)): p.read_bytes()
                for sub in ("summary", "timeline") for p in (full_prof / "device_0" / sub)
                .iterdir()}
    before = snapshot()
    run_export(full_prof, quiet=True)
    assert snapshot() == before


def test_summary_format_json(tmp_path: Path) -> None:
    config = cfg(tmp_path, aicpu="on", l2="on", runtime_api="on", msproftx="on")
    prof = export(tmp_path, config)
    csv_names = files(prof, "summary")
    for p in (prof / "device_0" / "summary").iterdir():
        p.unlink()
    run_export(prof, quiet=True, summary_format="json")
    json_names = files(prof, "summary")
    assert json_names == {n.replace(".csv", ".json") for n in csv_names}
    for name in json_names - {"prof_rule_0.json"}:
        data = json.loads((prof / "device_0" / "summary" / name).read_text())
        assert isinstance(data, list) and data and isinstance(data[0], dict), name
        stem = name[:-len(f"{SUFFIX}.json")]
        assert ",".join(data[0]) == (HEADERS.get(stem) or
                                     OP_SUMMARY_BASE + "," + PMU_TAILS["PipeUtilization"])


# --- dynamic shape, multi-device ---------------------------------------------------------------

def test_thread_group_only_for_dynamic_shape(tmp_path: Path) -> None:
    prof = run(tmp_path, [make_chunk(2)], cfg(tmp_path))
    run_export(prof, quiet=True)
    assert not any(n.startswith("thread_group") for n in files(prof, "timeline"))
    # the same data reported as dynamic-shape (aging.*) host records
    for p in (prof / "host" / "data").iterdir():
        if p.name.startswith("unaging."):
            p.rename(p.with_name("aging." + p.name[len("unaging."):]))
    run_export(prof, quiet=True)
    path = prof / "device_0" / "timeline" / "thread_group_0_1_1_2.json"
    events = json.loads(path.read_text())
    procs = {e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert procs == {"Thread 4242"}
    lanes = {e["tid"] for e in events if e["ph"] == "X"}
    assert lanes == {1}  # GE lane: ModelExecute, copies, launches (no runtime_api data)
    assert {r["OP State"] for r in rows(prof, "op_summary", "_0_1_1_2")} == {"dynamic"}


HCCL_OPS = STEP_OPS[:13] + [("allreduce/CollectiveReduceV2", "CollectiveReduceV2",
                             (T((3, 3, 1, 16), F),), (T((3, 3, 1, 16), F),), ())] + STEP_OPS[13:]


def _two_device_chunk():
    ch = make_chunk(2, ops=HCCL_OPS)
    for i, it in enumerate(ch.iterations):
        it.ops += make_iteration(1, it.index, it.start_ns, ops=HCCL_OPS, device_id=1).ops
    return ch


@pytest.mark.parametrize("hccl", ["on", "off"])
def test_hccl_multi_device(tmp_path: Path, hccl: str) -> None:
    prof = run(tmp_path, [_two_device_chunk()], cfg(tmp_path, hccl=hccl), device_ids=(0, 1))
    run_export(prof, quiet=True)
    for dev in (0, 1):
        names = files(prof, "timeline", dev)
        has = f"hccl_{dev}_1_1_2.json" in names
        assert has == (hccl == "on")
        if has:
            events = json.loads((prof / f"device_{dev}/timeline/hccl_{dev}_1_1_2.json")
                                .read_text())
            x = [e for e in events if e["ph"] == "X"]
            # ring all-reduce on 2 ranks: 1 Reduce_Inline + 1 Memcpy step per iteration
            assert [e["name"] for e in x] == ["Reduce_Inline", "Memcpy"] * 2
            # the steps' args as the real analysis writes them (each step a task of the
            # HCCL stream with its hccl_info)
            assert {e["args"]["src rank"] for e in x} == {dev}
            assert {e["args"]["stream id"] for e in x} == {4}
            assert [e["args"]["task type"] for e in x] == [e["name"] for e in x]


def test_no_hccl_file_single_device(tmp_path: Path) -> None:
    prof = run(tmp_path, [make_chunk(2, ops=HCCL_OPS)], cfg(tmp_path, hccl="on"))
    run_export(prof, quiet=True)
    assert not any(n.startswith("hccl") for n in files(prof, "timeline"))


# --- advice ------------------------------------------------------------------------------------

def test_prof_rule_and_console_report(tmp_path: Path, capsys) -> None:
    prof = run(tmp_path, [make_chunk(3)], cfg(tmp_path, aicpu="on"))
    res = run_export(prof, advice="full")  # the real tool's whole report
    out = capsys.readouterr().out
    rule = json.loads((prof / "device_0/summary/prof_rule_0.json").read_text())
    assert rule["status"] == 0
    assert list(rule["data"]) == ["Op Summary", "Op Parallel", "Model Summary"]
    assert [a.path.name for a in res.advice] == ["prof_rule_0.json"]
    assert "\nPerformance Summary Report:\n1. Computation:" in out
    proc = {r["Rule Suggestion"]: r["Tuning Data"]
            for g in rule["data"]["Op Summary"] if g["Rule Type"] == "Operator Processing"
            for r in g["result"]}
    assert proc["Check and reduce AI CPU operators"] == ["dropout/random_uniform/RandomUniform"]
    # each op-list finding names its ops with their numbers on the console
    assert "\t1)Use multi-core: [" in out or "Use multi-core" not in str(rule)
    assert "- dropout/random_uniform/RandomUniform: 3 tasks, " in out
    assert "Percentage of AI CPU Execution Time is " in out
    # quiet: no report on the console, but the file is still written
    run_export(prof, quiet=True)
    assert "Performance Summary Report" not in capsys.readouterr().out


def test_brief_advice_is_the_default(tmp_path: Path, capsys) -> None:
    """One line per finding, the Computation rules as one statement naming each op's
    bottleneck pipe, and where the full report is; `off` prints none of it."""
    prof = run(tmp_path, [make_chunk(3)], cfg(tmp_path, aicpu="on",
                                              aic_metrics="PipeUtilization"))
    res = run_export(prof)
    out = capsys.readouterr().out
    assert "Performance Summary Report" not in out
    [adv] = res.advice
    head = [ln for ln in out.splitlines() if ln.startswith("[INFO] Tuning advice")]
    assert head == [f"[INFO] Tuning advice: {len(adv.brief)} findings (full report: {adv.path};"
                    " msprof export --advice full prints it)"]
    lines = [ln for ln in out.splitlines() if ln.startswith("  - ")]
    assert lines == [f"  - {b}" for b in adv.brief] and 1 <= len(lines) <= 8
    comp = [ln for ln in lines if ln.startswith("  - Computation:")]
    assert len(comp) == 1 and "by bottleneck pipe" in comp[0]
    assert "Check and reduce AI CPU operators (1 ops; heaviest: "\
           "dropout/random_uniform/RandomUniform: 3 tasks" in out
    run_export(prof, advice="off")
    assert "Tuning advice" not in capsys.readouterr().out


def test_iteration_selection_applies_to_every_file(tmp_path: Path) -> None:
    config = cfg(tmp_path, aicpu="on", l2="on", runtime_api="on", msproftx="on")
    prof = export(tmp_path, config, model_id=1, iteration_id=2, iteration_count=2)
    sfx = "_0_1_2_3"
    assert files(prof, "summary") == named(DEFAULT_SUMMARIES | {"aicpu", "l2_cache",
                                                                "runtime_api", "msprof_tx"},
                                           sfx, "csv") | {"prof_rule_0.json"}
    stack = rows(prof, "ai_stack_time", sfx)
    assert sorted({r["Infer ID"] for r in stack}) == ["2", "3"]
    n_tasks = len(rows(prof, "task_time", sfx))
    calls = sum(int(r["Calls"]) for r in rows(prof, "runtime_api", sfx))
    n_copy = sum(r["kernel_type"] == "MEMCPY_ASYNC" for r in rows(prof, "task_time", sfx))
    assert n_copy == 2  # one input copy per iteration (rtMemcpyAsync), not an op
    assert calls == n_tasks == len(rows(prof, "op_summary", sfx)) + n_copy
    n_core = sum(r["kernel_type"] == "AI_CORE" for r in rows(prof, "task_time", sfx))
    assert len(rows(prof, "l2_cache", sfx)) == n_core
    ge = json.loads((prof / "device_0/timeline" / f"ge{sfx}.json").read_text())
    assert [e["name"] for e in ge if e["ph"] == "X"] == ["Input", "Infer", "Output"] * 2
    assert {e["args"]["Model Name"] for e in ge if e["ph"] == "X"} == {"sequential"}
    # markers are host events: not restricted to the window (like the CANN layer)
    assert len(rows(prof, "msprof_tx", sfx)) == 2


def test_mindstudio_writes_fusion_op_with_device_id(full_prof: Path) -> None:
    from msprof_cli.export.api import run_export

    run_export(full_prof, layout="mindstudio", quiet=True)
    out = full_prof / "mindstudio_profiler_output"
    [path] = list(out.glob("fusion_op_*.csv"))
    lines = path.read_text().splitlines()
    assert lines[0] == "Device_id," + HEADERS["fusion_op"]
    assert lines[1].startswith("0,sequential,1,")
    assert "fusion_op.csv" in (out / "README.txt").read_text()
