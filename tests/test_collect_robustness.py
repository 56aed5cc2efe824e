"""Robustness of `msprof collect` with real TensorFlow:

* SIGKILL at random points after the first flush: every step flushed before the kill is in the
  export, and the export warns about what is missing (no end_info);
* a failure inside the collector (injected with MSPROF_CLI_FAULT) never breaks the script, and
  collect says what was not captured;
* forked and spawned children of the script are not profiled.
"""
from __future__ import annotations

import csv
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "tests" / "scripts"
MSPROF = [sys.executable, "-m", "msprof_cli"]


def _env(dump: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PROFILING_MODE", "PROFILING_OPTIONS", "MSPROF_CLI_OWNER",
                        "MSPROF_CLI_FAULT")}
    env["MSPROF_CLI_DUMP_CAPTURE"] = str(dump)
    env.update(extra)
    return env


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def _chunks(dump: Path) -> list[dict]:
    out = []
    for p in sorted(dump.glob("*.json")):
        try:
            out.append(json.loads(p.read_text()))
        except ValueError:  # killed while the dump was being written
            pass
    return out


class Killed:
    def __init__(self, tmp: Path, delay: float) -> None:
        self.tmp, self.delay = tmp, delay
        self.out, self.dump = tmp / "out", tmp / "dump"
        cmd = [*MSPROF, "collect", "--output", str(self.out), "--training-trace", "on", "--",
               sys.executable, str(SCRIPTS / "keras_fit.py")]
        self.proc = subprocess.Popen(cmd, env=_env(self.dump, LOOP="1",
                                                   MSPROF_CLI_FLUSH_SECONDS="0.3"),
                                     cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        self.flushed_at = 0.0

    def poll_flushed(self) -> bool:
        if not self.flushed_at and any(self.dump.glob("*.json")):
            self.flushed_at = time.monotonic()
        return bool(self.flushed_at)


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[Killed, str, str, str]]:
    rng = random.Random(20261130)
    runs = [Killed(tmp_path_factory.mktemp(f"kill{i}"), rng.uniform(0.3, 2.5))
            for i in range(3)]  # concurrently: one TF start-up for all three
    deadline = time.monotonic() + 120
    pending = list(runs)
    while pending and time.monotonic() < deadline:
        for r in list(pending):
            if r.poll_flushed() and time.monotonic() - r.flushed_at >= r.delay:
                for child in _children(r.proc.pid):
                    os.kill(child, signal.SIGKILL)
                pending.remove(r)
        time.sleep(0.02)
    results = []
    for r in runs:
        out, err = r.proc.communicate(timeout=60)
        exp = subprocess.run([*MSPROF, "export", "--output", str(next(r.out.glob("PROF_*")))],
                             capture_output=True, text=True, cwd=r.tmp, timeout=180)
        assert exp.returncode == 0, exp.stderr[-3000:]
        results.append((r, out, err, exp.stdout + exp.stderr))
    return results


def test_sigkill_reported_by_name(killed: list) -> None:
    for r, _, err, _ in killed:
        assert r.proc.returncode == 128 + signal.SIGKILL, err[-2000:]
        assert "SIGKILL" in err


def test_sigkill_keeps_every_flushed_step(killed: list) -> None:
    for r, _, _, _ in killed:
        chunks = _chunks(r.dump)
        assert chunks, "no chunk was flushed before the kill"
        counts = [sum(1 for it in c["iterations"] if it["model_id"] == 1) for c in chunks]
        prof = next(r.out.glob("PROF_*"))
        path = next((prof / "device_0" / "summary").glob("step_trace_*.csv"))
        with open(path, newline="") as fh:
            rows = [row for row in csv.DictReader(fh) if row["Model ID"] == "1"]
        # the last dumped chunk may have been killed between its dump and its raw write
        assert sum(counts[:-1]) <= len(rows) <= sum(counts), (counts, len(rows))
        assert [int(row["Iteration ID"]) for row in rows] == list(range(1, len(rows) + 1))


def test_sigkill_export_warns_what_is_missing(killed: list) -> None:
    for _, _, _, log in killed:
        assert "no end_info" in log and "did not finish" in log


@pytest.mark.parametrize("point, says", [
    ("device", "the emulated device failed on a chunk"),
    ("step", "a step could not be recorded"),
])
def test_collector_failure_never_breaks_the_script(tmp_path: Path, point: str,
                                                   says: str) -> None:
    proc = subprocess.run([*MSPROF, "collect", "--output", str(tmp_path / "out"), "--",
                           sys.executable, str(SCRIPTS / "keras_fit.py")],
                          env=_env(tmp_path / "dump", EXIT_CODE="4", MSPROF_CLI_FAULT=point),
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 4, proc.stderr[-2000:]  # the script ran to its own exit
    assert "stdout line from the script" in proc.stdout
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("[msprof] WARNING")]
    assert lines and says in lines[0] and "injected fault" in lines[0]
    assert len(lines) == 1  # one line per distinct problem, not one per step


def test_forked_and_spawned_children_not_profiled(tmp_path: Path) -> None:
    proc = subprocess.run([*MSPROF, "collect", "--output", str(tmp_path / "out"), "--",
                           sys.executable, str(SCRIPTS / "fork_children.py")],
                          env=_env(tmp_path / "dump"), capture_output=True, text=True,
                          cwd=tmp_path, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    pids = {}
    for line in proc.stdout.splitlines():
        words = line.split()
        if words[0] == "child":
            assert words[4:6] == ["exit", "0"], line
            pids[words[1]] = words[3]
        elif words[0] == "parent":
            pids["parent"] = words[2]
    assert set(pids) == {"fork", "spawn", "parent"}
    assert len(list((tmp_path / "out").glob("PROF_*"))) == 1
    dumped = {p.name.split("_")[1] for p in (tmp_path / "dump").glob("*.json")}
    assert dumped == {pids["parent"]}
    assert "[msprof] WARNING" not in proc.stderr


def test_killing_the_launcher_ends_the_profiled_child(tmp_path):
    """A SIGKILLed `msprof collect` used to leave the training process
    running as an orphan; the child now gets SIGTERM when its launcher dies."""
    script = tmp_path / "sleepy.py"
    pidfile = tmp_path / "child.pid"
    script.write_text("import os, time\n"
                      f"open({str(pidfile)!r}, 'w').write(str(os.getpid()))\n"
                      "time.sleep(60)\n")
    launcher = subprocess.Popen(MSPROF + ["collect", "--output", str(tmp_path / "out"), "--",
                                          sys.executable, str(script)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not pidfile.exists() or not pidfile.read_text():
        assert time.monotonic() < deadline, "the child never started"
        time.sleep(0.1)
    child = int(pidfile.read_text())
    launcher.kill()
    launcher.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(child, signal.SIGKILL)
    pytest.fail("the profiled child outlived its killed launcher")


def test_a_failing_script_is_reported_with_its_exit_code(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text("raise SystemExit(3)\n")
    run = subprocess.run(MSPROF + ["collect", "--output", str(tmp_path / "out"), "--",
                                   sys.executable, str(script)], capture_output=True, text=True)
    assert run.returncode == 3
    assert "failed with exit code 3" in run.stderr
