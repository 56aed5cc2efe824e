"""End-to-end: layer norms on the emulated 910 (docs/device-model.md 3.5).  A Keras model's
layer norms run as their moments and element-wise ops (GE's LayerNorm fusion does not match
Keras 3's arithmetic) and the advice says so with their tasks and time, apart from BatchNorm; a TF 1
layer norm differentiated by tf.gradients runs as GE's three fused kernels.
tests/scripts/layer_norm.py and tf1_layer_norm.py through `msprof collect` and `msprof export`."""
from __future__ import annotations

from pathlib import Path

import pytest
from e2e_runs import collect_and_export

pytestmark = pytest.mark.e2e


def collect(tmp: Path, script: str) -> tuple[list[dict[str, str]], str]:
    rows, printed, said = collect_and_export(tmp, script)
    assert "layer norm" in printed
    return rows, said


def test_keras_layer_norms_run_as_their_ops_and_the_advice_counts_them(tmp_path: Path) -> None:
    rows, said = collect(tmp_path, "layer_norm.py")
    types = {r["OP Type"] for r in rows if "layer_normalization" in r["Op Name"]}
    assert {"ReduceMeanD", "SquaredDifference", "RsqrtGrad"} <= types, types
    assert "LayerNorm" not in types
    line = next(ln for ln in said.splitlines() if "LayerNorm: " in ln)
    assert "2 layer norms run as their moments and element-wise ops" in line, line
    assert "BatchNorm: " not in said


def test_a_tf1_layer_norm_runs_as_ge_fused_kernels(tmp_path: Path) -> None:
    rows, said = collect(tmp_path, "tf1_layer_norm.py")
    steps = {r["Op Name"]: 0 for r in rows}
    for r in rows:
        steps[r["Op Name"]] += 1
    fused = {r["OP Type"]: r for r in rows
             if r["OP Type"] in ("LayerNorm", "LayerNormXBackpropV2",
                                 "LayerNormBetaGammaBackpropV2")}
    assert set(fused) == {"LayerNorm", "LayerNormXBackpropV2", "LayerNormBetaGammaBackpropV2"}
    assert {steps[r["Op Name"]] for r in fused.values()} == {3}  # once a training step
    assert fused["LayerNorm"]["Input Shapes"] == '"16,32,64;64;64"'
    assert fused["LayerNorm"]["Output Shapes"] == '"16,32,64;16,32,1;16,32,1"'
    assert not [r for r in rows if r["OP Type"] in ("SquaredDifference", "RsqrtGrad", "TileD")
                and "LayerNorm" in r["Op Name"]]
    assert "LayerNorm: " not in said  # nothing to advise: GE fused them
