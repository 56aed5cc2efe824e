"""Per-result-dir control data the decoder needs: clocks, frequencies, PMU switches."""
from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from msprof_cli.errors import ProfDirError
from msprof_cli.raw import control
from msprof_cli.raw.profdir import device_id_of

from ..fmt import mhz_fraction, ticks_to_ns

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
    aiv_num: int = 0  # AI Vector cores (the Atlas A2's; 0 on the 910)
    dev_cntvct: int = 0
    host_sync_ns: int = 0
    warnings: list[str] = field(default_factory=list)

    @property
    def data_dir(self) -> Path:
        return self.path / "data"

    @property
    def offset_ns(self) -> int:
        """local_ns = monotonic_ns + offset_ns (docs/formats/raw-format.md 8), in integer ns.

        The real analysis computes the offset in binary floating point --
        ``float(collectionTimeBegin) - float(clockMonotonicRaw) / 1000`` µs
        (``InfoConfReader._load_local_time_offset``) -- and adds ``Decimal(str(offset))`` to
        each timestamp before quantizing it to 0.001 µs (``trans_into_local_time``).  So the
        offset is that float's shortest repr, not the exact difference: for a real
        collectionTimeBegin (>= 2^50 µs, a 0.25 µs float64 ulp) it is a multiple of 0.25 µs,
        0.1-0.2 µs off the exact one, and always whole ns.  See `local_offset_ns`."""
        return local_offset_ns(self.time_begin_us, self.mono_begin_ns)

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
    def stars(self) -> bool:
        """The data of an Atlas A2 (910B): a STARS task log and per-core-kind PMU."""
        return str(self.info.get("platform_version", "")) == "5"

    @property
    def aiv_metrics(self) -> str | None:
        return str(self.sample.get("aiv_metrics") or "") or None

    @property
    def aiv_events(self) -> list[int]:
        """The AI Vector cores' PMU events (Atlas A2; sample.json aiv_profiling_events)."""
        raw = str(self.sample.get("aiv_profiling_events", "") or "")
        return [int(x, 16) for x in re.split(r"[,\s]+", raw) if x]

    @property
    def l2_events(self) -> list[int]:
        raw = str(self.sample.get("l2CacheTaskProfilingEvents", "") or "")
        return [int(x, 16) for x in re.split(r"[,\s]+", raw) if x]


SUPPORTED_PLATFORMS = {"1": "Ascend910", "5": "Ascend910B"}
# other platform ids of docs/formats/raw-format.md 1, named in the error message
KNOWN_PLATFORMS = {"0": "Ascend310", "2": "MDC", "3": "Lhisi", "4": "Ascend310P",
                   "5": "Ascend910B", "7": "Ascend310B", "8": "Ascend310B", "9": "V5",
                   "11": "Ascend310B", "15": "V6", "16": "V6"}
KNOWN_FORMAT_VERSION = "1.0"
INT63 = 1 << 63
MAX_MHZ = Fraction(100_000)


def _find(path: Path, pattern: str, refused: list[Path] | None = None) -> Path | None:
    """First regular file of `path` matching `pattern`; symbolic links are never followed
    (collected in `refused` so that the error can say why the file is "missing")."""
    rx = re.compile(pattern)
    try:
        entries = sorted(p for p in path.iterdir() if rx.match(p.name))
    except OSError as exc:
        raise ProfDirError(f"{path}: cannot list the result directory "
                           f"({exc.strerror or exc}). Check its permissions.") from None
    hits = []
    for p in entries:
        if p.is_symlink():
            if refused is not None:
                refused.append(p)
        elif p.is_file():
            hits.append(p)
    return hits[0] if hits else None


def _missing(path: Path, what: str, refused: list[Path], why: str) -> ProfDirError:
    if refused:
        return ProfDirError(f"{refused[0]} is a symbolic link; control files are never read "
                            f"through links (a PROF dir must not point outside itself). Replace "
                            f"it with the real file.")
    return ProfDirError(f"{path} has no {what} file: {why}")


def _read_json(p: Path) -> dict[str, Any]:
    try:
        return control.read_json_line(p)
    except (ValueError, OSError) as exc:
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise ProfDirError(f"{p}: unreadable control file ({detail}). It must be one line of "
                           f"JSON as written by `msprof collect`; restore it from a backup or "
                           f"re-collect the data. The raw data was not modified.") from None


