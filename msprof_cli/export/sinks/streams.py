"""Output files written piece by piece across the windows of a windowed export.

The whole-table writers (writers.py) know the row / event count before they open a file, so
they choose between one file and ``_slice_k`` files first.  Here the count is known only at
the end: rows and events are appended as the windows come, slices are cut at the same
boundaries (`slice_rows` rows, `slice_events` events), and the final names are given by
``close`` -- the bytes equal those of the whole-table writers.  Until then everything lives
under the temporary names of writers.AtomicFile (removed on failure, or as stale files of a
dead process by the next export).

A Chrome-trace file repeats its metadata events at the head of every slice.  In a
one-window plan the metadata (every thread and stream lane) is known before the first event
(`JsonStream.begin`): each slice is written in place and ended by ``]`` and a rename.  In a
windowed plan it is only known after the last window: the events go to temporary body files,
and ``close_jobs(meta)`` write each final file as ``[`` + metadata + body + ``]`` (a buffered
copy of the body, files.append_file).
"""
from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pandas as pd

from . import files as FS
from . import writers as W
from .files import AtomicFile, SliceNamer
from .writers import csv_line, render_csv


class _Slices:
    """The temporary files of one output's slices, in order; no file stays open between
    writes, so a forked worker can append and hand the object back (it pickles).  The
    temporary names carry the pid of the process that made the object (the export): a
    worker's exit does not make them stale."""

    def __init__(self, paths: SliceNamer) -> None:
        self.paths = paths
        self.tmps: list[Path] = []
        self.owner = os.getpid()

    def new(self, head: str = "") -> None:
        af = AtomicFile(self.paths.single(), self.owner)
        with af.open_temp() as fh:
            fh.write(head)
        self.tmps.append(af.tmp)

    def append(self):
        """The last slice, opened for appending text (a context manager)."""
        try:
            return open(self.tmps[-1], "a", encoding="utf-8", newline="")
        except OSError as exc:
            raise FS.write_error(self.paths.single(), exc) from None

    def targets(self) -> list[Path]:
        n = len(self.tmps)
        return [self.paths.single()] if n == 1 else [self.paths.slice(k) for k in range(n)]

    def discard(self) -> None:
        """Remove the temporary slices, also those a failed worker started (by name)."""
        single = self.paths.single()
        stale = set(self.tmps)
        folder = single.parent
        if folder.is_dir() and not folder.is_symlink():  # never list through a link
            stale |= set(folder.glob(f".{single.name}.tmp{self.owner}.*"))
        for tmp in stale:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        self.tmps = []


class CsvStream:
    """A CSV summary appended window by window (str cells, missing -> ``N/A``), byte-equal
    to writers.write_csv of the whole table."""

    def __init__(self, paths: SliceNamer, header: list[str], slice_rows: int) -> None:
        self.slices = _Slices(paths)
        self.head = csv_line(header)
        self.slice_rows = slice_rows
        self.in_slice = 0
        self.total = 0

    def write(self, df: pd.DataFrame) -> None:
        lo = 0
        while lo < len(df):
            if not self.slices.tmps or self.in_slice == self.slice_rows:
                self.slices.new(self.head)
                self.in_slice = 0
            take = min(len(df) - lo, self.slice_rows - self.in_slice)
            try:
                with self.slices.append() as fh:
                    for c in range(lo, lo + take, W.CHUNK_ROWS):
                        fh.write(render_csv(df.iloc[c:min(c + W.CHUNK_ROWS, lo + take)],
                                         fill_na=True))
            except OSError as exc:
                raise FS.write_error(self.slices.paths.single(), exc) from None
            lo += take
            self.in_slice += take
            self.total += take

    def close(self, empty_file: bool = False) -> list[Path]:
        """The final files (none without rows, unless `empty_file`: a header-only file)."""
        if self.total == 0:
            self.discard()
            if not empty_file:
                return []
            self.slices.new(self.head)
        out = self.slices.targets()
        for tmp, target in zip(self.slices.tmps, out):
            try:
                os.replace(tmp, target)
            except OSError as exc:
                raise FS.write_error(target, exc) from None
        self.slices.tmps = []
        return out

    def discard(self) -> None:
        self.slices.discard()


