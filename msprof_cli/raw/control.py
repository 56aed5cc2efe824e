"""Control files of a result dir (docs/formats/raw-format.md section 3): written by the collector,
read by
export and query.  One definition of names, keys and formats for both sides.

Standard library only (used inside the profiled process).
"""
from __future__ import annotations

import json
import os
import platform
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HOST_DEVICE_ID = 64  # the host "device id" of sample.json (docs/formats/raw-format.md 1)
DRV_VERSION = 467473  # >= this: the analysis uses all-data export mode on 910
MAX_CONTROL_BYTES = 4 * 1024 * 1024  # a control file larger than this is refused (hostile dir)


def _suffix(device_id: int | None) -> str:
    return "" if device_id is None else f".{device_id}"


def local_date(epoch_us: int) -> str:
    """`YYYY-MM-DD hh:mm:ss.ffffff` in local time."""
    sec, us = divmod(epoch_us, 1_000_000)
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(sec)) + f".{us:06d}"


@dataclass(frozen=True)
class ClockPair:
    """Wall clock (µs) and CLOCK_MONOTONIC_RAW (ns) sampled at the same instant."""

    wall_us: int
    mono_ns: int

    @classmethod
    def now(cls) -> "ClockPair":
        # sample monotonic on both sides of the wall clock and take the middle
        m0 = time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)
        wall = time.time_ns()
        m1 = time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)
        return cls(wall_us=wall // 1000, mono_ns=(m0 + m1) // 2)

    @property
    def offset_us(self) -> float:
        """Local µs = mono_ns / 1000 + offset_us (docs/formats/raw-format.md 8)."""
        return self.wall_us - self.mono_ns / 1000


def write_json_line(path: Path, obj: dict[str, Any]) -> None:
    """One-line JSON (the readers read only the first line), written atomically."""
    write_text_atomic(path, json.dumps(obj))


FILE_MODE = 0o640  # control and data files: owner rw, group r (as the real tool)


def write_text_atomic(path: Path, text: str) -> None:
    """Write `text` to a unique temporary name in the same dir, fsync, then ``os.replace``:
    readers see the old file or the new one, never a half-written one.  The temporary file is
    created exclusively without following links, mode 0640 whatever the umask."""
    import secrets  # here: the export reads control files only (hmac etc. not at start-up)

    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0),
                 FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
        with open(fd, "w", encoding="utf-8", closefd=True) as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_start_info(result_dir: Path, clock: ClockPair, device_id: int | None) -> None:
    write_json_line(result_dir / f"start_info{_suffix(device_id)}", {
        "collectionDateBegin": local_date(clock.wall_us),
        "collectionTimeBegin": str(clock.wall_us),
        "clockMonotonicRaw": str(clock.mono_ns),
    })


def write_end_info(result_dir: Path, clock: ClockPair, device_id: int | None) -> None:
    write_json_line(result_dir / f"end_info{_suffix(device_id)}", {
        "collectionDateEnd": local_date(clock.wall_us),
        "collectionTimeEnd": str(clock.wall_us),
        "clockMonotonicRaw": str(clock.mono_ns),
    })


def write_host_start_log(result_dir: Path, sync_mono_ns: int, device_id: int | None) -> None:
    section = "[Host]" if device_id is None else f"[Device{device_id}]"
    write_text_atomic(result_dir / f"host_start.log{_suffix(device_id)}",
                      f"{section}\nclock_monotonic_raw: {sync_mono_ns}\n"
                      f"cntvct: {sync_mono_ns}\ncntvct_diff: 0\n")


def write_dev_start_log(result_dir: Path, sync_mono_ns: int, dev_cntvct: int,
                        device_id: int) -> None:
    write_text_atomic(result_dir / f"dev_start.log.{device_id}",
                      f"clock_monotonic_raw: {sync_mono_ns}\ncntvct: {dev_cntvct}\n")


def _mac() -> str:
    try:
        for name in sorted(os.listdir("/sys/class/net")):
            if name == "lo":
                continue
            with open(f"/sys/class/net/{name}/address") as fh:
                return fh.read().strip()
    except OSError:
        pass
    return "00:00:00:00:00:00"


