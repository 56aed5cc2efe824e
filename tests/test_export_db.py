"""`msprof export --type db`: PROF_X/msprof_{ts}.db (docs/formats/export-files.md 7,
docs/database.md)."""
from __future__ import annotations

import csv
import json
import re
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from msprof_cli.export.api import run_export
from msprof_cli.export.decode.dataset import load_prof
from msprof_cli.export.layouts.db import export_db
from msprof_cli.export.layouts.mindstudio import export_mindstudio
from msprof_cli.export.outputs import db_tables as DB
from msprof_cli.export.plan import one_window
from tests.export_fixtures import copy_golden
from tests.rich_prof import MARKERS, build_prof, marker_spans

DB_RE = re.compile(r"^msprof_\d{14}\.db$")
TOP5_SQL = """
SELECT op.value AS op_type, tt.value AS task_type, COUNT(*) AS count,
       SUM(t.endNs - t.startNs) / 1000.0 AS total_us
FROM COMPUTE_TASK_INFO c
JOIN TASK t ON t.globalTaskId = c.globalTaskId
JOIN STRING_IDS op ON op.id = c.opType
JOIN STRING_IDS tt ON tt.id = c.taskType
GROUP BY c.opType, c.taskType
ORDER BY total_us DESC, op_type ASC
LIMIT 5
"""


def _rows(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(path.open(encoding="utf-8")))


def _one(directory: Path, stem: str, ext: str = "csv") -> Path:
    [p] = [p for p in directory.iterdir() if re.match(rf"^{stem}_\d{{14}}\.{ext}$", p.name)]
    return p


@pytest.fixture(scope="module")
def rich(tmp_path_factory) -> tuple[Path, Path, Path]:
    """(prof, db path, mindstudio dir) of one rich PROF dir exported both ways."""
    prof = build_prof(tmp_path_factory.mktemp("rich"))
    [dbp] = run_export(prof, type_="db", quiet=True).files
    run_export(prof, layout="mindstudio", quiet=True)
    return prof, dbp, prof / "mindstudio_profiler_output"


def _q(dbp: Path, sql: str, *args) -> list[tuple]:
    with sqlite3.connect(dbp) as conn:
        return conn.execute(sql, args).fetchall()


def test_golden_db_counts(tmp_path: Path) -> None:
    prof = copy_golden(tmp_path)
    result = run_export(prof, type_="db", quiet=True)
    [dbp] = result.files
    assert dbp.parent == prof and DB_RE.match(dbp.name)
    # --type db writes only the db (the real tool's behaviour)
    assert not (prof / "mindstudio_profiler_output").exists()
    assert not list(prof.glob("device_*/summary")) and not list(prof.glob(".*tmp*"))
    assert _q(dbp, "SELECT COUNT(*) FROM TASK") == [(18,)]
    assert _q(dbp, "SELECT COUNT(*) FROM COMPUTE_TASK_INFO") == [(18,)]
    assert _q(dbp, "SELECT COUNT(*) FROM CANN_API") == [(21,)]
    assert _q(dbp, "SELECT COUNT(*) FROM STEP_TIME") == [(3,)]
    # the verified golden row: Conv2D_1, stream 2 task 1, 120 µs, local ns
    assert _q(dbp, """SELECT s.value, t.streamId, t.taskId, t.startNs, t.endNs, t.modelId
                      FROM TASK t JOIN COMPUTE_TASK_INFO c USING (globalTaskId)
                      JOIN STRING_IDS s ON s.id = c.name ORDER BY t.startNs LIMIT 1""") == [
        ("Conv2D_1", 2, 1, 1700000000001031000, 1700000000001151000, 1)]


