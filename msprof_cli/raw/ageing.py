"""storage_limit ageing marker (project format; docs/troubleshooting.md "Aged-out data").

When the collected raw data reaches ``storage_limit - 20 MiB`` (docs/formats/options.md 4: "oldest
files
aged out when <= 20 MB left") the device writer deletes the oldest raw slices.  It records
that in one JSON line at the PROF dir root, ``storage_aging.json``, so that `msprof query`
and `msprof export` can say that the data is incomplete.  The real analysis ignores the file
(it only reads result dirs).  Standard library only (written inside the profiled process).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from msprof_cli.raw import control

MARKER = "storage_aging.json"
MIB = 1024 * 1024
HEADROOM_BYTES = 20 * MIB  # ageing starts when this much of the limit is left


def write_marker(prof_dir: Path, info: dict[str, Any]) -> None:
    control.write_json_line(prof_dir / MARKER, info)


def read_marker(prof_dir: Path) -> dict[str, Any] | None:
    """The marker of a PROF dir, None when nothing was aged out.  A damaged marker still
    means data was aged out: it is reported with what can be read."""
    path = prof_dir / MARKER
    if not path.exists() and not path.is_symlink():
        return None
    try:
        return control.read_json_line(path)
    except (OSError, ValueError):
        return {}


def aged_message(prof_dir: Path, info: dict[str, Any]) -> str:
    limit = info.get("storageLimitMB", "?")
    slices = info.get("agedSlices", "?")
    mib = info.get("agedBytes")
    size = f"{int(mib) / MIB:.1f} MiB" if isinstance(mib, int) else "? MiB"
    return (f"{prof_dir.name}: storage_limit {limit}MB was reached during collection; the "
            f"{slices} oldest raw slices ({size}) were aged out (deleted), so the first "
            f"iterations/tasks of the run are missing. Raise --storage-limit (or "
            f"PROFILING_OPTIONS storage_limit) to keep everything.")
