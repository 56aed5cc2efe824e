"""Helpers of the reliability tests: PROF dir copies and raw-data snapshots."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from tests.export_fixtures import copy_golden

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
# directories the export writes; everything else of a PROF dir is raw data
OUTPUT_DIRS = {"summary", "timeline", "mindstudio_profiler_output", "mindstudio_profiler_log",
               "sqlite", "analyze"}


def golden(tmp: Path) -> Path:
    """A writable copy of the golden PROF dir."""
    return copy_golden(tmp)


def snapshot(prof: Path) -> dict[str, str]:
    """sha256 of every raw file (outputs excluded), keyed by path relative to the PROF dir."""
    out = {}
    for root, dirs, files in os.walk(prof, followlinks=False):
        dirs[:] = [d for d in dirs if d not in OUTPUT_DIRS]
        for name in files:
            p = Path(root) / name
            if p.is_symlink() or name.startswith("msprof_") and name.endswith(".db"):
                continue
            out[str(p.relative_to(prof))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def msprof(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run the `msprof` CLI in a subprocess (exit codes and stderr as the user sees them)."""
    return subprocess.run([PYTHON, "-m", "msprof_cli", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=timeout)


def device_dir(prof: Path) -> Path:
    return prof / "device_0"


def data_file(prof: Path, kind: str) -> Path:
    if kind in ("hwts", "aicore", "ts_track"):
        return prof / "device_0" / "data" / f"{kind}.data.0.slice_0"
    names = {"api_event": "unaging.api_event.data.slice_0",
             "task_track": "unaging.compact.task_track.slice_0",
             "hash_dic": "unaging.additional.hash_dic.slice_0"}
    return prof / "host" / "data" / names[kind]
