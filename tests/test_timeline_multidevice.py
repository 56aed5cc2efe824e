"""Multi-device timelines (docs/export.md 5): step-trace ``Reduce_{i}_{k}`` events, the
``Communication`` process of msprof json, the Overlap Analysis ``Communication`` /
``Communication(Not Overlapped)`` / ``Free`` events, and their consistency with the step_trace
CSV, hccl json and communication_statistic.  The PROF dir is written by the emulated Device
(2 devices, hccl on, 2 AllReduces per iteration, ops launched close enough for the HCCL tasks
to overlap compute tasks); no TensorFlow."""
from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_device_records import STEP_OPS, F
from test_device_records import T as TS
from test_device_records import config, make_chunk, make_iteration, run

from msprof_cli.export.api import run_export
from msprof_cli.export.outputs import comm_layer as CL
from msprof_cli.export.outputs import overlap_layer as OV
from msprof_cli.export.outputs import trace as TR

APP_PID = 4242
N_ITER = 3
AR = [("allreduce/CollectiveReduceV2", "CollectiveReduceV2", (TS((2704, 10), F),),
       (TS((2704, 10), F),), ()),
      ("allreduce_1/CollectiveReduceV2", "CollectiveReduceV2", (TS((3, 3, 1, 16), F),),
       (TS((3, 3, 1, 16), F),), ())]
OPS = STEP_OPS[:10] + AR[:1] + STEP_OPS[10:13] + AR[1:] + STEP_OPS[13:]
N_AR = 2
SPACING = 3_000  # ns between launches: compute tasks run while the HCCL tasks do


def ns(ts: str) -> int:
    whole, frac = ts.split(".")
    return int(whole) * 1000 + int(frac)


def dur_ns(d: float) -> int:
    return int(round(d * 1000))


