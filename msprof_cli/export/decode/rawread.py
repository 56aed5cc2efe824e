"""Read binary raw record files into numpy structured arrays, defensively.

Raw data comes from long, expensive runs, so a damaged file must cost as little data as
possible and never crash the export:

* Files are memory-mapped read-only and only whole records are taken: a truncated tail (file
  size not a multiple of the record size, e.g. a collection killed mid-write) is dropped with a
  warning naming the file and the number of bytes.
* Records whose magic number is wrong (host unified records, aicpu) are skipped and counted.
* hwts / aicore records carry a 4-bit rolling counter (docs/formats/raw-format.md 5.1/5.2).  A
record whose
  counter breaks the sequence with *both* neighbours is corrupt: it is skipped and counted.  A
  jump that the following records continue means records were lost before it: the records
  are kept and the jump is reported.  hwts records with an undefined log type (5-7) are
  skipped and counted too.
* Symbolic links inside a data dir (and a data dir that is itself a link) are never followed:
  a hostile PROF dir cannot make the export read outside itself.
* Before copying columns out of the maps, the memory they need is compared with the memory
  available, so a huge (or sparse, hostile) file gives a clear RawDataError, not an OOM kill.

Slices are concatenated in the order given by ``raw.profdir.slice_files`` (aging before
unaging, slice number).  The ``aging.`` prefix is the dynamic-shape marker of the real
collector; it has nothing to do with storage ageing (see docs/troubleshooting.md).
"""
from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from msprof_cli.errors import RawDataError
from msprof_cli.raw import layouts as L
from msprof_cli.raw import stars_layouts as SL
from msprof_cli.raw.profdir import SliceNames, slice_files

MAX_DICT_BYTES = 256 * 1024 * 1024  # hash_dic / type_info_dic: more is not a real dictionary
MEMORY_FRACTION = 0.8  # decode refuses to need more than this share of the available memory
HWTS_VALID_LOG_TYPES = (0, 1, 2, 3, 4)  # task start/end, block start/end, block PMU


@dataclass
class DecodeLog:
    """Warnings collected while decoding (printed by the API, asserted by tests)."""

    warnings: list[str] = field(default_factory=list)
    bad_records: int = 0  # records skipped as corrupt (bad magic, counter, log type)
    lost_records: int = 0  # records missing according to the rolling counters

    def warn(self, msg: str) -> None:
        if msg not in self.warnings:  # one line per distinct problem
            self.warnings.append(msg)

    def merge(self, other: "DecodeLog") -> None:
        """Append what another (e.g. a worker's) log collected, as if logged here now."""
        for msg in other.warnings:
            self.warn(msg)
        self.bad_records += other.bad_records
        self.lost_records += other.lost_records


def host_regex(kind: str) -> SliceNames:
    """``(aging|unaging).{file}.slice_{n}`` of a host record kind."""
    name = L.HOST_FILES[kind]
    return SliceNames((f"aging.{name}", f"unaging.{name}"))


def device_regex(kind: str) -> SliceNames:
    """``{file}.{device}.slice_{n}`` of a device record kind, its legacy file name included
    (layouts.device_file_regex)."""
    return SliceNames((L.DEVICE_FILES[kind],) + ((L.LEGACY_DEVICE_FILES[kind],)
                                                 if kind in L.LEGACY_DEVICE_FILES else ()),
                      device=True)