def test_schema_tables_columns_and_index(rich) -> None:
    _, dbp, _ = rich
    with sqlite3.connect(dbp) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        for table, cols in DB.SCHEMA.items():
            if table == "COMMUNICATION_OP":  # HCCL data only
                assert table not in tables
                continue
            assert table in tables, table
            info = conn.execute(f"PRAGMA table_info({table})").fetchall()
            assert [(r[1], r[2]) for r in info] == [(c, t.split()[0]) for c, t in cols], table
        for table in DB.ENUMS:
            assert table in tables
        idx = conn.execute("PRAGMA index_info(TaskIndex)").fetchall()
        assert [r[2] for r in idx] == ["startNs", "globalTaskId"]
        meta = dict(conn.execute("SELECT name, value FROM META_DATA"))
        assert meta == {"SCHEMA_VERSION": "1.2.0", "SCHEMA_VERSION_MAJOR": "1",
                        "SCHEMA_VERSION_MINOR": "2", "SCHEMA_VERSION_MICRO": "0"}
        api = dict(conn.execute("SELECT id, name FROM ENUM_API_TYPE"))
        assert api == {20000: "acl", 15000: "model", 10000: "node", 5500: "communication",
                       5000: "runtime", 50001: "op", 50002: "queue", 50003: "trace",
                       50004: "mstx"}
        assert conn.execute("SELECT * FROM NPU_INFO").fetchall() == [(0, "Ascend910")]
        assert conn.execute("SELECT * FROM RANK_DEVICE_MAP").fetchall() == [(-1, 0)]
        assert conn.execute("SELECT COUNT(*) FROM HOST_INFO").fetchone() == (1,)
        # every text id used anywhere resolves through STRING_IDS
        ids = {r[0] for r in conn.execute("SELECT id FROM STRING_IDS")}
        for col in ("name", "taskType", "opType", "inputShapes", "opState", "hf32Eligible",
                    "attrInfo"):
            used = {r[0] for r in conn.execute(f"SELECT DISTINCT {col} FROM COMPUTE_TASK_INFO")}
            assert used <= ids, col
        assert {r[0] for r in conn.execute("SELECT DISTINCT taskType FROM TASK")} <= ids
        assert {r[0] for r in conn.execute("SELECT DISTINCT name FROM CANN_API")} <= ids
        values = [r[0] for r in conn.execute("SELECT value FROM STRING_IDS")]
        assert len(values) == len(set(values)), "strings must be interned once"


def test_counts_and_durations_match_csv_and_json(rich) -> None:
    _, dbp, out = rich
    summary = _rows(_one(out, "op_summary"))
    task_time = _rows(_one(out, "task_time"))
    assert _q(dbp, "SELECT COUNT(*) FROM TASK") == [(len(task_time),)]
    assert _q(dbp, "SELECT COUNT(*) FROM COMPUTE_TASK_INFO") == [(len(summary),)]
    assert len(summary) > 50
    # same total duration (integer ns in the db, µs with 3 decimals in the CSV)
    [(db_ns,)] = _q(dbp, "SELECT SUM(t.endNs - t.startNs) FROM TASK t "
                         "JOIN COMPUTE_TASK_INFO c USING (globalTaskId)")
    csv_ns = sum(round(float(r["Task Duration(us)"]) * 1000) for r in summary)
    assert db_ns == csv_ns
    # and the same tasks: (stream, task, start) of every op_summary row
    db_keys = _q(dbp, "SELECT streamId, taskId, startNs FROM TASK t "
                      "JOIN COMPUTE_TASK_INFO c USING (globalTaskId) ORDER BY startNs")
    csv_keys = [(int(r["Stream ID"]), int(r["Task ID"]),
                 int(r["Task Start Time(us)"].strip().replace(".", ""))) for r in summary]
    assert db_keys == csv_keys
    # the msprof JSON: one Ascend Hardware X event per TASK row, same total duration
    events = json.loads(_one(out, "msprof", "json").read_text())
    hw_pid = {e["pid"] for e in events if e.get("name") == "process_name"
              and e["args"]["name"] == "Ascend Hardware"}
    hw = [e for e in events if e["ph"] == "X" and e["pid"] in hw_pid and e.get("cat") is None]
    assert len(hw) == len(task_time)
    [(all_ns,)] = _q(dbp, "SELECT SUM(endNs - startNs) FROM TASK")
    assert round(sum(e["dur"] for e in hw) * 1000) == all_ns
    # task types: runtime names in TASK, GE types in COMPUTE_TASK_INFO
    kinds = dict(_q(dbp, "SELECT s.value, COUNT(*) FROM TASK t JOIN STRING_IDS s "
                         "ON s.id = t.taskType GROUP BY s.value"))
    # (+ the per-step input copies: TASK rows, never COMPUTE_TASK_INFO rows)
    assert set(kinds) == {"KERNEL_AICORE", "KERNEL_AICPU", "MEMCPY_ASYNC"}
    ge = {r["Task Type"] for r in summary}
    assert {v for (v,) in _q(dbp, "SELECT DISTINCT s.value FROM COMPUTE_TASK_INFO c "
                                  "JOIN STRING_IDS s ON s.id = c.taskType")} == ge


