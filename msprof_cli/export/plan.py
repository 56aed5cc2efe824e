"""The export plan: the windows a PROF dir is exported in (issue 16, docs/export.md 9).

A plan always exists.  A big PROF dir that window mode covers is cut at quiet points
(windows.plan_windows / plan_all_devices: about 500k tasks a window); every other PROF dir
-- small, damaged, several host dirs -- is a plan of *one* window that covers the whole
collection.  `Plan.load(k)` is the one decode entry: the whole decode (dataset.load_prof)
for a one-window plan, the window's rows (windows.load_window) otherwise.  An output that
is written from a plan (open, one `feed` per window, close) is therefore written the same
way whatever the size: one definition, whatever the number of windows.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from msprof_cli.errors import ProfDirError

from .dataset import ProfData, load_prof
from .windows import (INT64_MAX, INT64_MIN, WHY_WHOLE, WindowPlan, device_ids, load_window,
                      plan_all_devices, plan_windows)


@dataclass
class Plan:
    """The windows of one export unit (a PROF dir, or one device of it for the legacy
    layout).  `windows` None: one window, the whole collection (`why` says why)."""

    prof: Path
    windows: list[WindowPlan] | None = None  # per device, the same cuts
    why: str = ""
    data: ProfData | None = field(default=None, repr=False)  # the one window, once decoded
    decode_warnings: list[str] = field(default_factory=list)  # of the one window's decode

    @property
    def whole(self) -> bool:
        return self.windows is None

    def __len__(self) -> int:
        return 1 if self.windows is None else len(self.windows[0])

    def bounds(self, k: int) -> tuple[int, int]:
        """Window k in local ns: [lo, hi)."""
        return (INT64_MIN, INT64_MAX) if self.windows is None else self.windows[0].bounds(k)

    def load(self, k: int) -> ProfData:
        """The decoded data of window k (the whole decode for a one-window plan)."""
        if self.windows is None:
            if self.data is None:
                self.data = load_prof(self.prof)
                self.decode_warnings = list(self.data.log.warnings)
                _check_not_empty(self.data)
            return self.data
        return load_window(self.windows if len(self.windows) > 1 else self.windows[0], k)

    def warnings(self) -> list[str]:
        """The plan's decode warnings (a one-window plan: its decode's, once loaded)."""
        if self.windows is None:
            return list(self.decode_warnings)
        return list(dict.fromkeys(w for p in self.windows for w in p.log.warnings))

    def release(self) -> None:
        self.data = None


def _check_not_empty(data: ProfData) -> None:
    if not data.devices and (data.host.apis is None or len(data.host.apis) == 0):
        raise ProfDirError(f"{data.prof} contains no device data and no host API data; "
                           f"nothing to export.")


def plan_export(prof: Path, target: int | None = None) -> Plan:
    """The windows of `prof` for the outputs that mix its devices (mindstudio, db): every
    device with the same cuts, or one window."""
    ids = device_ids(prof)
    found = plan_all_devices(prof, target) if len(ids) > 1 else \
        plan_windows(prof, target, device=ids[0] if ids else None)
    if found is None:
        return Plan(prof, None, WHY_WHOLE[0])
    return Plan(prof, found if isinstance(found, list) else [found])


def one_window(data: ProfData, why: str = "") -> Plan:
    """The one-window plan of data decoded already."""
    _check_not_empty(data)
    return Plan(data.prof, None, why, data, list(data.log.warnings))
