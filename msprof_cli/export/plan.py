"""The export plan: the windows a PROF dir is exported in (docs/export.md 9).

A plan always exists.  A big PROF dir that window mode covers is cut at quiet points
(windows.plan_windows / plan_all_devices: about 500k tasks a window); every other PROF dir
-- small, damaged, several host dirs -- is a plan of *one* window that covers the whole
collection.  `Plan.load(k)` is the one decode entry: the whole decode (dataset.load_prof)
for a one-window plan, the window's rows (windows.load_window) otherwise.  Every output is
written from a plan (open, one window at a time, close), so it is written by one definition
whatever the size of the collection.

What an output must know of a device beside its windows' rows (`Plan.facts`: its result
dir, whether the collection has host API rows, dynamic-shape data, l2_cache records) comes
from the scan for a windowed plan and from the decode for a one-window plan.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterator

import pandas as pd

from msprof_cli.errors import ProfDirError

from .decode.control_info import ResultDirInfo
from .decode.data import ProfData
from .decode.dataset import load_prof
from .decode.quiet import INT64_MAX, INT64_MIN
from .decode.window_load import l2_rows, load_window
from .decode.windows import Whole, WindowPlan, device_ids, plan_all_devices, plan_windows


@dataclass
class DeviceFacts:
    """What the outputs need to know of one device of a plan, for every window."""

    rd: ResultDirInfo
    l2_records: int = 0  # its l2_cache records (read by `Plan.l2_chunks` at the end)
    host_models: set[int] | None = None  # legacy.host_models of the whole (None: compute)


@dataclass
class Decode:
    """The whole decode of one PROF dir, shared by the one-window plans of its devices
    (the legacy layout exports device by device, from one decode)."""

    prof: Path
    data: ProfData | None = None
    warnings: list[str] = field(default_factory=list)

    def get(self) -> ProfData:
        if self.data is None:
            self.data = load_prof(self.prof)
            self.warnings = list(self.data.log.warnings)
            _check_not_empty(self.data)
        return self.data


@dataclass
class Plan:
    """The windows of one export unit (a PROF dir, or one device of it for the legacy
    layout).  `windows` None: one window, the whole collection (`why` says why); `device`:
    that device only (a one-window plan of the legacy layout)."""

    prof: Path
    windows: list[WindowPlan] | None = None  # per device, the same cuts
    why: str = ""
    decode: Decode | None = field(default=None, repr=False)
    device: int | None = None
    _view: ProfData | None = field(default=None, repr=False)
    _l2: list[pd.DataFrame | None] = field(default_factory=list, repr=False)
    _facts: list[DeviceFacts] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.windows is None and self.decode is None:
            self.decode = Decode(self.prof)

    @property
    def whole(self) -> bool:
        return self.windows is None

    def __len__(self) -> int:
        return 1 if self.windows is None else len(self.windows[0])

    @property
    def cuts(self) -> list[int]:
        """Window k is [cuts[k], cuts[k + 1]) in local ns."""
        return [INT64_MIN, INT64_MAX] if self.windows is None else self.windows[0].cuts

    def bounds(self, k: int) -> tuple[int, int]:
        """Window k in local ns: [lo, hi)."""
        return self.cuts[k], self.cuts[k + 1]

    def load(self, k: int) -> ProfData:
        """The decoded data of window k (the whole decode for a one-window plan)."""
        if self.windows is not None:
            return load_window(self.windows if len(self.windows) > 1 else self.windows[0], k)
        if self._view is None:
            data = self.decode.get()
            if self.device is not None:  # one device of the collection (rank_ids: all)
                data = replace(data, devices=[d for d in data.devices
                                              if d.device_id == self.device],
                               rank_ids=data.rank_ids or [d.device_id for d in data.devices])
            self._view = data
            self._facts = [DeviceFacts(d.rd, 0 if d.l2 is None else len(d.l2))
                           for d in data.devices]
            self._l2 = [d.l2 for d in data.devices]
        return self._view

    @property
    def facts(self) -> list[DeviceFacts]:
        """Per device of the plan (in the order of `load`'s devices)."""
        if self.windows is not None:
            return [DeviceFacts(p.dev_rd, p.l2_records, p.host_models) for p in self.windows]
        if self._facts is None:
            self.load(0)
        return self._facts

    def app_pid(self) -> int:
        """The application's pid of the collection (the pid of every trace event)."""
        facts = self.facts
        if facts:
            return facts[0].rd.app_pid
        rd = self.load(0).host.rd if self.windows is None else self.windows[0].host_rd
        return rd.app_pid if rd is not None else 0

    def host_rd(self):
        """The host dir's ResultDirInfo (None: a collection without one)."""
        return self.load(0).host.rd if self.windows is None else self.windows[0].host_rd

    def has_apis(self) -> bool:
        """The collection has host API rows (the msprof json flows need them)."""
        if self.windows is not None:
            return self.windows[0].has_apis
        apis = self.load(0).host.apis
        return apis is not None and len(apis) > 0

    def aging(self) -> bool:
        """The collection has dynamic-shape host data (thread_group json)."""
        if self.windows is not None:
            return self.windows[0].aging
        tables = self.load(0).host.tables
        return tables is not None and bool(tables.aging)

    def l2_chunks(self, j: int, chunk: int) -> Iterator[pd.DataFrame]:
        """Device j's l2_cache records as frames of `chunk` records, in file order (they
        carry no time: no window decodes them)."""
        if self.windows is not None:
            yield from l2_rows(self.windows[j], chunk)
            return
        self.facts  # noqa: B018 -- decoded
        l2 = self._l2[j]
        for lo in range(0, 0 if l2 is None else len(l2), chunk):
            yield l2.iloc[lo:lo + chunk]

    def warnings(self) -> list[str]:
        """The plan's decode warnings (a one-window plan: its decode's, once loaded)."""
        if self.windows is None:
            return list(self.decode.warnings)
        return list(dict.fromkeys(w for p in self.windows for w in p.log.warnings))

    def rewind(self) -> None:
        """Ready for another pass over the windows (--all-models: one per model): the
        occurrence numbers the windows carried are reset."""
        self._view = None
        for p in self.windows or ():
            if p.pmu is not None:
                p.pmu.base[:] = 0

    def release(self) -> None:
        """Drop the decoded rows (the l2_cache records and the facts stay)."""
        self._view = None
        if self.decode is not None and self.device is None:
            self.decode.data = None


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
    if isinstance(found, Whole):
        return Plan(prof, None, found.why)
    return Plan(prof, found if isinstance(found, list) else [found])


def plan_devices(prof: Path) -> Iterator[tuple[int | None, Plan]]:
    """The plans of the legacy layout, which exports each device on its own: per device,
    its windows (`plan_windows(device=…)`) or one window; the one-window plans share one
    whole decode.  (None, plan) for a PROF dir without device dirs.  Lazy: a device is
    scanned when its turn comes, so one scan's index is held at a time."""
    ids = device_ids(prof)
    if not ids:
        yield None, Plan(prof, None, "no device")
        return
    decode = Decode(prof)
    for dev in ids:
        found = plan_windows(prof, models=True, device=dev)
        yield dev, (Plan(prof, None, found.why, decode, dev) if isinstance(found, Whole)
                    else Plan(prof, [found]))


def one_window(data: ProfData, why: str = "") -> Plan:
    """The one-window plan of data decoded already."""
    _check_not_empty(data)
    return Plan(data.prof, None, why, Decode(data.prof, data, list(data.log.warnings)))
