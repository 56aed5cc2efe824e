"""GE's ReLU with a bit mask (relu_mask.py) and the fusion of up to two element-wise kernels
into the BatchNorm update or the input gradient that feeds them (ub_fusion.head_chains)."""
from __future__ import annotations

import numpy as np

from msprof_cli.capture import CaptureChunk, Iteration, ModelInfo, OpRun
from msprof_cli.capture import TensorSpec as T
from msprof_cli.device import relu_mask as RM
from msprof_cli.device.chip import ASCEND910
from msprof_cli.device.cost_model import evaluate
from msprof_cli.device.op_table import Interner, SignatureRegistry, build_tables
from msprof_cli.device.trans_ops import TransPass
from msprof_cli.device.ub_fusion import HEAD_BN, HEAD_DX, Member, UbFuser, head_chains

H = "float16"
X = T((32, 28, 28, 128), H)  # a ResNet-sized fp16 activation
W = T((3, 3, 128, 128), H)
C = T((128,), "float32")


# --- the ReLU's mask ----------------------------------------------------------------------

def test_a_relu_read_by_one_relu_grad_gets_a_mask_and_its_grad_reads_it():
    types = {"r": "Relu", "g": "ReluGrad", "bn": "BatchNorm"}
    shapes = {"r": X.shape, "bn": X.shape}
    assert RM.pairs({"g": "r"}, types, shapes, set()) == {"r": "ReluV2", "g": "ReluGradV2"}
    # read by two gradients: the pass leaves both (NOT_CHANGED)
    types["g2"] = "ReluGrad"
    assert RM.pairs({"g": "r", "g2": "r"}, types, shapes, set()) == {}
    # a last axis that is not a multiple of 8 (ND): relu_v2 rejects it
    assert RM.pairs({"g": "r"}, types, {"r": (64, 12)}, set()) == {}
    assert RM.pairs({"g": "r"}, types, {"r": (64, 16)}, set()) == \
        {"r": "ReluV2", "g": "ReluGradV2"}
    # a ReLU Grappler fused into the op before it: that op writes the mask
    assert RM.pairs({"g": "bn"}, types, shapes, {"bn"}) == {"bn": RM.EPILOGUE,
                                                            "g": "ReluGradV2"}
    # anything else that a ReluGrad reads is left alone
    assert RM.pairs({"g": "bn"}, types, shapes, set()) == {}


def test_mask_is_one_bit_per_element_in_c0_blocks():
    assert RM.mask_spec((32, 28, 28, 128)).shape == (32, 28, 28, 16)  # C1 = 8 blocks x 2 B
    assert RM.mask_spec((32, 28, 28, 3)).shape == (32, 28, 28, 2)  # C padded to 16
    assert RM.mask_spec((64, 1024)).shape == (64, 128)


def test_relu_grad_v2_reads_a_sixteenth_of_what_relu_grad_read():
    sigs = SignatureRegistry()
    relu = sigs.intern("Relu", (X,), (X,), 0)
    grad = sigs.intern("ReluGrad", (X, X), (X,), 0)
    v2 = RM.retyped(sigs, relu, "ReluV2")
    g2 = RM.retyped(sigs, grad, "ReluGradV2")
    elems = 32 * 28 * 28 * 128
    assert sigs.ge_type[v2] == "ReluV2" and sigs.ge_type[g2] == "ReluGradV2"
    assert sigs.bytes_out[v2] == sigs.bytes_out[relu] + elems / 8
    assert sigs.bytes_in[g2] == sigs.bytes_in[grad] - 2 * elems + elems / 8
    assert sigs.specs[g2][0][1].dtype == "uint8" and len(sigs.specs[v2][1]) == 2
    cost = evaluate(sigs.arrays(), ASCEND910)
    assert cost.dur_ticks[g2] < cost.dur_ticks[grad]


# --- the head patterns ----------------------------------------------------------------------

E = float(np.prod(X.shape))


