"""Append-only slice files of the result dirs' data/ (docs/formats/raw-format.md 2.2) and
storage_limit.

Slices.  A file kind (`unaging.compact.task_track`, `hwts.data.0`, ...) is written as
`..slice_{g}` where g is the current *generation* of the whole PROF dir.  A generation is closed
at the end of a chunk (`RawStorage.end_chunk`), once the slices written in it reach
`slice_bytes` together (64 MiB by default), and then every file kind of every data dir moves to
the next generation at once.  Records never straddle slices (a chunk boundary is a record
boundary), and slice g of every kind covers the same chunks: ageing out a generation removes a
consistent time range (hwts and aicore stay aligned, host flips and device flips are lost
together).  A kind that first appears in generation g starts at `slice_{g}`: slice numbers may
have gaps, which the readers accept (they sort by number).  The name dictionaries (hash_dic,
type_info_dic) and graph_id_map are *pinned*: always slice_0, never rotated, never aged.

storage_limit (docs/formats/options.md 4).  When the data files of the PROF dir reach `limit - 20
MiB`, the
oldest generations are deleted (never the newest one written) until they are below it again,
and `storage_aging.json` records it at the PROF dir root (raw/ageing.py).  Without a
storage_limit the limit is 90 % of the free space of the output disk at start (the real
default).  With one, `slice_bytes` is `(limit - 20 MiB) / 8` (1 MiB to 64 MiB) so that one
ageing step removes about an eighth of the budget.  MB means MiB (2**20 bytes).

Every `sync()` flushes and fsyncs what was written, so a SIGKILL loses at most the chunk being
written.  Files are created 0640 and dirs 0750 whatever the umask, never through a symlink.
"""
from __future__ import annotations

import logging
import os
import re
import time
from pathlib import Path
from typing import BinaryIO, Callable

import numpy as np

from msprof_cli.raw import ageing
from msprof_cli.raw.profdir import make_dir

SLICE_BYTES = 64 * 1024 * 1024  # close a generation once its slices reach 64 MiB together
MIN_SLICE_BYTES = 1024 * 1024
AGEING_SLICES = 8  # with a storage_limit: about 8 generations fit in the budget
DEFAULT_LIMIT_FRACTION = 0.9  # no storage_limit: 90 % of the free disk space
PINNED_KINDS = frozenset({"hash_dic", "type_info_dic", "graph_id_map"})
FILE_MODE = 0o640
_SLICE_RE = re.compile(r"\.slice_(\d+)$")
_OPEN_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0)

log = logging.getLogger(__name__)


