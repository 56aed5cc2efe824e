"""msprof summary / diff / check: the pieces on small frames, the CLI on the frozen
corpus (our device writer's dirs and real-layout collections).  The real TensorFlow runs are
in test_summary_e2e.py."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from msprof_cli.summary import check as C
from msprof_cli.summary import diff as D
from msprof_cli.summary import model as M
from msprof_cli.summary.build import stat
from msprof_cli.summary.intervals import covered, merged
from msprof_cli.summary.render import render

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import build as corpus  # noqa: E402


# -- pieces ----------------------------------------------------------------------------------
def test_busy_union_and_coverage_match_brute_force() -> None:
    rng = np.random.default_rng(3)
    start = rng.integers(0, 1000, 200)
    end = start + rng.integers(1, 40, 200)
    ms, me = merged(start, end)
    grid = np.zeros(1100, bool)
    for s, e in zip(start, end):
        grid[s:e] = True
    assert int((me - ms).sum()) == int(grid.sum())
    assert np.all(ms[1:] > me[:-1])  # disjoint, sorted
    a = rng.integers(0, 1000, 50)
    b = a + rng.integers(0, 300, 50)
    got = covered(ms, me, a, b)
    want = [int(grid[x:y].sum()) for x, y in zip(a, b)]
    assert got.tolist() == want


def test_stat_is_in_us_and_robust() -> None:
    s = stat(np.array([1000, 2000, 3000, 100000]))
    assert (s.median, s.min, s.max, s.count) == (2.5, 1.0, 100.0, 4)
    assert stat(np.array([])) is None


@pytest.mark.parametrize("text,base,new,hit", [
    ("+5%", 100.0, 105.0, False), ("+5%", 100.0, 105.5, True),
    ("+1ms", 100.0, 1000.0, False), ("+1ms", 100.0, 1101.0, True),
    ("+5%,+1us", 10.0, 10.9, False), ("+5%,+1us", 10.0, 11.2, True),
    ("+5%,+1us", 0.0, 2.0, True),  # a new op type: no base, the absolute floor decides
    ("off", 1.0, 1e9, False), ("+1%", 100.0, 50.0, False),
])
def test_thresholds(text, base, new, hit) -> None:
    assert C.parse_threshold(text, "t").exceeded(base, new) is hit


@pytest.mark.parametrize("bad", ["5", "+5 percent", "+-3%", "fast", "+5%,x"])
def test_bad_threshold_says_how_to_write_one(bad) -> None:
    with pytest.raises(M.SummaryError, match="not understood; write"):
        C.parse_threshold(bad, "--max-op-type")


def test_config_files(tmp_path: Path) -> None:
    toml = tmp_path / "gate.toml"
    toml.write_text('[thresholds]\nop-type = "+20%"\niteration-time = "off"\n')
    lim = C.thresholds(toml, {"op-type": "+7%"})
    assert lim["op-type"].pct == 7.0  # the command line wins over the file
    assert lim["iteration-time"].off
    js = tmp_path / "gate.json"
    js.write_text(json.dumps({"thresholds": {"fp-bp": "+2%"}}))
    assert C.thresholds(js, {})["fp-bp"].pct == 2.0
    bad = tmp_path / "bad.toml"
    bad.write_text('[thresholds]\nstep = "+1%"\n')
    with pytest.raises(M.SummaryError, match="unknown metric 'step'"):
        C.thresholds(bad, {})


def _op(name, op_type, pos, us, shapes="8,8") -> M.OpRow:
    return M.OpRow(name, op_type, "AI_CORE", pos, 10, 1.0, us, shapes, shapes)


def _model(ops, mid=1, name="net", device_time=100.0, aug=50.0) -> M.ModelSummary:
    st = (lambda v: M.Stat(v, v, v, v, v, 10))
    types: dict[str, float] = {}
    for o in ops:
        types[o.op_type] = types.get(o.op_type, 0.0) + o.per_step_us
    total = sum(types.values())
    return M.ModelSummary(
        model_id=mid, name=name, signature="|".join(o.op_type for o in ops), iterations=10,
        measured="1-4", replayed="5-10", iteration_time=st(device_time + aug),
        device_time=st(device_time), fp_bp=st(device_time * 0.8), refresh=st(device_time * 0.2),
        data_aug_bound=st(aug), busy_share=0.9, op_us_per_step=total,
        communication_us_per_step=0.0, memcpy_us_per_step=0.0, tasks=10 * len(ops),
        op_types=[M.OpTypeRow(t, "AI_CORE", 10, 1.0, v, v / total) for t, v in types.items()],
        ops=ops)


def _summary(models, source="run") -> M.Summary:
    dev = M.DeviceSummary("PROF_1", 0, -1, 100, 1000.0, 0.5, models)
    return M.Summary(source, "0.1.0", M.Collection("Ascend910", True, "0.1.0", "2.21.0",
                                                     "3.11"), [dev])


BASE_OPS = [_op("net/conv/Conv2D", "Conv2D", 0, 40.0), _op("net/dense_1/MatMul", "MatMul", 1,
                                                            30.0),
            _op("net/dense_2/MatMul", "MatMul", 2, 20.0), _op("loss/Sum", "Sum", 3, 10.0)]


def test_json_round_trip_and_refusals(tmp_path: Path) -> None:
    s = _summary([_model(BASE_OPS)])
    text = M.to_json(s)
    assert json.loads(text)["schema_version"] == M.SCHEMA_VERSION
    assert M.from_dict(json.loads(text)) == s
    p = tmp_path / "base.json"
    p.write_text(text[: len(text) // 2])  # cut short
    with pytest.raises(M.SummaryError, match="not valid JSON"):
        M.read_json(p)
    data = json.loads(text)
    with pytest.raises(M.SummaryError, match="schema_version 99"):
        M.from_dict({**data, "schema_version": 99})
    with pytest.raises(M.SummaryError, match="not an msprof summary"):
        M.from_dict({"traceEvents": []})
    data["devices"][0]["models"][0]["op_us_per_step"] = "fast"
    with pytest.raises(M.SummaryError, match=r"devices\[0\]\.models\[0\]\.op_us_per_step"):
        M.from_dict(data)


def test_ops_match_by_name_then_by_place() -> None:
    renamed = [_op("net/conv/Conv2D", "Conv2D", 0, 40.0),
               _op("net/dense_3/MatMul", "MatMul", 1, 30.0),  # Keras renumbered the layer
               _op("net/dense_4/MatMul", "MatMul", 2, 20.0), _op("loss/Sum", "Sum", 3, 10.0)]
    pairs, removed, added = D.match_ops(BASE_OPS, renamed)
    assert not removed and not added
    assert {(b.name, n.name) for b, n in pairs} >= {("net/dense_1/MatMul", "net/dense_3/MatMul")}
    extra = BASE_OPS[:1] + [_op("net/conv_2/Conv2D", "Conv2D", 1, 15.0)] + [
        replace(o, position=o.position + 1) for o in BASE_OPS[1:]]
    pairs, removed, added = D.match_ops(BASE_OPS, extra)
    assert [o.name for o in added] == ["net/conv_2/Conv2D"] and not removed


def test_models_match_by_signature_then_name() -> None:
    a, b = _model(BASE_OPS, mid=1, name="train"), _model(BASE_OPS[:2], mid=2, name="eval")
    x, y = _model(BASE_OPS[:2], mid=7, name="other"), _model(BASE_OPS[1:], mid=8, name="train")
    pairs, left, right = D.match_models([a, b], [x, y])
    assert [(p.model_id, q.model_id, how) for p, q, how in pairs] == [(2, 7, "signature"),
                                                                      (1, 8, "name")]
    assert not left and not right


def test_same_runs_pass_and_a_wider_op_fails_naming_it() -> None:
    base = _summary([_model(BASE_OPS)])
    res = C.check(D.diff(base, _summary([_model(BASE_OPS)])), C.thresholds(None, {}))
    assert res.passed and not res.regressions
    wider = [replace(BASE_OPS[1], per_step_us=45.0, input_shapes="8,64")] + \
        [o for o in BASE_OPS if o.name != "net/dense_1/MatMul"]
    new = _summary([_model(wider, device_time=115.0)])
    res = C.check(D.diff(base, new), C.thresholds(None, {}))
    assert not res.passed
    metrics = {f.metric for f in res.regressions}
    assert "op type MatMul (AI_CORE) per step" in metrics
    assert any("net/dense_1/MatMul [MatMul] +15.000 us, 100 % of the change, shape 8,8 -> 8,64"
               in b for f in res.regressions for b in f.because)
    text = render(res, "text")
    assert text.startswith("msprof check FAILED") and "\x1b[" not in text


def test_host_side_change_is_not_an_op_regression() -> None:
    base = _summary([_model(BASE_OPS, aug=50.0)])
    new = _summary([_model(BASE_OPS, aug=5000.0)])
    res = C.check(D.diff(base, new), C.thresholds(None, {}))
    assert {f.side for f in res.regressions} == {"host", "mixed"}
    mixed = next(f for f in res.regressions if f.side == "mixed")
    assert any(b.startswith("host side, measured") for b in mixed.because)
    assert not any(f.metric.startswith("op type") for f in res.regressions)
    loose = C.check(D.diff(base, new), C.thresholds(None, {"data-aug-bound": "off",
                                                           "iteration-time": "off"}))
    assert loose.passed


def test_a_missing_model_fails_the_gate() -> None:
    base = _summary([_model(BASE_OPS), _model(BASE_OPS[:1], mid=2, name="eval")])
    res = C.check(D.diff(base, _summary([_model(BASE_OPS)])), C.thresholds(None, {}))
    assert not res.passed and res.missing == ['device 0 model 2 "eval"']


def test_markdown_tables_fit_github() -> None:
    s = _summary([_model(BASE_OPS)])
    md = render(s, "md")
    assert "| Top op types | Task Type |" in md and "| --- | --- | ---: |" in md
    text = render(s, "text")
    lines = [ln for ln in text.splitlines() if ln.startswith(("Conv2D ", "MatMul ", "Sum "))]
    assert len({ln.index(" us") for ln in lines if " us" in ln}) == 1  # aligned columns


# -- the CLI on the frozen corpus ---------------------------------------------------------------
@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> dict[str, Path]:
    keep = {"ascend910_small", "two_devices_hccl", "oracle_keras_bn", "host_only", "device_only",
            "msproftx_aicpu_pmu"}
    return {k: v for k, v in corpus.unpack(tmp_path_factory.mktemp("sum_raw")).items()
            if k in keep}


def msprof(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "msprof_cli", *args], capture_output=True,
                          text=True, timeout=300)


def test_summary_json_of_real_layout_dirs(cases, tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    r = msprof("summary", str(cases["two_devices_hccl"]), "--format", "json", "-o", str(out))
    assert r.returncode == 0, r.stderr
    s = M.read_json(out)
    assert [d.device_id for d in s.devices] == [0, 1]
    train = s.devices[0].models[0]
    assert (train.model_id, train.name, train.iterations) == (1, "resnet_train", 81)
    assert train.communication_us_per_step > 0 and train.memcpy_us_per_step > 0
    assert train.pipes and {p.op_type for p in train.pipes} >= {"Conv2D", "MatMulV2"}
    assert 0 < train.busy_share <= 1 and train.fp_bp.median > 0
    assert sum(t.share for t in train.op_types) == pytest.approx(1, abs=1e-3)
    # the op rows add up to the op types
    assert sum(o.per_step_us for o in train.ops) == pytest.approx(train.op_us_per_step,
                                                                   abs=0.01 * len(train.ops))
    r = msprof("summary", str(cases["ascend910_small"]))  # hardware data (the golden dir)
    assert r.returncode == 0 and "device 0" in r.stdout, r.stderr


def test_diff_and_check_of_the_same_collection(cases, tmp_path: Path) -> None:
    prof = cases["oracle_keras_bn"]
    base = tmp_path / "base.json"
    assert msprof("summary", str(prof), "--format", "json", "-o", str(base)).returncode == 0
    r = msprof("check", str(prof), "--baseline", str(base))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PASSED" in r.stdout
    r = msprof("diff", str(base), str(prof), "--format", "md")
    assert r.returncode == 0 and "device step unchanged" in r.stdout
    r = msprof("check", str(cases["two_devices_hccl"]), "--baseline", str(base),
               "--format", "json")
    assert r.returncode == 1
    assert json.loads(r.stdout)["kind"] == "msprof_cli.check"


def test_bad_input_exits_2_and_names_the_side(cases, tmp_path: Path) -> None:
    prof = cases["oracle_keras_bn"]
    broken = tmp_path / "base.json"
    broken.write_text('{"kind": "msprof_cli.summary", "schema_version": 1, "devic')
    r = msprof("check", str(prof), "--baseline", str(broken))
    assert r.returncode == 2 and "baseline:" in r.stderr and "not valid JSON" in r.stderr
    r = msprof("check", str(tmp_path / "nope"), "--baseline", str(prof))
    assert r.returncode == 2 and "NEW:" in r.stderr and "does not exist" in r.stderr
    r = msprof("check", str(prof), "--baseline", str(prof), "--max-op-type", "lots")
    assert r.returncode == 2 and "--max-op-type" in r.stderr
    other = tmp_path / "trace.json"
    other.write_text(json.dumps({"traceEvents": []}))
    r = msprof("diff", str(other), str(prof))
    assert r.returncode == 2 and "not an msprof summary JSON" in r.stderr


def test_summary_reads_an_exported_folder_and_host_only_dirs(cases) -> None:
    prof = cases["msproftx_aicpu_pmu"]
    assert msprof("export", "--output", str(prof), "--layout", "mindstudio").returncode == 0
    out = next(prof.glob("mindstudio_profiler_output"))
    a = msprof("summary", str(prof), "--format", "json")
    b = msprof("summary", str(out), "--format", "json")
    assert a.returncode == b.returncode == 0, b.stderr
    da, db = json.loads(a.stdout), json.loads(b.stdout)
    assert da["devices"] == db["devices"]
    r = msprof("summary", str(cases["host_only"]))
    assert r.returncode == 0 and "no device data" in r.stdout


def test_help_stays_light() -> None:
    code = ("import sys; from msprof_cli.cli.main import cli; "
            "print(sorted(m for m in ('pandas', 'numpy', 'tensorflow', 'dask') "
            "if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.stdout.strip() == "[]", r.stdout + r.stderr
    assert re.search(r"summary\s+Summarise", msprof("--help").stdout)


# -- the summary's own decode (summary/decode.py) against the export's --------------------------
@pytest.fixture(scope="module")
def all_cases(tmp_path_factory) -> dict[str, Path]:
    return corpus.unpack(tmp_path_factory.mktemp("sum_all"))


def _without_advice(s: M.Summary) -> dict:
    d = M.to_dict(s)
    for dev in d["devices"]:
        dev.pop("advice"), dev.pop("advice_note"), dev.pop("advice_model")
    return d


def test_the_summary_decode_gives_the_exports_summary(all_cases) -> None:
    """Every corpus case summarised from the summary's decode equals its summary from the
    export's (the advice aside: the summary decode is used where there is none)."""
    from msprof_cli.summary.build import build

    for name, prof in all_cases.items():
        own = _without_advice(build(prof, decode="summary"))
        assert own == _without_advice(build(prof, decode="export")), name


