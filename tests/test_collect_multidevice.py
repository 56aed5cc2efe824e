"""End-to-end: tf.distribute.MirroredStrategy over 2 logical CPUs (tests/scripts/mirrored.py)
through `msprof collect --hccl on`, then `msprof export`: one device_{id} per replica, the
collective ops as HCCL tasks, AllReduce step-trace tags, hccl_info, HCCL node APIs, ranks and
the step_trace Reduce columns.  One collect run shared by all assertions."""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from msprof_cli.device.readback import device_records, host_records, ts_track
from msprof_cli.raw import layouts as L

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "scripts" / "mirrored.py"
STEPS = 3  # 24 samples, global batch 8


class Run:
    def __init__(self, tmp: Path) -> None:
        env = {k: v for k, v in os.environ.items()
               if k not in ("PROFILING_MODE", "PROFILING_OPTIONS", "MSPROF_CLI_OWNER")}
        env["MSPROF_CLI_DUMP_CAPTURE"] = str(tmp / "dump")
        cmd = [sys.executable, "-m", "msprof_cli", "collect", "--output", str(tmp / "out"),
               "--hccl", "on", "--training-trace", "on", "--", sys.executable, str(SCRIPT)]
        self.proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tmp,
                                   timeout=180)
        assert self.proc.returncode == 0, self.proc.stderr[-3000:]
        self.prof = sorted((tmp / "out").glob("PROF_*"))[0]
        self.chunks = [json.loads(p.read_text()) for p in sorted((tmp / "dump").glob("*.json"))]
        exp = subprocess.run([sys.executable, "-m", "msprof_cli", "export", "--output",
                              str(self.prof)], capture_output=True, text=True, cwd=tmp,
                             timeout=180)
        assert exp.returncode == 0, exp.stderr[-3000:]

    def ops(self) -> list[dict]:
        return [o for c in self.chunks for it in c["iterations"] for o in it["ops"]]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return Run(tmp_path_factory.mktemp("mirrored"))


def test_script_ran_with_two_replicas(run: Run) -> None:
    assert "mirrored replicas 2" in run.proc.stdout


def test_ops_carry_their_replica(run: Run) -> None:
    ops = run.ops()
    by_dev = Counter(o["device_id"] for o in ops)
    assert set(by_dev) == {0, 1}, by_dev
    for o in ops:
        if "/replica_1/" in o["name"]:
            assert o["device_id"] == 1, o["name"]
    colls = [(o["name"], o["device_id"]) for o in ops if o["tf_type"] == "CollectiveReduceV2"]
    assert {d for _, d in colls} == {0, 1}, colls  # one all-reduce per replica per step


def test_one_device_dir_per_replica_with_rank(run: Run) -> None:
    for dev in (0, 1):
        d = run.prof / f"device_{dev}"
        info = json.loads((d / f"info.json.{dev}").read_text())
        assert info["rank_id"] == dev
        assert info["devices"] == str(dev)
        assert len(device_records(run.prof, "hwts", dev)) > 0
        assert (d / f"start_info.{dev}").exists() and (d / f"end_info.{dev}").exists()


def test_allreduce_step_trace_tags_on_hccl_stream(run: Run) -> None:
    for dev in (0, 1):
        steps, _ = ts_track(run.prof, dev)
        tags = steps["tag_id"].astype(int)
        assert (tags == 10000).sum() == STEPS and (tags == 10001).sum() == STEPS
        red = steps[tags >= 10000]
        assert set(red["stream_id"].tolist()) == {4}  # the HCCL stream
        start = red[red["tag_id"] == 10000]["timestamp"].astype(np.int64)
        end = red[red["tag_id"] == 10001]["timestamp"].astype(np.int64)
        # ring all-reduce of 960 B over 2 ranks: 15 us latency + bytes/link bw (>= 15 us)
        assert ((end - start) * 10 >= 15_000).all()


