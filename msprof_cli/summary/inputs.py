"""What `diff` / `check` / `report` accept as BASE or NEW: a PROF dir, a job dir holding
PROF dirs, a folder inside a PROF dir (its export output, `mindstudio_profiler_output/`,
`device_0/summary/`), or a summary JSON saved by `msprof summary --format json`."""
from __future__ import annotations

from pathlib import Path

from msprof_cli.errors import MsprofError
from msprof_cli.raw import profdir

from . import model as M


def _enclosing_prof(path: Path) -> Path | None:
    for p in [path, *path.parents][:4]:
        if profdir.is_prof_dir(p):
            return p
    return None


def load(path: Path, role: str | None = None) -> M.Summary:
    """The summary of `path`.  With a `role` (BASE, NEW, baseline) any refusal becomes a
    SummaryError (exit code 2: bad input) naming it, so a CI log says which side was wrong;
    without one the refusal keeps its own exit code (msprof summary)."""
    path = Path(path)
    try:
        if path.is_file():
            return M.read_json(path)
        from .build import build

        if path.is_dir() and not profdir.find_prof_dirs(path):
            inside = _enclosing_prof(path.resolve())
            if inside is not None:  # an export folder of a PROF dir: its raw data
                s = build(inside)
                s.source = str(path)
                return s
        return build(path)
    except MsprofError as exc:
        if role is None:
            raise
        raise M.SummaryError(f"{role}: {exc}") from None
