"""Unit tests of the export decoder on small arrays and hand-made raw files."""
from __future__ import annotations

import random
import sqlite3
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from msprof_cli.export import fmt
from msprof_cli.export.decode.dataset import load_prof
from msprof_cli.export.decode.device import assign_batches, pair_hwts
from msprof_cli.export.decode.host import decode_apis, decode_tensors
from msprof_cli.export.decode.rawread import DecodeLog, read_files
from msprof_cli.export.decode.steptrace import iteration_spans, iterations
from msprof_cli.export.outputs.overlap_layer import merge_intervals
from msprof_cli.export.outputs.timeline import flow_ids
from msprof_cli.raw import layouts as L
from tests.export_fixtures import copy_golden


def _values(n: int = 20000) -> list[float]:
    rng = random.Random(7)
    vals = [12.25 * 0.15, 12.25 * 0.05, 3.0625, 2.4375, 0.0005, 1.0005, 2.675, 0.125, 0.0]
    vals += [round(rng.random() * 10 ** rng.randint(-3, 9), rng.randint(2, 6)) for _ in range(n)]
    vals += [rng.randint(0, 10 ** 6) / 8000 for _ in range(n)]  # many exact ties
    return vals


def test_py_round_matches_python() -> None:
    vals = _values()
    got = fmt.py_round(np.array(vals), 3)
    assert [float(x) for x in got] == [round(v, 3) for v in vals]


def test_sqlite_round_matches_sqlite() -> None:
    vals = _values(5000)
    con = sqlite3.connect(":memory:")
    if tuple(int(x) for x in sqlite3.sqlite_version.split(".")) >= (3, 43, 0):
        pytest.skip("reference semantics are those of SQLite <= 3.42 (the golden's engine)")
    want = [con.execute("select round(?, 3)", (v,)).fetchone()[0] for v in vals]
    got = fmt.sqlite_round(np.array(vals), 3)
    assert [float(x) for x in got] == want


def test_float_str_is_python_repr() -> None:
    vals = _values(3000) + [1e16, 1e-5, 120.0, 123456789012.25]
    assert list(fmt.float_str(np.array(vals))) == [str(v) for v in vals]


@pytest.mark.parametrize("case", ["repeating", "distinct", "short"])
def test_dur_text_is_repr_of_microseconds(case: str) -> None:
    """Timeline durations print as the repr of their µs float, via a table of the distinct
    values when they repeat, directly otherwise."""
    from msprof_cli.export.outputs.trace import dur_text

    rng = np.random.default_rng(7)
    n = {"repeating": 5000, "distinct": 5000, "short": 10}[case]
    hi = 40 if case == "repeating" else 10**15
    ns = rng.integers(0, hi, n) * 125 + rng.integers(0, 2, n)
    ns[:3] = [0, 1, 10**17 + 3]
    assert dur_text(ns) == [repr(int(v) / 1000.0) for v in ns]


def test_obj_full_shares_one_value() -> None:
    out = fmt.obj_full(5, "N/A")
    assert out.dtype == object and out.tolist() == ["N/A"] * 5
    assert len({id(v) for v in out}) == 1


def test_us_str_exact_on_16_digit_values() -> None:
    ns = np.array([1700000000001031000, 1700000000001299375, 5, 1700000000001299001])
    assert list(fmt.us_str(ns)) == ["1700000000001031.000", "1700000000001299.375", "0.005",
                                    "1700000000001299.001"]


def test_ts_sort_key_is_float_of_printed_text() -> None:
    ns = np.array([1700000000001299375, 1700000000001299500, 1700000000001299001])
    assert list(fmt.ts_sort_key(ns)) == [float(s) for s in fmt.us_str(ns)]


