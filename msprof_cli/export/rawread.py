"""Read binary raw record files into numpy structured arrays.

Files are memory-mapped and only whole records are taken: a truncated tail (file size not a
multiple of the record size, e.g. a collection killed mid-write) is dropped with a warning
naming the file and the number of bytes.  Records whose magic number is wrong are skipped and
counted (one warning per file).  Slices are concatenated in the order given by
``raw.profdir.slice_files`` (aging before unaging, slice number).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from msprof_cli.raw import layouts as L
from msprof_cli.raw.profdir import slice_files


@dataclass
class DecodeLog:
    """Warnings collected while decoding (printed by the API, asserted by tests)."""

    warnings: list[str] = field(default_factory=list)
    bad_records: int = 0

    def warn(self, msg: str) -> None:
        self.warnings.append(msg)


def _host_regex(kind: str) -> re.Pattern[str]:
    return re.compile(r"^(aging|unaging)\." + re.escape(L.HOST_FILES[kind]) + r"\.slice_\d+$")


def _device_regex(kind: str) -> re.Pattern[str]:
    return re.compile(r"^" + re.escape(L.DEVICE_FILES[kind]) + r"\.\d+\.slice_\d+$")


def read_file(path: Path, dtype: np.dtype, log: DecodeLog) -> np.ndarray:
    """Whole records of one file (memory-mapped, read-only)."""
    size = path.stat().st_size
    n, rest = divmod(size, dtype.itemsize)
    if rest:
        log.warn(f"{path}: truncated tail, {rest} bytes dropped "
                 f"({n} whole records of {dtype.itemsize} bytes kept)")
    if n == 0:
        return np.zeros(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r", shape=(n,))


Columns = dict[str, np.ndarray]


def read_files(files: list[Path], dtype: np.dtype, log: DecodeLog, fields: list[str] | None = None,
               magic_field: str | None = None, magic: int = L.MAGIC) -> Columns:
    """Concatenate the records of `files` as {field: column} (only `fields` are copied out of
    the memory maps, which keeps memory bounded); column ``_aging`` flags aging-file records."""
    # padding fields are raw void bytes; sub-array and nested-record fields are kept
    names = list(fields or [n for n in dtype.names
                            if not (dtype[n].base.kind == "V" and dtype[n].base.names is None)])
    parts: dict[str, list[np.ndarray]] = {n: [] for n in names}
    aging: list[np.ndarray] = []
    for path in files:
        arr = read_file(path, dtype, log)
        if magic_field is not None and len(arr):
            ok = arr[magic_field] == magic
            nbad = int(len(arr) - np.count_nonzero(ok))
            if nbad:
                log.bad_records += nbad
                log.warn(f"{path}: {nbad} records with a bad magic number skipped")
                arr = arr[ok]
        for n in names:
            parts[n].append(np.array(arr[n]))
        aging.append(np.full(len(arr), path.name.startswith("aging."), dtype=bool))
        del arr
    out: Columns = {}
    for n in names:
        sub = dtype[n]
        empty = np.zeros((0,) + sub.shape, dtype=sub.base)
        out[n] = np.concatenate(parts[n]) if parts[n] else empty
    out["_aging"] = np.concatenate(aging) if aging else np.zeros(0, dtype=bool)
    return out


def host_records(data_dir: Path, kind: str, log: DecodeLog,
                 fields: list[str] | None = None) -> Columns:
    """Records of a host unified-format file kind (api_event, task_track, ...) as columns."""
    files = slice_files(data_dir, _host_regex(kind))
    return read_files(files, L.HOST_DTYPES[kind], log, fields, magic_field="magic")


def device_records(data_dir: Path, kind: str, log: DecodeLog,
                   fields: list[str] | None = None) -> Columns:
    files = slice_files(data_dir, _device_regex(kind))
    magic_field = "magic" if kind == "aicpu" else None
    return read_files(files, L.DEVICE_DTYPES[kind], log, fields, magic_field=magic_field)


def text_dict_lines(data_dir: Path, kind: str) -> list[str]:
    """Lines of all hash_dic / type_info_dic slices (aging then unaging)."""
    lines: list[str] = []
    for path in slice_files(data_dir, _host_regex(kind)):
        lines.extend(path.read_text(encoding="utf-8", errors="replace").splitlines())
    return lines


def hash_dict(data_dir: Path) -> dict[int, str]:
    """`<u64 hash>:<string>` lines, split at the first colon; bad lines skipped."""
    out: dict[int, str] = {}
    for line in text_dict_lines(data_dir, "hash_dic"):
        key, sep, value = line.partition(":")
        if sep and key.strip().isdigit():
            out[int(key)] = value
    return out


def type_info_dict(data_dir: Path) -> dict[tuple[int, int], str]:
    """`<level>_<type>:<name>` lines -> {(level, type): name}."""
    out: dict[tuple[int, int], str] = {}
    for line in text_dict_lines(data_dir, "type_info_dic"):
        key, sep, value = line.partition(":")
        level, us, typ = key.strip().partition("_")
        if sep and us and level.isdigit() and typ.isdigit():
            out[(int(level), int(typ))] = value.strip()
    return out
