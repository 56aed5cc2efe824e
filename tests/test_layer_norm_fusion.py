"""GE's LayerNormTrainingFusionPass on real TensorFlow graphs (docs/device-model.md 3.5): a
TF 1 layer norm (tf.nn.moments + tf.nn.batch_normalization, differentiated by tf.gradients)
becomes LayerNorm + LayerNormXBackpropV2 + LayerNormBetaGammaBackpropV2 with the rest folded;
the GradientTape's own graph of the same layer norm (its AddN in another order, which Grappler
rebuilds before GE sees it) and Keras 3's LayerNormalization do not match.  The graphs are
built by tests/scripts/layer_norm_patterns.py in a child process (TensorFlow stays out of the
test process)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from msprof_cli.device.layer_norm_fusion import (BETA_GAMMA_BACKPROP, FOLDED, LAYER_NORM,
                                                 X_BACKPROP)

pytestmark = pytest.mark.e2e
SCRIPT = Path(__file__).resolve().parent / "scripts" / "layer_norm_patterns.py"


@pytest.fixture(scope="module")
def plans() -> dict:
    proc = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_tf1_layer_norm_and_its_tf_gradients_fuse_into_three_kernels(plans: dict) -> None:
    got = plans["tf1"]
    kernels = {n: r for n, r in got.items() if r["type"] != FOLDED}
    assert sorted(r["type"] for r in kernels.values()) == sorted(
        [LAYER_NORM, X_BACKPROP, BETA_GAMMA_BACKPROP])
    by_type = {r["type"]: (n, r) for n, r in kernels.items()}
    name, ln = by_type[LAYER_NORM]
    assert name == "LayerNorm/batchnorm/add_1"
    assert ln["inputs"] == [[4, 8, 32], [32], [32]]
    assert ln["outputs"] == [[4, 8, 32], [4, 8, 1], [4, 8, 1]]
    assert by_type[X_BACKPROP][0].startswith("gradients/AddN_")  # the AddN into x
    assert by_type[X_BACKPROP][1]["inputs"] == [[4, 8, 32], [4, 8, 32], [4, 8, 1], [4, 8, 1],
                                                [32]]
    assert by_type[BETA_GAMMA_BACKPROP][1]["outputs"] == [[32], [32]]
    assert by_type[BETA_GAMMA_BACKPROP][0] == "gradients/LayerNorm/batchnorm/mul_grad/Sum_1"
    folded = {n for n, r in got.items() if r["type"] == FOLDED}
    for op in ("LayerNorm/moments/mean", "LayerNorm/moments/SquaredDifference",
               "LayerNorm/batchnorm/Rsqrt", "LayerNorm/batchnorm/sub",
               "gradients/LayerNorm/batchnorm/Rsqrt_grad/RsqrtGrad",
               "gradients/LayerNorm/moments/SquaredDifference_grad/sub",
               "gradients/LayerNorm/batchnorm/mul_grad/Mul",
               "gradients/LayerNorm/moments/mean_grad/truediv",
               "gradients/LayerNorm/batchnorm/sub_grad/Sum"):  # dbeta: the same kernel
        assert op in folded, op
    # what the fused kernels do not replace keeps running
    assert not any(n.startswith(("gradients/Tensordot", "GradientDescent")) for n in got)
    assert "Tensordot/MatMul" not in got


def test_a_tape_order_and_keras3_layer_norms_do_not_match(plans: dict) -> None:
    assert plans["tape"] == {}
    assert plans["keras3"] == {}
