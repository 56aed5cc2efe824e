"""One integration test: the exporter accepts the emulated device's raw data."""
from __future__ import annotations

import csv

import pytest
from test_device_records import device_op_names, make_chunk, run

api = pytest.importorskip("msprof_cli.export.api")


def test_export_op_summary_rows_equal_device_ops(tmp_path):
    prof = run(tmp_path, [make_chunk(3)])
    api.run_export(prof, layout="mindstudio", quiet=True)
    out = prof / "mindstudio_profiler_output"
    [summary] = out.glob("op_summary_*.csv")
    rows = list(csv.DictReader(summary.open()))
    # AI Core + AI CPU tasks (aicpu on); HCCL and host-only ops have no op_summary row
    assert len(rows) == 3 * len(device_op_names())
    assert {r["Model ID"] for r in rows} == {"1"}
    assert {r["OP State"] for r in rows} == {"static"}
    names = {r["Op Name"] for r in rows}
    assert "sequential/conv2d/Relu" in names and "dropout/random_uniform/RandomUniform" in names
    conv = [r for r in rows if r["Op Name"] == "sequential/conv2d/Relu"][0]
    assert conv["OP Type"] == "Conv2D" and conv["Task Type"] == "AI_CORE"
    assert float(conv["Task Duration(us)"]) > 0 and conv["mac_ratio"] not in ("", "N/A")
    [steps] = out.glob("step_trace_*.csv")
    st = list(csv.DictReader(steps.open()))
    assert len(st) == 3 and all(r["FP Start(us)"] != "N/A" for r in st)


def test_op_without_captured_tensors_exports_na_shapes(tmp_path):
    """No tensor specs captured -> no tensor_info record -> N/A shape cells (not empty)."""
    from test_device_records import STEP_OPS

    ops = [("plain/Cast", "Cast", (), (), ())] + list(STEP_OPS)
    prof = run(tmp_path, [make_chunk(1, ops=ops)])
    api.run_export(prof, layout="mindstudio", quiet=True)
    [summary] = (prof / "mindstudio_profiler_output").glob("op_summary_*.csv")
    rows = {r["Op Name"]: r for r in csv.DictReader(summary.open())}
    cast = rows["plain/Cast"]
    assert (cast["Input Shapes"], cast["Input Data Types"], cast["Output Formats"]) == (
        "N/A", "N/A", "N/A")
    assert rows["sequential/conv2d/Relu"]["Input Shapes"].startswith('"')