def test_hccl_info_and_node_apis(run: Run) -> None:
    h = host_records(run.prof, "hccl_info")
    assert len(h) == 2 * 2 * STEPS  # per rank and step: reduce-scatter + all-gather step
    assert Counter(h["local_rank"].tolist()) == {0: 2 * STEPS, 1: 2 * STEPS}
    assert set(h["rank_size"].tolist()) == {2}
    api = host_records(run.prof, "api_event")
    hc = api[api["level"] == L.LEVEL_HCCL]
    # one HCCL-level API per step (how the real analysis links a step's
    # hccl_info to its task), each inside the node launch API of the same op, enclosing
    # exactly that step's hccl_info and its task_track on the same thread
    assert len(hc) == len(h) and set(hc["type"].tolist()) == {L.HCCL_MASTER}
    launches = api[(api["level"] == L.LEVEL_NODE) & (api["type"] == L.NODE_LAUNCH)]
    tt = host_records(run.prof, "task_track")
    for rec in hc:
        lw = launches[(launches["item_id"] == rec["item_id"]) &
                      (launches["begin_time"] <= rec["begin_time"]) &
                      (launches["end_time"] >= rec["end_time"])]
        assert len(lw) == 1

        def inside(r):
            return (r["thread_id"] == rec["thread_id"]) & (r["timestamp"] >= rec["begin_time"]) \
                & (r["timestamp"] <= rec["end_time"])
        assert inside(h).sum() == 1 and inside(tt).sum() == 1


def test_export_step_trace_reduce_columns(run: Run) -> None:
    for dev in (0, 1):
        path = next((run.prof / f"device_{dev}" / "summary").glob("step_trace_*.csv"))
        with open(path, newline="") as fh:
            rows = list(csv.reader(fh))
        head = rows[0]
        assert head[-2:] == ["Reduce Start(us)", "Reduce Duration(us)"]
        assert len(rows) == 1 + STEPS
        for r in rows[1:]:
            assert r[-2] != "N/A" and float(r[-1]) >= 15.0
            assert r[1] != "N/A" and r[2] != "N/A"  # FP and BP found on each replica


def test_export_timelines_reduce_and_communication(run: Run) -> None:
    """msprof json per replica: one Reduce_{i}_0 per step (the CSV's Reduce Start), the
    Communication process (sort 17) with the all-reduce ops, Overlap Analysis communication."""
    for dev in (0, 1):
        tl = run.prof / f"device_{dev}" / "timeline"
        events = json.loads(next(tl.glob(f"msprof_{dev}_*.json")).read_text())
        path = next((run.prof / f"device_{dev}" / "summary").glob("step_trace_*.csv"))
        with open(path, newline="") as fh:
            rows = list(csv.reader(fh))[1:]
        red = [e for e in events if e.get("cat") == "Reduce"]
        assert sorted(e["ts"] for e in red) == sorted(r[-2].rstrip("\t") for r in rows)
        assert {e["name"] for e in red} == {f"Reduce_{i}_0" for i in range(1, STEPS + 1)}
        procs = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
        comm_pid = [p for p, n in procs.items() if n == "Communication"]
        assert comm_pid and (comm_pid[0] >> 5) & 31 == 17 and comm_pid[0] & 31 == dev
        ops = [e for e in events if e["ph"] == "X" and e["pid"] == comm_pid[0] and e["tid"] == 0]
        # the collectives as the real analysis shows them: named
        # {op}_{group[-3:]}_{k}_1 in order, its args
        assert len(ops) == STEPS and all(e["args"]["rank_size"] == 2 for e in ops)
        assert [e["name"].rsplit("_", 2)[1] for e in sorted(ops, key=lambda e: e["ts"])] \
            == [str(k) for k in range(STEPS)]
        overlap = [p for p, n in procs.items() if n == "Overlap Analysis"]
        assert any(e["ph"] == "X" and e["pid"] == overlap[0] and e["tid"] == 1 for e in events)
