"""End-to-end: a Keras model's layer norms run as their moments and element-wise ops on the
emulated 910 (GE fuses them only in TF 1 graphs: docs/device-model.md 9), and the advice says
so with their tasks and time, apart from BatchNorm.  tests/scripts/layer_norm.py through
`msprof collect` and `msprof export`."""
from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
SCRIPT = Path(__file__).resolve().parent / "scripts" / "layer_norm.py"
MSPROF = [sys.executable, "-m", "msprof_cli"]


def test_layer_norms_run_as_their_ops_and_the_advice_counts_them(tmp_path: Path) -> None:
    proc = subprocess.run([*MSPROF, "collect", "--output", str(tmp_path / "out"), "--",
                           sys.executable, str(SCRIPT)], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "layer norm done" in proc.stdout
    [prof] = sorted((tmp_path / "out").glob("PROF_*"))
    exp = subprocess.run([*MSPROF, "export", str(prof)], capture_output=True, text=True,
                         timeout=300)
    assert exp.returncode == 0, exp.stderr[-3000:]
    [path] = sorted((prof / "device_0" / "summary").glob("op_summary_0*.csv"))
    with open(path, newline="") as fh:
        types = {r["OP Type"] for r in csv.DictReader(fh)
                 if "layer_normalization" in r["Op Name"]}
    assert {"ReduceMeanD", "SquaredDifference", "RsqrtGrad"} <= types, types
    assert "LayerNorm" not in types
    said = exp.stdout + exp.stderr
    line = next(ln for ln in said.splitlines() if "LayerNorm: " in ln)
    assert "2 layer norms run as their moments and element-wise ops" in line, line
    assert "BatchNorm: " not in said