def m(ge: str, n_in: int = 2, n_out: int = 1, same: bool = True, elems: float = E) -> Member:
    return Member(ge, n_in, n_out, same, elems)


def test_bn_update_takes_the_residual_add_and_the_relu_v2():
    prods = {"bn": ("conv",), "add": ("bn", "short"), "relu": ("add",),
             "stat": ("bn",), "next": ("relu",)}
    members = {"add": m("Add"), "relu": m("ReluV2", 1, 2), "stat": m("Cast", 1, 1, elems=128)}
    chains = head_chains(prods, {"bn": (HEAD_BN, E)}, members, {})
    assert chains == [["bn", "add", "relu"]]  # the per-channel Cast is another output
    # a plain Relu (one input, one output) fails BNUpdateEltwiseEltwise's check: one follower
    members["relu"] = m("Relu", 1, 1)
    assert head_chains(prods, {"bn": (HEAD_BN, E)}, members, {}) == [["bn", "add"]]


def test_input_gradient_takes_addn_and_relu_grad_v2_or_one_allowed_op():
    prods = {"sum": ("dx", "other"), "rg": ("sum", "mask"), "bng": ("rg",)}
    members = {"sum": m("AddN"), "rg": m("ReluGradV2")}
    heads = {"dx": (HEAD_DX, E)}
    assert head_chains(prods, heads, members, {}) == [["dx", "sum", "rg"]]
    # AddN over inputs of different shapes fails the pass's check; ReluGradV2 alone fits
    assert head_chains({"rg": ("dx", "mask")}, heads, {"rg": m("ReluGradV2")}, {}) == \
        [["dx", "rg"]]
    members["sum"] = m("AddN", same=False)
    assert head_chains(prods, heads, members, {}) == []
    # a Mul is not in either pass; a dx read by two kernels is not fused
    assert head_chains({"mul": ("dx",)}, heads, {"mul": m("Mul")}, {}) == []
    two = {"rg": ("dx", "mask"), "f": ("dx",)}
    assert head_chains(two, heads, {"rg": m("ReluGradV2")}, {}) == []


# --- through the device's passes ----------------------------------------------------------

def block_ops():
    """relu0 -> conv -> BatchNorm -> Add(relu0) -> Relu, and its backward."""
    y = (X, C, C, C, C, C)
    ops = [("relu0", "Relu", (X,), (X,)),
           ("conv", "Conv2D", (X, W), (X,)),
           ("bn", "FusedBatchNormV3", (X, C, C, C, C), y),
           ("add", "AddV2", (X, X), (X,)),
           ("relu", "Relu", (X,), (X,)),
           ("loss", "Sum", (X,), (T((), H),)),
           ("rg", "ReluGrad", (X, X), (X,)),
           ("bng", "FusedBatchNormGradV3", (X, X, C, C, C, C), (X, C, C)),
           ("dx", "Conv2DBackpropInput", (T((4,), "int32"), W, X), (X,)),
           ("sum", "AddN", (X, X), (X,)),
           ("rg0", "ReluGrad", (X, X), (X,))]
    prods = {"relu0": ("x0",), "conv": ("relu0", "w"), "bn": ("conv", "g", "b", "m", "v"),
             "add": ("bn", "relu0"),
             "relu": ("add",), "loss": ("relu",), "rg": ("loss", "relu"),
             "bng": ("rg", "conv", "g", "bn", "bn", "bn"), "dx": ("sz", "w", "bng"),
             "sum": ("dx", "rg"), "rg0": ("sum", "relu0")}
    return ops, prods