class RawStorage:
    """Generation (slice) rotation and storage_limit ageing over the data dirs of a PROF dir."""

    def __init__(self, prof_dir: Path | None, limit_mb: int | None = None, *,
                 ageing_on: bool = True, slice_bytes: int | None = None) -> None:
        self.prof_dir = Path(prof_dir) if prof_dir is not None else None
        self.limit_mb = limit_mb
        self.limit_bytes: int | None = None
        if ageing_on and self.prof_dir is not None:
            if limit_mb is not None:
                self.limit_bytes = limit_mb * ageing.MIB
            else:
                try:
                    st = os.statvfs(self.prof_dir)
                    self.limit_bytes = int(st.f_bavail * st.f_frsize * DEFAULT_LIMIT_FRACTION)
                except OSError:
                    self.limit_bytes = None
        self.threshold = None if self.limit_bytes is None \
            else max(0, self.limit_bytes - ageing.HEADROOM_BYTES)
        if slice_bytes is None:
            slice_bytes = SLICE_BYTES if limit_mb is None or self.threshold is None else \
                min(SLICE_BYTES, max(MIN_SLICE_BYTES, self.threshold // AGEING_SLICES))
        self.slice_bytes = slice_bytes
        self.generation = 0
        self.dirs: list[DataDir] = []
        self.aged_slices = 0
        self.aged_bytes = 0
        self._over_warned = False

    @classmethod
    def unlimited(cls, slice_bytes: int = SLICE_BYTES) -> "RawStorage":
        return cls(None, None, ageing_on=False, slice_bytes=slice_bytes)

    def register(self, data_dir: "DataDir") -> None:
        self.dirs.append(data_dir)

    def end_chunk(self) -> list[str]:
        """After every chunk (all dirs synced): close the generation when it is full, then age
        out the oldest generations when the limit is near.  Returns messages to report."""
        current = sum(f.size for d in self.dirs for f in d.files.values()
                      if not f.pinned and f.index == self.generation)
        if current >= self.slice_bytes:
            for d in self.dirs:
                d.rotate(self.generation + 1)
            self.generation += 1
        return self._age() if self.threshold is not None else []

    def _age(self) -> list[str]:
        files: list[tuple[int, int, Path]] = []  # (generation, size, path) of rotating slices
        total = 0
        for d in self.dirs:
            pinned_names = {f.name_of(0) for f in d.files.values() if f.pinned}
            try:
                entries = list(os.scandir(d.data_dir))
            except OSError:
                continue
            for e in entries:
                if not e.is_file(follow_symlinks=False):
                    continue
                size = e.stat(follow_symlinks=False).st_size
                total += size
                m = _SLICE_RE.search(e.name)
                if m and e.name not in pinned_names:
                    files.append((int(m.group(1)), size, Path(e.path)))
        assert self.threshold is not None
        if total < self.threshold:
            return []
        newest = max((g for g, _, _ in files), default=0)
        removed = 0
        for gen in sorted({g for g, _, _ in files if g < newest}):
            if total < self.threshold:
                break
            for g, size, path in files:
                if g == gen:
                    try:
                        os.unlink(path)
                    except OSError:
                        continue
                    total -= size
                    self.aged_bytes += size
                    self.aged_slices += 1
                    removed += 1
        msgs = []
        if removed:
            ageing.write_marker(self.prof_dir, {
                "storageLimitMB": self.limit_mb if self.limit_mb is not None
                else self.limit_bytes // ageing.MIB,
                "agedSlices": self.aged_slices, "agedBytes": self.aged_bytes,
                "oldestKeptSlice": min((g for g, _, p in files if p.exists()), default=newest),
                "lastAgedAt": str(time.time_ns() // 1000)})
            msgs.append(f"storage limit reached: {removed} oldest raw slices aged out "
                        f"({self.aged_slices} so far, {self.aged_bytes} bytes)")
        if total >= self.threshold and not self._over_warned:
            self._over_warned = True
            msgs.append(f"the newest raw slices alone ({total} bytes) exceed the storage limit "
                        f"minus 20 MiB; they are kept. Raise storage_limit or profile fewer "
                        f"steps.")
        return msgs


class SliceFile:
    def __init__(self, data_dir: Path, name_of: Callable[[int], str],
                 slice_bytes: int | None = None, *, pinned: bool = False,
                 generation: int = 0) -> None:
        self.data_dir = data_dir
        self.name_of = name_of
        self.slice_bytes = slice_bytes  # unused: rotation is per generation (RawStorage)
        self.pinned = pinned
        self.index = 0 if pinned else generation
        self.size = 0
        self._fh: BinaryIO | None = None
        self.dirty = False

    def _open(self) -> BinaryIO:
        if self._fh is None:
            path = self.data_dir / self.name_of(self.index)
            fd = os.open(path, _OPEN_FLAGS, FILE_MODE)
            try:
                os.fchmod(fd, FILE_MODE)
                self._fh = open(fd, "ab")
            except BaseException:
                os.close(fd)
                raise
            self.size = self._fh.tell()
        return self._fh

    def rotate(self, generation: int) -> None:
        """Move to `generation`'s slice (pinned files stay on slice_0)."""
        if self.pinned or generation == self.index:
            return
        self._flush()
        if self._fh is not None:
            self._fh.close()
        self._fh = None
        self.index = generation
        self.size = 0

    def write_records(self, arr: np.ndarray) -> None:
        if len(arr) == 0:
            return
        fh = self._open()
        # the array's own bytes, without a `tobytes()` copy (a loop-heavy model writes ~190 MB
        # of records at exit: a second copy was ~50k page faults of system time)
        raw = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
        fh.write(raw)
        self.size += raw.nbytes
        self.dirty = True

    def write_lines(self, lines: list[str]) -> None:
        if not lines:
            return
        data = "".join(line + "\n" for line in lines).encode("utf-8")
        fh = self._open()
        fh.write(data)
        self.size += len(data)
        self.dirty = True

    def _flush(self) -> None:
        if self._fh is not None and self.dirty:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self.dirty = False

    def sync(self) -> None:
        self._flush()

    def close(self) -> None:
        self._flush()
        if self._fh is not None:
            self._fh.close()
            self._fh = None


class DataDir:
    """The slice files of one data/ dir, opened lazily by kind name."""

    def __init__(self, data_dir: Path, storage: RawStorage | None = None) -> None:
        self.data_dir = data_dir
        make_dir(data_dir)
        self._own_storage = storage is None
        self.storage = storage if storage is not None else RawStorage.unlimited()
        self.storage.register(self)
        self.files: dict[str, SliceFile] = {}

    def file(self, key: str, name_of: Callable[[int], str]) -> SliceFile:
        f = self.files.get(key)
        if f is None:
            f = self.files[key] = SliceFile(self.data_dir, name_of, pinned=key in PINNED_KINDS,
                                            generation=self.storage.generation)
        return f

    def rotate(self, generation: int) -> None:
        for f in self.files.values():
            f.rotate(generation)

    def sync(self) -> None:
        for f in self.files.values():
            f.sync()
        if self._own_storage:
            for msg in self.storage.end_chunk():
                log.warning(msg)

    def close(self) -> None:
        for f in self.files.values():
            f.close()