def _mem_total_kb() -> int:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _uptime() -> str:
    try:
        with open("/proc/uptime") as fh:
            return str(int(float(fh.read().split()[0])))
    except (OSError, ValueError):
        return "0"


def info_json(*, pid: int, device_info: dict[str, Any] | None, device_id: int | None,
              rank_id: int = -1, pid_name: str = "python3") -> dict[str, Any]:
    """info.json(.N) in the collector's key order (docs/formats/raw-format.md 3.5)."""
    import socket  # here: only the collection writes info.json (the export's start-up)

    cores = os.cpu_count() or 1
    host = socket.gethostname()
    return {
        "jobInfo": "NA",
        "version": "1.0",
        "mac": _mac(),
        "OS": platform.system().lower(),
        "cpuCores": cores,
        "hostname": host,
        "hwtype": platform.machine(),
        "devices": "" if device_id is None else str(device_id),
        "platform": platform.system().lower(),
        "platform_version": "1",
        "pid": str(pid),
        "memoryTotal": _mem_total_kb(),
        "cpuNums": cores,
        "sysClockFreq": 100,
        "upTime": _uptime(),
        "netCardNums": 0,
        "rank_id": rank_id,
        "pid_name": pid_name,
        "drvVersion": DRV_VERSION,
        "hostUid": str(zlib.crc32(host.encode()) or 1),
        "CPU": [{"Id": 0, "Name": platform.processor() or "cpu", "Frequency": "",
                 "Logical_CPU_Count": cores, "Type": platform.machine()}],
        "netCard": [],
        "DeviceInfo": [] if device_info is None else [device_info],
    }


def write_info_json(result_dir: Path, info: dict[str, Any], device_id: int | None) -> None:
    write_json_line(result_dir / f"info.json{_suffix(device_id)}", info)


# --- readers -------------------------------------------------------------------------------

MAX_JSON_DEPTH = 64  # control files are flat; deeper nesting is refused before parsing
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def _json_depth(line: bytes) -> int:
    """Upper bound of the nesting depth (brackets inside strings count too: only an upper
    bound is needed to refuse hostile input before the recursive parser sees it)."""
    if line.count(b"[") + line.count(b"{") <= MAX_JSON_DEPTH:
        return 0  # cannot be deeper than the number of openers (the common case)
    depth = best = 0
    for ch in line.translate(None, delete=_NOT_BRACKETS):
        depth += 1 if ch in b"[{" else -1
        best = max(best, depth)
    return best


def read_json_line(path: Path) -> dict[str, Any]:
    """Read the first line of a one-line JSON control file.

    Raises OSError when the file cannot be read (a symbolic link is refused with ELOOP) and
    ValueError -- with a message that does not repeat the path -- when it is malformed,
    larger than MAX_CONTROL_BYTES or nested deeper than MAX_JSON_DEPTH."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with open(fd, "rb", closefd=True) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > MAX_CONTROL_BYTES:
            raise ValueError(f"{size} bytes; a control file is at most {MAX_CONTROL_BYTES} "
                             f"bytes")
        line = fh.readline()
    if _json_depth(line) > MAX_JSON_DEPTH:
        raise ValueError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        value = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"not one line of JSON: {exc.msg} at column {exc.colno}") from None
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    if not isinstance(value, dict):
        raise ValueError("must hold a JSON object ({...})")
    return value


def read_ini(path: Path) -> dict[str, str]:
    """`key: value` lines of host_start.log / dev_start.log (section headers skipped)."""
    out: dict[str, str] = {}
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with open(fd, "rb", closefd=True) as fh:
        if os.fstat(fh.fileno()).st_size > MAX_CONTROL_BYTES:
            raise ValueError("too large for a control file")
        text = fh.read().decode("utf-8", errors="replace")
    for line in text.splitlines():
        if ":" in line and not line.startswith("["):
            key, _, value = line.partition(":")
            out[key.strip()] = value.strip()
    return out
