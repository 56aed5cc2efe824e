"""Which software collected a PROF dir: `msprof_cli_run.json` at its root.

    {"version": 1, "msprof_cli": "0.1.0", "tensorflow": "2.21.0", "python": "3.11.7",
     "emulation": {"precision_mode": "allow_fp32_to_fp16", "dropout": "tf"}}

Written by the agent when a collection starts (so a killed run has it too); read by
`msprof summary` (the collection's versions and the emulated system's settings, so a CI diff
can tell a TensorFlow upgrade or another emulation setting from a model change).  The
precision mode is the one the collection started with (a script's session config may change
it later).  A real CANN PROF dir has no such file: the real msprof analysis ignores files it
does not know.  Standard library only.
"""
from __future__ import annotations

import json
import platform
import sys
from pathlib import Path
from typing import Any

FILE_NAME = "msprof_cli_run.json"


def current(emulation: dict[str, str] | None = None) -> dict[str, object]:
    from msprof_cli import __version__

    tf = sys.modules.get("tensorflow")
    out: dict[str, object] = {"version": 1, "msprof_cli": __version__,
                              "tensorflow": str(getattr(tf, "__version__", "") or ""),
                              "python": platform.python_version()}
    if emulation:
        out["emulation"] = dict(emulation)
    return out


def write(prof_dir: Path, emulation: dict[str, str] | None = None) -> None:
    from msprof_cli.raw.control import write_json_line

    write_json_line(Path(prof_dir) / FILE_NAME, current(emulation))


def read(prof_dir: Path) -> dict[str, Any]:
    """The recorded versions and emulation settings ({} when absent, a link or
    unreadable)."""
    path = Path(prof_dir) / FILE_NAME
    try:
        if not path.is_file() or path.is_symlink() or path.stat().st_size > 65536:
            return {}
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    if not isinstance(data, dict):
        return {}
    out: dict[str, Any] = {k: str(data.get(k, "")) for k in ("msprof_cli", "tensorflow",
                                                              "python")}
    emu = data.get("emulation")
    out["emulation"] = {str(k): str(v) for k, v in emu.items()} if isinstance(emu, dict) \
        else {}
    return out
