"""End-to-end: a real Keras program collected on an emulated Atlas A2 (`msprof collect
--soc-version Ascend910B3`) through every subcommand, and the same program on the 910 beside
it (docs/formats/ascend910b.md, docs/device-model.md 1).  The real analysis's agreement with
our export of A2 collections is tests/test_oracle_cases.py's (the fresh_a2_* cases)."""
from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from msprof_cli.raw import stars_layouts as SL

pytestmark = pytest.mark.e2e
SCRIPT = Path(__file__).resolve().parent / "scripts" / "a2_conv.py"
MSPROF = [sys.executable, "-m", "msprof_cli"]


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run([*MSPROF, *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def collections(tmp_path_factory) -> dict[str, Path]:
    """The script collected on the Ascend910B3 and on the Ascend910A."""
    out = {}
    for chip in ("Ascend910B3", "Ascend910A"):
        tmp = tmp_path_factory.mktemp(chip)
        run("collect", "--output", str(tmp / "out"), "--soc-version", chip, "--",
            sys.executable, str(SCRIPT), cwd=tmp)
        [out[chip]] = sorted((tmp / "out").glob("PROF_*"))
    return out


def copy_of(prof: Path, tmp: Path) -> Path:
    """A copy to export into (export writes beside the raw data, in the PROF dir)."""
    return Path(shutil.copytree(prof, tmp / prof.name))


def _csv(path_glob: list[Path]) -> list[dict[str, str]]:
    [path] = path_glob
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_the_raw_data_is_the_a2_layout(collections) -> None:
    prof = collections["Ascend910B3"]
    data = prof / "device_0" / "data"
    names = {p.name.split(".data")[0] for p in data.iterdir()}
    assert {"stars_soc", "ffts_profile", "ts_track"} <= names
    assert not names & {"hwts", "aicore"}  # the 910's task log and PMU are not written
    info = json.loads((prof / "device_0" / "info.json.0").read_text())
    dev = info["DeviceInfo"][0]
    assert (info["platform_version"], dev["ai_core_num"], dev["aiv_num"],
            dev["hwts_frequency"], dev["aic_frequency"]) == ("5", 20, 40, "50", "1800")
    sample = json.loads((prof / "device_0" / "sample.json").read_text())
    assert sample["ai_core_metrics"] == "PipeUtilizationExct"
    assert sample["ai_core_profiling_events"] == "0x416,0x417,0x9,0x302,0xc,0x303,0x54,0x55"
    assert (sample["aiv_profiling"], sample["aiv_metrics"]) == ("on", "PipeUtilization")
    log = np.fromfile(next(data.glob("stars_soc.data.0.slice_*")), SL.ACSQ_LOG)
    assert (log["magic"] == SL.STARS_MAGIC).all()
    func = SL.func_type(log["head"])
    assert (func == SL.FUNC_ACSQ_START).sum() == (func == SL.FUNC_ACSQ_END).sum() > 100
    assert (np.diff(log["syscnt"].astype(np.int64)) >= 0).all()  # one time-ordered log
    pmu = np.fromfile(next(data.glob("ffts_profile.data.0.slice_*")), SL.CONTEXT_PMU)
    kinds = set(((pmu["ffts_type"] >> 13) & 7).tolist())
    assert kinds == {SL.FFTS_AIC_ONLY, SL.FFTS_AIV_ONLY}


def test_cube_work_runs_on_the_cube_cores_and_vector_work_on_the_vector_cores(
        collections, tmp_path: Path) -> None:
    out = copy_of(collections["Ascend910B3"], tmp_path) / "mindstudio_profiler_output"
    run("export", str(out.parent), "--layout", "mindstudio")
    rows = _csv(sorted(out.glob("op_summary_*.csv")))
    header = list(rows[0])
    assert header.index("Mix Block Dim") == header.index("Block Dim") + 1
    assert header[header.index("Context ID") + 1:header.index("Context ID") + 3] == [
        "aicore_time(us)", "aic_total_cycles"]
    assert header[-1] == "cube_utilization(%)" and "aiv_vec_ratio" in header
    conv = [r for r in rows if r["OP Type"] == "Conv2D"]
    relu = [r for r in rows if r["OP Type"] in ("ReluGrad", "MaxPool", "Add", "Mul")]
    assert conv and relu
    for r in conv:
        assert r["Task Type"] == "AI_CORE" and int(r["aic_total_cycles"]) > 0
        assert int(r["aiv_total_cycles"]) == 0 and float(r["cube_utilization(%)"]) > 0
        assert int(r["Block Dim"]) <= 20  # the B3's AI Cube cores
    for r in relu:
        assert r["Task Type"] == "AI_VECTOR_CORE" and int(r["aiv_total_cycles"]) > 0
        assert int(r["aic_total_cycles"]) == 0 and float(r["aiv_time(us)"]) > 0
        assert int(r["Block Dim"]) <= 40
    assert all(r["Mix Block Dim"] == "0" and r["Context ID"] == "N/A" for r in conv + relu)
    # the copies: task_time rows of their own type, not ops
    assert not [r for r in rows if "Memcpy" in r["Op Name"]]
    tasks = _csv(sorted(out.glob("task_time_*.csv")))
    assert {r["kernel_type"] for r in tasks if r["kernel_name"].startswith("MemcpyAsync")} == {
        "MEMCPY_ASYNC"}
    [js] = sorted(out.glob("msprof_*.json"))
    events = json.loads(js.read_text())
    freq = [e for e in events if e.get("name") == "AI Core Freq" and e["ph"] == "C"]
    assert len(freq) > 2 and {e["args"]["MHz"] for e in freq} == {1800.0}


def test_every_subcommand_reads_an_a2_collection(collections, tmp_path: Path) -> None:
    prof = collections["Ascend910B3"]
    legacy = copy_of(prof, tmp_path / "legacy")
    run("export", str(legacy))
    assert sorted(legacy.glob("device_0/summary/op_summary_*.csv"))
    assert sorted(legacy.glob("device_0/timeline/msprof_*.json"))
    db = copy_of(prof, tmp_path / "db")
    run("export", str(db), "--type", "db")
    assert sorted(db.rglob("msprof_*.db"))
    said = run("summary", str(prof)).stdout
    assert "Chip Ascend910B3 (Atlas A2)" in said and "AI_VECTOR_CORE" in said
    q = run("query", str(prof))
    assert "device_0" in q.stdout and "Ascend910B3 (Atlas A2)" in q.stderr
    rows = json.loads(run("query", str(prof), "--format", "json").stdout)
    assert {r["Chip"] for r in rows} == {"Ascend910B3 (Atlas A2)"}
    run("check", str(prof), "--baseline", str(prof))
    html = tmp_path / "r.html"
    run("report", str(prof), "-o", str(html))
    assert html.stat().st_size > 10_000


def test_the_same_program_on_two_chips_is_explained_by_engine(collections) -> None:
    said = run("diff", str(collections["Ascend910A"]), str(collections["Ascend910B3"])).stdout
    assert "chip: Ascend910 -> Ascend910B3 (Atlas A2)" in said
    # an op type that moved to the vector cores is one row, saying so
    assert "AI_CORE -> AI_VECTOR_CORE" in said