def _same_decode(prof: Path):
    import pandas as pd

    from msprof_cli.export.decode.dataset import load_prof
    from msprof_cli.export.outputs.summaries import op_rows
    from msprof_cli.summary import decode as SD

    full = load_prof(prof)
    own, shapes = SD.load(prof)
    assert own.log.warnings == full.log.warnings
    assert [d.device_id for d in own.devices] == [d.device_id for d in full.devices]
    for f, o in zip(full.devices, own.devices):
        for c in o.tasks.columns:
            assert pd.Series(o.tasks[c].to_numpy()).equals(
                pd.Series(f.tasks[c].to_numpy())), (prof, f.device_id, c)
        ins, outs = shapes.of(o.tasks["connection_id"].to_numpy())
        assert (ins == f.tasks["in_shapes"].to_numpy(object)).all()
        assert (outs == f.tasks["out_shapes"].to_numpy(object)).all()
        assert o.iterations.equals(f.iterations)
        assert (o.comm_ops is None) == (f.comm_ops is None)
        assert o.comm_ops is None or o.comm_ops.equals(f.comm_ops)
        assert SD.op_row_count(o) == len(op_rows(f))
    return shapes


@pytest.mark.parametrize("case", ["two_devices_hccl", "oracle_mirrored_hccl", "dynamic_shape",
                                  "msproftx_aicpu_pmu", "damaged"])
