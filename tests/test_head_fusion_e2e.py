"""End-to-end: a Keras model of ReLU convolutions with a residual add on the emulated 910
(docs/device-model.md 3.1, 3.4): GE gives each ReLU a bit mask, fuses the input gradients
with the ReLU gradient (and the residual's AddN) and zeroes the atomic outputs first.
tests/scripts/relu_convs.py through `msprof collect` and `msprof export`."""
from __future__ import annotations

from pathlib import Path

import pytest
from e2e_runs import collect_and_export

pytestmark = pytest.mark.e2e


def test_relus_get_a_mask_and_input_gradients_fuse_their_followers(tmp_path: Path) -> None:
    rows, _, _ = collect_and_export(tmp_path, "relu_convs.py", "--precision-mode",
                                    "allow_mix_precision")
    steps = sum(1 for r in rows if r["Op Name"].endswith("conv_a_1/Relu"))
    assert steps >= 2
    # no ReluGrad task is left: each ran as ReluGradV2 inside an input gradient's kernel
    assert not [r for r in rows if r["OP Type"] in ("ReluGrad", "AddN")]
    dx = [r["Op Name"] for r in rows if r["OP Type"] == "Conv2DBackpropInput"]
    assert sum(n.endswith("conv_b_1/ReluGrad") for n in dx) == steps  # dx + ReluGradV2
    two = [n for n in dx if n.endswith("conv_a_1/ReluGrad")]
    assert len(two) == steps and all("/AddN" in n for n in two)  # dx + AddN + ReluGradV2
    # the forward convolutions Grappler fused with their ReLU write the mask too: 2 bytes
    # (16 bits) per block of 16 channels
    conv_a = next(r for r in rows if r["Op Name"].endswith("conv_a_1/Relu"))
    assert conv_a["OP Type"] == "Conv2D"
    assert conv_a["Output Shapes"].strip('"').split(";") == ["16,16,16,16", "16,16,16,2"]
    # GE's one AtomicAddrClean a step, before the step's first kernel: it zeroes the filter
    # gradients the Conv2DBackpropFilter kernels add into
    cleans = [i for i, r in enumerate(rows) if r["OP Type"] == "AtomicAddrClean"]
    assert len(cleans) == steps
    assert all(rows[i]["Op Name"].startswith("atomic_addr_clean0_") for i in cleans)
    starts = [float(r["Task Start Time(us)"]) for r in rows]
    first_conv = min(starts[i] for i, r in enumerate(rows)
                     if r["Op Name"].endswith("conv_a_1/Relu"))
    assert starts[cleans[0]] < first_conv
