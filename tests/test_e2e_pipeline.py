"""End-to-end walking skeleton: a real Keras script through `msprof collect`, then `msprof export`
(both layouts) and `msprof query`, asserting on the real files."""
from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest

from msprof_cli.raw import layouts as L

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "scripts" / "keras_fit.py"
STEPS = 3  # keras_fit.py: 12 samples, batch 4, 1 epoch
MSPROF = [sys.executable, "-m", "msprof_cli"]


def msprof(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    proc = subprocess.run([*MSPROF, *args], capture_output=True, text=True, cwd=cwd,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def collect(tmp: Path, *flags: str) -> Path:
    msprof("collect", "--output", str(tmp / "out"), *flags, "--", sys.executable, str(SCRIPT),
           cwd=tmp)
    profs = sorted((tmp / "out").glob("PROF_*"))
    assert len(profs) == 1
    return profs[0]


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def prof(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("pipeline")
    prof = collect(tmp)
    msprof("export", "--output", str(prof), cwd=tmp)
    return prof


def summary(prof: Path, name: str) -> Path:
    files = sorted((prof / "device_0" / "summary").glob(f"{name}_0_*.csv"))
    assert len(files) == 1, [p.name for p in (prof / "device_0" / "summary").iterdir()]
    return files[0]


def test_file_names_carry_device_model_and_iterations(prof: Path) -> None:
    names = {p.name for p in (prof / "device_0" / "summary").iterdir()}
    assert f"op_summary_0_1_1_{STEPS}.csv" in names
    assert f"step_trace_0_1_1_{STEPS}.csv" in names
    timelines = {p.name for p in (prof / "device_0" / "timeline").iterdir()}
    assert f"msprof_0_1_1_{STEPS}.json" in timelines


def test_op_summary_has_the_models_real_layers(prof: Path) -> None:
    rows = read_csv(summary(prof, "op_summary"))
    conv = [r for r in rows if r["OP Type"] == "Conv2D"]
    dense = [r for r in rows if r["OP Type"] == "MatMulV2"]
    assert conv and all("conv2d" in r["Op Name"] for r in conv)
    assert dense and all("dense" in r["Op Name"] for r in dense)
    first = conv[0]
    assert first["Input Shapes"].startswith('"4,8,8,1;3,3,1,4')  # batch 4, 8x8x1, 3x3 kernel
    assert first["Output Shapes"] == '"4,6,6,4"'
    assert first["OP State"] == "static" and first["Task Type"] == "AI_CORE"
    assert first["Task Start Time(us)"].endswith("\t")
    assert float(first["Task Duration(us)"]) > 0 and float(first["vec_ratio"]) >= 0
    # every conv of the 3 steps: forward + two gradients per step
    assert len([r for r in rows if r["OP Type"].startswith("Conv2D")]) >= STEPS


def test_one_step_trace_row_per_training_step(prof: Path) -> None:
    rows = read_csv(summary(prof, "step_trace"))
    assert [int(r["Iteration ID"]) for r in rows] == list(range(1, STEPS + 1))
    assert all(r["Model ID"] == "1" for r in rows)
    for r in rows:
        assert float(r["Iteration Time(us)"]) > 0
        assert float(r["FP to BP Time(us)"]) > 0


def test_op_statistic_totals_equal_op_summary_sums(prof: Path) -> None:
    ops = read_csv(summary(prof, "op_summary"))
    totals: dict[tuple[str, str], float] = defaultdict(float)
    counts: Counter = Counter()
    for r in ops:
        totals[(r["OP Type"], r["Task Type"])] += float(r["Task Duration(us)"])
        counts[(r["OP Type"], r["Task Type"])] += 1
    for r in read_csv(summary(prof, "op_statistic")):
        key = (r["OP Type"], r["Core Type"])
        assert int(r["Count"]) == counts[key]
        assert float(r["Total Time(us)"]) == pytest.approx(totals[key], abs=1e-3)


def hwts_pairs(prof: Path) -> int:
    hwts = np.fromfile(prof / "device_0" / "data" / "hwts.data.0.slice_0", dtype=L.HWTS)
    starts = int(np.count_nonzero((hwts["flags"] & 7) == L.HWTS_TASK_START))
    assert starts == int(np.count_nonzero((hwts["flags"] & 7) == L.HWTS_TASK_END))
    return starts


def test_legacy_task_time_covers_the_exported_iterations(prof: Path) -> None:
    """Legacy files hold the default model's iterations; tasks of the script's eager ops
    (outside any step) are not part of them."""
    all_rows = read_csv(summary(prof, "task_time"))
    # the per-step host<->device copies (MEMCPY_ASYNC, ts_track) are tasks but not ops:
    # each step copies its input batch in; the fetched loss goes back after the step's end
    # marker, so the last step's copy-out lies outside the exported window
    copies = [r["kernel_name"] for r in all_rows if r["kernel_type"] == "MEMCPY_ASYNC"]
    assert copies.count("MemcpyAsync_HostToDevice") == STEPS
    assert copies.count("MemcpyAsync_DeviceToHost") >= STEPS - 1
    rows = [r for r in all_rows if r["kernel_type"] != "MEMCPY_ASYNC"]
    assert 0 < len(rows) <= hwts_pairs(prof)
    ops = read_csv(summary(prof, "op_summary"))
    assert len(rows) == len([r for r in ops if r["Task Type"] == "AI_CORE"])


def test_timeline_is_chrome_trace_and_same_thread_events_nest(prof: Path) -> None:
    path = next((prof / "device_0" / "timeline").glob("msprof_0_*.json"))
    events = json.loads(path.read_text())
    assert isinstance(events, list)
    xs = [e for e in events if e["ph"] == "X"]
    assert xs and any(e["ph"] == "M" and e["name"] == "process_name" and
                      e["args"]["name"] == "Ascend Hardware" for e in events)
    by_thread: dict[tuple, list[tuple[float, float]]] = defaultdict(list)
    for e in xs:
        assert isinstance(e["ts"], str) and len(e["ts"].split(".")[1]) == 3
        float(e["ts"]), float(e["dur"])  # both parse as numbers
        # exact integer ns: a float64 cannot hold 16-digit µs with 3 decimals
        ts = int(e["ts"].replace(".", ""))
        by_thread[(e["pid"], e["tid"])].append((ts, ts + round(float(e["dur"]) * 1000)))
    for spans in by_thread.values():
        spans.sort(key=lambda s: (s[0], -s[1]))
        stack: list[float] = []
        for start, end in spans:
            while stack and stack[-1] <= start:
                stack.pop()
            # nested in the enclosing span, or disjoint from it: never a partial overlap
            assert not stack or end <= stack[-1], (start, end, stack[-1])
            stack.append(end)


def test_query_lists_the_collection(prof: Path) -> None:
    out = msprof("query", "--output", str(prof), cwd=prof.parent).stdout
    lines = [line for line in out.split("\n") if line]
    assert lines[0].startswith("Job Info\tDevice ID\tDir Name\t")
    device = [line.split("\t") for line in lines[1:] if "device_0" in line]
    assert len(device) == 1
    cells = [c.strip() for c in device[0]]
    assert cells[1] == "0" and cells[4] == "1" and cells[5] == str(STEPS)
    host = [line.split("\t") for line in lines[1:] if "host" in line][0]
    assert [c.strip() for c in host][4:7] == ["", "", ""]  # N/A shown as empty cells
    as_json = json.loads(msprof("query", "--output", str(prof), "--format", "json",
                                cwd=prof.parent).stdout)
    assert as_json[0]["Iteration Number"] == str(STEPS)


def test_mindstudio_layout_from_a_collection(prof: Path) -> None:
    msprof("export", "--output", str(prof), "--layout", "mindstudio", cwd=prof.parent)
    out = prof / "mindstudio_profiler_output"
    names = {p.name.rsplit("_", 1)[0] for p in out.iterdir() if p.suffix in (".csv", ".json")}
    assert {"op_summary", "op_statistic", "task_time", "step_trace", "api_statistic",
            "msprof"} <= names
    op = read_csv(next(out.glob("op_summary_*.csv")))
    assert op and list(op[0])[0] == "Device_id" and "Block Dim" in op[0]
    # all-data export: one task_time row per hwts start/end pair (+ the memcpy copies,
    # "MemcopyAsync" as the real analysis writes them, and the AI CPU tasks of ts_track)
    tasks = read_csv(next(out.glob("task_time_*.csv")))
    assert len([r for r in tasks if r["kernel_name"] != "MemcopyAsync"
                and r["kernel_type"] != "AI_CPU"]) == hwts_pairs(prof)


def test_device_durations_are_deterministic(prof: Path, tmp_path: Path) -> None:
    """A second collection of the same script gives the same device durations per op."""
    other = collect(tmp_path)
    msprof("export", "--output", str(other), cwd=tmp_path)

    def durations(p: Path) -> Counter:
        return Counter((r["Op Name"], r["Task Duration(us)"], r.get("total_cycles"))
                       for r in read_csv(summary(p, "op_summary")))

    assert durations(other) == durations(prof)


def test_database_from_a_collection_matches_the_csvs(prof: Path) -> None:
    import sqlite3

    msprof("export", "--output", str(prof), "--type", "db", cwd=prof.parent)
    [db] = list(prof.glob("msprof_*.db"))
    out = prof / "mindstudio_profiler_output"
    if not out.exists():
        msprof("export", "--output", str(prof), "--layout", "mindstudio", cwd=prof.parent)
    ops = read_csv(next(out.glob("op_summary_*.csv")))
    with sqlite3.connect(db) as con:
        n_compute = con.execute("SELECT COUNT(*) FROM COMPUTE_TASK_INFO").fetchone()[0]
        top = con.execute("""
            SELECT s.value, SUM(t.endNs - t.startNs) FROM COMPUTE_TASK_INFO c
            JOIN TASK t ON t.globalTaskId = c.globalTaskId JOIN STRING_IDS s ON s.id = c.opType
            GROUP BY c.opType ORDER BY 2 DESC LIMIT 1""").fetchone()
    assert n_compute == len(ops)
    stat = read_csv(next(out.glob("op_statistic_*.csv")))
    assert top[0] == stat[0]["OP Type"]
    assert top[1] / 1000 == pytest.approx(float(stat[0]["Total Time(us)"]), abs=0.01)


@pytest.mark.parametrize("layout", ["mindstudio", "legacy"])
def test_windowed_export_of_a_collection(prof: Path, tmp_path: Path, layout: str) -> None:
    """A real collection cut into windows of 40 tasks gives the files (and the console
    report) of the whole export, in both layouts."""
    import hashlib
    import os
    import re
    import shutil

    from msprof_cli.export.decode.windows import WINDOW_TASKS_ENV, Whole, plan_windows

    assert not isinstance(plan_windows(prof, 40), Whole)  # real collections have quiet points
    digests = []
    for name, window in (("whole", "0"), ("windowed", "40")):
        copy = tmp_path / name / prof.name
        shutil.copytree(prof, copy, ignore=shutil.ignore_patterns(
            "mindstudio_profiler_output", "summary", "timeline"))
        env = {**os.environ, WINDOW_TASKS_ENV: window}
        proc = subprocess.run([*MSPROF, "export", "--output", str(copy), "--layout", layout],
                              capture_output=True, text=True, env=env, timeout=180)
        assert proc.returncode == 0, proc.stderr[-3000:]
        outs = [copy / "mindstudio_profiler_output"] if layout == "mindstudio" else \
            [copy / "device_0" / "summary", copy / "device_0" / "timeline"]
        got = {re.sub(r"_\d{14}", "", f"{d.name}/{p.name}"): hashlib.sha256(p.read_bytes())
               .hexdigest() for d in outs for p in d.iterdir()}
        got["console"] = re.sub(r"_\d{14}", "", proc.stdout.replace(str(copy), "PROF"))
        digests.append(got)
    assert len(digests[0]) >= 9
    assert digests[1] == digests[0]
