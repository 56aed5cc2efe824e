"""Many ranks: the export of a job dir on a real Dask LocalCluster equals the
serial one file for file, a killed worker is survived or named, never leaving a partial
file under a final name; the cluster analysis (step breakdown, matrix, slow rank / link,
merged timeline) on the frozen corpus and on small summaries."""
from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from msprof_cli.cluster import analysis as A
from msprof_cli.cluster import timeline as TL
from msprof_cli.summary import model as M

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import build as corpus  # noqa: E402

JOB_CASES = ("two_devices_hccl", "oracle_keras_bn", "msproftx_aicpu_pmu")


def msprof(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "msprof_cli", *args], capture_output=True,
                          text=True, timeout=600, env={**os.environ, **(env or {})})


def tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def raw(tmp_path_factory) -> Path:
    """A job dir: three PROF dirs of the corpus (their names made distinct)."""
    cases = corpus.unpack(tmp_path_factory.mktemp("job_raw"))
    job = tmp_path_factory.mktemp("job")
    for i, name in enumerate(JOB_CASES):
        src = cases[name]
        shutil.copytree(src, job / src.name.replace("PROF_000001_", f"PROF_{i + 1:06d}_"))
    return job


@pytest.fixture(scope="module")
def serial(raw, tmp_path_factory) -> Path:
    job = tmp_path_factory.mktemp("serial") / "job"
    shutil.copytree(raw, job)
    r = msprof("export", "--output", str(job), "--distributed", "off")
    assert r.returncode == 0, r.stderr
    return job


def fresh(raw: Path, tmp_path: Path) -> Path:
    job = tmp_path / "job"
    shutil.copytree(raw, job)
    return job


def test_local_dask_export_equals_the_serial_one(raw, serial, tmp_path) -> None:
    job = fresh(raw, tmp_path)
    r = msprof("export", "--output", str(job), "--distributed", "local")
    assert r.returncode == 0, r.stderr
    assert "local Dask cluster" in r.stdout
    assert tree(job) == tree(serial)
    assert r.stdout.count("[INFO] Export all data in") == len(JOB_CASES)


def test_export_on_an_existing_scheduler(raw, serial, tmp_path) -> None:
    from distributed import LocalCluster

    job = fresh(raw, tmp_path)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster:
        r = msprof("export", "--output", str(job), env={
            "DASK_SCHEDULER_ADDRESS": cluster.scheduler_address})
    assert r.returncode == 0, r.stderr
    assert "Dask cluster at tcp://127.0.0.1" in r.stdout
    assert tree(job) == tree(serial)


def test_a_worker_killed_once_is_survived(raw, serial, tmp_path) -> None:
    job = fresh(raw, tmp_path)
    victim = sorted(job.glob("PROF_*"))[0].name
    r = msprof("export", "--output", str(job), "--distributed", "local", env={
        "MSPROF_TEST_KILL_EXPORT": victim, "MSPROF_TEST_KILL_MARKS": str(tmp_path)})
    assert (tmp_path / f".killed_{victim}").exists()  # the kill happened
    assert r.returncode == 0, r.stderr
    assert tree(job) == tree(serial)


