"""Shared helpers of the benchmarks: timing a command, peak RSS of children, result CSV, a file
of a git repository at a revision."""
from __future__ import annotations

import csv
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
MSPROF = [sys.executable, "-m", "msprof_cli"]


def timed(cmd: list[str], **kw) -> tuple[float, int, subprocess.CompletedProcess]:
    """Wall seconds and peak RSS (KB) of one child command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return wall, max(peak, before), proc


def write_results(name: str, rows: list[dict]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.csv"
    with open(path, "w", newline="") as fh:
        fields = list(dict.fromkeys(k for row in rows for k in row))  # every row's columns
        writer = csv.DictWriter(fh, fieldnames=fields, restval="")
        writer.writeheader()
        writer.writerows(rows)
    return path


def median(values: list[float]) -> float:
    values = sorted(values)
    n = len(values)
    return values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2


def env() -> dict[str, str]:
    e = dict(os.environ)
    e.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    return e


def git_show(git_dir: str, rev: str, path: str) -> bytes:
    """The bytes of `path` at `rev` in the repository at `git_dir` (a .git dir or a mirror)."""
    return subprocess.run(["git", "--git-dir", git_dir, "show", f"{rev}:{path}"],
                          check=True, capture_output=True).stdout