def test_ticks_to_ns_exact_and_half_even() -> None:
    assert list(fmt.ticks_to_ns(np.array([0, 1, 203100]), Fraction(100))) == [0, 10, 2031000]
    # 38.4 MHz: 1 tick = 26.0416.. ns
    got = fmt.ticks_to_ns(np.array([1, 3, 12]), Fraction("38.4"))
    assert list(got) == [round(Fraction(1000, 1) / Fraction("38.4") * k) for k in (1, 3, 12)]


def test_pair_hwts_pairs_per_stream_task() -> None:
    log = DecodeLog()
    stream = np.array([1, 2, 1, 2, 1, 1])
    task = np.array([5, 5, 5, 5, 6, 6])
    lt = np.array([0, 0, 1, 1, 0, 0])  # the last start of task 6 never ends
    tick = np.arange(6) * 10
    df = pair_hwts(stream, task, lt, tick, log)
    got = sorted(zip(df.stream_id, df.task_id, df.start_tick, df.end_tick))
    assert got == [(1, 5, 0, 20), (2, 5, 10, 30)]
    assert any("without a partner" in w for w in log.warnings)


def test_assign_batches_counts_flips_per_stream() -> None:
    tasks = pd.DataFrame({"stream_id": [1, 1, 1, 2], "task_id": [65535, 0, 1, 3],
                          "t": [10, 30, 40, 35]})
    flips = pd.DataFrame({"ts_ns": [20], "stream_id": [1], "task_id": [0], "flip_num": [1]})
    assert list(assign_batches(tasks, flips, "t")) == [0, 1, 1, 0]


def test_step_state_machine() -> None:
    # in E a 1 is ignored, so the following 4 closes [previous 4, t]
    tags = np.array([0, 4, 4, 1, 1, 4, 0, 1])
    t = np.arange(len(tags)) * 100
    start, end = iteration_spans(tags, t)
    assert [(int(a), int(b)) for a, b in zip(start, end)] == \
        [(0, 100), (100, 200), (200, 500), (600, 700)]
    # 1 in S closes and enters M, where a 4 is ignored until the next 0
    tags = np.array([0, 1, 4, 0, 4])
    start, end = iteration_spans(tags, np.arange(5) * 100)
    assert [(int(a), int(b)) for a, b in zip(start, end)] == [(0, 100), (300, 400)]


def test_iterations_fp_bp_and_data_aug() -> None:
    steps = pd.DataFrame({"ts_ns": [0, 5, 50, 60, 61, 100, 106, 150, 160, 161],
                          "tag_id": [0, 2, 3, 4, 1, 0, 2, 3, 4, 1], "model_id": 7,
                          "index_id": 1, "stream_id": 0, "task_id": 0})
    its = iterations(steps)
    assert list(its.iteration_id) == [1, 2]
    assert list(its.fp_ns) == [5, 106] and list(its.bp_ns) == [50, 150]
    assert list(its.data_aug_ns) == [-1, 46]


def _iterations_by_loop(steps: pd.DataFrame) -> list[tuple]:
    """The analysis's state machine record by record (the module docstring's), per model in
    time order: (model, iteration, start, end, fp, bp, {reduce column: time})."""
    out = []
    s = steps.sort_values(["model_id", "ts_ns"], kind="stable")
    for model, g in s.groupby("model_id", sort=True):
        state, begin, its = "M", None, []
        for tag, t in zip(g["tag_id"].tolist(), g["ts_ns"].tolist()):
            if tag == 0:
                state, begin = "S", t
            elif tag == 4 and state in "SE":
                its.append([begin, t]); state, begin = "E", t
            elif tag == 1 and state == "S":
                its.append([begin, t]); state = "M"
        for i, (b, e) in enumerate(its):
            inside = g[(g["ts_ns"] >= b) & (g["ts_ns"] <= e)]
            last = {}
            for tag, t in zip(inside["tag_id"].tolist(), inside["ts_ns"].tolist()):
                # the marker's own iteration: the latest one starting at or before it
                k = max(j for j, (bb, _) in enumerate(its) if bb <= t)
                if k == i:
                    last[tag] = t
            red = {f"reduce_{'start' if (tag - 10000) % 2 == 0 else 'end'}_{(tag - 10000) // 2}": t
                   for tag, t in last.items() if tag >= 10000}
            out.append((int(model), i + 1, b, e, last.get(2, -1), last.get(3, -1), red))
    return out