def test_the_summary_decode_gives_the_exports_columns(all_cases, case) -> None:
    """Column by column, the task tables of both decodes, every task's shapes included."""
    _same_decode(all_cases[case])


def test_the_summary_decode_of_a_damaged_tensor_info(all_cases, tmp_path: Path) -> None:
    """A tensor_info record with a bad magic number: record numbers are no longer positions,
    the shapes come from the whole tensor_info decode (and equal the export's)."""
    import shutil

    from msprof_cli.raw import layouts as L

    prof = tmp_path / all_cases["two_devices_hccl"].name
    shutil.copytree(all_cases["two_devices_hccl"], prof)
    f = sorted((prof / "host" / "data").glob("*tensor_info*"))[0]
    rec = np.memmap(f, dtype=L.HOST_DTYPES["tensor_info"], mode="r+")
    rec["magic"][3] = 0
    rec.flush()
    del rec
    assert _same_decode(prof).whole is not None


def test_big_dirs_take_the_summary_decode(all_cases, monkeypatch) -> None:
    """Above ADVICE_MAX_ROWS tasks a device the summary decodes on its own (the same
    summary, advice note included); a device with an advice to compute (fewer op rows than
    tasks) goes back to the export's decode."""
    from msprof_cli.summary import build as B
    from msprof_cli.summary import decode as SD

    calls = []
    load = SD.load
    monkeypatch.setattr(SD, "load", lambda prof: calls.append(prof) or load(prof))
    prof = all_cases["two_devices_hccl"]
    want = M.to_dict(B.build(prof))
    assert not calls and want["devices"][0]["advice"]
    monkeypatch.setattr(SD, "light_decodable", lambda prof, above: True)
    assert M.to_dict(B.build(prof)) == want and calls == [prof]  # the advice: export's
    monkeypatch.setattr(B, "ADVICE_MAX_ROWS", 50)
    want = M.to_dict(B.build(prof, decode="export"))
    assert "op rows: the advice is left to msprof export" in want["devices"][0]["advice_note"]
    assert M.to_dict(B.build(prof)) == want and calls == [prof, prof]


