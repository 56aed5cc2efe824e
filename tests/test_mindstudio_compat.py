"""Consumer compatibility of the mindstudio layout (reference README decision 8, one test per
requirement) and its completeness (docs/formats/export-files.md 2): msprof_tx, README entries,
slicing,
--summary-format json, folders holding several PROF dirs."""
from __future__ import annotations

import csv
import json
import re
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from msprof_cli.export.api import run_export
from msprof_cli.query import query_rows
from msprof_cli.raw.control import read_json_line
from msprof_cli.raw.profdir import PROF_RE, prof_dir_name
from tests.export_fixtures import copy_golden
from tests.rich_prof import MARKERS, build_prof, marker_spans

OUT = "mindstudio_profiler_output"
CONSUMER_RES = {
    "op_summary": re.compile(r"^op_summary_\d{14}\.csv$"),
    "msprof": re.compile(r"^msprof_\d{14}\.json$"),
    "op_statistic": re.compile(r"^op_statistic_\d{14}\.csv$"),
}
DB_RE = re.compile(r"^msprof_\d{1,20}\.db$")
REQUIRED = ["Task Duration(us)", "Op Name", "OP Type", "Task Type", "Task ID", "OP State",
            "Block Dim", "Input Shapes", "Input Data Types", "Input Formats", "Output Shapes",
            "Output Data Types", "Output Formats", "Task Start Time(us)", "Task Wait Time(us)"]


def _one(directory: Path, stem: str, ext: str = "csv") -> Path:
    hits = [p for p in directory.iterdir() if re.match(rf"^{stem}_\d{{14}}\.{ext}$", p.name)]
    assert len(hits) == 1, (stem, ext, sorted(p.name for p in directory.iterdir()))
    return hits[0]


def _rows(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(path.open(encoding="utf-8")))