def _int_field(p: Path, obj: dict[str, Any], key: str, hi: int = INT63) -> int:
    try:
        value = int(str(obj[key]))
    except KeyError:
        raise ProfDirError(f"{p}: the key {key!r} is missing. Restore the file or re-collect "
                           f"the data.") from None
    except ValueError:
        raise ProfDirError(f"{p}: {key} = {str(obj[key])[:40]!r} is not an integer. Restore "
                           f"the file or re-collect the data.") from None
    if not 0 <= value < hi:
        raise ProfDirError(f"{p}: {key} = {value} is out of range (0 to {hi - 1}).")
    return value


def check_platform(info: dict[str, Any], info_p: Path, warnings: list[str]) -> None:
    """Refuse a chip the decoder does not know; warn on another format version."""
    plat = info.get("platform_version")
    if plat is None:
        raise ProfDirError(f"{info_p} has no platform_version: the chip of this data is "
                           f"unknown. msprof_cli decodes Ascend910 data (platform_version "
                           f'"1"); restore info.json or re-collect.')
    plat = str(plat)
    if plat not in SUPPORTED_PLATFORMS:
        name = KNOWN_PLATFORMS.get(plat, "an unknown chip")
        raise ProfDirError(
            f'{info_p}: platform_version "{plat[:20]}" ({name}) is not supported. msprof_cli '
            f'decodes Ascend910 (platform_version "1") and Ascend910B (Atlas A2, "5") data; '
            f"export this data with the CANN toolkit of that chip.")
    version = str(info.get("version", KNOWN_FORMAT_VERSION))
    if version != KNOWN_FORMAT_VERSION:
        warnings.append(f'{info_p}: format version "{version[:20]}" differs from '
                        f'"{KNOWN_FORMAT_VERSION}", the version this decoder knows; decoding '
                        f"anyway, check the results.")


def _mhz(value: Any) -> Fraction:
    f = mhz_fraction(value)
    if not 0 < f <= MAX_MHZ or f.denominator > 1_000_000:
        raise ValueError(f"frequency {str(value)[:20]!r} MHz out of range")
    return f


_READ_ONCE: dict[str, ResultDirInfo] | None = None  # see `read_once`


@contextmanager
def read_once() -> Iterator[None]:
    """Meanwhile, each result dir's control files are read (and checked) once: an export of
    one PROF dir reads them in its plan, its window scan and its decode (listings, JSON and
    INI files: ~1 ms a result dir each time).  Scoped to one PROF dir's
    export, so that a later export sees the files as they are then."""
    global _READ_ONCE
    outer = _READ_ONCE
    _READ_ONCE = {}
    try:
        yield
    finally:
        _READ_ONCE = outer


def read_result_dir(path: Path) -> ResultDirInfo:
    """Read the control files of one result dir; raise ProfDirError (what, where, how to fix)
    when a mandatory one (start_info, info.json, sample.json) is missing or malformed.  The
    result is shared (`read_once`): callers do not modify it."""
    memo = _READ_ONCE
    if memo is None:
        return _read_result_dir(path)
    key = os.fspath(path)
    got = memo.get(key)
    if got is None:
        got = memo[key] = _read_result_dir(path)
    return got