@pytest.mark.parametrize("far", [False, True])  # far: span times too far apart for one key
def test_spans_find_is_enclose(far) -> None:
    import pandas as pd

    from msprof_cli.export.decode.dataset import enclose
    from msprof_cli.summary.joins import Spans

    rng = np.random.default_rng(5)
    n = 3000
    spans = pd.DataFrame({"thread_id": rng.integers(0, 4, n), "begin_ns": rng.integers(0, 400, n)})
    spans["end_ns"] = spans["begin_ns"] + rng.integers(0, 25, n)  # ties, nesting, overlaps
    spans["row"] = np.arange(n)
    rec = pd.DataFrame({"thread_id": rng.integers(0, 5, 8000),
                        "ts_ns": rng.integers(-5, 440, 8000)})
    rec.loc[0, "ts_ns"] = -(1 << 62)
    rec.loc[1, "ts_ns"] = 1 << 62
    if far:
        spans.loc[7, ["begin_ns", "end_ns"]] = [1 << 61, (1 << 61) + 9]
        rec.loc[2, ["thread_id", "ts_ns"]] = [spans.loc[7, "thread_id"], (1 << 61) + 3]
    want = enclose(rec, spans, "ts_ns", ["row"])["row"].to_numpy(np.float64)
    got = Spans.of(spans).find(rec["thread_id"].to_numpy(), rec["ts_ns"].to_numpy())
    assert np.array_equal(got, np.where(np.isnan(want), -1, want).astype(np.int64))