class JsonRowsStream:
    """A ``--summary-format json`` summary appended window by window: one file (json
    summaries are not sliced), byte-equal to writers.write_json_parts of the whole table.
    `fill_na`: missing cells print ``"N/A"`` (the mindstudio tables)."""

    def __init__(self, paths: SliceNamer, header: list[str], fill_na: bool = False) -> None:
        self.slices = _Slices(paths)
        self.header = header
        self.fill_na = fill_na
        self.total = 0

    def write(self, df: pd.DataFrame) -> None:
        if not len(df):
            return
        if self.fill_na and df.isna().to_numpy().any():
            df = df.fillna("N/A")
        if not self.slices.tmps:
            self.slices.new("[")
        try:
            with self.slices.append() as fh:
                for c in range(0, len(df), W.CHUNK_ROWS):
                    fh.write(("" if self.total == 0 and c == 0 else ", ")
                             + W.json_objects(self.header, df.iloc[c:c + W.CHUNK_ROWS]))
        except OSError as exc:
            raise FS.write_error(self.slices.paths.single(), exc) from None
        self.total += len(df)

    def close(self, empty_file: bool = False, target: Path | None = None) -> list[Path]:
        """The final file (``target``, default the single name), none without rows unless
        `empty_file` (``[]``)."""
        if self.total == 0:
            self.discard()
            if not empty_file:
                return []
            self.slices.new("[")
        target = self.slices.paths.single() if target is None else target
        try:
            with self.slices.append() as fh:
                fh.write("]")
            os.replace(self.slices.tmps[-1], target)
        except OSError as exc:
            self.discard()
            raise FS.write_error(target, exc) from None
        self.slices.tmps = []
        return [target]

    def discard(self) -> None:
        self.slices.discard()


def summary_stream(summary_format: str, paths: SliceNamer, header: list[str],
                   slice_rows: int, fill_na: bool = False) -> "CsvStream | JsonRowsStream":
    """The stream of one summary in `summary_format` (csv: `paths` as given; json: the same
    names with the .json extension)."""
    if summary_format == "json":
        return JsonRowsStream(SliceNamer(paths.directory, paths.stem, paths.suffix, "json"),
                              header, fill_na)
    return CsvStream(paths, header, slice_rows)


# the sliced Chrome traces closed by this process: per trace, (final path, first µs, last µs)
# per slice, in order; export.api writes them into the PROF dir's timeline index and clears
SLICE_INDEX: list[list[tuple[Path, float | None, float | None]]] = []


class JsonStream:
    """A Chrome-trace array appended window by window (event strings in their final order);
    the jobs of ``close_jobs(meta)`` (pipeline.close_traces) end it with the bytes
    writers.write_events gives the whole stream."""

    def __init__(self, paths: SliceNamer, slice_events: int) -> None:
        self.slices = _Slices(paths)
        self.slice_events = slice_events
        self.in_slice = 0
        self.total = 0
        # the head of every slice once known before the first event (`begin`): each slice's
        # temporary file then starts as its final file does, and closing it is a rename
        self.head: str | None = None
        # per slice, the times (µs) its events span, when known (events given as a sorted
        # timeline.EventStream): the slice index of a sliced timeline (SLICE_INDEX)
        self.ranges: dict[int, list[float]] = {}

    @staticmethod
    def head_of(meta: list[str]) -> str:
        return "[" + ", ".join(meta) + (", " if meta else "")

    def begin(self, meta: list[str]) -> None:
        """The metadata, known before the first event (a one-window plan): every slice is
        written whole in place, `[` + metadata + events, and `close_jobs` only ends it --
        no second copy of the body.  The metadata given to `close_jobs` must be the same."""
        if self.head is None and not self.slices.tmps:
            self.head = self.head_of(meta)

    def _new_slice(self) -> None:
        self.slices.new(self.head or "")
        self.in_slice = 0

    def _note_ranges(self, stream, lo: int, hi: int) -> None:
        """The slices events [lo, hi) of `stream` will land in (the same arithmetic as
        `write`), and the times they cover."""
        if not hasattr(stream, "key_range") or hi <= lo:
            return
        k, in_slice, pos = len(self.slices.tmps) - 1, self.in_slice, lo
        while pos < hi:
            if k < 0 or in_slice == self.slice_events:
                k, in_slice = k + 1, 0
            take = min(hi - pos, self.slice_events - in_slice)
            a, b = stream.key_range(pos, pos + take)
            got = self.ranges.setdefault(k, [a, b])
            got[0], got[1] = min(got[0], a), max(got[1], b)
            pos += take
            in_slice += take

    def write(self, events: list[str], keys: list[float] | None = None,
              span: tuple[float, float] | None = None) -> None:
        """Append event strings; for the slice index, `keys` (their times, µs) or `span`
        (times bracketing them all)."""
        lo = 0
        while lo < len(events):
            if not self.slices.tmps or self.in_slice == self.slice_events:
                self._new_slice()
            take = min(len(events) - lo, self.slice_events - self.in_slice)
            if (keys is not None or span is not None) and take:
                a, b = span if keys is None else (min(keys[lo:lo + take]),
                                                  max(keys[lo:lo + take]))
                got = self.ranges.setdefault(len(self.slices.tmps) - 1, [a, b])
                got[0], got[1] = min(got[0], a), max(got[1], b)
            try:
                with self.slices.append() as fh:
                    if self.in_slice:
                        fh.write(", ")
                    fh.write(", ".join(events[lo:lo + take]))
            except OSError as exc:
                raise FS.write_error(self.slices.paths.single(), exc) from None
            lo += take
            self.in_slice += take
            self.total += take

    def write_stream(self, stream, lo: int, hi: int) -> None:
        """Events [lo, hi) of `stream` (a sorted timeline.EventStream) appended in order,
        rendered EVENT_CHUNK at a time.  (Rendering one file by parallel pieces was dropped:
        their text was copied once more into the final file, which cost more than the second
        core saved beside the other jobs -- docs/performance.md "Small exports".)"""
        self._note_ranges(stream, lo, hi)
        for chunk in stream.chunks(lo, hi, W.EVENT_CHUNK):
            self.write(chunk)

    def close_jobs(self, meta: list[str]) -> list[Callable[[], list[Path]]]:
        """The writes of the final files, one independent job per slice: a slice that was
        `begun` is ended in place (``]``, renamed: a job marked `inline`, no worker); else its
        body is copied after the metadata (several jobs share the cores,
        parallel.run_jobs) and removed.  The caller `discard`s what is left."""
        if self.total == 0:
            self.discard()
            return []
        head = self.head_of(meta)
        targets = self.slices.targets()
        if len(targets) > 1:
            SLICE_INDEX.append([(t, *self.ranges.get(k, (None, None)))
                                for k, t in enumerate(targets)])
        if self.head is not None and head != self.head:  # an output's bug, not the data's
            raise RuntimeError(f"{targets[0].name}: the timeline metadata changed after its "
                               f"first events were written")

        def end(body: Path, target: Path) -> list[Path]:
            try:
                with open(body, "a", encoding="utf-8", newline="") as fh:
                    fh.write("]")
                os.replace(body, target)
            except OSError as exc:
                raise FS.write_error(target, exc) from None
            return [target]

        def copy(body: Path, target: Path) -> list[Path]:
            with AtomicFile(target) as fh:
                fh.write(head)
                FS.append_file(fh, body)
                fh.write("]")
            try:
                os.unlink(body)
            except OSError:
                pass
            return [target]

        jobs = []
        for body, target in zip(self.slices.tmps, targets):
            job = partial(end if self.head is not None else copy, body, target)
            job.inline = self.head is not None  # type: ignore[attr-defined]
            jobs.append(job)
        return jobs

    def discard(self) -> None:
        self.slices.discard()