def _events(out: Path) -> list[dict]:
    return json.loads(_one(out, "msprof", "json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module", params=["golden", "rich"])
def exported(request, tmp_path_factory) -> Path:
    """A PROF dir exported in the mindstudio layout and as a db."""
    root = tmp_path_factory.mktemp(request.param)
    prof = copy_golden(root) if request.param == "golden" else build_prof(root)
    run_export(prof, layout="mindstudio", quiet=True)
    run_export(prof, type_="db", quiet=True)
    return prof


# --- decision 8, one requirement per test ---------------------------------------------------

def test_prof_dir_name(exported: Path) -> None:
    assert PROF_RE.match(exported.name)
    assert PROF_RE.match(prof_dir_name(3))  # what `msprof collect` creates


def test_file_names(exported: Path) -> None:
    names = [p.name for p in (exported / OUT).iterdir()]
    for stem, rx in CONSUMER_RES.items():
        assert sum(bool(rx.match(n)) for n in names) == 1, stem
    # no _{dev}_{model} infix anywhere; db in the PROF root, none in the output dir
    assert all(re.match(r"^[a-z_]+_\d{14}\.(csv|json)$", n) or n == "README.txt" for n in names)
    dbs = [p.name for p in exported.iterdir() if p.suffix == ".db"]
    assert len(dbs) == 1 and DB_RE.match(dbs[0]) and re.match(r"^msprof_\d{14}\.db$", dbs[0])
    assert not [n for n in names if n.endswith(".db")]


def test_msprof_json_is_a_nonempty_array(exported: Path) -> None:
    text = _one(exported / OUT, "msprof", "json").read_text(encoding="utf-8")
    assert text.startswith("[")
    events = json.loads(text)
    assert isinstance(events, list)
    data = [e for e in events if e["ph"] != "M"]
    assert data
    for e in data:
        float(e["ts"])
        if "dur" in e:
            float(e["dur"])


def test_op_summary_has_rows_and_required_columns(exported: Path) -> None:
    path = _one(exported / OUT, "op_summary")
    header = path.read_text(encoding="utf-8").splitlines()[0].split(",")
    assert header[0] == "Device_id"
    for col in REQUIRED:
        assert col in header, col
    assert _rows(path)


def test_op_state_static(exported: Path) -> None:
    rows = _rows(_one(exported / OUT, "op_summary"))
    assert any(r["OP State"] == "static" for r in rows)
    assert {r["OP State"] for r in rows} <= {"static", "dynamic", "N/A"}


def test_block_dim_not_block_num(exported: Path) -> None:
    head = _one(exported / OUT, "op_summary").read_text(encoding="utf-8").splitlines()[0]
    assert "Block Dim" in head.split(",") and "Block Num" not in head


def test_shapes_wrapped_in_literal_quotes(exported: Path) -> None:
    rows = _rows(_one(exported / OUT, "op_summary"))
    shapes = [r[c] for r in rows for c in ("Input Shapes", "Output Shapes") if r[c] != "N/A"]
    assert shapes and all(s.startswith('"') and s.endswith('"') for s in shapes)


def test_info_json_fields(exported: Path) -> None:
    for dev in exported.glob("device_*"):
        n = dev.name.split("_")[1]
        info = read_json_line(dev / f"info.json.{n}")
        d = info["DeviceInfo"][0]
        for key in ("ai_core_num", "aiv_num", "aic_frequency", "id"):
            assert key in d, key
        assert int(d["ai_core_num"]) == 32 and str(d["id"]) == n
        assert "rank_id" in info and "hostUid" in info


def test_overlap_analysis_process(exported: Path) -> None:
    events = _events(exported / OUT)
    pids = {e["pid"] for e in events if e["name"] == "process_name"
            and e["args"]["name"] == "Overlap Analysis"}
    assert len(pids) == 1
    threads = {e["tid"]: e["args"]["name"] for e in events
               if e["name"] == "thread_name" and e["pid"] in pids}
    assert threads == {0: "Computing", 1: "Communication", 2: "Communication(Not Overlapped)",
                       3: "Free"}
    xs = Counter((e["name"], e["tid"]) for e in events if e["ph"] == "X" and e["pid"] in pids)
    assert xs[("Computing", 0)] >= 1 and xs[("Free", 3)] >= 1


def test_ascend_hardware_process_name(exported: Path) -> None:
    events = _events(exported / OUT)
    assert any(e["name"] == "process_name" and e["args"]["name"] == "Ascend Hardware"
               for e in events)


def test_op_statistic_counts_equal_op_summary(exported: Path) -> None:
    summary = Counter((r["OP Type"], r["Task Type"])
                      for r in _rows(_one(exported / OUT, "op_summary")))
    stat = {(r["OP Type"], r["Core Type"]): int(r["Count"])
            for r in _rows(_one(exported / OUT, "op_statistic"))}
    assert stat == dict(summary)


def test_db_counts_equal_op_summary(exported: Path) -> None:
    # the op rows of tasks: a collective's COMMUNICATION row (the real
    # analysis's op_summary) is no task -- it is in COMMUNICATION_OP
    n = sum(r["Task Type"] != "COMMUNICATION"
            for r in _rows(_one(exported / OUT, "op_summary")))
    [dbp] = [p for p in exported.iterdir() if p.suffix == ".db"]
    with sqlite3.connect(dbp) as conn:
        assert conn.execute("SELECT COUNT(*) FROM COMPUTE_TASK_INFO").fetchone() == (n,)
        # no extra tasks but the memcpy copies (mindstudio task_time "MemcopyAsync") and the
        # collectives' steps (task_time rows of their runtime type): task_time, not op_summary
        n_other = sum(r["kernel_name"] == "MemcopyAsync"
                      or r["kernel_type"] in ("MEMCPY_ASYNC", "REDUCE_ASYNC")
                      for r in _rows(_one(exported / OUT, "task_time")))
        assert conn.execute("SELECT COUNT(*) FROM TASK").fetchone() == (n + n_other,)
        names = conn.execute("SELECT COUNT(*) FROM COMPUTE_TASK_INFO c JOIN STRING_IDS s "
                             "ON s.id = c.name").fetchone()
        assert names == (n,)


# --- completeness ---------------------------------------------------------------------------

def _readme_files(text: str) -> set[str]:
    return {m.group(1) for m in re.finditer(r"^\d+\.([a-z_]+\.(?:json|csv)):", text, re.M)}


def test_readme_lists_every_file(exported: Path) -> None:
    out = exported / OUT
    present = {re.sub(r"_\d{14}(?=\.)", "", p.name) for p in out.iterdir()
               if p.name != "README.txt"}
    assert _readme_files((out / "README.txt").read_text(encoding="utf-8")) == present


def test_msprof_tx_files(tmp_path: Path) -> None:
    prof = build_prof(tmp_path)
    run_export(prof, layout="mindstudio", quiet=True)
    out = prof / OUT
    path = _one(out, "msprof_tx")
    assert path.read_text().splitlines()[0] == (
        "Device_id,pid,tid,category,event_type,payload_type,payload_value,Start_time(us),"
        "End_time(us),message_type,message,domain,Device Start_time(us),Device End_time(us)")
    rows = _rows(path)
    assert [r["message"] for r in rows] == [m for m, _, _ in MARKERS]
    assert rows[0]["event_type"] == "start/end" and rows[1]["event_type"] == "marker"
    assert rows[0]["Start_time(us)"].endswith("\t") and rows[0]["Device Start_time(us)"] == "N/A"
    ns = [int(rows[0][c].strip().replace(".", "")) for c in ("Start_time(us)", "End_time(us)")]
    (a0, b0), _ = marker_spans(prof)
    assert ns[1] - ns[0] == b0 - a0  # exact: local µs with 3 decimals
    # the range covers steps: CPU time of device ops is removed from it (time_model.py)
    assert 0 < b0 - a0 < MARKERS[0][2] - MARKERS[0][1]
    tx = json.loads(_one(out, "msprof_tx", "json").read_text())
    xs = [e for e in tx if e["ph"] == "X"]
    # the analysis lists marks (file order) before ranges, then sorts by float(ts): at
    # 1.7e15 µs float64 steps by 0.25 µs, so both start times are one key and the mark
    # stays first (the CSV sorts by the exact start time)
    assert [e["name"] for e in xs] == ["checkpoint", "epoch 1"]
    rng = xs[1]
    assert rng["dur"] == round((b0 - a0) / 1000, 3) and rng["args"]["event_type"] == "start/end"
    pname = [e for e in tx if e["name"] == "process_sort_index"][0]
    assert pname["args"]["sort_index"] == 6 and pname["pid"] == (4242 << 10) | (6 << 5) | 31
    # the markers are also in the merged msprof json
    merged = {e["name"] for e in _events(out) if e["ph"] == "X" and e["pid"] == pname["pid"]}
    assert merged == {m for m, _, _ in MARKERS}
    readme = _readme_files((out / "README.txt").read_text())
    assert {"msprof_tx.json", "msprof_tx.csv"} <= readme


def test_no_msprof_tx_without_markers(tmp_path: Path) -> None:
    prof = build_prof(tmp_path, n_iter=2, markers=False)
    run_export(prof, layout="mindstudio", quiet=True)
    assert not list((prof / OUT).glob("msprof_tx_*"))


def test_csv_and_json_slicing(tmp_path: Path) -> None:
    prof = build_prof(tmp_path, n_iter=4)
    run_export(prof, layout="mindstudio", quiet=True)
    out = prof / OUT
    whole_rows = _rows(_one(out, "op_summary"))
    whole_events = _events(out)
    for p in out.iterdir():
        p.unlink()
    run_export(prof, layout="mindstudio", quiet=True, csv_slice_rows=20, json_slice_events=100)
    names = sorted(p.name for p in out.iterdir())
    slices = sorted((p for p in out.iterdir()
                     if re.match(r"^op_summary_slice_\d+_\d{14}\.csv$", p.name)),
                    key=lambda p: int(p.name.split("_")[3]))
    assert not [n for n in names if re.match(r"^op_summary_\d{14}\.csv$", n)]
    assert len(slices) == -(-len(whole_rows) // 20)
    got = []
    for s in slices:
        rows = _rows(s)
        assert 0 < len(rows) <= 20  # every slice repeats the header
        got += rows
    assert got == whole_rows
    jslices = sorted((p for p in out.iterdir()
                      if re.match(r"^msprof_slice_\d+_\d{14}\.json$", p.name)),
                     key=lambda p: int(p.name.split("_")[2]))
    meta = [e for e in whole_events if e["ph"] == "M"]
    data = [e for e in whole_events if e["ph"] != "M"]
    assert len(jslices) == -(-len(data) // 100) > 1
    joined = []
    for s in jslices:
        ev = json.loads(s.read_text())
        assert isinstance(ev, list) and ev[:len(meta)] == meta  # metadata repeated
        joined += ev[len(meta):]
    assert joined == data
    readme = _readme_files((out / "README.txt").read_text())
    assert {"msprof.json", "op_summary.csv"} <= readme


def test_summary_format_json(tmp_path: Path) -> None:
    prof = build_prof(tmp_path, n_iter=2)
    run_export(prof, layout="mindstudio", quiet=True)
    out = prof / OUT
    csv_rows = _rows(_one(out, "op_summary"))
    api_rows = _rows(_one(out, "api_statistic"))
    for p in out.iterdir():
        p.unlink()
    run_export(prof, layout="mindstudio", summary_format="json", quiet=True)
    assert not list(out.glob("*.csv"))
    rows = json.loads(_one(out, "op_summary", "json").read_text())
    assert rows and all("Device_id" not in r for r in rows)
    assert rows == [{k: v for k, v in r.items() if k != "Device_id"} for r in csv_rows]
    api = json.loads(_one(out, "api_statistic", "json").read_text())
    assert api == [{k: v for k, v in r.items() if k != "Device_id"} for r in api_rows]
    readme = _readme_files((out / "README.txt").read_text())
    assert {"op_summary.json", "api_statistic.json", "msprof.json"} <= readme
    assert not [n for n in readme if n.endswith(".csv")]
    # summaries named like a timeline get "_summary": neither file replaces the other
    for stem in ("step_trace", "msprof_tx"):
        [timeline] = [p for p in out.glob(f"{stem}_*.json") if re.fullmatch(
            stem + r"_\d{14}\.json", p.name)]
        assert json.loads(timeline.read_text())[0]["ph"] == "M"
        [summary] = out.glob(f"{stem}_summary_*.json")
        assert isinstance(json.loads(summary.read_text())[0], dict)
        assert {f"{stem}.json", f"{stem}_summary.json"} <= readme


def test_summary_format_json_several_devices(tmp_path: Path) -> None:
    prof = build_prof(tmp_path, n_iter=2, device_ids=(0, 1), markers=False)
    run_export(prof, layout="mindstudio", quiet=True)
    out = prof / OUT
    by_dev = Counter(r["Device_id"] for r in _rows(_one(out, "op_summary")))
    assert set(by_dev) == {"0", "1"}
    for p in out.iterdir():
        p.unlink()
    run_export(prof, layout="mindstudio", summary_format="json", quiet=True)
    for dev in ("0", "1"):
        [p] = out.glob(f"op_summary_device_{dev}_*.json")
        rows = json.loads(p.read_text())
        assert len(rows) == by_dev[dev] and "Device_id" not in rows[0]


# --- folders holding several PROF dirs ------------------------------------------------------

@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> tuple[Path, list[Path]]:
    root = tmp_path_factory.mktemp("many")
    profs = [build_prof(root, name="PROF_000001_20250101120000123_AAAAAAAAAAAAAAAA", pid=1001,
                        rank_id=0, n_iter=2, markers=False),
             build_prof(root, name="PROF_000002_20250101120000456_BBBBBBBBBBBBBBBB", pid=1002,
                        rank_id=1, n_iter=4, markers=False)]
    return root, profs


def test_query_on_a_folder_of_prof_dirs(folder) -> None:
    root, profs = folder
    rows = query_rows(root)
    devs = [r for r in rows if r.dir_name == "device_0"]
    assert {Path(r.prof_dir).name for r in devs} == {p.name for p in profs}
    by_prof = {p.name: [(r.model_id, r.iteration_number, r.rank_id) for r in devs
                        if Path(r.prof_dir).name == p.name] for p in profs}
    assert by_prof == {profs[0].name: [("1", "1", "0"), ("2", "1", "0")],
                       profs[1].name: [("1", "2", "1"), ("2", "2", "1")]}
    assert sum(r.dir_name == "host" for r in rows) == 2


@pytest.mark.parametrize("layout, type_", [("mindstudio", "text"), ("legacy", "text"),
                                           ("mindstudio", "db")])
def test_export_on_a_folder_of_prof_dirs(folder, layout: str, type_: str) -> None:
    root, profs = folder
    result = run_export(root, layout=layout, type_=type_, quiet=True)
    assert result.prof_dirs == profs
    for prof, n_iter in zip(profs, (2, 4)):
        mine = [f for f in result.files if prof in f.parents]
        assert mine, prof
        if type_ == "db":
            [dbp] = mine
            with sqlite3.connect(dbp) as conn:
                assert conn.execute("SELECT COUNT(*) FROM STEP_TIME").fetchone() == (n_iter,)
                assert conn.execute("SELECT rankId FROM RANK_DEVICE_MAP").fetchone() == \
                    (profs.index(prof),)
        elif layout == "mindstudio":
            assert len(_rows(_one(prof / OUT, "step_trace"))) == n_iter
        else:
            assert list((prof / "device_0" / "summary").glob("op_summary_0_*.csv"))