@pytest.mark.parametrize("seed", range(40))
def test_iterations_match_the_state_machine(seed: int) -> None:
    """Several models, markers outside every iteration, AllReduce pairs of some models only
    (-1 elsewhere), equal times; iter_id ranks step ends (ties in row order)."""
    rng = np.random.default_rng(seed)
    n = [1, 6, 40, 150][seed % 4]
    steps = pd.DataFrame({"model_id": rng.integers(0, 3, n).astype(np.uint32),
                          "ts_ns": rng.integers(0, 60, n),
                          "tag_id": rng.choice([0, 1, 2, 3, 4, 4, 10000, 10001, 10002, 10003],
                                               n).astype(np.uint16)})
    its = iterations(steps)
    want = _iterations_by_loop(steps)
    assert len(its) == len(want)
    reduce_cols = [c for c in its.columns if c.startswith("reduce_")]
    for row, (model, it, b, e, fp, bp, red) in zip(its.itertuples(index=False), want):
        assert (row.model_id, row.iteration_id, row.step_start_ns, row.step_end_ns,
                row.fp_ns, row.bp_ns) == (model, it, b, e, fp, bp)
        assert {c: getattr(row, c) for c in reduce_cols} == \
            {c: red.get(c, -1) for c in reduce_cols}
    end = its["step_end_ns"].to_numpy()
    assert list(its["iter_id"]) == list(np.argsort(np.argsort(end, kind="stable"),
                                                   kind="stable") + 1)


def test_flow_ids_match_python_ints() -> None:
    rng = np.random.default_rng(3)
    stream, task, batch = rng.integers(0, 2048, 50), rng.integers(0, 65536, 50), \
        rng.integers(0, 100, 50)
    got = flow_ids(1, stream, task, batch)
    want = [str((1 << 80) + (int(s) << 64) + (int(t) << 48) + (int(b) << 32) + 4294967295)
            for s, t, b in zip(stream, task, batch)]
    assert list(got) == want
    assert flow_ids(0, np.array([2]), np.array([1]), np.array([0]))[0] == "36893769626690781183"


def test_merge_intervals_touching_merge() -> None:
    s, e = merge_intervals(np.array([0, 10, 30, 5]), np.array([10, 20, 40, 8]))
    assert list(s) == [0, 30] and list(e) == [20, 40]


def _write(path: Path, arr: np.ndarray, extra: bytes = b"") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(arr.tobytes() + extra)


def test_truncated_tail_and_bad_magic(tmp_path: Path) -> None:
    rec = np.zeros(3, dtype=L.API_EVENT)
    rec["magic"] = L.MAGIC
    rec["magic"][1] = 0x1234
    rec["begin_time"], rec["end_time"] = [1, 2, 3], [5, 6, 7]
    f = tmp_path / "unaging.api_event.data.slice_0"
    _write(f, rec, b"\x01\x02\x03")
    log = DecodeLog()
    cols = read_files([f], L.API_EVENT, log, magic_field="magic")
    assert list(cols["begin_time"]) == [1, 3]
    assert log.bad_records == 1
    assert any("3 bytes dropped" in w and str(f) in w for w in log.warnings)


