"""Append-only slice files of a result dir's data/ (raw-format.md 2.2).

A file kind (`unaging.compact.task_track`, `hwts.data.0`, ...) is written as `..slice_0`,
`..slice_1`, ...: a slice is closed when the next record would make it exceed SLICE_BYTES, so a
record never straddles two slices.  Every `sync()` flushes and fsyncs what was written, so a
SIGKILL loses at most the chunk being written.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO, Callable

import numpy as np

SLICE_BYTES = 64 * 1024 * 1024  # rotate slices at 64 MiB (record boundary)


class SliceFile:
    def __init__(self, data_dir: Path, name_of: Callable[[int], str],
                 slice_bytes: int = SLICE_BYTES) -> None:
        self.data_dir = data_dir
        self.name_of = name_of
        self.slice_bytes = slice_bytes
        self.index = 0
        self.size = 0
        self._fh: BinaryIO | None = None
        self.dirty = False

    def _open(self) -> BinaryIO:
        if self._fh is None:
            self._fh = open(self.data_dir / self.name_of(self.index), "ab")
            self.size = self._fh.tell()
        return self._fh

    def _rotate(self) -> None:
        self._flush()
        if self._fh is not None:
            self._fh.close()
        self._fh = None
        self.index += 1
        self.size = 0

    def write_records(self, arr: np.ndarray) -> None:
        if len(arr) == 0:
            return
        raw = np.ascontiguousarray(arr).tobytes()
        self._write_units(raw, arr.dtype.itemsize)

    def write_lines(self, lines: list[str]) -> None:
        if not lines:
            return
        self._open()
        for line in lines:
            data = (line + "\n").encode("utf-8")
            if self.size and self.size + len(data) > self.slice_bytes:
                self._rotate()
            fh = self._open()
            fh.write(data)
            self.size += len(data)
        self.dirty = True

    def _write_units(self, raw: bytes, unit: int) -> None:
        pos = 0
        while pos < len(raw):
            fh = self._open()
            room = (self.slice_bytes - self.size) // unit * unit
            if room <= 0:
                if self.size == 0:  # one record larger than a slice: write it anyway
                    room = unit
                else:
                    self._rotate()
                    continue
            part = raw[pos:pos + room]
            fh.write(part)
            self.size += len(part)
            pos += len(part)
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

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        data_dir.mkdir(parents=True, exist_ok=True)
        self.files: dict[str, SliceFile] = {}

    def file(self, key: str, name_of: Callable[[int], str]) -> SliceFile:
        f = self.files.get(key)
        if f is None:
            f = self.files[key] = SliceFile(self.data_dir, name_of)
        return f

    def sync(self) -> None:
        for f in self.files.values():
            f.sync()

    def close(self) -> None:
        for f in self.files.values():
            f.close()
