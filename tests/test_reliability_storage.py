"""storage_limit: slices rotate together at chunk boundaries, the oldest generations
are aged out when `limit - 20 MiB` is reached, and query/export report it."""
from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np
import pytest

from msprof_cli.device import writer as W
from msprof_cli.device.writer import DataDir, RawStorage
from msprof_cli.export.api import run_export
from msprof_cli.query import query_rows
from msprof_cli.raw import ageing
from msprof_cli.raw import layouts as L
from tests.test_device_records import config, make_chunk, run

KIB = 1024


def slice_numbers(data: Path, prefix: str) -> list[int]:
    return sorted(int(re.search(r"slice_(\d+)$", p.name).group(1))
                  for p in data.glob(f"{prefix}*"))


def _records(n: int, fill: int = 0) -> np.ndarray:
    arr = np.zeros(n, dtype=L.HWTS)
    arr["task_id"] = fill
    return arr


def test_generations_rotate_together_and_dictionaries_stay(tmp_path):
    storage = RawStorage(tmp_path, None, ageing_on=False, slice_bytes=64 * KIB)
    host, dev = DataDir(tmp_path / "host" / "data", storage), \
        DataDir(tmp_path / "device_0" / "data", storage)
    for chunk in range(5):
        host.file("api_event", lambda i: f"unaging.api_event.data.slice_{i}"
                  ).write_records(_records(300))  # 19 200 B per chunk
        host.file("hash_dic", lambda i: f"unaging.additional.hash_dic.slice_{i}"
                  ).write_lines([f"{chunk}:name{chunk}"])
        dev.file("hwts", lambda i: f"hwts.data.0.slice_{i}").write_records(_records(300))
        host.sync(), dev.sync()
        assert storage.end_chunk() == []
    # 38 400 B per chunk: a generation is closed after 2 chunks (>= 64 KiB needs 2)
    assert slice_numbers(tmp_path / "host/data", "unaging.api_event") == [0, 1, 2]
    assert slice_numbers(tmp_path / "device_0/data", "hwts") == [0, 1, 2]
    assert slice_numbers(tmp_path / "host/data", "unaging.additional.hash_dic") == [0]
    sizes = [p.stat().st_size for p in sorted((tmp_path / "device_0/data").iterdir())]
    assert all(s % 64 == 0 for s in sizes)  # whole records in every slice
    assert sum(sizes) == 5 * 300 * 64
    # a kind first written in generation 2 starts at slice_2 (gaps are fine for readers)
    dev.file("aicore", lambda i: f"aicore.data.0.slice_{i}").write_records(
        np.zeros(3, dtype=L.AICORE))
    dev.sync()
    assert slice_numbers(tmp_path / "device_0/data", "aicore") == [storage.generation]


def test_files_0640_dirs_0750_whatever_the_umask(tmp_path):
    import os

    old = os.umask(0o000)
    try:
        d = DataDir(tmp_path / "r" / "data")
        d.file("hwts", lambda i: f"hwts.data.0.slice_{i}").write_records(_records(2))
        d.close()
    finally:
        os.umask(old)
    assert (tmp_path / "r" / "data").stat().st_mode & 0o777 == 0o750
    assert (tmp_path / "r").stat().st_mode & 0o777 == 0o750
    assert (tmp_path / "r/data/hwts.data.0.slice_0").stat().st_mode & 0o777 == 0o640


def test_ageing_deletes_oldest_generations(tmp_path):
    # limit 21 MiB -> ageing threshold 1 MiB; generations of 128 KiB
    storage = RawStorage(tmp_path, 21, slice_bytes=128 * KIB)
    assert storage.threshold == 1 * ageing.MIB
    dev = DataDir(tmp_path / "device_0" / "data", storage)
    msgs = []
    for chunk in range(40):  # 40 x 64 KiB = 2.5 MiB written
        dev.file("hwts", lambda i: f"hwts.data.0.slice_{i}").write_records(
            _records(1024, fill=chunk))
        dev.sync()
        msgs += storage.end_chunk()
    data = tmp_path / "device_0" / "data"
    total = sum(p.stat().st_size for p in data.iterdir())
    assert total < storage.threshold
    kept = slice_numbers(data, "hwts")
    assert kept[0] > 0 and kept == list(range(kept[0], kept[-1] + 1))
    # the newest chunks are all there, in order
    arr = np.concatenate([np.fromfile(data / f"hwts.data.0.slice_{k}", dtype=L.HWTS)
                          for k in kept])
    chunks = np.unique(arr["task_id"])
    assert chunks[-1] == 39 and list(chunks) == list(range(chunks[0], 40))
    marker = ageing.read_marker(tmp_path)
    assert marker["storageLimitMB"] == 21 and marker["agedSlices"] == kept[0]
    assert marker["agedBytes"] == 40 * 1024 * 64 - total
    assert marker["oldestKeptSlice"] == kept[0]
    assert any(m.startswith("storage limit reached:") for m in msgs)


