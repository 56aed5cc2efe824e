"""Crashes and concurrency of `msprof export`: two exports of one PROF dir at once
produce complete, correct files; an export SIGKILLed at a random moment leaves no half-written
file under a final name, and a rerun succeeds (and removes the dead export's temporary files).

The collect side (script killed with SIGKILL/SIGINT, collector crash) belongs to the collect
agent and is tested there."""
from __future__ import annotations

import hashlib
import random
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from msprof_cli.export.api import run_export
from tests.reliability_fixtures import PYTHON, ROOT, snapshot
from tests.test_device_records import make_chunk, run

N_ITER = 400  # enough tasks that writing the outputs takes a noticeable time


def outputs(prof: Path) -> dict[str, str]:
    """sha256 of every export output (summary/ and timeline/ of every result dir)."""
    out = {}
    for d in ("summary", "timeline"):
        for p in sorted(prof.glob(f"*/{d}/*")):
            if p.name.startswith("."):  # a temporary file, not under a final name
                continue
            out[str(p.relative_to(prof))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def temps(prof: Path) -> list[Path]:
    return [p for d in ("summary", "timeline") for p in prof.glob(f"*/{d}/.*")]


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> tuple[Path, dict[str, str], float]:
    """A Device-written PROF dir, the outputs of one complete export of it and the time that
    export took in-process."""
    base = tmp_path_factory.mktemp("big")
    prof = run(base, [make_chunk(N_ITER)])
    ref = base / "ref"
    shutil.copytree(prof, ref / prof.name)
    t0 = time.monotonic()
    run_export(ref / prof.name, quiet=True)
    took = time.monotonic() - t0
    expected = outputs(ref / prof.name)
    assert len(expected) >= 6
    return prof, expected, took


def export_proc(prof: Path) -> subprocess.Popen:
    return subprocess.Popen([PYTHON, "-m", "msprof_cli", "export", "--output", str(prof)],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def test_two_exports_at_once(big, tmp_path):
    src, expected, _ = big
    prof = tmp_path / src.name
    shutil.copytree(src, prof)
    raw = snapshot(prof)
    procs = [export_proc(prof) for _ in range(2)]
    errs = [p.communicate(timeout=120)[1].decode() for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    assert outputs(prof) == expected  # every file complete and correct, none interleaved
    assert temps(prof) == []
    assert snapshot(prof) == raw


def test_export_killed_midway_then_rerun(big, tmp_path):
    src, expected, took = big
    rng = random.Random(8)
    for k in range(3):
        prof = tmp_path / f"k{k}" / src.name
        shutil.copytree(src, prof)
        raw = snapshot(prof)
        proc = export_proc(prof)
        # start-up (imports) takes ~0.6 s, then the export itself: kill anywhere in it
        time.sleep(0.6 + rng.uniform(0.1, 1.0) * took)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        got = outputs(prof)
        # whatever exists under a final name is a complete, correct file
        for name, digest in got.items():
            assert expected.get(name) == digest, f"half-written {name} after SIGKILL"
        assert snapshot(prof) == raw
        # the rerun succeeds, writes everything and removes the dead export's temp files
        res = subprocess.run([PYTHON, "-m", "msprof_cli", "export", "--output", str(prof)],
                             cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        assert outputs(prof) == expected
        assert temps(prof) == []