def _read_result_dir(path: Path) -> ResultDirInfo:
    dev = device_id_of(path)
    suffix = r"" if dev is None else rf"\.{dev}"
    refused: list[Path] = []
    info_p = _find(path, rf"^info\.json{suffix}$", refused) \
        or _find(path, r"^info\.json(\.\d+)?$", refused)
    if info_p is None:
        raise _missing(path, "info.json" + ("" if dev is None else f".{dev}"), refused,
                       "the collection did not finish writing its control files. Restore it "
                       "or re-collect the data.")
    refused = []
    start_p = _find(path, rf"^start_info{suffix}$", refused) \
        or _find(path, r"^start_info(\.\d+)?$", refused)
    if start_p is None:
        raise _missing(path, "start_info", refused,
                       "the collection did not start properly, nothing can be exported from "
                       "this directory.")
    refused = []
    sample_p = _find(path, r"^sample\.json$", refused)
    if sample_p is None:
        raise _missing(path, "sample.json", refused,
                       "it records the collection switches (PMU events) the decoder needs. "
                       "Restore it or re-collect the data.")
    info = _read_json(info_p)
    start = _read_json(start_p)
    sample = _read_json(sample_p)
    begin_us = _int_field(start_p, start, "collectionTimeBegin", INT63 // 1000)
    mono_ns = _int_field(start_p, start, "clockMonotonicRaw")
    rd = ResultDirInfo(path=path, device_id=dev, info=info, sample=sample,
                       time_begin_us=begin_us, mono_begin_ns=mono_ns)
    check_platform(info, info_p, rd.warnings)
    if _find(path, rf"^end_info{suffix}$") is None:  # the collector writes it at its close
        rd.warnings.append(f"{path}: no end_info{'' if dev is None else f'.{dev}'}: the "
                           "collection did not finish (the profiled process was killed?); "
                           "the data flushed before that is exported, the rest is missing")
    try:
        rd.pmu_events, rd.l2_events, rd.aiv_events  # noqa: B018 -- validate them now
    except ValueError:
        raise ProfDirError(f"{sample_p}: ai_core_profiling_events / l2CacheTaskProfilingEvents "
                           f"must be comma-separated hex numbers such as 0x8,0xa. Restore the "
                           f"file or re-collect the data.") from None
    devs = info.get("DeviceInfo")
    dev_info = devs[0] if isinstance(devs, list) and devs and isinstance(devs[0], dict) else {}
    if dev_info:
        try:
            rd.hwts_mhz = _mhz(dev_info.get("hwts_frequency", "100"))
            rd.aic_mhz = _mhz(dev_info.get("aic_frequency", "1000"))
            rd.ai_core_num = int(dev_info.get("ai_core_num", 32))
            rd.aiv_num = int(dev_info.get("aiv_num", 0) or 0)
            if not 0 < rd.ai_core_num <= 4096 or not 0 <= rd.aiv_num <= 4096:
                raise ValueError("core count out of range")
        except (ValueError, ZeroDivisionError, TypeError):
            rd.hwts_mhz, rd.aic_mhz, rd.ai_core_num = Fraction(100), Fraction(1000), 32
            rd.warnings.append(f"{info_p}: bad frequency / core values, using the Ascend910 "
                               f"defaults (hwts 100 MHz, AI Core 1000 MHz, 32 cores)")
    if dev is not None:
        dev_log = _find(path, rf"^dev_start\.log\.{dev}$")
        host_log = _find(path, rf"^host_start\.log\.{dev}$")
        try:
            if dev_log is not None:
                rd.dev_cntvct = _int_field(dev_log, control.read_ini(dev_log), "cntvct")
            else:
                rd.warnings.append(f"{path}: no dev_start.log.{dev}; device times may be offset")
            if host_log is not None:
                rd.host_sync_ns = _int_field(host_log, control.read_ini(host_log),
                                             "clock_monotonic_raw")
            elif dev_log is not None:
                rd.host_sync_ns = _int_field(dev_log, control.read_ini(dev_log),
                                             "clock_monotonic_raw")
        except (ValueError, OSError) as exc:
            raise ProfDirError(f"{path}: unreadable start log ({exc}). Restore it or "
                               f"re-collect the data.") from None
    return rd


def local_offset_ns(time_begin_us: int, mono_begin_ns: int) -> int:
    """The real analysis's local-time offset in ns: ``Decimal(repr(float(begin_us) -
    float(mono_ns) / 1000)) * 1000``.  Whole ns whenever the offset's repr has at most 3
    decimals (every begin time >= 2^43 µs, i.e. any date after 1970-04); a finer repr (only
    for synthetic start times) is rounded half-even to ns, which differs from the analysis's
    per-timestamp quantize only when it ends in exactly 0.5 ns."""
    off = Decimal(repr(float(time_begin_us) - float(mono_begin_ns) / 1000)) * 1000
    return int(off.to_integral_value(rounding=ROUND_HALF_EVEN))


def to_mono_ns(ticks: np.ndarray, rd: ResultDirInfo) -> np.ndarray:
    """Device syscnt -> host CLOCK_MONOTONIC_RAW ns through the sync point of the result
    dir's dev_start.log / host_start.log (docs/formats/raw-format.md 8).  One definition for export
    and
    the pandas-free `msprof query`."""
    rel = np.asarray(ticks, dtype=np.uint64).astype(np.int64) - np.int64(rd.dev_cntvct)
    return ticks_to_ns(rel, rd.hwts_mhz) + np.int64(rd.host_sync_ns)