def available_memory() -> int:
    """Bytes of memory the decoder may still use (MemAvailable; patched by tests)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 1 << 62  # unknown: do not refuse


def _unreadable(path: Path, exc: OSError) -> RawDataError:
    why = exc.strerror or str(exc)
    return RawDataError(
        f"{path}: cannot read the raw data file ({why}). Run the export as the user who "
        f"collected the data or give that user read permission (chmod u+r); the raw data "
        f"was not modified.")


def data_files(data_dir: Path, regex: "re.Pattern[str] | SliceNames", log: DecodeLog
               ) -> list[Path]:
    """`slice_files` of a data dir that never follows symbolic links (warned once)."""
    if data_dir.is_symlink():
        log.warn(f"{data_dir} is a symbolic link; refused (a PROF dir must not point outside "
                 f"itself), its data is not exported. Copy the real data into the PROF dir.")
        return []
    try:
        links = sorted(p.name for p in data_dir.iterdir() if regex.match(p.name)
                       and p.is_symlink())
    except OSError:
        links = []
    if links:
        log.warn(f"{data_dir}: symbolic links ignored (never followed): {', '.join(links)}")
    return slice_files(data_dir, regex)


def _open_raw(path: Path) -> int:
    """A read-only descriptor of the raw file itself, never of a link swapped in after the
    listing (O_NOFOLLOW): size and type are then taken from the descriptor (fstat)."""
    try:
        # O_NONBLOCK: a FIFO put in the file's place must not block the open
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise RawDataError(f"{path} is a symbolic link; raw data is never read through "
                               f"links (a PROF dir must not point outside itself). Replace it "
                               f"with the real file; the raw data was not modified.") from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise RawDataError(f"{path} is not a regular file; raw data files are plain files "
                           f"written by `msprof collect`.")
    return fd


def read_file(path: Path, dtype: np.dtype, log: DecodeLog) -> np.ndarray:
    """Whole records of one file (memory-mapped, read-only)."""
    try:
        fd = _open_raw(path)
    except OSError as exc:
        raise _unreadable(path, exc) from None
    try:
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            n, rest = divmod(st.st_size, dtype.itemsize)
            if rest:
                log.warn(f"{path}: truncated tail, {rest} bytes dropped "
                         f"({n} whole records of {dtype.itemsize} bytes kept)")
            if n == 0:
                return np.zeros(0, dtype=dtype)
            return np.memmap(fh, dtype=dtype, mode="r", shape=(n,))
    except OSError as exc:
        raise _unreadable(path, exc) from None


Columns = dict[str, np.ndarray]


# bytes per record of the decode's own temporaries beside the copied fields: the flag and
# type checks' masks, int64 times, sort orders (a hostile 100 GiB sparse slice passed a guard
# that counted the copied fields only, and the temporaries took 18.9 GB)
TEMP_BYTES_PER_RECORD = 32
SPARSE_MIN_BYTES = 64 << 20  # smaller files are not checked for holes


def _check_memory(files: list[Path], dtype: np.dtype, names: list[str]) -> None:
    per_record = sum(dtype[n].itemsize for n in names) + 1 + TEMP_BYTES_PER_RECORD
    records = 0
    for p in files:
        try:
            st = os.stat(p, follow_symlinks=False)
        except OSError:
            continue
        records += st.st_size // dtype.itemsize
        # msprof collect writes every byte of a slice: a file mostly made of holes declares
        # data it does not hold (damaged or hostile); refused before anything is decoded
        if st.st_size >= SPARSE_MIN_BYTES and st.st_blocks * 512 < st.st_size // 2:
            raise RawDataError(
                f"{p}: the file declares {st.st_size / 2**30:.1f} GiB but holds only "
                f"{st.st_blocks * 512 / 2**20:.1f} MiB on disk (a sparse file). msprof collect "
                f"never writes such files: it is damaged or not raw data. Remove it or restore "
                f"the original; the raw data was not modified.")
    need = records * per_record
    avail = available_memory()
    if need > avail * MEMORY_FRACTION:
        where = files[0].parent if files else "?"
        raise RawDataError(
            f"{where}: decoding {records} records of {files[0].name.split('.slice_')[0]} needs "
            f"about {need / 2**30:.1f} GiB of memory, but only {avail / 2**30:.1f} GiB are "
            f"available. The files declare more data than this machine can hold (or are "
            f"damaged/sparse); export on a machine with more memory or check the file sizes.")


def read_files(files: list[Path], dtype: np.dtype, log: DecodeLog, fields: list[str] | None = None,
               magic_field: str | None = None, magic: int = L.MAGIC,
               select: np.ndarray | None = None) -> Columns:
    """Concatenate the records of `files` as {field: column} (only `fields` are copied out of
    the memory maps, which keeps memory bounded); column ``_aging`` flags aging-file records
    and ``_file`` holds the index in `files` of each record's file.

    `select` (windowed export, windows.py): sorted indices of the records to take, counted
    over the whole records of all `files` in order; only those records are copied out."""
    # padding fields are raw void bytes; sub-array and nested-record fields are kept
    names = list(fields or [n for n in dtype.names
                            if not (dtype[n].base.kind == "V" and dtype[n].base.names is None)])
    if select is None:
        _check_memory(files, dtype, names)
    # every field is copied once, straight into its column (sized from the file sizes; a
    # concatenation of per-file copies wrote every byte twice into fresh pages)
    counts = []
    for path in files:
        try:
            counts.append(os.stat(path, follow_symlinks=False).st_size // dtype.itemsize)
        except OSError:
            counts.append(0)  # read_file reports it
    if select is not None:
        bounds = np.cumsum([0] + counts)
        counts = list(np.diff(np.searchsorted(select, bounds)))
    out = _Columns(names, dtype, int(sum(counts)))
    first = 0  # index of the file's first record among all records
    for k, path in enumerate(files):
        arr = read_file(path, dtype, log)
        if select is not None:
            n = len(arr)
            lo, hi = np.searchsorted(select, [first, first + n])
            arr = arr[select[lo:hi] - first]
            first += n
        if magic_field is not None and len(arr):
            ok = arr[magic_field] == magic
            nbad = int(len(arr) - np.count_nonzero(ok))
            if nbad:
                log.bad_records += nbad
                log.warn(f"{path}: {nbad} records with a bad magic number skipped")
                arr = arr[ok]
        try:
            out.append(arr, path.name.startswith("aging."), k)
        except OSError as exc:  # an I/O error while paging the map in
            raise _unreadable(path, exc) from None
        del arr
    return out.columns()


class _Columns:
    """The columns `read_files` fills file by file, preallocated for `capacity` records
    (grown if a file holds more than its size said when counted, e.g. still being
    written)."""

    def __init__(self, names: list[str], dtype: np.dtype, capacity: int) -> None:
        self.names, self.n = names, 0
        self.cols = {n: np.empty((capacity,) + dtype[n].shape, dtype=dtype[n].base)
                     for n in names}
        self.cols["_aging"] = np.empty(capacity, dtype=bool)
        self.cols["_file"] = np.empty(capacity, dtype=np.int32)

    def append(self, arr: np.ndarray, aging: bool, file_index: int) -> None:
        m = len(arr)
        lo, hi = self.n, self.n + m
        if hi > len(self.cols["_file"]):
            self.cols = {k: np.concatenate([v[:lo], np.empty((m,) + v.shape[1:], v.dtype)])
                         for k, v in self.cols.items()}
        for n in self.names:
            self.cols[n][lo:hi] = arr[n]
        self.cols["_aging"][lo:hi] = aging
        self.cols["_file"][lo:hi] = file_index
        self.n = hi

    def columns(self) -> Columns:
        cap = len(self.cols["_file"])
        if self.n == cap:
            return self.cols
        # records skipped (bad magic) or files shorter than counted: the columns are cut
        # (copied when that frees more than an eighth)
        return {k: (v[:self.n].copy() if (cap - self.n) * 8 > cap else v[:self.n])
                for k, v in self.cols.items()}


def _filter(cols: Columns, keep: np.ndarray) -> Columns:
    return {k: v[keep] for k, v in cols.items()}


def _per_file(files: list[Path], file_idx: np.ndarray, mask: np.ndarray) -> dict[Path, int]:
    counts = np.bincount(file_idx[mask], minlength=len(files))
    return {files[i]: int(c) for i, c in enumerate(counts) if c}


def check_counter(cols: Columns, files: list[Path], log: DecodeLog, kind: str) -> Columns:
    """Skip records whose 4-bit rolling counter breaks the sequence with both neighbours
    (corrupt), report counter jumps (lost records).  Closed form, no loop per record."""
    flags = cols["flags"]
    n = len(flags)
    if n < 2:
        return cols
    cnt = (flags >> 4).astype(np.int16)
    step_ok = ((cnt[1:] - cnt[:-1]) & 0xF) == 1  # between i and i+1
    bad = np.zeros(n, dtype=bool)
    bad[1:-1] = ~step_ok[:-1] & ~step_ok[1:]  # interior records only
    if bad.any():
        for path, c in _per_file(files, cols["_file"], bad).items():
            log.warn(f"{path}: {c} {kind} records with an out-of-sequence rolling counter "
                     f"skipped as corrupt")
        log.bad_records += int(bad.sum())
        cols = _filter(cols, ~bad)
        cnt = cnt[~bad]
    if len(cnt) >= 2:
        gap = (cnt[1:] - cnt[:-1] - 1) & 0xF  # records missing before record i+1
        jumps = np.flatnonzero(gap)
        if len(jumps):
            lost = int(gap[jumps].sum())
            log.lost_records += lost
            where = files[int(cols["_file"][jumps[0] + 1])]
            log.warn(f"{where}: the {kind} rolling counter jumps at {len(jumps)} places "
                     f"(at least {lost} records missing, e.g. lost by the device or skipped as "
                     f"corrupt); the records around them are kept")
    return cols


def host_records(data_dir: Path, kind: str, log: DecodeLog,
                 fields: list[str] | None = None, select: np.ndarray | None = None) -> Columns:
    """Records of a host unified-format file kind (api_event, task_track, ...) as columns
    (`select`: see `read_files`)."""
    files = data_files(data_dir, host_regex(kind), log)
    return read_files(files, L.HOST_DTYPES[kind], log, fields, magic_field="magic",
                      select=select)


def device_records(data_dir: Path, kind: str, log: DecodeLog,
                   fields: list[str] | None = None, select: np.ndarray | None = None
                   ) -> Columns:
    """Records of a device file kind as columns (`select`: see `read_files`; the rolling
    counter is only checked on whole data: a window is taken from data the whole check
    found clean)."""
    files = data_files(data_dir, device_regex(kind), log)
    # the STARS log's magic 0x6BD3 (the analysis drops records without it); its PMU file
    # has none (stars_layouts.py)
    magic_field, magic = {"aicpu": ("magic", L.MAGIC),
                          "stars_soc": ("magic", SL.STARS_MAGIC)}.get(kind, (None, L.MAGIC))
    counted = kind in ("hwts", "aicore") and select is None
    if kind in ("hwts", "aicore") and fields is not None and "flags" not in fields:
        fields = [*fields, "flags"]
    cols = read_files(files, L.DEVICE_DTYPES[kind], log, fields, magic_field=magic_field,
                      magic=magic, select=select)
    if kind == "hwts" and len(cols["flags"]):
        ok = np.isin(cols["flags"] & 0x07, HWTS_VALID_LOG_TYPES)
        if not ok.all():
            bad = ~ok
            for path, c in _per_file(files, cols["_file"], bad).items():
                log.warn(f"{path}: {c} hwts records with an undefined log type skipped as "
                         f"corrupt")
            log.bad_records += int(bad.sum())
            cols = _filter(cols, ok)
    if counted:
        cols = check_counter(cols, files, log, kind)
    return cols


def text_dict_lines(data_dir: Path, kind: str, log: DecodeLog | None = None) -> list[str]:
    """Lines of all hash_dic / type_info_dic slices (aging then unaging).

    Bytes that are not UTF-8 are replaced (U+FFFD), never fatal; a dictionary larger than
    MAX_DICT_BYTES is refused (a real one holds a few MB of op names)."""
    files = data_files(data_dir, host_regex(kind), log or DecodeLog())
    total = 0
    lines: list[str] = []
    for path in files:
        try:
            fd = _open_raw(path)
            with os.fdopen(fd, "rb") as fh:
                total += os.fstat(fh.fileno()).st_size
                if total > MAX_DICT_BYTES:
                    raise RawDataError(
                        f"{path}: the {kind} files hold more than {MAX_DICT_BYTES >> 20} MiB, "
                        f"which is not a real name dictionary (damaged or hostile data). Remove "
                        f"or repair the file; the raw data was not modified.")
                data = fh.read(MAX_DICT_BYTES + 1)
        except OSError as exc:
            raise _unreadable(path, exc) from None
        lines.extend(data.decode("utf-8", errors="replace").splitlines())
    return lines


def hash_dict(data_dir: Path, log: DecodeLog | None = None) -> dict[int, str]:
    """`<u64 hash>:<string>` lines, split at the first colon; bad lines skipped."""
    out: dict[int, str] = {}
    for line in text_dict_lines(data_dir, "hash_dic", log):
        key, sep, value = line.partition(":")
        key = key.strip()
        if sep and key.isascii() and key.isdigit() and len(key) <= 20:
            out[int(key)] = value
    return out


def type_info_dict(data_dir: Path, log: DecodeLog | None = None) -> dict[tuple[int, int], str]:
    """`<level>_<type>:<name>` lines -> {(level, type): name}."""
    out: dict[tuple[int, int], str] = {}
    for line in text_dict_lines(data_dir, "type_info_dic", log):
        key, sep, value = line.partition(":")
        level, us, typ = key.strip().partition("_")
        if sep and us and level.isascii() and level.isdigit() and typ.isascii() \
                and typ.isdigit() and len(level) <= 10 and len(typ) <= 10:
            out[(int(level), int(typ))] = value.strip()
    return out
