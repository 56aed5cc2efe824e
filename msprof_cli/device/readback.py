"""Read back what the emulated device wrote (tests, debugging): every slice file of a kind,
concatenated and decoded with the shared layouts.  numpy only."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from msprof_cli.raw import layouts as L
from msprof_cli.raw.profdir import slice_files


def host_records(prof: Path, kind: str) -> np.ndarray:
    pattern = re.compile(rf"^(aging|unaging)\.{re.escape(L.HOST_FILES[kind])}\.slice_\d+$")
    files = slice_files(Path(prof) / "host" / "data", pattern)
    parts = [np.fromfile(f, dtype=L.HOST_DTYPES[kind]) for f in files]
    return np.concatenate(parts) if parts else np.zeros(0, L.HOST_DTYPES[kind])


def host_lines(prof: Path, kind: str) -> list[str]:
    pattern = re.compile(rf"^(aging|unaging)\.{re.escape(L.HOST_FILES[kind])}\.slice_\d+$")
    lines: list[str] = []
    for f in slice_files(Path(prof) / "host" / "data", pattern):
        lines += f.read_text(encoding="utf-8").splitlines()
    return lines


def device_records(prof: Path, kind: str, device_id: int = 0) -> np.ndarray:
    pattern = re.compile(L.device_file_regex(kind, device_id))
    files = slice_files(Path(prof) / f"device_{device_id}" / "data", pattern)
    parts = [np.fromfile(f, dtype=L.DEVICE_DTYPES[kind]) for f in files]
    return np.concatenate(parts) if parts else np.zeros(0, L.DEVICE_DTYPES[kind])


def ts_track(prof: Path, device_id: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(step-trace records, flip records) of ts_track.data."""
    raw = device_records(prof, "ts_track", device_id)
    steps = raw[raw["rpt_type"] == L.TS_RPT_STEP_TRACE]
    flips = raw[raw["rpt_type"] == L.TS_RPT_FLIP].view(L.TS_TRACK_FLIP)
    return steps, flips


def ts_memcpy(prof: Path, device_id: int = 0) -> np.ndarray:
    """The "ts memcpy" records (rptType 11) of ts_track.data."""
    raw = device_records(prof, "ts_track", device_id)
    return raw[raw["rpt_type"] == L.TS_RPT_MEMCPY].view(L.TS_TRACK_MEMCPY)