def test_top5_op_types_one_query_matches_op_statistic(rich) -> None:
    _, dbp, out = rich
    top = _q(dbp, TOP5_SQL)
    stat = _rows(_one(out, "op_statistic"))
    expected = sorted(((r["OP Type"], r["Core Type"], int(r["Count"]),
                        float(r["Total Time(us)"])) for r in stat),
                      key=lambda r: (-r[3], r[0]))[:5]
    assert len(top) == 5
    assert [(a, b, c, round(d, 3)) for a, b, c, d in top] == expected
    assert [r["OP Type"] for r in stat[:5]] == [r[0] for r in top]


def test_pmu_values_match_op_summary(rich) -> None:
    _, dbp, out = rich
    summary = _rows(_one(out, "op_summary"))
    pmu = _q(dbp, """SELECT p.globalTaskId, s.value, p.value FROM TASK_PMU_INFO p
                     JOIN STRING_IDS s ON s.id = p.name""")
    by_task: dict[int, dict[str, float]] = {}
    for gid, name, value in pmu:
        by_task.setdefault(gid, {})[name] = value
    order = [g for (g,) in _q(dbp, "SELECT globalTaskId FROM TASK t JOIN COMPUTE_TASK_INFO c "
                                   "USING (globalTaskId) ORDER BY startNs")]
    checked = 0
    for gid, row in zip(order, summary):
        if row["aicore_time(us)"] == "N/A":
            assert gid not in by_task  # AI CPU rows have no PMU
            continue
        m = by_task[gid]
        assert m["aic_total_time"] == pytest.approx(float(row["aicore_time(us)"]) * 1000)
        assert m["aic_total_cycles"] == int(row["total_cycles"])
        assert m["aic_mac_ratio"] == pytest.approx(float(row["mac_ratio"]))
        assert m["aic_mte2_time"] == pytest.approx(float(row["mte2_time(us)"]) * 1000)
        assert m["aic_cube_utilization"] == pytest.approx(float(row["cube_utilization(%)"]))
        checked += 1
    assert checked > 40


def test_cann_api_step_time_and_mstx(rich) -> None:
    prof, dbp, out = rich
    api = _rows(_one(out, "api_statistic"))
    db_counts = dict(_q(dbp, "SELECT s.value, COUNT(*) FROM CANN_API a JOIN STRING_IDS s "
                             "ON s.id = a.name GROUP BY s.value"))
    assert db_counts == {r["API Name"]: int(r["Count"]) for r in api}
    levels = {lvl for (lvl,) in _q(dbp, "SELECT DISTINCT e.name FROM CANN_API a "
                                        "JOIN ENUM_API_TYPE e ON e.id = a.type")}
    assert levels == {r["Level"] for r in api}
    # globalTid = pid << 32 | tid; launches share connection ids with TASK
    [(gtid,)] = _q(dbp, "SELECT DISTINCT globalTid >> 32 FROM CANN_API")
    assert gtid == 4242
    joined = _q(dbp, "SELECT COUNT(*) FROM TASK t JOIN CANN_API a USING (connectionId)")
    # input/output copies are issued by GE's InputCopy/OutputCopy, not by a node launch
    assert joined == _q(dbp, "SELECT COUNT(*) FROM TASK t JOIN STRING_IDS s ON s.id = "
                             "t.taskType WHERE s.value != 'MEMCPY_ASYNC'")
    steps = _rows(_one(out, "step_trace"))
    st = _q(dbp, "SELECT id, modelId, endNs FROM STEP_TIME ORDER BY endNs")
    assert [(int(r["Iteration ID"]), int(r["Model ID"])) for r in steps] == \
        [(i, m) for i, m, _ in st]
    assert {m for _, m, _ in st} == {1, 2}
    [(start, end)] = _q(dbp, "SELECT * FROM SESSION_TIME_INFO")
    # the end of the collection on the emulated clock: the CPU's op time is not in it
    assert start == 1_700_000_000_000_000_000 and start < end < start + 10_000_000_000
    assert end >= max(e for _, _, e in st)
    tx = _q(dbp, """SELECT s.value, m.eventType, m.endNs - m.startNs FROM MSTX_EVENTS m
                    JOIN STRING_IDS s ON s.id = m.message ORDER BY m.startNs""")
    spans = marker_spans(prof)
    assert tx == [(msg, 2 if b > a else 0, e - s) for (msg, a, b), (s, e) in zip(MARKERS, spans)]