def test_a_rank_that_always_dies_is_named_and_leaves_no_partial_file(raw, serial,
                                                                     tmp_path) -> None:
    job = fresh(raw, tmp_path)
    victim = sorted(job.glob("PROF_*"))[1].name
    r = msprof("export", "--output", str(job), "--distributed", "local", env={
        "MSPROF_TEST_KILL_EXPORT": f"{victim}:always", "MSPROF_TEST_KILL_MARKS": str(tmp_path),
        "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "1"})  # one retry, then named
    assert r.returncode == 5, r.stdout + r.stderr
    assert f"1 of {len(JOB_CASES)} PROF dirs could not be exported: {victim}" in r.stderr
    got, want = tree(job), tree(serial)
    for path, digest in got.items():
        name = Path(path).name
        if path in want:
            assert digest == want[path], f"{path} differs from the serial export"
        else:  # only the killed writer's temporary files, never a final name
            assert name.startswith("."), path
    others = {p for p in want if not p.startswith(victim)}
    assert others <= set(got)  # the other ranks finished


# -- cluster analysis --------------------------------------------------------------------------
def _dev(prof: str, rank: int, it: float, aug: float, comm_wait: float,
         links=()) -> M.DeviceSummary:
    n = 10
    steps = M.StepSeries(1, list(range(1, n + 1)), [it] * n, [it - aug - 20] * n, [20.0] * n,
                         [aug] * n, [it - aug - comm_wait] * n, [comm_wait + 5] * n,
                         [comm_wait] * n)
    m = M.ModelSummary(1, "net", "sig", n, "1-10", "", None, None, None, None, None, 0.5, 10.0,
                       5.0, 0.0, 100, steps=steps)
    return M.DeviceSummary(prof, 0, rank, 100, 1000.0, 0.5, [m], links=list(links))


def _summary(devs) -> M.Summary:
    return M.Summary("job", "0.1.0", M.Collection("Ascend910", True, "", "", ""), devs)


def test_the_slow_rank_is_found_with_its_cause() -> None:
    link = M.LinkRow("allreduce", 0, 1, "SDMA", "HCCS", 10, 10_000_000, 1000.0)
    slow_link = M.LinkRow("allreduce", 1, 0, "SDMA", "HCCS", 10, 10_000_000, 4000.0)
    res = A.analyse([_summary([_dev("PROF_1", 0, 6000, 200, 3000, [link])]),
                     _summary([_dev("PROF_2", 1, 6000, 3200, 0, [slow_link])])])
    assert res.slow_ranks == [1]
    text = " ".join(res.verdict)
    assert "Rank 1 (PROF_2, device 0) is the slow rank" in text
    assert "input pipeline (Data Aug Bound" in text
    assert [(ln.src, ln.dst, ln.slow) for ln in res.links] == [(0, 1, False), (1, 0, True)]
    assert "Link 1 -> 0 (SDMA/HCCS) is slow: allreduce: 2.500 GB/s" in text
    even = A.analyse([_summary([_dev("PROF_1", 0, 6000, 200, 100)]),
                      _summary([_dev("PROF_2", 1, 6100, 250, 120)])])
    assert even.slow_ranks == [] and "No slow rank" in even.verdict[0]


def test_ranks_without_rank_ids_are_numbered_and_warned() -> None:
    res = A.analyse([_summary([_dev("PROF_1", -1, 6000, 200, 0)]),
                     _summary([_dev("PROF_2", -1, 6000, 200, 0)])])
    assert sorted(r.rank for r in res.ranks) == [0, 1]
    assert any("already taken" in w for w in res.warnings)


def test_clocks_that_cannot_be_aligned_are_reported_with_numbers(tmp_path) -> None:
    a = TL.RankTrace({0: 0}, tmp_path / "PROF_A", [], first_ns=0, last_ns=10**9)
    b = TL.RankTrace({0: 1}, tmp_path / "PROF_B", [], first_ns=3600 * 10**9,
                     last_ns=3601 * 10**9)
    b.host = "other"
    a.host = "vm"
    warnings = TL.check_clocks([a, b])
    assert any("2 hosts" in w for w in warnings)
    assert any("rank 1 (PROF_B) cannot be aligned" in w and "3599.000 s after" in w
               for w in warnings)


def test_cluster_of_a_two_device_job(raw, tmp_path) -> None:
    job = tmp_path / "job"
    src = next(p for p in raw.glob("PROF_*") if "BENCHMARK" in p.name)
    shutil.copytree(src, job / src.name)
    r = msprof("cluster", str(job))
    assert r.returncode == 0, r.stderr
    assert "no merged timeline" in r.stdout  # not exported yet: says how
    assert msprof("export", "--output", str(job), "--layout", "mindstudio").returncode == 0
    r = msprof("cluster", str(job), "--format", "json")
    assert r.returncode == 0, r.stderr
    verdict = json.loads(r.stdout)
    assert [x["rank"] for x in verdict["ranks"]] == [0, 1] and verdict["slow_ranks"] == []
    out = job / "cluster_analysis_output"
    with open(out / "cluster_step_trace_time.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    ranks = [r for r in rows if r["Type"] == "rank"]
    assert {r["Index"] for r in ranks} == {"0", "1"}
    one = ranks[0]
    assert float(one["Communication"]) == pytest.approx(
        float(one["Overlapped"]) + float(one["Communication(Not Overlapped)"]), abs=0.002)
    matrix = json.loads((out / "cluster_communication_matrix.json").read_text())
    links = matrix["(0, 1)"]["step"]["Total Op Info@hccl_world_group"]
    assert set(links) == {"0-1", "1-0", "0-0", "1-1"} and links["0-1"]["Bandwidth(GB/s)"] > 0
    assert links["0-0"]["Transport Type"] == "LOCAL"  # the self-links msprof-analyze maps by
    group = json.loads((out / "communication_group.json").read_text())
    assert group["collective"] == [[0, 1]] and group["p2p"] == []
    assert (out / "cluster_step_trace_time.csv").read_bytes().count(b"\r\n") == len(rows) + 1
    trace = json.loads((out / "cluster_timeline.json").read_text())
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e["name"] == "process_name"}
    assert sorted(names) == [1, 2] and names[2].startswith("rank 1 ")
    xs = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    assert xs and all(isinstance(e["ts"], float) and e["ts"] >= 0 for e in xs)
