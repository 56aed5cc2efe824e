"""The joins of the summary's decode (summary.decode) on integer columns: the values of the
export's frame joins (export.decode.dataset) without their frames.

* `Spans.find` is dataset.enclose: per record, the latest span (by begin, then by row) of
  its thread that begins at or before it, if the record is not past its end.
* `match` is the left merge on (group, occurrence) of dataset.build_device: the k-th row of
  a group on the left meets the k-th row of that group on the right.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from msprof_cli.export.decode.join import occurrence_match


def match(left: tuple[np.ndarray, ...], right: tuple[np.ndarray, ...]) -> np.ndarray:
    """Per left row, the right row of the same group (equal key columns) and the same
    occurrence (rank among the earlier rows of its group, in row order), or -1: the export's
    own join (export.decode.join.occurrence_match), one definition for both."""
    return occurrence_match(list(left), list(right))


@dataclass
class Spans:
    """Spans of one kind (node launches, model executions) sorted for `find`: by thread,
    begin, row -- as one int64 key (thread code, begin) when their times allow it."""

    threads: np.ndarray  # the distinct threads, sorted
    key: np.ndarray | None  # sorted (thread code << bits | begin - lo); None: no such key
    lo: int
    bits: int
    thread: np.ndarray  # per sorted span
    begin: np.ndarray
    end: np.ndarray
    row: np.ndarray  # the span's row in the frame it came from

    @classmethod
    def of(cls, frame: pd.DataFrame) -> "Spans":
        th = frame["thread_id"].to_numpy(np.int64)
        b = frame["begin_ns"].to_numpy(np.int64)
        threads = np.unique(th)
        lo = int(b.min()) if len(b) else 0
        bits = max((int(b.max()) - lo).bit_length(), 1) if len(b) else 1
        key = None
        if bits + max(len(threads).bit_length(), 1) <= 62:
            key = (np.searchsorted(threads, th) << bits) | (b - lo)
            order = np.argsort(key, kind="stable")
            key = key[order]
        else:
            order = np.lexsort((np.arange(len(b)), b, th))
        return cls(threads, key, lo, bits, th[order], b[order],
                   frame["end_ns"].to_numpy(np.int64)[order], order)

    def find(self, thread: np.ndarray, ts: np.ndarray) -> np.ndarray:
        """Per record (thread, time), the frame row of the span enclosing it, or -1."""
        thread = np.asarray(thread, np.int64)
        ts = np.asarray(ts, np.int64)
        out = np.full(len(ts), -1, np.int64)
        if len(ts) == 0 or len(self.row) == 0:
            return out
        if self.key is None:  # times too far apart for one key: the frame join itself
            from msprof_cli.export.decode.enclose import enclose

            spans = pd.DataFrame({"thread_id": self.thread, "begin_ns": self.begin,
                                  "end_ns": self.end, "row": self.row})
            rec = pd.DataFrame({"thread_id": thread, "ts_ns": ts})
            got = enclose(rec, spans, "ts_ns", ["row"])["row"].to_numpy(np.float64)
            return np.where(np.isnan(got), -1, got).astype(np.int64)
        rc = np.minimum(np.searchsorted(self.threads, thread), len(self.threads) - 1)
        hi = self.lo + (1 << self.bits) - 1  # no span begins after: a later time searches here
        rkey = (rc << self.bits) | (np.clip(ts, self.lo, hi) - self.lo)
        pos = np.searchsorted(self.key, rkey, side="right") - 1
        p = np.maximum(pos, 0)
        ok = (self.threads[rc] == thread) & (ts >= self.lo) & (pos >= 0) \
            & ((self.key[p] >> self.bits) == rc) & (ts <= self.end[p])
        out[ok] = self.row[p[ok]]
        return out
