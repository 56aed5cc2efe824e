"""Indexes the scan of a windowed export builds over the raw records: TimeIndex (blocks of records
with their min / max time, so a window reads only its records) and PmuIndex (the aicore PMU
records by (stream, task, occurrence), with occurrence counters carried from window to window).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .control_info import ResultDirInfo, to_mono_ns
from .device import STREAM_MASK
from .rawread import DecodeLog, device_records, host_records

BLOCK = 4096  # records per block of a TimeIndex


@dataclass
class TimeIndex:
    """The records of one raw kind located by local time: min and max per block of BLOCK
    records (files are nearly in time order, so a window reads few blocks it does not
    keep) and the records every window takes (`always`: flips, step markers)."""

    kind: str
    device: bool
    field: str
    n: int
    mins: np.ndarray
    maxs: np.ndarray
    always: np.ndarray

    @classmethod
    def build(cls, kind: str, device: bool, field_: str, times: np.ndarray,
              always: np.ndarray | None = None) -> "TimeIndex":
        n = len(times)
        starts = np.arange(0, n, BLOCK)
        mins = np.minimum.reduceat(times, starts) if n else np.zeros(0, np.int64)
        maxs = np.maximum.reduceat(times, starts) if n else np.zeros(0, np.int64)
        return cls(kind, device, field_, n, mins, maxs,
                   np.zeros(0, np.int64) if always is None else always.astype(np.int64))

    def select(self, lo: int, hi: int, rd: ResultDirInfo, always: np.ndarray | None = None
               ) -> np.ndarray:
        """Sorted indices of the records with local time in [lo, hi), plus `always` (by
        default the index's own)."""
        always = self.always if always is None else always
        blocks = np.flatnonzero((self.maxs >= lo) & (self.mins < hi))
        if len(blocks) == 0:
            return always
        cand = (blocks[:, None] * BLOCK + np.arange(BLOCK)).ravel()
        cand = cand[cand < self.n]
        log = DecodeLog()
        if self.device:
            cols = device_records(rd.data_dir, self.kind, log, [self.field], select=cand)
            t = to_mono_ns(cols[self.field], rd) + np.int64(rd.offset_ns)
        else:
            cols = host_records(rd.data_dir, self.kind, log, [self.field], select=cand)
            t = cols[self.field].astype(np.int64) + np.int64(rd.offset_ns)
        keep = cand[(t >= lo) & (t < hi)]
        if not len(always):
            return keep
        # both sorted: a sort of the two and a pass over neighbours (np.union1d hashes:
        # ~2 s per window for a million step-trace records)
        both = np.concatenate([keep, always])
        both.sort()
        return both[np.r_[True, both[1:] != both[:-1]]] if len(both) else both


@dataclass
class PmuIndex:
    """aicore records by (stream, task, occurrence): `comp` sorted composite keys
    ``(stream << 16 | task) << 32 | occurrence``, `rec` their record indices; `base` the
    occurrences of each key (`keys`) taken by the windows so far."""

    comp: np.ndarray
    rec: np.ndarray
    keys: np.ndarray
    base: np.ndarray

    @classmethod
    def build(cls, stream: np.ndarray, task: np.ndarray, at: np.ndarray | None = None
              ) -> "PmuIndex":
        """`at`: the record index of each (stream, task) given (default: its position; an
        Atlas A2's PMU file also holds records that are not per-task PMU)."""
        key = (stream.astype(np.int64) & STREAM_MASK) << 16 | task.astype(np.int64)
        order = np.argsort(key, kind="stable")
        ks = key[order]
        new = np.r_[True, ks[1:] != ks[:-1]] if len(ks) else np.zeros(0, bool)
        first = np.flatnonzero(new)
        occ = np.arange(len(ks)) - np.repeat(first, np.diff(np.r_[first, len(ks)]))
        rec = order.astype(np.int64) if at is None else np.asarray(at, np.int64)[order]
        return cls(comp=(ks << 32) | occ, rec=rec, keys=ks[first],
                   base=np.zeros(len(first), np.int64))

    def records(self, stream: np.ndarray, task: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
        """For candidate tasks (in time order) of the next window: (positions among them
        that have a PMU record, those records' indices); advances the occurrence counters."""
        key = (stream.astype(np.int64) << 16) | task.astype(np.int64)
        occ = pd.Series(key).groupby(key, sort=False).cumcount().to_numpy(np.int64)
        pos = np.minimum(np.searchsorted(self.keys, key), max(len(self.keys) - 1, 0))
        known = (self.keys[pos] == key) if len(self.keys) else np.zeros(len(key), bool)
        occ = occ + np.where(known, self.base[pos], 0)
        np.add.at(self.base, pos[known], 1)
        query = (key << 32) | occ
        j = np.minimum(np.searchsorted(self.comp, query), max(len(self.comp) - 1, 0))
        hit = known & (self.comp[j] == query) if len(self.comp) else known & False
        return np.flatnonzero(hit), self.rec[j[hit]]