@pytest.fixture(scope="module")
def prof(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("multidev")
    ch = make_chunk(N_ITER, ops=OPS, spacing=SPACING)
    # the graph's data edges: each op consumes the compute op before it, an all-reduce its
    # gradient, and nothing consumes the all-reduces here (their tasks overlap compute)
    names = [o[0] for o in OPS]
    compute = [n for n in names if "allreduce" not in n]
    ch.models[1].producers = {n: ((compute[compute.index(n) - 1],) if n in compute
                                  and compute.index(n) else
                                  (names[names.index(n) - 1],) if n not in compute else ())
                              for n in names}
    for it in ch.iterations:
        it.ops += make_iteration(1, it.index, it.start_ns, ops=OPS, device_id=1,
                                 spacing=SPACING).ops
    p = run(root, [ch], config(hccl=True, output=str(root)), device_ids=(0, 1))
    run_export(p, quiet=True)
    run_export(p, layout="mindstudio", quiet=True)
    return p


def _one(folder: Path, pattern: str) -> Path:
    [path] = sorted(folder.glob(pattern))
    return path


def _ms(prof: Path, name: str, ext: str) -> Path:
    return _one(prof / "mindstudio_profiler_output", f"{name}_[0-9]*.{ext}")


def _csv(path: Path) -> list[list[str]]:
    with open(path, newline="") as fh:
        return list(csv.reader(fh))


def _events(path: Path) -> list[dict]:
    return json.loads(path.read_text())


def _x(events: list[dict], pid: int, tid: int | None = None) -> list[dict]:
    return [e for e in events if e["ph"] == "X" and e["pid"] == pid
            and (tid is None or e["tid"] == tid)]


# --- Reduce events ------------------------------------------------------------------------

def _check_reduce(events: list[dict], dev: int, st_rows: list[list[str]], dev_col: bool) -> None:
    red = [e for e in events if e.get("cat") == "Reduce"
           and e["pid"] == TR.pid_of(APP_PID, TR.SORT_HARDWARE, dev)]
    assert len(red) == N_ITER * N_AR
    head, rows = st_rows[0], st_rows[1:]
    if dev_col:
        rows = [r for r in rows if r[0] == str(dev)]
        off = 1
    else:
        off = 0
    starts = [i for i, h in enumerate(head) if h == "Reduce Start(us)"]
    assert len(starts) == N_AR
    by_name = {e["name"]: e for e in red}
    for r in rows:
        it = int(r[off])
        for k, c in enumerate(starts):
            e = by_name[f"Reduce_{it}_{k}"]
            assert list(e) == ["name", "pid", "tid", "ts", "dur", "args", "cat", "ph"]
            assert e["tid"] == APP_PID + TR.STEP_TID_BASE
            assert list(e["args"]) == ["Iteration ID", f"Reduce Start {k}", f"Reduce End {k}"]
            assert e["args"]["Iteration ID"] == it
            # the CSV's Reduce Start / Duration of this iteration and AllReduce
            assert e["ts"] == r[c].rstrip("\t") == e["args"][f"Reduce Start {k}"]
            assert e["dur"] == float(r[c + 1])
            assert ns(e["args"][f"Reduce End {k}"]) - ns(e["ts"]) == dur_ns(e["dur"])


def test_reduce_events_mindstudio(prof: Path) -> None:
    st_rows = _csv(_ms(prof, "step_trace", "csv"))
    for name in ("msprof", "step_trace"):
        events = _events(_ms(prof, name, "json"))
        for dev in (0, 1):
            _check_reduce(events, dev, st_rows, dev_col=True)


def test_reduce_events_legacy(prof: Path) -> None:
    for dev in (0, 1):
        st_rows = _csv(_one(prof / f"device_{dev}" / "summary", "step_trace_*.csv"))
        for name in ("msprof", "step_trace"):
            events = _events(_one(prof / f"device_{dev}" / "timeline", f"{name}_{dev}_*.json"))
            _check_reduce(events, dev, st_rows, dev_col=False)


# --- Communication process --------------------------------------------------------------------

def _meta(events: list[dict], pid: int) -> list[tuple]:
    return [(e["name"], e["tid"], next(iter(e["args"].values())))
            for e in events if e["ph"] == "M" and e["pid"] == pid]


def test_communication_process(prof: Path) -> None:
    events = _events(_ms(prof, "msprof", "json"))
    for dev in (0, 1):
        pid = TR.pid_of(APP_PID, CL.SORT_COMMUNICATION, dev)
        assert pid == (APP_PID << 10) | (17 << 5) | dev
        assert _meta(events, pid) == [
            ("process_name", 0, "Communication"),
            ("thread_name", 0, "Group hccl_world_group Communication"),
            ("thread_sort_index", 0, 0),
            ("thread_name", 1, "Plane 0"), ("thread_sort_index", 1, 1),
            ("process_labels", 0, f"NPU {dev}"), ("process_sort_index", 0, 17)]
        # the collectives and their steps as the real analysis shows them (each step a
        # device task): op {name}_{group[-3:]}_{k}_1, steps on tid 1
        ops = _x(events, pid, 0)
        assert len(ops) == N_ITER * N_AR
        assert {e["name"].rsplit("_", 3)[0] for e in ops} == {a[0] for a in AR}
        assert [int(e["name"].rsplit("_", 2)[1]) for e in ops] == list(range(len(ops)))
        for e in ops:
            assert list(e) == ["name", "pid", "tid", "ts", "dur", "args", "ph"]
            assert e["args"]["rank_size"] == 2 and e["args"]["count"] == -1
        steps = _x(events, pid, 1)
        # ring all-reduce on 2 ranks: 1 Reduce_Inline + 1 Memcpy step per op execution
        assert len(steps) == 2 * len(ops)
        assert [e["name"] for e in steps] == ["Reduce_Inline", "Memcpy"] * len(ops)
        # the steps of each op tile the op's interval
        for op, (a, b) in zip(ops, zip(steps[0::2], steps[1::2])):
            assert a["args"]["src rank"] == b["args"]["src rank"] == dev
            assert ns(a["ts"]) == ns(op["ts"])
            assert ns(b["ts"]) + dur_ns(b["dur"]) == ns(op["ts"]) + dur_ns(op["dur"])
        # every op lies inside its step-trace Reduce pair (markers around the task)
        red = sorted((ns(e["ts"]), ns(e["ts"]) + dur_ns(e["dur"])) for e in events
                     if e.get("cat") == "Reduce"
                     and e["pid"] == TR.pid_of(APP_PID, TR.SORT_HARDWARE, dev))
        for op, (rs, re_) in zip(ops, red):
            assert rs <= ns(op["ts"]) and ns(op["ts"]) + dur_ns(op["dur"]) <= re_


def test_legacy_hccl_json_matches_communication_planes(prof: Path) -> None:
    for dev in (0, 1):
        tl = prof / f"device_{dev}" / "timeline"
        hccl = [e for e in _events(_one(tl, "hccl_*.json")) if e["ph"] == "X"]
        msprof = _events(_one(tl, f"msprof_{dev}_*.json"))
        planes = _x(msprof, TR.pid_of(APP_PID, CL.SORT_COMMUNICATION, dev), 1)
        assert len(hccl) == len(planes) == 2 * N_ITER * N_AR
        for h, p in zip(hccl, planes):
            assert (h["name"], h["args"], h["dur"]) == (p["name"], p["args"], p["dur"])
            assert abs(h["ts"] * 1000 - ns(p["ts"])) < 500  # numeric ts: a float64 µs
            assert h["tid"] + 1 == p["tid"]  # msprof json: the plane lanes after the group's


def test_communication_statistic(prof: Path) -> None:
    rows = _csv(_ms(prof, "communication_statistic", "csv"))
    assert rows[0] == ["Device_id", "OP Type", "Count", "Total Time(us)", "Min Time(us)",
                       "Avg Time(us)", "Max Time(us)", "Ratio(%)"]
    assert [(r[0], r[1], r[2], r[7]) for r in rows[1:]] == [
        ("0", "HcomAllReduce", str(N_ITER * N_AR), "100.0"),
        ("1", "HcomAllReduce", str(N_ITER * N_AR), "100.0")]


def test_reports_switch_communication(prof: Path, tmp_path: Path) -> None:
    p = tmp_path / "p"
    shutil.copytree(prof, p)
    shutil.rmtree(p / "mindstudio_profiler_output")
    rep = tmp_path / "reports.json"
    rep.write_text(json.dumps({"json_process": {"communication": False}}))
    run_export(p, layout="mindstudio", reports=rep, quiet=True)
    events = _events(_ms(p, "msprof", "json"))
    pids = {e["pid"] for e in events}
    assert TR.pid_of(APP_PID, CL.SORT_COMMUNICATION, 0) not in pids
    assert TR.pid_of(APP_PID, OV.overlap_sorts([0, 1])[0], 0) in pids  # overlap keeps its Communication


# --- Overlap Analysis -------------------------------------------------------------------------

def _intervals(events: list[dict], pid: int, tid: int) -> list[tuple[int, int]]:
    return sorted((ns(e["ts"]), ns(e["ts"]) + dur_ns(e["dur"])) for e in _x(events, pid, tid))


def _union(iv: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for a, b in sorted(iv):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [tuple(x) for x in out]


def _length(iv: list[tuple[int, int]]) -> int:
    return sum(b - a for a, b in iv)


def _disjoint(iv: list[tuple[int, int]]) -> bool:
    iv = sorted(x for x in iv if x[1] > x[0])  # zero-length intervals cover nothing
    return all(iv[i][1] <= iv[i + 1][0] for i in range(len(iv) - 1))


def _inside(iv: list[tuple[int, int]], cover: list[tuple[int, int]]) -> bool:
    return _length(_union(iv + cover)) == _length(_union(cover))


def test_overlap_analysis_invariants(prof: Path) -> None:
    events = _events(_ms(prof, "msprof", "json"))
    ops = _csv(_ms(prof, "op_summary", "csv"))
    head = ops[0]
    i_start, i_dur = head.index("Task Start Time(us)"), head.index("Task Duration(us)")
    for dev in (0, 1):
        pid = TR.pid_of(APP_PID, OV.overlap_sorts([0, 1])[dev], dev)  # 21, 20: reverse dir order
        comp, comm, no, free = (_intervals(events, pid, t) for t in range(4))
        # Computing = the op rows of tasks (not the collectives' COMMUNICATION rows)
        i_type = head.index("Task Type")
        starts = [(ns(r[i_start].rstrip("\t")), r[i_dur]) for r in ops[1:]
                  if r[0] == str(dev) and r[i_type] != "COMMUNICATION"]
        tasks = [(a, a + dur_ns(float(d))) for a, d in starts]
        assert comp == _union(tasks)
        hccl_ops = [(ns(e["ts"]), ns(e["ts"]) + dur_ns(e["dur"]))
                    for e in _x(events, TR.pid_of(APP_PID, CL.SORT_COMMUNICATION, dev), 0)]
        assert comm == _union(hccl_ops) and len(comm) == N_ITER * N_AR
        # Computing, Not Overlapped and Free are disjoint and cover the compute range
        assert _disjoint(comp + no + free)
        lo, hi = min(a for a, _ in tasks), max(b for _, b in tasks)
        cover = _union(comp + no + free)
        assert _inside([(lo, hi)], cover) and cover[0][0] == lo
        assert all(lo <= a and b <= hi for a, b in free)
        # Not Overlapped = Communication minus Computing
        assert _inside(no, comm)
        assert _length(no) == _length(_union(comm + comp)) - _length(comp)
        # Free = the range minus computing minus communication
        assert _length(free) == (hi - lo) - _length(_union([(max(a, lo), min(b, hi))
                                                            for a, b in comm + comp]))
        # the data really has both overlapped and exposed communication
        assert 0 < _length(no) < _length(comm)


def test_overlap_legacy_equals_mindstudio_per_device(prof: Path) -> None:
    ms = _events(_ms(prof, "msprof", "json"))
    for dev in (0, 1):
        leg = _events(_one(prof / f"device_{dev}" / "timeline", f"msprof_{dev}_*.json"))
        pid = TR.pid_of(APP_PID, OV.overlap_sorts([0, 1])[dev], dev)
        assert _x(leg, pid) == _x(ms, pid)


# --- overlap_layer on random intervals ---------------------------------------------------------

class _Dev:
    device_id = 0


def _layer_intervals(rows: pd.DataFrame, comm: CL.CommData | None
                     ) -> dict[int, list[tuple[int, int]]]:
    lay = OV.overlap_layer(_Dev(), rows, APP_PID, comm)  # type: ignore[arg-type]
    out: dict[int, list[tuple[int, int]]] = {0: [], 1: [], 2: [], 3: []}
    for s in lay.take(np.arange(len(lay))):
        e = json.loads(s)
        out[e["tid"]].append((ns(e["ts"]), ns(e["ts"]) + dur_ns(e["dur"])))
    return {k: sorted(v) for k, v in out.items()}


iv_list = st.lists(st.tuples(st.integers(0, 200), st.integers(0, 40)), max_size=12)


@settings(max_examples=200, deadline=None)
@given(tasks=iv_list.filter(len), comm=iv_list)
def test_overlap_layer_invariants_random(tasks, comm) -> None:
    base = 1_700_000_000_000_000_000
    t = [(base + a * 10, base + (a + d) * 10) for a, d in tasks]
    c = [(base + a * 10, base + (a + d) * 10) for a, d in comm]
    rows = pd.DataFrame({"start_local": [a for a, _ in t], "end_local": [b for _, b in t]},
                        dtype=np.int64)
    ops = pd.DataFrame({"start_local": [a for a, _ in c], "end_local": [b for _, b in c]},
                       dtype=np.int64)
    got = _layer_intervals(rows, CL.CommData(ops, pd.DataFrame(), np.zeros(0, object)))
    comp, cm, no, free = got[0], got[1], got[2], got[3]
    assert comp == _union(t)
    assert cm == _union(c)
    lo, hi = min(a for a, _ in t), max(b for _, b in t)
    assert _disjoint(comp + no + free)
    cover = _union(comp + no + free)
    assert _inside([(lo, hi)], cover)
    assert _inside(no, cm) and _length(no) == _length(_union(c + t)) - _length(_union(t))
    assert all(b > a for a, b in no + free)
    assert _length(free) == (hi - lo) - _length(_union(
        [(max(a, lo), min(b, hi)) for a, b in c + t if min(b, hi) > max(a, lo)]))
    # without communication: Free = the gaps between computing (single-device output)
    if not c:
        assert free == [(a[1], b[0]) for a, b in zip(comp, comp[1:])]


def test_db_overlap_analysis_has_the_communication_rows_of_the_json(prof: Path) -> None:
    import sqlite3

    run_export(prof, type_="db", quiet=True)
    [dbp] = list(prof.glob("msprof_*.db"))
    events = json.loads(next((prof / "mindstudio_profiler_output").glob("msprof_*.json"))
                        .read_text())
    pids = {e["pid"]: e["args"]["labels"] for e in events
            if e.get("name") == "process_labels"}
    ov = {e["pid"] for e in events if e.get("name") == "process_name"
          and e["args"]["name"] == "Overlap Analysis"}
    want: dict[tuple[int, str], int] = {}
    for e in events:
        if e["ph"] == "X" and e["pid"] in ov:
            dev = int(pids[e["pid"]].split()[1])
            want[(dev, e["name"])] = want.get((dev, e["name"]), 0) + 1
    names = {"COMPUTE": "Computing", "COMMUNICATION": "Communication",
             "COMM_NOT_OVERLAP_COMP": "Communication(Not Overlapped)", "FREE": "Free"}
    with sqlite3.connect(dbp) as con:
        got = {(d, names[n]): c for d, n, c in con.execute(
            "SELECT o.deviceId, e.name, COUNT(*) FROM OVERLAP_ANALYSIS o JOIN "
            "ENUM_OVERLAP_ANALYSIS_TYPE e ON e.id = o.type GROUP BY o.deviceId, e.name")}
    assert got == want
    assert any(name == "Communication(Not Overlapped)" for _, name in got)