def test_event_pairs_and_connection_ids(tmp_path: Path) -> None:
    rec = np.zeros(4, dtype=L.API_EVENT)
    rec["magic"] = L.MAGIC
    rec["level"] = L.LEVEL_NODE
    rec["type"] = 5
    rec["thread_id"] = 9
    rec["begin_time"] = [100, 110, 150, 500]
    rec["end_time"] = [L.EVENT_RESERVE, 130, L.EVENT_RESERVE, 600]
    rec["reserve"] = [42, 0, 42, 0]
    _write(tmp_path / "unaging.api_event.data.slice_0", rec)
    api = decode_apis(tmp_path, DecodeLog())
    got = list(zip(api.connection_id, api.begin_ns, api.end_ns))
    assert got == [(0, 100, 150), (1, 110, 130), (3, 500, 600)]


def test_multi_record_tensors_concatenate(tmp_path: Path) -> None:
    rec = np.zeros(2, dtype=L.TENSOR_INFO)
    rec["magic"] = L.MAGIC
    rec["timestamp"], rec["thread_id"], rec["op_name"] = 7, 1, 99
    rec["tensor_num"] = [5, 1]
    t = rec["tensors"]
    t["tensor_type"][0] = [0, 0, 0, 0, 1]
    t["shape"][0, :, 0] = [1, 2, 3, 4, 5]
    t["format"][0] = 2
    t["data_type"][0] = 1
    t["tensor_type"][1, 0] = 1
    t["shape"][1, 0, :2] = [6, 0]
    t["format"][1, 0] = 0
    _write(tmp_path / "unaging.additional.tensor_info.slice_0", rec)
    df = decode_tensors(tmp_path, DecodeLog())
    assert len(df) == 1
    row = df.iloc[0]
    assert row.in_shapes == "1;2;3;4"
    assert row.out_shapes == "5;6"
    assert row.out_formats == "ND;NCHW"
    assert row.out_types == "FLOAT16;FLOAT"


def test_golden_tables(tmp_path: Path) -> None:
    data = load_prof(copy_golden(tmp_path))
    dev = data.devices[0]
    assert len(dev.tasks) == 18 and dev.tasks.pmu_ok.all()
    assert list(dev.tasks.connection_id[:7]) == [0, 1, 2, 3, 4, 5, 7]
    assert set(dev.tasks.model_id) == {1}
    assert len(dev.iterations) == 3


def test_enclose_matches_the_per_record_definition() -> None:
    """decode.enclose (per-thread searchsorted): the payload of the last span
    (by begin, ties in span order) of the record's thread with begin <= ts, when ts <= its
    end; NaN otherwise -- an int payload stays int only when every record is enclosed."""
    from msprof_cli.export.decode.enclose import enclose

    rng = np.random.default_rng(5)
    for _ in range(2000):
        ns, nr = int(rng.integers(0, 8)), int(rng.integers(0, 10))
        b = rng.integers(0, 20, ns)
        spans = pd.DataFrame({"thread_id": rng.integers(0, 3, ns), "begin_ns": b,
                              "end_ns": b + rng.integers(0, 8, ns),
                              "cid": rng.integers(0, 100, ns), "f": rng.random(ns)})
        rec = pd.DataFrame({"thread_id": rng.integers(0, 4, nr), "ts": rng.integers(-2, 30, nr)},
                           index=rng.permutation(nr) + 5)
        got = enclose(rec, spans, "ts", ["cid", "f"])
        want = []
        for th, ts in zip(rec["thread_id"], rec["ts"]):
            best = None
            for i in np.argsort(spans["begin_ns"].to_numpy(), kind="stable"):
                if spans["thread_id"].iat[i] == th and spans["begin_ns"].iat[i] <= ts:
                    best = i
            ok = best is not None and ts <= spans["end_ns"].iat[best]
            want.append((spans["cid"].iat[best], spans["f"].iat[best]) if ok else (None, None))
        assert list(got.index) == list(rec.index)
        all_in = all(w[0] is not None for w in want)
        assert got["cid"].dtype == (np.int64 if all_in and nr else np.float64)
        for (c, f), gc, gf in zip(want, got["cid"], got["f"]):
            assert (np.isnan(gc) and np.isnan(gf)) if c is None else (gc == c and gf == f)
