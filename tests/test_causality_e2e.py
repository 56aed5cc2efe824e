"""End-to-end: a causally true timeline (docs/device-model.md 5 "Dependencies").  Real
TensorFlow programs through `msprof collect` and `msprof export`: a task never starts before
the tasks producing its inputs end, on whatever stream they run; a collective costs its time
whether or not HCCL data is recorded; a sparse update costs the rows it touches; the default
export is the training model and its op_summary holds that model's rows only."""
from __future__ import annotations

import csv
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
SCRIPTS = Path(__file__).resolve().parent / "scripts"
MSPROF = [sys.executable, "-m", "msprof_cli"]
NA_DIM = "4294967295"


def _run(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    import os
    proc = subprocess.run([*MSPROF, *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300, env={**os.environ, **(env or {})})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def collect_export(tmp: Path, script: str, *flags: str, env: dict | None = None
                   ) -> tuple[Path, str]:
    _run("collect", "--output", str(tmp / "out"), *flags, "--", sys.executable,
         str(SCRIPTS / script), cwd=tmp, env=env)
    [prof] = sorted((tmp / "out").glob("PROF_*"))
    proc = _run("export", "--output", str(prof), cwd=tmp)
    return prof, proc.stdout + proc.stderr


def rows(prof: Path, name: str, dev: int = 0) -> list[dict[str, str]]:
    [path] = sorted((prof / f"device_{dev}" / "summary").glob(f"{name}_{dev}*.csv"))
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def start(r: dict[str, str]) -> float:
    return float(r["Task Start Time(us)"].strip())


def end(r: dict[str, str]) -> float:
    return start(r) + float(r["Task Duration(us)"])


def test_dropout_compare_waits_for_its_ai_cpu_mask(tmp_path: Path) -> None:
    """The dropout mask (StatelessRandomUniformV2, AI CPU stream) feeds GreaterEqual (AI Core
    stream): the compare, and the forward pass behind it, wait for the mask."""
    prof, _ = collect_export(tmp_path, "dropout.py", "--full-trace")
    ops = sorted(rows(prof, "op_summary"), key=start)
    masks = [r for r in ops if r["OP Type"] == "StatelessRandomUniformV2"]
    compares = [r for r in ops if r["Op Name"].endswith("stateless_dropout/GreaterEqual")]
    assert len(masks) == len(compares) == 4
    for mask, cmp_ in zip(masks, compares):
        assert mask["Stream ID"] != cmp_["Stream ID"]
        assert start(cmp_) >= end(mask) + 1.0, (mask, cmp_)  # + the event wait
    # the step's FP to BP spans the mask (20 us + 2 ns an element on the AI CPU)
    steps = rows(prof, "step_trace")
    mask_us = float(masks[0]["Task Duration(us)"])
    assert all(float(s["FP to BP Time(us)"]) > mask_us for s in steps)


@pytest.fixture(scope="module")
def mirrored(tmp_path_factory) -> dict[str, Path]:
    out = {}
    for hccl in ("on", "off"):
        out[hccl], _ = collect_export(tmp_path_factory.mktemp(f"mirrored_{hccl}"), "mirrored.py",
                                      "--hccl", hccl, "--full-trace", env={"CUSTOM": "1"})
    return out


def test_optimizer_update_waits_for_the_all_reduce(mirrored: dict[str, Path]) -> None:
    ops = sorted(rows(mirrored["on"], "op_summary"), key=start)
    reduces = [r for r in ops if r["OP Type"] == "HcomAllReduce"]
    assert reduces
    for ar in reduces:
        # the next weight update after this all-reduce (its result feeds the update)
        after = [r for r in ops if start(r) > start(ar) and "update" in r["Op Name"]]
        assert after and start(after[0]) >= end(ar), (ar, after[0])


def test_collectives_cost_time_whatever_hccl_records(mirrored: dict[str, Path]) -> None:
    """--hccl decides what is recorded, not what the emulated system runs."""
    on, off = (rows(mirrored[h], "step_trace") for h in ("on", "off"))
    assert [s["Iteration Time(us)"] for s in on] == [s["Iteration Time(us)"] for s in off]
    assert not [r for r in rows(mirrored["off"], "op_summary") if r["OP Type"] == "HcomAllReduce"]
    # and the all-reduce is on the critical path of the "on" run's iteration
    for s in on:
        assert float(s["Iteration Time(us)"]) > float(s["Reduce Duration(us)"])


def test_sparse_update_costs_the_rows_it_touches(tmp_path: Path) -> None:
    """A TF1 embedding (50000 x 200 ref variable, 128 ids a step): the lookup and the
    ScatterSub move 128 rows, not the 40 MB table; shapes of fed placeholders and ref
    variables' dtypes are printed."""
    prof, _ = collect_export(tmp_path, "tf1_embedding.py", "--full-trace")
    ops = rows(prof, "op_summary")
    table_us = 2 * 50000 * 200 * 4 / 1.2e12 * 1e6  # one pass over the table at HBM speed
    for kind in ("ScatterSub", "GatherV2"):
        sel = [r for r in ops if r["OP Type"] == kind and "embedding" in r["Op Name"]]
        assert sel, kind
        assert max(float(r["Task Duration(us)"]) for r in sel) < table_us / 5, (kind, sel[0])
    assert not [r for r in ops if NA_DIM in r["Input Shapes"] or NA_DIM in r["Output Shapes"]]
    assert not [r for r in ops if "UNDEFINED" in r["Input Data Types"]]


def test_nodes_grappler_made_have_the_shapes_they_ran_with(tmp_path: Path) -> None:
    """ArithmeticOptimizer's AddN and reordered casts are in no Python graph: the session's
    partition graphs give them (and the ops Grappler rewired) their inputs and shapes."""
    prof, _ = collect_export(tmp_path, "tf1_grappler.py")
    ops = rows(prof, "op_summary")
    made = [r for r in ops if "ArithmeticOptimizer/" in r["Op Name"]]
    assert {r["OP Type"] for r in made} >= {"AddN"}, {r["Op Name"] for r in made}
    addn = next(r for r in made if r["OP Type"] == "AddN")
    assert addn["Input Shapes"] == '"32,64;32,64;32,64;32,64"', addn
    assert addn["Input Data Types"] == "FLOAT;FLOAT;FLOAT;FLOAT", addn
    assert not [r for r in ops if NA_DIM in r["Input Shapes"] or NA_DIM in r["Output Shapes"]]
    assert not [r for r in ops if r["OP Type"] != "Assign" and not r["Output Shapes"]]


def test_nodes_grappler_made_in_a_tf_function_have_shapes(tmp_path: Path) -> None:
    """The same for a tf.function: its optimized graph, reported when it is first
    instantiated, names the AddN's inputs, whose one shape it takes."""
    prof, _ = collect_export(tmp_path, "tf2_grappler.py")
    ops = rows(prof, "op_summary")
    addn = [r for r in ops if r["Op Name"].startswith("ArithmeticOptimizer/AddOpsRewrite")]
    assert addn and all(r["Input Shapes"] == '"32,64;32,64;32,64;32,64"' and
                        r["Output Shapes"] == '"32,64"' for r in addn), addn[:1]
    assert not [r for r in ops if NA_DIM in r["Input Shapes"] or NA_DIM in r["Output Shapes"]]


def test_default_export_is_the_training_model_and_its_rows(tmp_path: Path) -> None:
    """fit, then predict with more steps: the default export is the training model (said on
    the console), and its op_summary / op_statistic hold that model's tasks only."""
    prof, err = collect_export(tmp_path, "fit_then_predict.py")
    assert "the training model with the most iterations" in err, err
    [name] = [p.name for p in (prof / "device_0" / "summary").glob("op_summary_*.csv")]
    assert name.startswith("op_summary_0_1_"), name
    models = {r["Model ID"] for r in rows(prof, "op_summary")}
    assert models == {"1"}


def test_placement_rules_and_unknown_types_are_said(tmp_path: Path) -> None:
    """tf.data ops stay on the host; op types in no table are counted and named by collect
    and export (they run as AI Core vector kernels by a documented guess)."""
    proc = subprocess.run([*MSPROF, "collect", "--output", str(tmp_path / "out"), "--",
                           sys.executable, str(SCRIPTS / "unknown_ops.py")],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = "2 op types in no op table ran as AI Core vector kernels by the unknown-type rule: " \
        "BesselI0e (3 tasks), Xlogy (3 tasks)"
    assert said in proc.stdout + proc.stderr
    [prof] = sorted((tmp_path / "out").glob("PROF_*"))
    proc = _run("export", "--output", str(prof), "--layout", "mindstudio", cwd=tmp_path)
    assert f"[WARNING] {said}" in proc.stderr
    [ops] = sorted((prof / "mindstudio_profiler_output").glob("op_summary_*.csv"))
    with open(ops, newline="") as fh:
        types = {r["OP Type"] for r in csv.DictReader(fh)}
    assert {"BesselI0e", "Xlogy"} <= types
    assert not types & {"DatasetCardinality", "GetOptions", "ComputeBatchSize"}


def test_eager_calls_between_steps_are_launches_not_the_cpus_work(tmp_path: Path) -> None:
    """An eager model call between steps: on the NPU each op is one single-op launch, so the
    gap before the next step (Data Aug Bound) holds the script's Python, not the CPU's
    matmuls (docs/device-model.md 5.2)."""
    proc = subprocess.run([*MSPROF, "collect", "--full-trace", "--output",
                           str(tmp_path / "out"), "--", sys.executable,
                           str(SCRIPTS / "eager_between_steps.py")],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    eager_us = float(proc.stdout.split("eager_seconds")[1].split()[0]) * 1e6
    [prof] = sorted((tmp_path / "out").glob("PROF_*"))
    _run("export", "--output", str(prof), cwd=tmp_path)
    steps = {int(s["Iteration ID"]): s for s in rows(prof, "step_trace")}
    gap = float(steps[9]["Data Aug Bound(us)"])
    # the same run's own clock: the calls took eager_us on this CPU, most of it in matmuls
    # (2 x 256 x 2048 x 2048 MACs a call) that the NPU runs in microseconds
    assert gap < 0.5 * eager_us, (gap, eager_us)
    others = [float(steps[i]["Data Aug Bound(us)"]) for i in (2, 3, 4, 5, 6, 7, 8, 10, 11)]
    assert gap > min(others)  # the Python of the eager calls is still there


def test_warm_up_steps_are_left_out_of_the_summary_statistics(tmp_path: Path) -> None:
    import json

    _run("collect", "--output", str(tmp_path / "out"), "--", sys.executable,
         str(SCRIPTS / "fit_then_predict.py"), cwd=tmp_path)
    [prof] = sorted((tmp_path / "out").glob("PROF_*"))
    proc = _run("summary", str(prof), "--format", "json", cwd=tmp_path)
    models = {m["model_id"]: m for d in json.loads(proc.stdout)["devices"] for m in d["models"]}
    train = models[1]
    assert train["warmup_iterations"] == 1
    assert train["iteration_time"]["count"] == train["iterations"] - 1
    assert len(train["steps"]["iteration_id"]) == train["iterations"]  # the series keeps it
    text = _run("summary", str(prof), cwd=tmp_path).stdout
    assert "1 warm-up step (graph tracing) left out of the statistics" in text


def test_sampled_steps_land_in_the_graph_they_ran(tmp_path: Path) -> None:
    """predict twice with a partial last batch: the partial batch runs a second graph of the
    predict function.  Sampled collection used to replay the full batches after it as the
    partial batch's graph, which had never been traced (iterations without ops)."""
    import json

    _run("collect", "--output", str(tmp_path / "out"), "--", sys.executable,
         str(SCRIPTS / "predict_twice.py"), cwd=tmp_path)
    [prof] = sorted((tmp_path / "out").glob("PROF_*"))
    proc = _run("summary", str(prof), "--format", "json", cwd=tmp_path)
    models = [m for d in json.loads(proc.stdout)["devices"] for m in d["models"]
              if m["model_id"] is not None]
    assert all(m["op_us_per_step"] > 0 for m in models), [
        (m["model_id"], m["iterations"], m["op_us_per_step"]) for m in models]
    predict = sorted(m["iterations"] for m in models if m["name"].endswith("_predict"))
    # 37 + 62 full batches in one graph, the 2 partial batches in the other
    assert predict == [2, 99], predict


def test_an_op_pinned_to_the_cpu_stays_on_the_host(tmp_path: Path) -> None:
    """`with tf.device("/cpu:0")` around an embedding lookup: the TF adapter keeps it on the
    host, so it is no device task; the unpinned MatMul is."""
    prof, _ = collect_export(tmp_path, "cpu_pinned.py", "--full-trace")
    types = {r["OP Type"] for r in rows(prof, "op_summary")}
    assert "MatMulV2" in types
    assert not types & {"GatherV2", "ResourceGather"}, types


def test_an_optimizer_update_colocated_with_its_variable_runs_on_the_device(
        tmp_path: Path) -> None:
    """tf.compat.v1 optimizers (and the Keras 2 ones) colocate each update op with its
    variable, whose eager placement on this CPU-only machine is `CPU:0`: that is no pin by the
    script, so the update is a device task every step; the lookup the script did pin under
    `tf.device("/cpu:0")` (colocated with its table) stays on the host."""
    prof, _ = collect_export(tmp_path, "v1_optimizer.py", "--full-trace")
    counts = Counter(r["OP Type"] for r in rows(prof, "op_summary"))
    assert counts["ApplyMomentumD"] == 3 and counts["ApplyAdamD"] == 3, counts
    assert not set(counts) & {"GatherV2", "ResourceGather"}, counts
