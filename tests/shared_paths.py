"""Where the project's shared/ folder (reference, golden data) is: CI lays a copy of it beside
the clone; developers have it at ../shared too.  MSPROF_SHARED_DIR overrides."""
from __future__ import annotations

import os
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]


def shared_dir() -> Path:
    candidates = [os.environ.get("MSPROF_SHARED_DIR"), _ROOT.parent / "shared", "/work/shared"]
    for cand in candidates:
        if cand and (Path(cand) / "golden").is_dir():
            return Path(cand)
    raise FileNotFoundError("shared/ (golden data) not found beside the repository; set "
                            "MSPROF_SHARED_DIR to its path")


GOLDEN_DIR = shared_dir() / "golden" / "ascend910-small"
GOLDEN_RAW = GOLDEN_DIR / "raw"
