"""One process per rank: tf.distribute.MultiWorkerMirroredStrategy on localhost.

Unit tests (no TensorFlow): the rank and rank size of a process from TF_CONFIG and the rank
variables (precedence, malformed TF_CONFIG), the HCCL step plan of each collective, and a
hand-built one-device Device that is rank 1 of 3 (its hccl_info and the export).

End-to-end (`e2e`): tests/scripts/multiworker.py starts 2 real worker processes (subprocess,
TF_CONFIG each, rank 1 sleeps SLOW_MS per batch in its tf.data map) through
`msprof collect --children --hccl on`, then `msprof export --layout mindstudio` of each PROF
dir.  One collect run (the default sampled tracing) shared by all e2e assertions (~20 s on 2
cores).
"""
from __future__ import annotations

import csv
import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from test_device_records import STEP_OPS, F
from test_device_records import T as TS
from test_device_records import config, make_chunk, run

from msprof_cli.collect.routes import RankInfo, rank_from_env, rank_info, tf_config_rank
from msprof_cli.device.host_records import ROLE_DST, ROLE_SRC, hccl_step_plan
from msprof_cli.device.readback import host_records
from msprof_cli.export.api import run_export

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "scripts" / "multiworker.py"
STEPS = 16
SLOW_MS = 30


def tf_config(task_type: str, index, cluster=None) -> str:
    cluster = cluster or {"worker": ["localhost:1", "localhost:2"]}
    return json.dumps({"cluster": cluster, "task": {"type": task_type, "index": index}})


# --- rank and rank size of a process ------------------------------------------------------

def test_tf_config_worker_index_is_the_rank() -> None:
    assert rank_info({"TF_CONFIG": tf_config("worker", 0)}) == RankInfo(0, 2, "TF_CONFIG")
    assert rank_info({"TF_CONFIG": tf_config("worker", 1)}) == RankInfo(1, 2, "TF_CONFIG")
    four = {"worker": [f"localhost:{p}" for p in range(4)]}
    assert rank_info({"TF_CONFIG": tf_config("worker", 3, four)}) == RankInfo(3, 4, "TF_CONFIG")
    assert rank_from_env({"TF_CONFIG": tf_config("worker", "1")}) == 1  # index as a string


def test_tf_config_chief_is_rank_0_and_shifts_the_workers() -> None:
    cluster = {"chief": ["localhost:1"], "worker": ["localhost:2", "localhost:3"],
               "evaluator": ["localhost:4"], "ps": ["localhost:5"]}
    assert rank_info({"TF_CONFIG": tf_config("chief", 0, cluster)}) == RankInfo(0, 3, "TF_CONFIG")
    assert rank_info({"TF_CONFIG": tf_config("worker", 0, cluster)}).rank == 1
    assert rank_info({"TF_CONFIG": tf_config("worker", 1, cluster)}) == RankInfo(2, 3, "TF_CONFIG")
    # an evaluator takes no part in the collectives: no rank, no warning
    ev = rank_info({"TF_CONFIG": tf_config("evaluator", 0, cluster)})
    assert ev.rank == -1 and not ev.warning
    # sparse cluster spec {index: address}
    sparse = {"worker": {"0": "localhost:1", "1": "localhost:2"}}
    assert rank_info({"TF_CONFIG": tf_config("worker", 1, sparse)}) == RankInfo(1, 2, "TF_CONFIG")