def test_match_is_the_occurrence_merge() -> None:
    import pandas as pd

    from msprof_cli.summary.joins import match

    rng = np.random.default_rng(7)
    left = pd.DataFrame({"a": rng.integers(0, 5, 5000), "b": rng.integers(0, 7, 5000)})
    right = pd.DataFrame({"a": rng.integers(0, 6, 4000), "b": rng.integers(0, 7, 4000)})
    for f in (left, right):
        f["occ"] = f.groupby(["a", "b"], sort=False).cumcount()
    right["row"] = np.arange(len(right))
    want = left.merge(right, how="left", on=["a", "b", "occ"])["row"].fillna(-1)
    got = match((left["a"].to_numpy(), left["b"].to_numpy()),
                (right["a"].to_numpy(), right["b"].to_numpy()))
    assert np.array_equal(got, want.to_numpy(np.int64))
    neg = match((left["a"].to_numpy() - 3, left["b"].to_numpy()),  # not packable: ngroup
                (right["a"].to_numpy() - 3, right["b"].to_numpy()))
    assert np.array_equal(neg, got)


def test_long_advice_lines_keep_the_finding_and_cut_the_op_names() -> None:
    from msprof_cli.summary.render import shorten_advice

    op = "StatefulPartitionedCall/generator_1/conv2d_transpose_2/conv2d_transpose/Conv2DBackpropInput"
    a = ("Operator Processing: Check and reduce AI CPU operators (3 ops; heaviest: "
         + "; ".join(f"{op}_{i}: 6 tasks, 316.62 us in total" for i in range(6)) + ")")
    b = a.replace("Check and reduce AI CPU operators", "Try to cast the data type to INT32")
    sa, sb = shorten_advice(a, 400), shorten_advice(b, 400)
    assert len(sa) <= 400 and len(sb) <= 400
    assert sa.startswith("Operator Processing: Check and reduce AI CPU operators (3 ops;")
    assert sb.startswith("Operator Processing: Try to cast the data type to INT32 (3 ops;")
    assert sa != sb and ".../conv2d_transpose/Conv2DBackpropInput_0" in sa
    assert "StatefulPartitionedCall" not in sa  # the names lost their leading scopes
    assert shorten_advice("short line (1 op)", 400) == "short line (1 op)"


