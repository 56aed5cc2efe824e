"""The column reader of raw records (rawread.read_files)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from msprof_cli.export.decode import rawread
from msprof_cli.raw import layouts as L


def _record_file(path: Path, thread_ids: list[int], bad: set[int] = frozenset(),
                 tail: int = 0) -> None:
    dt = L.HOST_DTYPES["api_event"]
    rec = np.zeros(len(thread_ids), dtype=dt)
    rec["magic"] = L.MAGIC
    rec["thread_id"] = thread_ids
    rec["begin_time"] = np.arange(1, len(thread_ids) + 1)
    for i in bad:
        rec["magic"][i] = 0
    path.write_bytes(rec.tobytes() + b"\0" * tail)


def test_read_files_columns_equal_the_records_of_every_file(tmp_path):
    files = [tmp_path / f"unaging.api_event.data.slice_{k}" for k in range(3)]
    _record_file(files[0], [1, 2, 3])
    _record_file(files[1], [4, 5, 6, 7], bad={1})
    _record_file(files[2], [8, 9], tail=5)
    log = rawread.DecodeLog()
    cols = rawread.read_files(files, L.HOST_DTYPES["api_event"], log,
                              ["thread_id", "begin_time"], magic_field="magic")
    assert cols["thread_id"].tolist() == [1, 2, 3, 4, 6, 7, 8, 9]
    assert cols["begin_time"].tolist() == [1, 2, 3, 1, 3, 4, 1, 2]
    assert cols["_file"].tolist() == [0, 0, 0, 1, 1, 1, 2, 2]
    assert not cols["_aging"].any()
    assert log.bad_records == 1 and len(log.warnings) == 2  # bad magic, truncated tail
    sel = rawread.read_files(files, L.HOST_DTYPES["api_event"], rawread.DecodeLog(),
                             ["thread_id"], magic_field="magic",
                             select=np.array([1, 2, 3, 5, 8]))
    assert sel["thread_id"].tolist() == [2, 3, 4, 6, 9]
    assert sel["_file"].tolist() == [0, 0, 1, 1, 2]


def test_read_columns_grow_past_the_counted_records():
    """A file longer when read than when counted (still being written) is read whole."""
    dt = np.dtype([("a", "<u4"), ("b", "<u2", (2,))])
    cols = rawread._Columns(["a", "b"], dt, 2)
    recs = np.zeros(3, dtype=dt)
    recs["a"] = [5, 6, 7]
    recs["b"] = [[1, 2], [3, 4], [5, 6]]
    cols.append(recs[:1], False, 0)
    cols.append(recs[1:], True, 1)
    out = cols.columns()
    assert out["a"].tolist() == [5, 6, 7]
    assert out["b"].tolist() == [[1, 2], [3, 4], [5, 6]]
    assert out["_aging"].tolist() == [False, True, True]
    assert out["_file"].tolist() == [0, 1, 1]