def test_newest_generation_is_never_aged(tmp_path):
    storage = RawStorage(tmp_path, 21, slice_bytes=8 * ageing.MIB)
    dev = DataDir(tmp_path / "device_0" / "data", storage)
    dev.file("hwts", lambda i: f"hwts.data.0.slice_{i}").write_records(
        _records(2 * ageing.MIB // 64))  # one chunk of 2 MiB, above the 1 MiB threshold
    dev.sync()
    msgs = storage.end_chunk()
    assert (tmp_path / "device_0/data/hwts.data.0.slice_0").stat().st_size == 2 * ageing.MIB
    assert any("the newest raw slices alone" in m for m in msgs)
    assert ageing.read_marker(tmp_path) is None


def test_default_limit_is_90_percent_of_free_space(tmp_path):
    import shutil

    storage = RawStorage(tmp_path, None)
    free = shutil.disk_usage(tmp_path).free
    assert abs(storage.limit_bytes - 0.9 * free) < 0.01 * free + 10 * ageing.MIB
    assert storage.slice_bytes == W.SLICE_BYTES


@pytest.fixture
def aged_prof(tmp_path, monkeypatch) -> Path:
    """A Device-written PROF dir whose oldest slices were aged out (small limit for the test:
    the options refuse < 200MB, the Device takes any int)."""
    monkeypatch.setattr(W, "MIN_SLICE_BYTES", 64 * KIB)
    cfg = config(storage_limit_mb=21)  # threshold 1 MiB -> slices of 128 KiB
    chunks, start, first = [], None, 1
    from tests.test_device_records import T0
    start = T0
    for _ in range(16):
        c = make_chunk(20, first_index=first, start=start)
        chunks.append(c)
        first += 20
        start = c.iterations[-1].end_ns + 50_000
    return run(tmp_path, chunks, cfg)


def test_device_ages_out_and_export_reports_it(aged_prof, capsys):
    prof = aged_prof
    marker = ageing.read_marker(prof)
    assert marker and marker["agedSlices"] > 0 and marker["storageLimitMB"] == 21
    data_bytes = sum(p.stat().st_size for p in prof.glob("*/data/*"))
    assert data_bytes < 1 * ageing.MIB + 300 * KIB  # threshold + at most one chunk
    host = prof / "host" / "data"
    assert (host / "unaging.additional.hash_dic.slice_0").exists()
    assert (host / "unaging.additional.type_info_dic.slice_0").exists()
    assert not (prof / "device_0/data/hwts.data.0.slice_0").exists()

    res = run_export(prof, layout="mindstudio", quiet=True)
    msg = [w for w in res.warnings if "storage_limit 21MB was reached" in w]
    assert msg and "oldest raw slices" in msg[0] and "Raise --storage-limit" in msg[0]
    [summary] = (prof / "mindstudio_profiler_output").glob("op_summary_*.csv")
    rows = list(csv.DictReader(summary.open()))
    assert rows and all(r["Op Name"] and not r["Op Name"].isdigit() for r in rows)  # names kept
    [steps] = (prof / "mindstudio_profiler_output").glob("step_trace_*.csv")
    n_steps = len(list(csv.DictReader(steps.open())))
    assert 0 < n_steps < 16 * 20  # the first iterations are gone, the rest exported
    query_rows(prof)
    assert "storage_limit 21MB was reached during collection" in capsys.readouterr().err
