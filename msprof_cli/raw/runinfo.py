"""Which software collected a PROF dir: `msprof_cli_run.json` at its root.

    {"version": 1, "msprof_cli": "0.1.0", "tensorflow": "2.21.0", "python": "3.11.7"}

Written by the agent when a collection starts (so a killed run has it too); read by
`msprof summary` (the collection's versions, so a CI diff can tell a TensorFlow upgrade from a
model change).  A real CANN PROF dir has no such file: the real msprof analysis ignores files it
does not know.  Standard library only.
"""
from __future__ import annotations

import json
import platform
import sys
from pathlib import Path

FILE_NAME = "msprof_cli_run.json"


def current() -> dict[str, object]:
    from msprof_cli import __version__

    tf = sys.modules.get("tensorflow")
    return {"version": 1, "msprof_cli": __version__,
            "tensorflow": str(getattr(tf, "__version__", "") or ""),
            "python": platform.python_version()}


def write(prof_dir: Path) -> None:
    from msprof_cli.raw.control import write_json_line

    write_json_line(Path(prof_dir) / FILE_NAME, current())


def read(prof_dir: Path) -> dict[str, str]:
    """The recorded versions ({} when absent, a link or unreadable)."""
    path = Path(prof_dir) / FILE_NAME
    try:
        if not path.is_file() or path.is_symlink() or path.stat().st_size > 65536:
            return {}
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: str(data.get(k, "")) for k in ("msprof_cli", "tensorflow", "python")}
