"""Legacy layout: naming, model/iteration selection, error texts, summary json, slicing."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from msprof_cli.errors import ExportError, ProfDirError
from msprof_cli.export.api import run_export
from msprof_cli.export.decode.model_info import models_and_iterations
from msprof_cli.export.derive.selection import Selection, select
from tests.export_fixtures import copy_golden


@pytest.fixture()
def prof(tmp_path: Path) -> Path:
    return copy_golden(tmp_path)


def _names(prof: Path, sub: str) -> set[str]:
    return {p.name for p in (prof / "device_0" / sub).iterdir()}


def test_default_exports_all_iterations_of_default_model(prof: Path) -> None:
    res = run_export(prof, quiet=True)
    assert _names(prof, "summary") == {"op_summary_0_1_1_3.csv", "op_statistic_0_1_1_3.csv",
                                       "task_time_0_1_1_3.csv", "step_trace_0_1_1_3.csv",
                                       "ai_stack_time_0_1_1_3.csv", "prof_rule_0.json"}
    # the golden raw data has no GE copies: ge / ai_stack_time come from ModelExecute + tasks
    assert _names(prof, "timeline") == {"msprof_0_1_1_3.json", "step_trace_0_1_1_3.json",
                                        "task_time_0_1_1_3.json", "ai_stack_time_0_1_1_3.json",
                                        "ge_0_1_1_3.json"}
    assert len(res.files) == 11
    op = (prof / "device_0/summary/op_summary_0_1_1_3.csv").read_bytes()
    assert b"\r" not in op and op.startswith(b"Model ID,Task ID,") and b"Block Dim" in op
    assert len(op.splitlines()) == 19
    st = (prof / "device_0/summary/step_trace_0_1_1_3.csv").read_text().splitlines()
    assert [line.split(",")[0] for line in st[1:]] == ["1", "2", "3"]


def test_iteration_window(prof: Path) -> None:
    run_export(prof, model_id=1, iteration_id=2, iteration_count=2, quiet=True)
    summ = prof / "device_0" / "summary"
    assert (summ / "op_summary_0_1_2_3.csv").is_file()
    rows = (summ / "op_summary_0_1_2_3.csv").read_text().splitlines()[1:]
    assert [r.split(",")[1] for r in rows] == [str(t) for t in (12, 13, 14, 15, 16, 17,
                                                               23, 24, 25, 26, 27, 28)]
    assert rows[0].split(",")[9] == "0"  # first exported row: wait time 0
    trace = json.loads((prof / "device_0/timeline/msprof_0_1_2_3.json").read_text())
    hw = [e for e in trace if e.get("ph") == "X" and "Task Id" in e.get("args", {})]
    assert len(hw) == 12
    # a step export keeps the CANN rows of its steps (the real analysis's
    # get_condition_within_iteration): the 6 launches of each of iterations 2 and 3, of 18
    cann = [e for e in trace if e.get("name", "").startswith("Node@")]
    assert len(cann) == 12
    run_export(prof, model_id=1, iteration_id=3, quiet=True)
    assert (summ / "step_trace_0_1_3.csv").read_text().count("\n") == 2
    trace = json.loads((prof / "device_0/timeline/msprof_0_1_3.json").read_text())
    assert len([e for e in trace if e.get("name", "").startswith("Node@")]) == 6
    run_export(prof, quiet=True)  # all iterations (the real all-export mode): every row
    trace = json.loads((prof / "device_0/timeline/msprof_0_1_1_3.json").read_text())
    assert len([e for e in trace if e.get("name", "").startswith("Node@")]) == 18


def test_api_window_of_a_step_export() -> None:
    """[latest step end before the first step's start (0: none), last step's end]; a row is
    kept when it starts inside (closed) or straddles the low bound."""
    from msprof_cli.export.derive.selection import api_window, in_api_window

    its = pd.DataFrame({"model_id": [1, 1, 1, 2], "iteration_id": [1, 2, 3, 1],
                        "step_start_ns": [100, 300, 500, 250],
                        "step_end_ns": [200, 400, 600, 280]})
    sel = select(its, {1}, 1, 2, 2)
    assert api_window(its, sel) == (280, 600)  # model 2's step ended last before 300
    assert api_window(its, select(its, {1}, 1, 1, 1)) == (0, 200)
    assert api_window(its, Selection(None, None, None, None, None)) is None
    keep = in_api_window([279, 270, 280, 600, 601], [279, 285, 290, 610, 700], (280, 600))
    assert keep.tolist() == [False, True, True, True, False]


@pytest.mark.parametrize("kwargs, message", [
    ({"model_id": 3, "iteration_id": 1},
     "The model id 3 is invalid. Must select from {1}. Please enter a valid model id."),
    ({"model_id": 1, "iteration_id": 2, "iteration_count": 3},
     "The exported iteration 2-4 is invalid for model id 1. Please enter a valid iteration "
     "within 1-3."),
    ({"model_id": 1, "iteration_id": 1, "iteration_count": 6},
     "The iteration count 6 is invalid for model id 1. Must be greater than 0 and less than or "
     "equal to 5. Please enter a valid iteration count."),
    ({"model_id": 1, "iteration_id": 1, "iteration_count": 0},
     "The iteration count 0 is invalid for model id 1."),
    ({"model_id": 1}, "--model-id must be given together with --iteration-id"),
    ({"type_": "sqlite"}, "Unknown export type 'sqlite'; choose text or db."),
])
def test_error_messages(prof: Path, kwargs: dict, message: str) -> None:
    with pytest.raises(ExportError) as exc:
        run_export(prof, quiet=True, **kwargs)
    assert message in str(exc.value)


def test_single_op_mode_error() -> None:
    its = pd.DataFrame({"model_id": [], "iteration_id": [], "step_start_ns": [],
                        "step_end_ns": []})
    with pytest.raises(ExportError, match="in single op mode"):
        select(its, {4294967295}, 1, 1, 1)
    assert select(its, {4294967295}, None, None, 1).suffix(0) == "_0"


def test_suffix_rules() -> None:
    assert Selection(1, 2, 2, 0, 1).suffix(0) == "_0_1_2"
    assert Selection(1, 2, 6, 0, 1).suffix(3) == "_3_1_2_6"
    assert Selection(None, None, None, None, None).suffix(1) == "_1"


def test_default_model_prefers_most_iterations() -> None:
    its = pd.DataFrame({"model_id": [1, 2, 2, 3, 3], "iteration_id": [1, 1, 2, 1, 2],
                        "step_start_ns": [0, 10, 20, 30, 40], "step_end_ns": [5, 15, 25, 35, 45]})
    assert select(its, {1, 2, 3}, None, None, 1).model_id == 3  # tie 2/3 -> larger id
    assert select(its, {1}, None, None, 1).model_id == 1  # only model 1 has host ops


def test_summary_format_json(prof: Path) -> None:
    run_export(prof, summary_format="json", quiet=True)
    rows = json.loads((prof / "device_0/summary/op_summary_0_1_1_3.json").read_text())
    assert len(rows) == 18 and rows[0]["Op Name"] == "Conv2D_1"
    assert rows[0]["Task Start Time(us)"] == "1700000000001031.000\t"


def test_slicing_with_small_limits(prof: Path) -> None:
    run_export(prof, layout="mindstudio", csv_slice_rows=5, json_slice_events=40, quiet=True)
    out = prof / "mindstudio_profiler_output"
    ops = sorted(out.glob("op_summary_slice_*_*.csv"))
    assert len(ops) == 4
    assert all(p.read_text().startswith("Device_id,Model ID") for p in ops)
    assert sum(len(p.read_text().splitlines()) - 1 for p in ops) == 18
    js = sorted(out.glob("msprof_slice_*_*.json"))
    assert len(js) == 4  # 125 events / 40
    for p in js:
        ev = json.loads(p.read_text())
        assert ev[0] == {"name": "process_name", "pid": 4344256, "tid": 0,
                         "args": {"name": "Ascend Hardware"}, "ph": "M"}
    assert not list(out.glob("op_summary_[0-9]*.csv"))


def test_reports_switch_removes_layers(prof: Path, tmp_path: Path) -> None:
    cfg = tmp_path / "reports.json"
    cfg.write_text(json.dumps({"json_process": {"cann": False, "overlap_analyse": False}}))
    run_export(prof, layout="mindstudio", reports=cfg, quiet=True)
    ev = json.loads(next((prof / "mindstudio_profiler_output").glob("msprof_*.json")).read_text())
    names = {e["name"] for e in ev}
    assert "Node@launch" not in names and "Computing" not in names and "Conv2D_1" in names


def test_path_errors(tmp_path: Path) -> None:
    with pytest.raises(ProfDirError, match="does not exist"):
        run_export(tmp_path / "missing", quiet=True)
    with pytest.raises(ProfDirError, match="does not have PROF dir"):
        run_export(tmp_path, quiet=True)
    empty = tmp_path / "PROF_000001_20250101120000123_ABCDEFGHIJKLMNOP"
    (empty / "device_0" / "data").mkdir(parents=True)
    (empty / "device_0" / "info.json.0").write_text("{}")
    with pytest.raises(ProfDirError, match="contains no profiling data"):
        run_export(empty, quiet=True)


def test_console_lines(prof: Path, capsys) -> None:
    run_export(prof.parent)
    out = capsys.readouterr().out
    assert f"[INFO] Start export data in {prof}." in out
    assert f"[INFO] Export all data in {prof} done." in out


def test_models_and_iterations(prof: Path) -> None:
    got = models_and_iterations(prof / "device_0")
    assert list(got) == [1]
    assert [i for i, _, _ in got[1]] == [1, 2, 3]
    assert got[1][0][1:] == (1700000000001029500, 1700000000001305500)
    host = models_and_iterations(prof / "host")
    assert [i for i, _, _ in host[1]] == [1, 2, 3]
    assert host[1][0][1] == 1700000000001000000


def test_the_model_choice_is_said_and_all_models_exports_each(tmp_path, capsys,
                                                              monkeypatch) -> None:
    """The default export says which model and iterations it kept, which
    other models exist and how to export them; --all-models writes each model's own
    _{device}_{model}_{iterations} files (one prof_rule), the same bytes in windows."""
    import hashlib
    import shutil
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import gen_prof

    src = gen_prof.generate(3000, tmp_path / "src", batch_tasks=1000, quiet=True)
    prof = tmp_path / "one" / src.name
    shutil.copytree(src, prof)
    res = run_export(prof)
    out = capsys.readouterr().out
    [choice] = res.models
    assert choice.by_default and [m for m, _, _ in choice.models] == [1, 2]
    assert choice.model_id == 1 and choice.first == 1
    assert (f'[INFO] device_0: exported model 1 "resnet_train", iterations 1-{choice.last} '
            f"(the training model with the most iterations). Also collected: model 2") in out
    assert "--all-models exports each model in its own files; --model-id 2 --iteration-id 1" \
        in out
    summary = prof / "device_0" / "summary"
    assert [p.name for p in summary.glob("op_summary_*")] == [
        f"op_summary_0_1_1_{choice.last}.csv"]

    def digests(p: Path) -> dict[str, str]:
        return {f.relative_to(p).as_posix(): hashlib.sha256(f.read_bytes()).hexdigest()
                for f in sorted(p.glob("device_0/*/*"))}

    res = run_export(prof, all_models=True, quiet=True)
    assert [(c.model_id, c.by_default) for c in res.models] == [(1, True), (2, False)]
    last2 = res.models[1].last
    names = sorted(p.name for p in summary.glob("op_summary_*"))
    assert names == [f"op_summary_0_1_1_{choice.last}.csv", f"op_summary_0_2_1_{last2}.csv"]
    rows = pd.read_csv(summary / names[1])
    # the real analysis joins a step export's tasks with the GE data of the model's
    # (iteration, model) pairs only (parse_aicore_op_summary_calculator._get_ge_data): the
    # training steps between model 2's first and last iteration are not its rows
    assert set(rows["Model ID"]) == {2}
    assert len(list(summary.glob("prof_rule_*"))) == 1
    whole = digests(prof)
    # a default export after it says the other model's files are an earlier export's
    run_export(prof)
    out = capsys.readouterr().out
    assert (f"device_0: summary/ and timeline/ also hold files of model 2 (") in out
    assert "from an earlier export (--all-models or --model-id)" in out
    whole = digests(prof)
    # windows: every pass over the same plan starts its carried state afresh
    monkeypatch.setenv("MSPROF_EXPORT_WINDOW_TASKS", "700")
    win = tmp_path / "win" / src.name
    shutil.copytree(src, win)
    run_export(win, all_models=True, quiet=True)
    assert digests(win) == whole
    with pytest.raises(ExportError, match="--all-models exports every model"):
        run_export(prof, all_models=True, model_id=1, iteration_id=1, quiet=True)


def test_the_export_says_which_timeline_to_open_first(prof: Path, capsys) -> None:
    """The msprof json (its first slice when sliced) is named on the
    console with where to open it."""
    run_export(prof, json_slice_events=50)
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if "Timeline to open first" in ln)
    assert f"{prof.name}/device_0/timeline/msprof_slice_0_" in line
    assert "(slice 0 of " in line and "https://ui.perfetto.dev" in line
    run_export(prof, layout="mindstudio")
    out = capsys.readouterr().out
    assert f"Timeline to open first: {prof.name}/mindstudio_profiler_output/msprof_2" in out


def test_a_host_dir_alone_says_why_the_legacy_layout_writes_nothing(prof: Path, capsys):
    import shutil

    shutil.rmtree(prof / "device_0")
    res = run_export(prof, quiet=True)
    assert not res.files
    err = capsys.readouterr().err
    assert "has no device_N directory: the legacy layout writes per-device files" in err
    assert "--layout mindstudio" in err and res.warnings
    assert run_export(prof, layout="mindstudio", quiet=True).files