def test_eager_work_outside_models_is_judged_as_host_side() -> None:
    """A program against its own earlier run: on a loaded machine an eager metric op ran
    outside the steps in one run and not the other.  The models' steps stay exact; the
    outside-models entry gets the outside-models limit (+100 % and +1 ms)."""
    outside = replace(_model([_op("Cast", "Cast", 0, 1.5)]), model_id=None, name="",
                      signature="", iterations=0)
    more = replace(_model([_op("Cast", "Cast", 0, 1.5), _op("DivNoNan", "DivNoNan", 1, 1.51)]),
                   model_id=None, name="", signature="", iterations=0)
    base = _summary([_model(BASE_OPS), outside])
    res = C.check(D.diff(base, _summary([_model(BASE_OPS), more])), C.thresholds(None, {}))
    assert res.passed, [f.metric for f in res.regressions]
    # a real change of the models' steps still fails
    wider = [replace(BASE_OPS[1], per_step_us=45.0)] + BASE_OPS[2:] + BASE_OPS[:1]
    res = C.check(D.diff(base, _summary([_model(wider), more])), C.thresholds(None, {}))
    assert not res.passed
    # and a big change outside the models does too
    heavy = replace(more, ops=more.ops + [_op("Big", "Big", 2, 5000.0)],
                    op_us_per_step=5003.0,
                    op_types=more.op_types + [M.OpTypeRow("Big", "AI_CORE", 1, 1.0, 5000.0,
                                                          0.99)])
    res = C.check(D.diff(base, _summary([_model(BASE_OPS), heavy])), C.thresholds(None, {}))
    assert not res.passed


