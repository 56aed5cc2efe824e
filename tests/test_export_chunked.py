"""The chunked / streamed export paths give byte-identical files to the whole-at-once path.

* CSV summaries are rendered CHUNK_ROWS rows at a time, timelines EVENT_CHUNK sorted events
  at a time (lazy layers, timeline.EventStream): tiny chunk sizes must not change a byte.
* The bulk CSV renderer equals pandas' ``to_csv`` (quoting, empty cells, one column).
* Sliced timelines: each slice repeats the metadata, holds at most the limit, and the slices
  concatenated are the events of the unsliced file in order.
"""
from __future__ import annotations

import hashlib
import json
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from msprof_cli.export.api import run_export
from msprof_cli.export.outputs import trace as TR
from msprof_cli.export.sinks import writers as W

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import gen_prof  # noqa: E402


@pytest.fixture(scope="module")
def prof_src(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("chunked")
    return gen_prof.generate(3000, root, devices=2, l2=True, batch_tasks=700, quiet=True)


def _export(src: Path, dest: Path, layout: str, **kw) -> dict[str, str]:
    prof = dest / src.name
    shutil.copytree(src, prof)
    res = run_export(prof, layout=layout, quiet=True, **kw)
    # the console advice (legacy): built from the same op_summary chunks as the files
    out = {f"advice {a.path.name}": a.text for a in res.advice}
    for p in prof.rglob("*"):
        rel = str(p.relative_to(prof))
        if p.is_file() and ("summary/" in rel or "timeline/" in rel
                            or "mindstudio_profiler_output" in rel):
            out[re.sub(r"_\d{14}", "", rel)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@pytest.mark.parametrize("layout", ["legacy", "mindstudio"])
def test_tiny_chunks_are_byte_identical(prof_src, tmp_path, monkeypatch, layout):
    whole = _export(prof_src, tmp_path / "whole", layout)
    monkeypatch.setattr(W, "CHUNK_ROWS", 7)
    monkeypatch.setattr(W, "EVENT_CHUNK", 5)
    chunked = _export(prof_src, tmp_path / "chunked", layout)
    assert len(whole) >= 9
    if layout == "legacy":  # op_summary in chunks of 7 rows: the same advice, files and report
        assert sum(k.startswith("advice ") for k in whole) == 2
    assert chunked == whole


def _events(path: Path) -> list:
    return json.loads(path.read_text())


def test_sliced_timeline_is_the_whole_file_cut(prof_src, tmp_path, monkeypatch):
    whole_dir = tmp_path / "w"
    _export(prof_src, whole_dir, "mindstudio")
    monkeypatch.setattr(W, "EVENT_CHUNK", 3)
    sliced_dir = tmp_path / "s"
    _export(prof_src, sliced_dir, "mindstudio", json_slice_events=1000, csv_slice_rows=500)
    out_w = whole_dir / prof_src.name / "mindstudio_profiler_output"
    out_s = sliced_dir / prof_src.name / "mindstudio_profiler_output"
    full = _events(next(out_w.glob("msprof_2*.json")))
    meta = [e for e in full if e["ph"] == "M"]
    slices = sorted(out_s.glob("msprof_slice_*.json"),
                    key=lambda p: int(p.name.split("_")[2]))
    assert len(slices) > 2
    events = []
    for p in slices:
        part = _events(p)
        assert part[:len(meta)] == meta
        assert 0 < len(part) - len(meta) <= 1000
        events += part[len(meta):]
    assert events == full[len(meta):]
    # CSV slices: each with the header, rows in order
    whole_csv = next(out_w.glob("op_summary_2*.csv")).read_text().splitlines()
    parts = sorted(out_s.glob("op_summary_slice_*.csv"),
                   key=lambda p: int(p.name.split("_")[3]))
    rows = []
    for p in parts:
        lines = p.read_text().splitlines()
        assert lines[0] == whole_csv[0] and len(lines) - 1 <= 500
        rows += lines[1:]
    assert rows == whole_csv[1:]


def test_bulk_csv_equals_pandas():
    df = pd.DataFrame({
        "a": np.array(["x", "", 'say "hi"', "a,b", "multi\nline", "ünï", "-1", "N/A"],
                      dtype=object),
        "b": np.arange(8, dtype=np.int64) - 3,
        "c": np.array(["1700000000001031.000\t"] * 8, dtype=object),
    })
    expect = df.to_csv(header=False, index=False, lineterminator="\n")
    assert W._csv_text(df) == expect
    one = df[["a"]]
    assert W._csv_text(one) == one.to_csv(header=False, index=False, lineterminator="\n")
    mostly_distinct = pd.DataFrame({"a": np.array([f"v{i}" for i in range(50)] + ["q,"],
                                                  dtype=object)})
    assert W._csv_text(mostly_distinct) == mostly_distinct.to_csv(
        header=False, index=False, lineterminator="\n")
    floats = pd.DataFrame({"f": [0.1, 2.5], "s": ["a", "b"]})  # not text: pandas' writer
    assert W._csv_text(floats) == floats.to_csv(header=False, index=False, lineterminator="\n")


def test_json_summary_rows_equal_json_dumps_of_dicts(tmp_path):
    """--summary-format json rows built per column equal json.dumps of each row's dict, also
    for a repeated header (one key: first place, last value), missing cells, numbers, and a
    table written in parts."""
    header = ["Name %s", "Reduce Start(us)", "n", "Reduce Start(us)", "f", "ü"]
    df = pd.DataFrame({
        "a": np.array(['say "hi"', "ünï", "\t", "x", None, "y"], dtype=object),
        "b": np.array(["1", "2", "3", "4", "5", "6"], dtype=object),
        "c": np.arange(6, dtype=np.int64) - 2,
        "d": np.array(["N/A", "7", np.nan, "9", "10", "11"], dtype=object),
        "e": [0.1, np.nan, 2.5, 1e16, -0.0, 3.0],
        "g": np.array([True, False, True, True, False, True], dtype=object),
    })
    want = "[" + ", ".join(json.dumps(dict(zip(header, row)))
                           for row in df.itertuples(index=False, name=None)) + "]"
    assert "[" + W.json_objects(header, df) + "]" == want
    path = tmp_path / "t.json"
    W.write_json_parts(path, header, [(4, lambda lo, hi: df.iloc[lo:hi]),
                                      (0, lambda lo, hi: df.iloc[:0]),
                                      (2, lambda lo, hi: df.iloc[4 + lo:4 + hi])])
    assert path.read_text() == want
    W.write_json_rows(path, header, df.iloc[:0])
    assert path.read_text() == "[]"


def test_event_stream_equals_sorted_list():
    rng = np.random.default_rng(7)
    keys = [rng.integers(0, 50, n).astype(np.float64) for n in (40, 0, 25, 60)]
    layers = []
    for k, kk in enumerate(keys):
        ev = np.array([f"L{k}e{i}" for i in range(len(kk))], dtype=object)
        if k % 2:  # lazy layer
            layers.append(TR.Layer([f"m{k}"], keys=kk, render=lambda idx, ev=ev: ev[idx].tolist()))
        else:
            layers.append(TR.Layer([f"m{k}"], ev, kk))
    all_ev = np.concatenate([np.array([f"L{k}e{i}" for i in range(len(kk))], dtype=object)
                             for k, kk in enumerate(keys)])
    expect = all_ev[np.argsort(np.concatenate(keys), kind="stable")].tolist()
    meta, stream = TR.assemble_stream(layers)
    assert meta == ["m0", "m1", "m2", "m3"]
    got = [e for c in stream.chunks(0, len(stream), 7) for e in c]
    assert got == expect
    assert [e for c in stream.chunks(10, 50, 3) for e in c] == expect[10:50]
    assert TR.assemble(layers)[1] == expect


@pytest.mark.parametrize("layout", ["legacy", "mindstudio"])
@pytest.mark.parametrize("devices", [1, 2])
@pytest.mark.parametrize("split", ["slices", "whole"])
def test_parallel_workers_equal_serial(tmp_path_factory, tmp_path, monkeypatch, layout, devices,
                                       split):
    """Forked export jobs (summary parts, the timelines, per device) write the same bytes as
    the serial export; sliced CSVs cross the device boundary (mindstudio); timelines written
    in place by a worker, sliced or whole, and no temporary file is left behind."""
    root = tmp_path_factory.mktemp(f"par{devices}")
    src = gen_prof.generate(1500, root, devices=devices, batch_tasks=700, quiet=True)
    kw = {"csv_slice_rows": 400, "json_slice_events": 1500 if split == "slices" else 10**6}
    monkeypatch.setenv("MSPROF_EXPORT_WORKERS", "1")
    serial = _export(src, tmp_path / "serial", layout, **kw)
    monkeypatch.setenv("MSPROF_EXPORT_WORKERS", "3")
    monkeypatch.setattr(W, "CHUNK_ROWS", 90)
    parallel = _export(src, tmp_path / "parallel", layout, **kw)
    assert len(serial) >= 9
    if split == "slices":
        assert sum("_slice_" in k and k.endswith(".json") for k in serial) >= 3
    assert parallel == serial
    assert not list((tmp_path / "parallel").rglob(".*.tmp*"))


def test_run_jobs_order_and_errors(monkeypatch):
    from msprof_cli.errors import ExportError
    from msprof_cli.export.runtime.parallel import run_jobs

    monkeypatch.setenv("MSPROF_EXPORT_WORKERS", "3")
    assert run_jobs([lambda: 1, lambda: [2], lambda: "3"]) == [1, [2], "3"]

    def boom():
        raise ExportError("disk full")
    with pytest.raises(ExportError, match="disk full"):
        run_jobs([boom, lambda: 0])


def test_lazy_numeric_x_events_equal_eager_text():
    """numeric_trace.x_events renders per chunk; its text equals the column-wise formatting
    (json.dumps names, %d.%03d ts, repr durations, scalar or per-row args)."""
    from msprof_cli.export.fmt import float_str, us_str
    from msprof_cli.export.outputs.numeric_trace import x_events

    name = np.array(["a", 'q"uote', "ünï", "a"], dtype=object)
    start = np.array([1_700_000_000_001_031, 5, 1_700_000_000_000_000, 999], dtype=np.int64)
    dur = np.array([1500, 0, 10**19 // 1000, 7], dtype=np.int64)
    tid = np.array([3, 1, 2, 0])
    for pid, args in ((42, '{"x": 1}'), (np.array([1, 2, 3, 4]),
                                         np.array(['{"k": %d}' % i for i in range(4)],
                                                  dtype=object))):
        lay = x_events(name, pid, tid, start, dur, args)
        got = lay.take(np.arange(4))
        pids = [str(pid)] * 4 if np.isscalar(pid) else [str(p) for p in pid]
        argv = [args] * 4 if isinstance(args, str) else list(args)
        expect = ['{"name": %s, "pid": %s, "tid": %d, "ts": %s, "dur": %s, "args": %s, '
                  '"ph": "X"}' % (json.dumps(n), p, t, ts, d, a) for n, p, t, ts, d, a in
                  zip(name, pids, tid, us_str(start), float_str(dur / 1000.0), argv)]
        assert got == expect
        assert lay.take(np.array([2, 0])) == [expect[2], expect[0]]


def test_job_pool_forks_each_job_when_it_starts(monkeypatch):
    """A job sees what the caller prepared before submitting it (forked at start), results
    come back in submission order, and a worker that dies is reported, not ignored."""
    import os
    import signal

    from msprof_cli.errors import ExportError
    from msprof_cli.export.runtime.parallel import JobPool

    monkeypatch.setenv("MSPROF_EXPORT_WORKERS", "2")
    state = {"x": 1}
    pool = JobPool()
    pool.submit(lambda: ("a", state["x"], os.getpid()))
    state["x"] = 2  # prepared after the first submit: the second job must see it
    pool.submit(lambda: ("b", state["x"], os.getpid()))
    (a, xa, pa), (b, xb, pb) = pool.results()
    assert (a, xa, b, xb) == ("a", 1, "b", 2)
    assert os.getpid() not in (pa, pb) and pa != pb

    pool = JobPool()
    pool.submit(lambda: os.kill(os.getpid(), signal.SIGKILL))
    with pytest.raises(ExportError, match="was killed by signal 9"):
        pool.results()


def test_job_pool_caller_runs_a_lane(monkeypatch, tmp_path):
    """`caller_runs` (a one-window plan): the jobs wait for `results`, then this process and
    one forked lane per other core take them one at a time -- every job runs once, the
    results come back in submission order, both processes worked; a failing job stops the
    other lane and is raised."""
    import os
    import time

    from msprof_cli.errors import ExportError
    from msprof_cli.export.runtime.parallel import JobPool

    monkeypatch.setenv("MSPROF_EXPORT_WORKERS", "2")
    pool = JobPool()
    pool.caller_busy, pool.caller_runs = False, True
    state = {"x": 0}
    for i in range(6):
        pool.submit(lambda i=i: (i, state["x"], os.getpid(), time.sleep(0.05)))
    state["x"] = 7  # prepared after the submits, before `results`: every job sees it
    got = pool.results()
    assert [g[0] for g in got] == list(range(6)) and {g[1] for g in got} == {7}
    pids = {g[2] for g in got}
    assert os.getpid() in pids and len(pids) == 2

    mark, me = tmp_path / "ran", os.getpid()

    def slow_then_mark():  # whoever is free takes the next job: the lane or this process
        time.sleep(1.0)
        if os.getpid() != me:  # a forked lane that was not stopped
            mark.write_text("the other lane ran on")

    def boom():
        raise ExportError("disk full")
    pool = JobPool()
    pool.caller_busy, pool.caller_runs = False, True
    pool.submit(slow_then_mark)
    pool.submit(boom)
    with pytest.raises(ExportError, match="disk full"):
        pool.results()
    time.sleep(1.2)
    assert not mark.exists()


def test_job_pool_serial_runs_at_submit(monkeypatch):
    import os

    from msprof_cli.export.runtime.parallel import JobPool

    monkeypatch.setenv("MSPROF_EXPORT_WORKERS", "1")
    pool = JobPool()
    pool.submit(os.getpid)
    assert pool.results() == [os.getpid()]


@pytest.mark.parametrize("damage", [False, True, "two devices"])
def test_tensor_info_decoded_by_a_worker_equals_serial(tmp_path, monkeypatch, damage):
    """load_prof decodes tensor_info in a forked worker when it is big, and the worker joins
    it to the launches while this process joins the rest: the tables and the warnings (same
    order) equal the serial decode's, also with damaged host files and several devices."""
    from msprof_cli.export.decode import dataset as D
    from tests.reliability_fixtures import golden

    if damage == "two devices":
        prof = gen_prof.generate(1500, tmp_path, devices=2, batch_tasks=700, quiet=True)
        damage = False
    else:
        prof = golden(tmp_path)
    data = prof / "host" / "data"
    if damage:  # truncated tails before, in and after tensor_info's place in the order
        for name in ("unaging.api_event.data.slice_0", "unaging.additional.tensor_info.slice_0"):
            with open(data / name, "ab") as fh:
                fh.write(b"\0" * 7)
    monkeypatch.setenv("MSPROF_EXPORT_WORKERS", "1")
    serial = D.load_prof(prof)
    monkeypatch.setenv("MSPROF_EXPORT_WORKERS", "2")
    monkeypatch.setattr(D, "TENSORS_WORKER_BYTES", 0)
    assert D._tensors_in_worker(data)
    forked = D.load_prof(prof)
    assert forked.log.warnings == serial.log.warnings
    assert len(serial.log.warnings) >= (2 if damage else 0)
    for a, b in zip(serial.devices, forked.devices, strict=True):
        pd.testing.assert_frame_equal(a.tasks, b.tasks)
    pd.testing.assert_frame_equal(serial.host.apis, forked.host.apis)


@pytest.mark.parametrize("begun", [False, True])
def test_json_stream_in_place_equals_copied(tmp_path, begun):
    """A timeline whose metadata is known before its first event (a one-window plan) is
    written in place: each slice starts with ``[`` + metadata, closing is a rename done in
    this process (no worker, no second copy of the body); the bytes equal those of the
    copied body.  Metadata that changed after the first event is a bug, and says so."""
    from msprof_cli.export.sinks.files import SliceNamer
    from msprof_cli.export.sinks.streams import SLICE_INDEX, JsonStream

    meta = ['{"m": 1}', '{"m": 2}']
    out = JsonStream(SliceNamer(tmp_path, "msprof", "", "json"), slice_events=4)
    if begun:
        out.begin(meta)
    out.write([f'{{"e": {i}}}' for i in range(6)], keys=[float(i) for i in range(6)])
    out.write(['{"e": 6}'], keys=[6.0])
    jobs = out.close_jobs(meta)
    assert [getattr(j, "inline", False) for j in jobs] == [begun, begun]
    paths = [p for job in jobs for p in job()]
    SLICE_INDEX.clear()
    assert [p.name for p in paths] == ["msprof_slice_0.json", "msprof_slice_1.json"]
    assert [json.loads(p.read_text()) for p in paths] == [
        [{"m": 1}, {"m": 2}] + [{"e": i} for i in range(4)],
        [{"m": 1}, {"m": 2}] + [{"e": i} for i in range(4, 7)]]
    assert sorted(p.name for p in tmp_path.iterdir()) == [p.name for p in paths]
    if begun:
        again = JsonStream(SliceNamer(tmp_path / "x", "msprof", "", "json"), slice_events=4)
        again.begin(meta)
        again.write(['{"e": 0}'])
        with pytest.raises(RuntimeError, match="metadata changed"):
            again.close_jobs(meta + ['{"m": 3}'])
        again.discard()


def test_read_once_shares_a_result_dir_within_one_export_only(tmp_path: Path) -> None:
    """An export reads each result dir's control files once (plan, window scan, decode);
    outside `read_once`, and in the next scope, the files are read as they are then."""
    from msprof_cli.export.decode.control_info import read_once, read_result_dir
    from msprof_cli.raw.profdir import result_dirs
    from tests.export_fixtures import copy_golden

    prof = copy_golden(tmp_path)
    rdir = result_dirs(prof)[0]
    with read_once():
        first = read_result_dir(rdir)
        assert read_result_dir(rdir) is first
    assert read_result_dir(rdir) is not first
    with read_once():
        assert read_result_dir(rdir) is not first  # a new scope reads again