def test_overlap_analysis_equals_json(rich) -> None:
    _, dbp, out = rich
    events = json.loads(_one(out, "msprof", "json").read_text())
    ov_pid = {e["pid"] for e in events if e.get("name") == "process_name"
              and e["args"]["name"] == "Overlap Analysis"}
    comp = sum(1 for e in events if e["ph"] == "X" and e["pid"] in ov_pid
               and e["name"] == "Computing")
    free = sum(1 for e in events if e["ph"] == "X" and e["pid"] in ov_pid
               and e["name"] == "Free")
    counts = dict(_q(dbp, "SELECT e.name, COUNT(*) FROM OVERLAP_ANALYSIS o "
                          "JOIN ENUM_OVERLAP_ANALYSIS_TYPE e ON e.id = o.type GROUP BY e.name"))
    assert counts == {"COMPUTE": comp, "FREE": free}


def test_communication_op_when_hccl_tasks_exist(tmp_path: Path) -> None:
    prof = build_prof(tmp_path, n_iter=2, markers=False)
    data = load_prof(prof)
    tasks = data.devices[0].tasks
    mm = (tasks["op_type"] == "MatMulV2").to_numpy()
    tasks.loc[mm, "task_type"] = "HCCL"
    tasks.loc[mm, "op_type"] = "HcomAllReduce"
    [dbp] = export_db(one_window(data))
    rows = _q(dbp, """SELECT s.value, c.endNs - c.startNs, c.deviceId FROM COMMUNICATION_OP c
                      JOIN STRING_IDS s ON s.id = c.opType""")
    assert len(rows) == int(mm.sum()) == 6
    assert {r[0] for r in rows} == {"HcomAllReduce"}
    assert not _q(dbp, "SELECT name FROM sqlite_master WHERE name = 'MSTX_EVENTS'")
    files = export_mindstudio(one_window(data))
    [cs] = [f for f in files if f.name.startswith("communication_statistic_")]
    stat = _rows(cs)
    assert [(r["Device_id"], r["OP Type"], r["Count"], r["Ratio(%)"]) for r in stat] == [
        ("0", "HcomAllReduce", "6", "100.0")]
    total = float(stat[0]["Total Time(us)"])
    assert total == pytest.approx(sum(r[1] for r in rows) / 1000)
    readme = (prof / "mindstudio_profiler_output" / "README.txt").read_text()
    assert ".communication_statistic.csv:" in readme


def test_db_options_ignored_and_atomic(tmp_path: Path, monkeypatch) -> None:
    prof = build_prof(tmp_path, n_iter=2, markers=False)
    # selection options are ignored with --type db (no model/iteration error)
    [dbp] = run_export(prof, type_="db", model_id=9, quiet=True).files
    assert dbp.is_file()
    dbp.unlink()

    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(DB, "insert_rows", boom)
    with pytest.raises(RuntimeError):
        run_export(prof, type_="db", quiet=True)
    assert not [p for p in prof.iterdir() if p.suffix == ".db" or ".db.tmp" in p.name]


def test_string_ids_intern_vectorised() -> None:
    s = DB.StringIds()
    a = s.column(np.array(["x", "y", "x", None], dtype=object))
    b = s.column(["y", "z"])
    assert a.tolist() == [0, 1, 0, 2] and b.tolist() == [1, 3]
    assert s.rows() == [(0, "x"), (1, "y"), (2, "N/A"), (3, "z")]


