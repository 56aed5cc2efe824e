"""Per-result-dir control data the decoder needs: clocks, frequencies, PMU switches."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from msprof_cli.errors import ProfDirError
from msprof_cli.raw import control
from msprof_cli.raw.profdir import device_id_of

from .fmt import mhz_fraction

NO_MODEL = 4294967295


@dataclass
class ResultDirInfo:
    """One result dir (`device_N/` or `host/`)."""

    path: Path
    device_id: int | None
    info: dict[str, Any]
    sample: dict[str, Any]
    time_begin_us: int  # start_info collectionTimeBegin (wall µs)
    mono_begin_ns: int  # start_info clockMonotonicRaw (ns)
    hwts_mhz: Fraction = Fraction(100)
    aic_mhz: Fraction = Fraction(1000)
    ai_core_num: int = 32
    dev_cntvct: int = 0
    host_sync_ns: int = 0
    warnings: list[str] = field(default_factory=list)

    @property
    def data_dir(self) -> Path:
        return self.path / "data"

    @property
    def offset_ns(self) -> int:
        """local_ns = monotonic_ns + offset_ns (raw-format.md 8, in integer ns)."""
        return self.time_begin_us * 1000 - self.mono_begin_ns

    @property
    def begin_local_ns(self) -> int:
        return self.time_begin_us * 1000

    @property
    def app_pid(self) -> int:
        try:
            return int(str(self.info.get("pid", "0")))
        except ValueError:
            return 0

    @property
    def ai_core_metrics(self) -> str | None:
        if str(self.sample.get("ai_core_profiling", "on")) == "off":
            return None
        metrics = self.sample.get("ai_core_metrics") or None
        return str(metrics) if metrics else None

    @property
    def pmu_events(self) -> list[int]:
        raw = str(self.sample.get("ai_core_profiling_events", "") or "")
        return [int(x, 16) for x in re.split(r"[,\s]+", raw) if x]

    @property
    def l2_events(self) -> list[int]:
        raw = str(self.sample.get("l2CacheTaskProfilingEvents", "") or "")
        return [int(x, 16) for x in re.split(r"[,\s]+", raw) if x]


def _find(path: Path, pattern: str) -> Path | None:
    rx = re.compile(pattern)
    hits = sorted(p for p in path.iterdir() if rx.match(p.name) and p.is_file())
    return hits[0] if hits else None


def read_result_dir(path: Path) -> ResultDirInfo:
    """Read the control files of one result dir; raise ProfDirError when start_info is missing."""
    dev = device_id_of(path)
    suffix = r"" if dev is None else rf"\.{dev}"
    info_p = _find(path, rf"^info\.json{suffix}$") or _find(path, r"^info\.json(\.\d+)?$")
    start_p = _find(path, rf"^start_info{suffix}$") or _find(path, r"^start_info(\.\d+)?$")
    sample_p = _find(path, r"^sample\.json$")
    if start_p is None:
        raise ProfDirError(f"{path} has no start_info file: the collection did not start "
                           f"properly, nothing can be exported from this directory.")
    try:
        info = control.read_json_line(info_p) if info_p else {}
        start = control.read_json_line(start_p)
        sample = control.read_json_line(sample_p) if sample_p else {}
        begin_us = int(str(start["collectionTimeBegin"]))
        mono_ns = int(str(start["clockMonotonicRaw"]))
    except (ValueError, KeyError, OSError) as exc:
        raise ProfDirError(f"{start_p}: unreadable control file ({exc}). Re-collect the data.") \
            from None
    rd = ResultDirInfo(path=path, device_id=dev, info=info, sample=sample,
                       time_begin_us=begin_us, mono_begin_ns=mono_ns)
    dev_info = (info.get("DeviceInfo") or [{}])[0] if isinstance(info.get("DeviceInfo"), list) \
        else {}
    if dev_info:
        try:
            rd.hwts_mhz = mhz_fraction(dev_info.get("hwts_frequency", "100"))
            rd.aic_mhz = mhz_fraction(dev_info.get("aic_frequency", "1000"))
            rd.ai_core_num = int(dev_info.get("ai_core_num", 32))
        except (ValueError, ZeroDivisionError):
            rd.warnings.append(f"{info_p}: bad frequency values, using the Ascend910 defaults")
    if dev is not None:
        dev_log = _find(path, rf"^dev_start\.log\.{dev}$")
        host_log = _find(path, rf"^host_start\.log\.{dev}$")
        try:
            if dev_log is not None:
                rd.dev_cntvct = int(control.read_ini(dev_log).get("cntvct", "0"))
            else:
                rd.warnings.append(f"{path}: no dev_start.log.{dev}; device times may be offset")
            if host_log is not None:
                rd.host_sync_ns = int(control.read_ini(host_log).get("clock_monotonic_raw", "0"))
            elif dev_log is not None:
                rd.host_sync_ns = int(control.read_ini(dev_log).get("clock_monotonic_raw", "0"))
        except ValueError as exc:
            raise ProfDirError(f"{path}: unreadable start log ({exc}).") from None
    return rd
