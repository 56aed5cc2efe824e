"""Shared helpers of the export tests: a writable copy of the golden raw PROF dir."""
from __future__ import annotations

import shutil
import stat
from pathlib import Path

from shared_paths import GOLDEN_DIR as GOLDEN

GOLDEN_RAW = GOLDEN / "raw"
GOLDEN_EXPECTED = GOLDEN / "expected-mindstudio"


def copy_golden(tmp: Path) -> Path:
    """Copy the golden PROF dir under `tmp` (writable) and return the PROF dir path."""
    src = next(GOLDEN_RAW.glob("PROF_*"))
    dst = tmp / src.name
    shutil.copytree(src, dst)
    for p in [dst, *dst.rglob("*")]:
        p.chmod(p.stat().st_mode | stat.S_IWUSR)
    return dst