class DeferredRows:
    """CSV rows of a device after the first, kept (pickled chunk frames in a temporary
    file) until the rows of the devices before are written: the mindstudio CSVs are
    device-major while the windows come in time order.  `replay` appends them to the
    output stream; like the streams, it keeps no file open between writes (pickles)."""

    def __init__(self, paths: SliceNamer) -> None:
        self.slices = _Slices(paths)
        self.parts = 0

    def write(self, df: pd.DataFrame) -> None:
        if not self.slices.tmps:
            self.slices.new()
        try:
            with open(self.slices.tmps[-1], "ab") as fh:
                pickle.dump(df, fh, protocol=pickle.HIGHEST_PROTOCOL)
        except OSError as exc:
            raise FS.write_error(self.slices.paths.single(), exc) from None
        self.parts += 1

    def replay(self, out: CsvStream) -> None:
        """Write the kept rows to `out`, then remove the temporary file."""
        if self.parts:
            with open(self.slices.tmps[-1], "rb") as fh:
                for _ in range(self.parts):
                    out.write(pickle.load(fh))
        self.discard()

    def discard(self) -> None:
        self.slices.discard()


class DeferredEvents:
    """Chrome-trace events of a device after the first, kept (pickled chunks of event
    strings in a temporary file) until the events of the devices before are written: the
    mindstudio msprof / step_trace json are device-major (the analysis appends its
    per-device files) while the windows come in time order.  Takes what a JsonStream takes
    from a WindowTimeline (`write`, `write_stream`); `replay` appends the events to the
    output stream.  Keeps no file open between writes (pickles)."""

    def __init__(self, paths: SliceNamer) -> None:
        self.slices = _Slices(paths)
        self.parts = 0
        self.total = 0

    def write(self, events: list[str], keys: list[float] | None = None,
              span: tuple[float, float] | None = None) -> None:
        if not events:
            return
        if not self.slices.tmps:
            self.slices.new()
        try:
            with open(self.slices.tmps[-1], "ab") as fh:
                pickle.dump((list(events), keys, span), fh, protocol=pickle.HIGHEST_PROTOCOL)
        except OSError as exc:
            raise FS.write_error(self.slices.paths.single(), exc) from None
        self.parts += 1
        self.total += len(events)

    def write_stream(self, stream, lo: int, hi: int) -> None:
        for a, chunk in zip(range(lo, hi, W.EVENT_CHUNK), stream.chunks(lo, hi, W.EVENT_CHUNK)):
            self.write(chunk, span=stream.key_range(a, min(a + W.EVENT_CHUNK, hi)))

    def replay(self, out: JsonStream) -> None:
        """Write the kept events to `out`, then remove the temporary file."""
        if self.parts:
            with open(self.slices.tmps[-1], "rb") as fh:
                for _ in range(self.parts):
                    events, keys, span = pickle.load(fh)
                    out.write(events, keys, span)
        self.discard()

    def discard(self) -> None:
        self.slices.discard()
