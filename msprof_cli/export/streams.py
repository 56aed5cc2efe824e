"""Output files written piece by piece across the windows of a windowed export.

The whole-table writers (writers.py) know the row / event count before they open a file, so
they choose between one file and ``_slice_k`` files first.  Here the count is known only at
the end: rows and events are appended as the windows come, slices are cut at the same
boundaries (`slice_rows` rows, `slice_events` events), and the final names are given by
``close`` -- the bytes equal those of the whole-table writers.  Until then everything lives
under the temporary names of writers.AtomicFile (removed on failure, or as stale files of a
dead process by the next export).

A Chrome-trace file repeats its metadata events at the head of every slice, and the
metadata (every thread and stream lane) is only known after the last window: the events go
to temporary body files, and ``close(meta)`` writes each final file as ``[`` + metadata +
body + ``]`` (a kernel-side copy of the body).
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pandas as pd

from . import writers as W
from .writers import AtomicFile, SliceNamer, _render, csv_line


class _Pieces:
    """Temporary files of one output, opened one after the other."""

    def __init__(self, paths: SliceNamer) -> None:
        self.paths = paths
        self.done: list[AtomicFile] = []
        self.cur: AtomicFile | None = None
        self.fh = None

    def open(self):
        self.close_current()
        self.cur = AtomicFile(self.paths.single()).open_temp()
        self.fh = self.cur.__enter__()
        return self.fh

    def close_current(self) -> None:
        if self.cur is not None:
            cur, self.cur = self.cur, None
            cur.__exit__(None, None, None)
            self.done.append(cur)
            self.fh = None

    def discard(self) -> None:
        if self.cur is not None:
            try:
                self.cur.fh.close()
            except OSError:
                pass
            self.done.append(self.cur)
            self.cur = None
        for af in self.done:
            try:
                os.unlink(af.tmp)
            except OSError:
                pass
        self.done = []

    def targets(self) -> list[Path]:
        n = len(self.done)
        return [self.paths.single()] if n == 1 else [self.paths.slice(k) for k in range(n)]


class CsvStream:
    """A CSV summary appended window by window (str cells, missing -> ``N/A``), byte-equal
    to writers.write_csv_parts of the whole table.  No file stays open between writes, so a
    forked worker can append a window's rows and hand the stream back (it pickles)."""

    def __init__(self, paths: SliceNamer, header: list[str], slice_rows: int) -> None:
        self.paths = paths
        self.head = csv_line(header)
        self.slice_rows = slice_rows
        self.tmps: list[Path] = []  # the slices' temporary files, the last one open for rows
        self.in_slice = 0
        self.total = 0
        # the process whose death makes the temporary files stale: the one that made the
        # stream (the export), also for slices a forked worker starts
        self.owner = os.getpid()

    def _new_slice(self) -> None:
        af = AtomicFile(self.paths.single(), self.owner)
        with af.open_temp() as fh:
            fh.write(self.head)
        self.tmps.append(af.tmp)
        self.in_slice = 0

    def write(self, df: pd.DataFrame) -> None:
        lo = 0
        while lo < len(df):
            if not self.tmps or self.in_slice == self.slice_rows:
                self._new_slice()
            take = min(len(df) - lo, self.slice_rows - self.in_slice)
            try:
                with open(self.tmps[-1], "a", encoding="utf-8", newline="") as fh:
                    for c in range(lo, lo + take, W.CHUNK_ROWS):
                        fh.write(_render(df.iloc[c:min(c + W.CHUNK_ROWS, lo + take)],
                                         fill_na=True))
            except OSError as exc:
                raise W._write_error(self.paths.single(), exc) from None
            lo += take
            self.in_slice += take
            self.total += take

    def close(self, empty_file: bool = False) -> list[Path]:
        """The final files (none without rows, unless `empty_file`: a header-only file)."""
        if self.total == 0:
            self.discard()
            if not empty_file:
                return []
            self._new_slice()
        n = len(self.tmps)
        out = [self.paths.single()] if n == 1 else [self.paths.slice(k) for k in range(n)]
        for tmp, target in zip(self.tmps, out):
            try:
                os.replace(tmp, target)
            except OSError as exc:
                raise W._write_error(target, exc) from None
        self.tmps = []
        return out

    def discard(self) -> None:
        """Remove the temporary slices, also those a failed worker started (by name)."""
        single = self.paths.single()
        stale = set(self.tmps) | set(single.parent.glob(f".{single.name}.tmp{self.owner}.*"))
        for tmp in stale:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        self.tmps = []


class JsonStream:
    """A Chrome-trace array appended window by window (event strings in their final order);
    ``close(meta)`` writes it as writers.event_jobs writes the whole stream."""

    def __init__(self, paths: SliceNamer, slice_events: int) -> None:
        self.pieces = _Pieces(paths)
        self.slice_events = slice_events
        self.in_slice = 0
        self.total = 0

    def write(self, events: list[str]) -> None:
        lo = 0
        while lo < len(events):
            if self.pieces.fh is None or self.in_slice == self.slice_events:
                self.pieces.open()
                self.in_slice = 0
            take = min(len(events) - lo, self.slice_events - self.in_slice)
            if self.in_slice:
                self.pieces.fh.write(", ")
            self.pieces.fh.write(", ".join(events[lo:lo + take]))
            lo += take
            self.in_slice += take
            self.total += take

    def close(self, meta: list[str]) -> list[Path]:
        if self.total == 0:
            self.pieces.discard()
            return []
        self.pieces.close_current()
        out = self.pieces.targets()
        try:
            for af, target in zip(self.pieces.done, out):
                with AtomicFile(target) as fh:
                    fh.write("[" + ", ".join(meta) + (", " if meta else ""))
                    fh.flush()
                    with open(af.tmp, "rb") as src:
                        shutil.copyfileobj(src, fh.buffer, 8 << 20)
                    fh.write("]")
                os.unlink(af.tmp)
        finally:
            self.pieces.discard()
        return out

    def discard(self) -> None:
        self.pieces.discard()
