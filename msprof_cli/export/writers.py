"""Atomic CSV / JSON writers with slicing (export-files.md 2.3, 5).

Every output goes to a temporary name in the target directory and is renamed with
``os.replace`` only when complete, so a crash never leaves a half-written file under the final
name.  CSV text is produced by pandas' C writer in chunks (minimal quoting, LF line ends);
JSON text is assembled from pre-rendered event strings (see timeline.py).
"""
from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import pandas as pd

CSV_SLICE_ROWS = 1_000_000
JSON_SLICE_EVENTS = 699_050
CHUNK_ROWS = 200_000


class AtomicFile:
    """``with AtomicFile(path) as fh:`` -- text file renamed into place on success."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")

    def __enter__(self) -> io.TextIOWrapper:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fh = open(self.tmp, "w", encoding="utf-8", newline="")
        return self.fh

    def __exit__(self, exc_type, exc, tb) -> None:
        self.fh.close()
        if exc_type is None:
            os.replace(self.tmp, self.path)
        else:
            try:
                os.unlink(self.tmp)
            except OSError:
                pass


def csv_line(values: Iterable[str]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(list(values))
    return buf.getvalue()


def _write_rows(fh, df: pd.DataFrame) -> None:
    for lo in range(0, len(df), CHUNK_ROWS):
        fh.write(df.iloc[lo:lo + CHUNK_ROWS].to_csv(header=False, index=False,
                                                    lineterminator="\n"))


def write_csv(paths: "SliceNamer", header: list[str], df: pd.DataFrame,
              slice_rows: int = CSV_SLICE_ROWS) -> list[Path]:
    """Write `df` (all str/object columns) under `header`; slice above `slice_rows` rows."""
    head = csv_line(header)
    if len(df) <= slice_rows:
        path = paths.single()
        with AtomicFile(path) as fh:
            fh.write(head)
            _write_rows(fh, df)
        return [path]
    out = []
    for k, lo in enumerate(range(0, len(df), slice_rows)):
        path = paths.slice(k)
        with AtomicFile(path) as fh:
            fh.write(head)
            _write_rows(fh, df.iloc[lo:lo + slice_rows])
        out.append(path)
    return out


def write_json_rows(path: Path, header: list[str], df: pd.DataFrame) -> list[Path]:
    """``--summary-format json``: a list of {header: value} objects (all values strings)."""
    import json

    with AtomicFile(path) as fh:
        fh.write("[")
        first = True
        for lo in range(0, len(df), CHUNK_ROWS):
            part = df.iloc[lo:lo + CHUNK_ROWS]
            part.columns = header
            recs = part.to_dict(orient="records")
            for rec in recs:
                fh.write(("" if first else ", ") + json.dumps(rec))
                first = False
        fh.write("]")
    return [path]


def write_events(paths: "SliceNamer", meta: list[str], events: Iterator[list[str]] | list[str],
                 total: int, slice_events: int = JSON_SLICE_EVENTS) -> list[Path]:
    """Write a Chrome-trace array: metadata strings then event strings (already sorted).

    Sliced above `slice_events` events; every slice repeats the metadata events."""
    events = list(events)
    if total <= slice_events:
        path = paths.single()
        with AtomicFile(path) as fh:
            fh.write("[" + ", ".join(meta + events) + "]")
        return [path]
    out = []
    for k, lo in enumerate(range(0, len(events), slice_events)):
        path = paths.slice(k)
        with AtomicFile(path) as fh:
            fh.write("[" + ", ".join(meta + events[lo:lo + slice_events]) + "]")
        out.append(path)
    return out


class SliceNamer:
    """Names of one output: ``{stem}{suffix}.{ext}`` or ``{stem}_slice_{k}{suffix}.{ext}``."""

    def __init__(self, directory: Path, stem: str, suffix: str, ext: str) -> None:
        self.directory, self.stem, self.suffix, self.ext = directory, stem, suffix, ext

    def single(self) -> Path:
        return self.directory / f"{self.stem}{self.suffix}.{self.ext}"

    def slice(self, k: int) -> Path:
        return self.directory / f"{self.stem}_slice_{k}{self.suffix}.{self.ext}"