def planned(ops: list, prods: dict, fuse: bool = True):
    """One step of `ops` through GE's boundary pass (and UB fusion): the op table, the
    signatures, the names and the models as GE compiled them."""
    t = 1_000_000
    runs = []
    for name, tf, ins, outs in ops:
        runs.append(OpRun(name, tf, t, t + 20_000, 7, ins, outs))
        t += 30_000
    info = {1: ModelInfo(1, "m", "k", op_order={o[0]: i for i, o in enumerate(ops)},
                         producers=prods)}
    chunk = CaptureChunk(models=info, iterations=[Iteration(1, 1, 0, t, 7, runs)])
    sigs, names = SignatureRegistry(), Interner()
    table, _ = build_tables(chunk, sigs, names)
    models = dict(chunk.models)
    table = TransPass().apply(table, models, sigs, names)
    if fuse:
        table = UbFuser().apply(table, models, sigs, names)
    return table, sigs, names, models


def test_a_resnet_block_runs_as_ge_fuses_it():
    ops, prods = block_ops()
    table, sigs, names, _ = planned(ops, prods)
    got = {names.items[n]: sigs.ge_type[s] for n, s in zip(table.name_idx.tolist(),
                                                           table.sig.tolist())}
    assert got["bnaddrelu"] == "BatchNorm"  # BNUpdateEltwiseEltwise: + Add + ReluV2
    assert got["dxsumrg0"] == "Conv2DBackpropInput"  # dx + AddN + ReluGrad(V2)
    assert got["rg"] == "ReluGradV2"  # reads the mask of the fused ReLU
    assert got["relu0"] == "ReluV2"
    assert "relu" not in got and "add" not in got and "sum" not in got
    # the fused input gradient keeps the cube work and reads the AddN's other input
    a = sigs.arrays()
    fused = int(table.sig[list(got).index("dxsumrg0")])
    dx = sigs.intern("Conv2DBackpropInput", ops[8][2], ops[8][3], 0)
    assert a["flops"][fused] == a["flops"][dx] > 0
    assert a["bytes_out"][fused] == a["bytes_out"][dx]


# --- GE's AtomicAddrClean -----------------------------------------------------------------

def test_the_kernels_that_add_atomically_and_their_bytes():
    from msprof_cli.device import atomic_clean as AC
    dw = T((3, 3, 128, 128), H)
    assert AC.atomic_bytes("Conv2DBackpropFilter", True, (X, T((4,), "int32"), X), (dw,)) \
        == 4 * 3 * 3 * 128 * 128  # the filter gradient, accumulated in fp32
    assert AC.atomic_bytes("BatchNorm", True, (X, C), (X,)) == 2 * 4 * 128  # the two sums
    assert AC.atomic_bytes("BatchNormGrad", True, (X, X, C), (X, C, C)) == 2 * 4 * 128
    assert AC.atomic_bytes("BatchNorm", False, (X, C), (X,)) == 0  # inference: no sums
    assert AC.atomic_bytes("Conv2DBackpropInput", True, (T((4,), "int32"), W, X), (X,)) == 0


def test_one_clean_task_at_the_front_of_the_graph_for_every_atomic_output():
    ops, prods = block_ops()
    ops.append(("dw", "Conv2DBackpropFilter", (X, T((4,), "int32"), X), (W,)))
    prods["dw"] = ("relu0", "sz", "bng")
    table, sigs, names, models = planned(ops, prods, fuse=False)
    row_names = [names.items[n] for n in table.name_idx.tolist()]
    assert row_names.count("atomic_addr_clean0_1") == 1
    first = row_names.index("atomic_addr_clean0_1")
    assert first == 0 or all(n.startswith("trans_") for n in row_names[:first])
    clean = int(table.sig[first])
    # the filter gradient (fp32) and the two BatchNorm layers' sums (forward and gradient)
    assert sigs.bytes_out[clean] == 4 * 3 * 3 * 128 * 128 + 2 * (2 * 4 * 128)
    assert sigs.ge_type[clean] == "AtomicAddrClean" and sigs.bytes_in[clean] == 0
    view = models[1]
    for atomic in ("dw", "bn", "bng"):
        assert "atomic_addr_clean0_1" in view.producers[atomic]
    assert "atomic_addr_clean0_1" not in view.producers["dx"]