def test_summary_of_device_only_data_says_why_there_is_no_advice(cases) -> None:
    """Real 910 device records without a host dir: the summary reads them and says the
    advice needs host task data (op names); a run where no op ran says that instead."""
    r = msprof("summary", str(cases["device_only"]))
    assert r.returncode == 0, r.stderr
    assert "Advice: no op_summary rows (no host task data)." in r.stdout
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_device_records import run

    from msprof_cli.capture import CaptureChunk
    empty = run(Path(str(cases["device_only"]) + "_empty"), [CaptureChunk()])
    r = msprof("summary", str(empty))
    assert r.returncode == 0, r.stderr
    assert "no TensorFlow op ran on the device" in r.stdout


def test_check_says_when_graphs_differ_and_why_a_host_change_passed() -> None:
    from msprof_cli.summary.render import check_lines

    base = _summary([_model(BASE_OPS, name="train", aug=50.0)])
    other = _summary([_model(BASE_OPS[:2], name="train", aug=120.0)])  # another program
    res = C.check(D.diff(base, other), C.thresholds(None, {"op-time": "off", "op-type": "off",
                                                           "device-time": "off",
                                                           "fp-bp": "off"}))
    text = "\n".join(check_lines(res))
    assert "Graphs differ: model 1 was matched to baseline model 1 by name" in text
    assert "fails only when the change exceeds both parts" in text


def test_the_summary_advice_is_the_default_exports(all_cases, tmp_path) -> None:
    """The summary's advice covers the rows a default `msprof export` puts in prof_rule (the
    model it chooses): the same findings and counts, on one device and on two."""
    import shutil

    from msprof_cli.summary.build import build

    for name in ("msproftx_aicpu_pmu", "oracle_keras_bn", "two_devices_hccl"):
        prof = shutil.copytree(all_cases[name], tmp_path / name)
        want = [a for dev in build(prof).devices for a in dev.advice]
        proc = subprocess.run([sys.executable, "-m", "msprof_cli", "export", str(prof)],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        said = [ln[4:] for ln in proc.stdout.splitlines() if ln.startswith("  - ")]
        assert want and said == want, name


def test_the_emulated_systems_settings_are_recorded_shown_and_diffed(tmp_path) -> None:
    """msprof_cli_run.json records the precision mode and dropout mode a collection ran with;
    the summary shows them and diff names a change (a record without them is no change)."""
    from dataclasses import replace as dc_replace

    from msprof_cli.raw import runinfo
    from msprof_cli.summary import diff as D
    from msprof_cli.summary.render import summary_lines

    runinfo.write(tmp_path, {"precision_mode": "allow_fp32_to_fp16", "dropout": "npu"})
    assert runinfo.read(tmp_path)["emulation"] == {"precision_mode": "allow_fp32_to_fp16",
                                                   "dropout": "npu"}
    base = _summary([_model(BASE_OPS)])
    emu = {"precision_mode": "allow_fp32_to_fp16", "dropout": "tf"}
    base = dc_replace(base, collection=dc_replace(base.collection, emulation=emu))
    new = dc_replace(base, collection=dc_replace(base.collection,
                                                 emulation={**emu, "dropout": "npu"}))
    assert "Emulated system: dropout npu, precision_mode allow_fp32_to_fp16" in \
        "\n".join(summary_lines(new))
    assert D.diff(base, new).collection == ["emulated dropout: tf -> npu"]
    old = dc_replace(base, collection=dc_replace(base.collection, emulation={}))
    assert D.diff(old, new).collection == []
    assert M.from_dict(M.to_dict(new)).collection.emulation == new.collection.emulation