def test_rank_precedence() -> None:
    tc = tf_config("worker", 1)
    # launcher variables first, then TF_CONFIG, then LOCAL_RANK
    assert rank_info({"RANK_ID": "5", "RANK_SIZE": "8", "TF_CONFIG": tc}) == \
        RankInfo(5, 8, "RANK_ID")
    assert rank_info({"RANK": "3", "WORLD_SIZE": "4", "TF_CONFIG": tc}) == RankInfo(3, 4, "RANK")
    assert rank_info({"OMPI_COMM_WORLD_RANK": "2", "TF_CONFIG": tc}) == \
        RankInfo(2, -1, "OMPI_COMM_WORLD_RANK")
    assert rank_info({"LOCAL_RANK": "0", "TF_CONFIG": tc}) == RankInfo(1, 2, "TF_CONFIG")
    assert rank_info({"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}) == RankInfo(1, 2, "LOCAL_RANK")
    assert rank_info({"RANK_ID": "x", "TF_CONFIG": tc}).source == "TF_CONFIG"  # not a number
    assert rank_info({"RANK_ID": "3", "RANK_SIZE": "2"}).size == -1  # size <= rank: unknown
    assert rank_info({}) == RankInfo()


@pytest.mark.parametrize("text", [
    "{bad json", "[]", "42", json.dumps({"cluster": {"worker": ["a"]}}),
    json.dumps({"cluster": "x", "task": {"type": "worker", "index": 0}}),
    json.dumps({"cluster": {"worker": "a,b"}, "task": {"type": "worker", "index": 0}}),
    tf_config("worker", -1), tf_config("worker", 2), tf_config("worker", True),
    tf_config("worker", 1.5), tf_config(None, 0),
])
def test_malformed_tf_config_gives_rank_minus_1_and_a_warning(text: str) -> None:
    info = tf_config_rank(text)
    assert info.rank == -1 and info.warning.startswith("TF_CONFIG")
    env = rank_info({"TF_CONFIG": text})
    assert env.rank == -1 and env.warning == info.warning
    # LOCAL_RANK still applies, the warning is kept
    local = rank_info({"TF_CONFIG": text, "LOCAL_RANK": "1"})
    assert local.rank == 1 and local.warning == info.warning


# --- the steps of each collective (hccl_info) --------------------------------------------

def test_hccl_step_plan() -> None:
    # ring all-reduce on 4 ranks: 3 reduce steps then 3 copies of 1/4 of the tensor to rank+1
    ar = hccl_step_plan("HcomAllReduce", "CollectiveReduceV2", True, 2, 4, 820.0, 800.0)
    assert ar == [(True, ROLE_SRC, 3, 200)] * 3 + [(False, ROLE_SRC, 3, 200)] * 3
    assert hccl_step_plan("HcomAllReduce", "CollectiveReduceV2", True, 3, 4, 0, 800.0)[0][2] == 0
    # broadcast: a chain from rank 0
    send = hccl_step_plan("HcomBroadcast", "CollectiveBcastSend", False, 0, 3, 64, 64)
    assert send == [(False, ROLE_SRC, 1, 64)]
    mid = hccl_step_plan("HcomBroadcast", "CollectiveBcastRecvV2", False, 1, 3, 16, 64)
    assert mid == [(False, ROLE_DST, 0, 64), (False, ROLE_SRC, 2, 64)]
    last = hccl_step_plan("HcomBroadcast", "CollectiveBcastRecv", False, 2, 3, 0, 64)
    assert last == [(False, ROLE_DST, 1, 64)]
    gather = hccl_step_plan("HcomAllGather", "CollectiveGatherV2", False, 1, 2, 64, 128)
    assert gather == [(False, ROLE_SRC, 0, 32)]


AR_OPS = STEP_OPS[:10] + [("sgd/CollectiveReduceV2", "CollectiveReduceV2",
                           (TS((2704, 10), F), TS((), "int32")), (TS((2704, 10), F),), ())] \
    + STEP_OPS[10:]


def test_one_device_rank_of_a_job(tmp_path: Path) -> None:
    """A PROF dir of one device that is rank 1 of 3 (one process per rank): hccl_info says
    local rank 1, rank size 3, sends to rank 2; the HCCL cost uses 3 ranks; the export finds
    the steps of its rank."""
    n_iter = 3
    prof = run(tmp_path, [make_chunk(n_iter, ops=AR_OPS)],
               config(hccl=True, output=str(tmp_path)), rank_id=1, rank_size=3)
    assert (prof / "device_1").exists() is False
    for f in (prof / "host" / "info.json", prof / "device_0" / "info.json.0"):
        assert json.loads(f.read_text())["rank_id"] == 1
    h = host_records(prof, "hccl_info")
    assert len(h) == n_iter * 2 * (3 - 1)
    assert set(h["local_rank"].tolist()) == {1} and set(h["remote_rank"].tolist()) == {2}
    assert set(h["rank_size"].tolist()) == {3} and set(h["role"].tolist()) == {ROLE_SRC}
    assert set(h["data_size"].tolist()) == {2704 * 10 * 4 // 3}
    # step durations: the task = 15 us + 2 (n-1)/n bytes / (14 GB/s x 2 peers at once),
    # split in 4 steps (docs/device-model.md 3, HCCL tasks)
    task_us = 15 + 2 * 2 / 3 * 2704 * 10 * 4 / (14e3 * 2)
    assert np.allclose(h["duration_estimated"] * 4, task_us, atol=0.05)
    run_export(prof, layout="mindstudio", quiet=True)
    out = prof / "mindstudio_profiler_output"
    [stat] = out.glob("communication_statistic_*.csv")
    rows = list(csv.DictReader(stat.open()))
    assert [(r["OP Type"], r["Count"]) for r in rows] == [("HcomAllReduce", str(n_iter))]
    [js] = out.glob("msprof_*.json")
    steps = [e for e in json.loads(js.read_text()) if e.get("name") in ("Memcpy", "Reduce_Inline")]
    assert len(steps) == len(h)
    # the steps as the real analysis shows them: src / dst rank args
    assert {(e["args"]["src rank"], e["args"]["dst rank"]) for e in steps} == {(1, 2)}
    ops = [e for e in json.loads(js.read_text())
           if e.get("ph") == "X" and "rank_size" in e.get("args", {})]
    assert len(ops) == n_iter and {e["args"]["rank_size"] for e in ops} == {3}


def test_one_device_without_rank_size_has_no_hccl_info(tmp_path: Path) -> None:
    """RANK_ID without a size (e.g. tests/scripts/rank_parent.py): the collectives are HCCL
    tasks, but with one known rank there are no ring steps to report."""
    prof = run(tmp_path, [make_chunk(2, ops=AR_OPS)], config(hccl=True, output=str(tmp_path)),
               rank_id=1)
    assert len(host_records(prof, "hccl_info")) == 0


# --- end to end: 2 worker processes through msprof collect --------------------------------

def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PROFILING_MODE", "PROFILING_OPTIONS", "MSPROF_CLI_OWNER", "TF_CONFIG",
                        "RANK_ID", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "LOCAL_RANK")}
    env.update(extra)
    return env


class Job:
    def __init__(self, tmp: Path) -> None:
        t0 = time.monotonic()
        # the default sampled tracing: most steps are replayed, and the slow rank must still
        # be found (its input pipeline's production time holds for the replayed steps)
        cmd = [sys.executable, "-m", "msprof_cli", "collect", "--children", "--hccl", "on",
               "--training-trace", "on", "--output", str(tmp / "out"), "--",
               sys.executable, str(SCRIPT)]
        self.proc = subprocess.run(
            cmd, env=_env(WORKERS="2", STEPS=str(STEPS), SLOW_RANK="1", SLOW_MS=str(SLOW_MS),
                          MW_TIMEOUT="150"),
            capture_output=True, text=True, cwd=tmp, timeout=240)
        self.collect_s = time.monotonic() - t0
        assert self.proc.returncode == 0, self.proc.stderr[-4000:]
        self.profs = sorted((tmp / "out").glob("PROF_*"))
        for prof in self.profs:
            run_export(prof, layout="mindstudio", quiet=True)
        self.total_s = time.monotonic() - t0

    def rank(self, prof: Path) -> int:
        return json.loads((prof / "host" / "info.json").read_text())["rank_id"]

    def by_rank(self) -> dict[int, Path]:
        return {self.rank(p): p for p in self.profs}

    def csv(self, prof: Path, name: str) -> list[dict[str, str]]:
        [path] = (prof / "mindstudio_profiler_output").glob(f"{name}_[0-9]*.csv")
        with open(path, newline="") as fh:
            return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Job:
    return Job(tmp_path_factory.mktemp("multiworker"))


@pytest.mark.e2e
def test_two_workers_two_prof_dirs_with_rank_ids(job: Job) -> None:
    for i in (0, 1):
        assert f"worker {i} of 2 steps {STEPS}" in job.proc.stdout
    assert len(job.profs) == 2, job.profs
    ranks = job.by_rank()
    assert sorted(ranks) == [0, 1]
    for rank, prof in ranks.items():
        assert prof.name.startswith(f"PROF_{rank + 1:06d}_")
        assert prof.name in job.proc.stderr  # the launcher lists both
        dev = json.loads((prof / "device_0" / "info.json.0").read_text())
        assert dev["rank_id"] == rank and dev["devices"] == "0"
        assert not (prof / "device_1").exists()
    # two real processes
    pids = {json.loads((p / "host" / "info.json").read_text())["pid"] for p in job.profs}
    assert len(pids) == 2


@pytest.mark.e2e
def test_hccl_tasks_and_hccl_info_on_both_ranks(job: Job) -> None:
    for rank, prof in job.by_rank().items():
        stat = {r["OP Type"]: int(r["Count"]) for r in job.csv(prof, "communication_statistic")}
        # per step: the packed gradients' all-reduce and strategy.reduce's (the loss)
        assert stat.get("HcomAllReduce") == 2 * STEPS, stat
        assert stat.get("HcomBroadcast", 0) > 0, stat  # the initial variables from the chief
        h = host_records(prof, "hccl_info")
        assert len(h) > 0
        assert set(h["local_rank"].tolist()) == {rank}
        assert set(h["remote_rank"].tolist()) == {1 - rank}
        assert set(h["rank_size"].tolist()) == {2}
        [js] = (prof / "mindstudio_profiler_output").glob("msprof_*.json")
        events = json.loads(js.read_text())
        comm = {e["pid"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"
                and e["args"]["name"] == "Communication"}
        names = Counter(e["name"] for e in events if e.get("pid") in comm and e["ph"] == "X")
        assert names["Reduce_Inline"] == 2 * STEPS and names["Memcpy"] >= 2 * STEPS, names


@pytest.mark.e2e
def test_communication_matrix_from_both_prof_dirs(job: Job) -> None:
    """src role: local -> remote; dst role: the receiving end of a transfer its sender also
    wrote.  The all-reduce links: 0 -> 1 and 1 -> 0, same bytes, same op names (cclTag)."""
    links: dict[tuple[int, int, int], int] = Counter()
    tags: dict[int, set[int]] = {}
    for rank, prof in job.by_rank().items():
        h = host_records(prof, "hccl_info")
        src = h[h["role"] == ROLE_SRC]
        for local, remote, tag, size in zip(src["local_rank"].tolist(), src["remote_rank"].tolist(),
                                            src["ccl_tag"].tolist(), src["data_size"].tolist()):
            links[(local, remote, tag)] += size
        tags[rank] = set(h["ccl_tag"].tolist())
        dst = h[h["role"] == ROLE_DST]
        assert rank == 1 or len(dst) == 0  # only the broadcast's receiver has dst steps
    shared = tags[0] & tags[1]  # the all-reduces (the broadcasts: Send on 0, Recv on 1)
    assert len(shared) == 2
    for tag in shared:
        assert links[(0, 1, tag)] == links[(1, 0, tag)] > 0


@pytest.mark.e2e
def test_slow_rank_has_the_larger_data_aug_bound(job: Job) -> None:
    dab = {}
    for rank, prof in job.by_rank().items():
        rows = job.csv(prof, "step_trace")
        assert len(rows) == STEPS
        # the first steps eat the batches tf.data prefetched while step 1 was traced
        vals = [float(r["Data Aug Bound(us)"]) for r in rows[STEPS // 2:]]
        dab[rank] = statistics.median(vals)
        sampling = json.loads((prof / "msprof_cli_sampling.json").read_text())
        assert any(m["replayed"] for m in sampling["models"].values()), sampling
    # the emulated device waits for the pipeline's own pace (a batch per SLOW_MS of sleep),
    # not for the shorter wait the slower CPU saw, in traced and replayed steps alike
    assert dab[1] > 0.8 * SLOW_MS * 1000, dab
    assert dab[1] > 10 * dab[0], dab


@pytest.mark.e2e
def test_the_fast_rank_waits_for_the_slow_one_in_its_collectives(job: Job) -> None:
    """The job's ranks are coupled once both have ended (device/rank_coupling.py): rank 0
    reaches each all-reduce early and waits inside it for rank 1, whose input pipeline is
    slow; afterwards both ranks step together."""
    assert "ranks aligned at their" in job.proc.stderr, job.proc.stderr[-2000:]
    reduce_us, step_us = {}, {}
    for rank, prof in job.by_rank().items():
        marker = json.loads((prof / "msprof_cli_coupling.json").read_text())
        assert len(marker["ranks"]) == 2 and marker["collectives"] >= 2 * STEPS
        [path] = (prof / "mindstudio_profiler_output").glob("step_trace_[0-9]*.csv")
        with open(path, newline="") as fh:
            head, *rows = list(csv.reader(fh))  # two "Reduce Duration(us)" columns
        rows = rows[STEPS // 2:]
        first, it = head.index("Reduce Duration(us)"), head.index("Iteration Time(us)")
        reduce_us[rank] = statistics.median(float(r[first]) for r in rows)
        step_us[rank] = statistics.median(float(r[it]) for r in rows)
    # rank 0's all-reduce holds the wait (rank 1's SLOW_MS per step)
    assert reduce_us[0] > 0.8 * SLOW_MS * 1000 > 10 * reduce_us[1], reduce_us
    assert abs(step_us[0] - step_us[1]) < 0.1 * max(step_us.values()), step_us


@pytest.mark.e2e
def test_rank_clocks_share_one_offset(job: Job) -> None:
    """Both ranks ran on one machine: each start_info pairs wall µs with CLOCK_MONOTONIC_RAW
    ns sampled together, so wall − monotonic is the same for both (to sampling jitter)."""
    offsets = []
    for prof in job.profs:
        host = json.loads((prof / "host" / "start_info").read_text())
        dev = json.loads((prof / "device_0" / "start_info.0").read_text())
        assert host == dev
        offsets.append(int(host["collectionTimeBegin"]) * 1000 - int(host["clockMonotonicRaw"]))
        log = (prof / "device_0" / "host_start.log.0").read_text()
        assert f"clock_monotonic_raw: {host['clockMonotonicRaw']}" in log
    assert abs(offsets[0] - offsets[1]) < 1_000_000, offsets  # < 1 ms


@pytest.mark.e2e
def test_cluster_analysis_finds_the_slow_rank(job: Job) -> None:
    """msprof cluster on the job dir: rank 1 sleeps in its input pipeline."""
    out = job.profs[0].parent
    proc = subprocess.run([sys.executable, "-m", "msprof_cli", "cluster", str(out),
                           "--format", "json"], capture_output=True, text=True, timeout=180,
                          env=_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    verdict = json.loads(proc.stdout)
    assert verdict["slow_ranks"] == [1], verdict["verdict"]
    text = " ".join(verdict["verdict"])
    assert "Rank 1" in text and "input pipeline (Data Aug Bound" in text
    files = {p.name for p in (out / "cluster_analysis_output").iterdir()}
    assert {"cluster_step_trace_time.csv", "cluster_communication_matrix.json",
            "cluster_communication.json", "communication_group.json",
            "cluster_timeline.json"} <= files
    matrix = json.loads((out / "cluster_analysis_output"
                         / "cluster_communication_matrix.json").read_text())
    ops = matrix["(0, 1)"]["step"]
    links = ops["allreduce-total@hccl_world_group"]  # the ring: equal bytes both ways
    assert links["0-1"]["Transit Size(MB)"] == links["1-0"]["Transit Size(MB)"] > 0
    assert "0-1" in ops["broadcast-total@hccl_world_group"]  # initial values from rank 0
    trace = json.loads((out / "cluster_analysis_output" / "cluster_timeline.json").read_text())
    procs = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e["name"] == "process_name"}
    assert sorted(procs) == [1, 2] and procs[2].startswith("rank 1 ")


@pytest.mark.e2e
def test_e2e_time(job: Job) -> None:
    print(f"collect {job.collect_s:.1f} s, collect + 2 exports {job.total_s:.1f} s")
    assert job.total_s < 120


@pytest.mark.e2e
def test_malformed_tf_config_does_not_break_collect(tmp_path: Path) -> None:
    script = tmp_path / "tiny.py"
    script.write_text("import tensorflow as tf\n"
                      "f = tf.function(lambda x: tf.reduce_sum(x * 2.0))\n"
                      "for _ in range(3):\n    v = f(tf.ones((4,)))\n"
                      "print('tiny', float(v))\n")
    cmd = [sys.executable, "-m", "msprof_cli", "collect", "--output", str(tmp_path / "out"),
           "--", sys.executable, str(script)]
    proc = subprocess.run(cmd, env=_env(TF_CONFIG='{"cluster": {"worker": ['), cwd=tmp_path,
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "tiny 8.0" in proc.stdout
    assert "[msprof] WARNING TF_CONFIG is not valid JSON" in proc.stderr
    assert "rank id -1" in proc.stderr
    [prof] = (tmp_path / "out").glob("PROF_*")
    assert prof.name.startswith("PROF_000001_")
    assert json.loads((prof / "host" / "info.json").read_text())["rank_id"] == -1