def test_communication_from_hccl_info_two_devices(tmp_path: Path) -> None:
    from msprof_cli.capture import CaptureChunk, ModelInfo
    from tests.test_device_records import STEP_OPS, T0, F, T, config, make_iteration, run

    ops = STEP_OPS[:4] + [("allreduce/CollectiveReduceV2", "CollectiveReduceV2",
                           (T((2704, 10), F),), (T((2704, 10), F),), ())]
    its, t = [], T0
    for i in range(3):
        it = make_iteration(1, i + 1, t, ops=ops)
        it.ops.extend(make_iteration(1, i + 1, t, ops=ops, device_id=1).ops)
        its.append(it)
        t = it.end_ns + 50_000
    chunk = CaptureChunk(models={1: ModelInfo(1, "m", "k", op_order={o[0]: i for i, o
                                                                     in enumerate(ops)})},
                         iterations=its)
    prof = run(tmp_path, [chunk], config(hccl=True), device_ids=(0, 1))
    data = load_prof(prof)
    if len(data.host.tables.hccl) == 0:
        pytest.skip("the emulated device wrote no hccl_info")
    [dbp] = export_db(one_window(data))
    rows = _q(dbp, """SELECT s.value, o.value, c.deviceId, c.endNs > c.startNs
                      FROM COMMUNICATION_OP c JOIN STRING_IDS s ON s.id = c.opName
                      JOIN STRING_IDS o ON o.id = c.opType ORDER BY c.deviceId, c.startNs""")
    # the collectives named as the real analysis names them (each step a device task):
    # {op}_{group[-3:]}_{k}_1, k counting per device
    assert rows == [(f"allreduce/CollectiveReduceV2_107_{k}_1", "HcomAllReduce", d, 1)
                    for d in (0, 1) for k in range(3)]
    files = export_mindstudio(one_window(data))
    [cs] = [f for f in files if f.name.startswith("communication_statistic_")]
    assert [(r["Device_id"], r["OP Type"], r["Count"]) for r in _rows(cs)] == [
        ("0", "HcomAllReduce", "3"), ("1", "HcomAllReduce", "3")]


def test_db_is_0640_and_a_sqlite_failure_is_a_clean_export_error(tmp_path, monkeypatch):
    import sqlite3
    import stat

    from msprof_cli.errors import ExportError
    from msprof_cli.export.outputs import db_tables as dbmod

    prof = copy_golden(tmp_path)
    run_export(prof, type_="db", quiet=True)
    [db] = prof.glob("msprof_*.db")
    assert stat.S_IMODE(db.stat().st_mode) == 0o640
    db.unlink()

    def full(*args, **kwargs):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(dbmod, "insert_rows", full)
    with pytest.raises(ExportError, match="disk is full"):
        run_export(prof, type_="db", quiet=True)
    assert not list(prof.glob("msprof_*.db")) and not list(prof.glob(".msprof_*"))


def _db_content(dbp: Path) -> list:
    with sqlite3.connect(dbp) as conn:
        names = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table' ORDER BY rowid")]
        return [(t, conn.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall())
                for t in names]


def test_parallel_pmu_side_files_equal_the_serial_db(tmp_path, monkeypatch) -> None:
    """TASK_PMU_INFO bound by forked workers into side files and merged in order, the PMU
    metrics formatted in chunks, the inserts in chunks: the same tables (rows, order,
    string ids) as a serial export in one chunk, on two devices with HCCL data."""
    import shutil
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import gen_prof

    src = gen_prof.generate(3000, tmp_path / "src", devices=2, batch_tasks=700, quiet=True)
    dbs = []
    for name, workers, small in (("serial", "1", False), ("parallel", "2", True)):
        prof = tmp_path / name / src.name
        shutil.copytree(src, prof)
        monkeypatch.setenv("MSPROF_EXPORT_WORKERS", workers)
        if small:
            monkeypatch.setattr(DB, "PMU_SIDE_MIN_ROWS", 0)
            monkeypatch.setattr(DB, "PMU_ROWS", 333)
            monkeypatch.setattr(DB, "INSERT_ROWS", 1000)
        run_export(prof, type_="db", quiet=True)
        [dbp] = prof.glob("msprof_*.db")
        assert not [p for p in prof.iterdir() if ".tmp" in p.name]
        dbs.append(_db_content(dbp))
    serial, parallel = dbs
    assert dict(serial)["TASK_PMU_INFO"] and dict(serial)["COMMUNICATION_OP"]
    assert parallel == serial


def test_a_failing_pmu_side_file_leaves_nothing(tmp_path, monkeypatch) -> None:
    prof = copy_golden(tmp_path)
    monkeypatch.setenv("MSPROF_EXPORT_WORKERS", "2")
    monkeypatch.setattr(DB, "PMU_SIDE_MIN_ROWS", 0)

    def boom(side, cols):
        side.write_bytes(b"partial")
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(DB, "pmu_side_file", boom)
    with pytest.raises(Exception, match="disk .or quota. is full|No space"):
        run_export(prof, type_="db", quiet=True)
    assert not list(prof.glob("msprof_*.db"))
    assert not [p for p in prof.iterdir() if ".tmp" in p.name]
