"""A real CNN training step's kernels, by group, beside an emulated one's
(docs/device-model.md "Calibration": the tables of kernel groups).

The real profiles: MindSpore's profiler output of ResNet-50 (batch 16 / 32 / 64) and
Inception-v3 (the same batches) on a first-generation Ascend 910 part with 30 AI Cores (clock
not stated), in the Huawei-Performance-Model dataset
(github.com/Huawei-Performance-Model/Ascend-910B@6066283e4ee2,
application_test/final_test/<case>/: `aicore_intermediate_0_detail.csv`, the mean time of
each kernel a step in ms; `<case>.csv`, MindSpore's framework_raw with each kernel's type,
block dim and shapes).  The emulated one: an op_summary of the same model and batch, e.g.
`benchmarks/calibration.py --models resnet50 --keep DIR` (Keras 2, allow_mix_precision).

    .venv/bin/python benchmarks/real_profile_kernels.py /path/to/Ascend-910B.git \\
        DIR/resnet50/PROF_*/device_0/summary/op_summary_*.csv [--case inceptionv3_32]

Prints, per kernel group, the real and the emulated us a step and their ratio, and the real
convolutions' achieved TFLOPS (FLOPs on the padded fractals: Ho*Wo rounded up to 16 x
K x Cout, from the NC1HWC0 / FracZ shapes).  Then, per forward convolution's inner axis K
(Cin padded to 16 x kh x kw), the ns a core spends on an output element, real and emulated,
and the real one less what its cube work takes at the 910's measured peak a core
(216 TFLOPS / 32): docs/device-model.md 3, "The cube's output"."""
from __future__ import annotations

import argparse
import io

import numpy as np
import orjson
import pandas as pd
from _common import git_show as show

CASES = "application_test/final_test/"  # + resnet50_32_224_224, inceptionv3_32, ...
# real kernel types (GE's, after its fusions) and emulated op types, by group
GROUPS = {
    "convolutions (with the BatchNorm reduce fused in)":
        (("FusionOp_Conv2D_BNTrainingReduce", "Conv2D"), ("Conv2D",)),
    "filter gradients (with GE's FusedDbnDw)":
        (("Conv2DBackpropFilter", "FusedDbnDw"), ("Conv2DBackpropFilter",)),
    "input gradients (with the fused ReluGradV2 and AddN)":
        (("FusionOp_Conv2DBackpropInput_ReluGradV2", "FusionOp_Conv2DBackpropInput_AddN_ReluGradV2",
          "Conv2DBackpropInput", "ReluGradV2"),
         ("Conv2DBackpropInput", "ReluGrad", "ReluGradV2", "AddN")),
    "BatchNorm gradient (BNTrainingUpdateGrad + ReduceGrad)":
        (("BNTrainingUpdateGrad", "BNTrainingReduceGrad"), ("BatchNormGrad",)),
    "BatchNorm update (with the fused ReLU and Add)":
        (("FusionOp_BNTrainingUpdate_ReLUV2", "FusionOp_BNTrainingUpdate_Add_ReLUV2",
          "BNTrainingUpdate"), ("BatchNorm", "Add")),
    "optimizer updates (real: with the weight decay fused in)":
        (("FusedMulApplyMomentum", "ApplyMomentum", "ApplyRMSProp"),
         ("ApplyKerasMomentumD", "ApplyMomentumD", "ApplyRMSPropD")),
    "pooling and its gradients":
        (("MaxPoolWithArgmax", "MaxPoolGradWithArgmax", "MaxPool", "MaxPoolGrad", "AvgPool",
          "AvgPoolGradVm", "AvgPoolGrad"),
         ("MaxPool", "MaxPoolGrad", "AvgPool", "AvgPoolGrad", "AvgPoolV2", "AvgPoolV2Grad")),
}



def real_kernels(git_dir: str, rev: str, case: str = "resnet50_32_224_224") -> pd.DataFrame:
    where = f"{CASES}{case}/"
    det = pd.read_csv(io.BytesIO(show(git_dir, rev, where + "aicore_intermediate_0_detail.csv")))
    raw = pd.read_csv(io.BytesIO(show(git_dir, rev, f"{where}{case}.csv")))
    k = det.merge(raw[["full_op_name", "op_type", "block_dim", "op_info"]], on="full_op_name")
    k["us"] = k["execution_time"] * 1000.0
    k["flops"] = [_conv_flops(t, orjson.loads(i)) for t, i in zip(k["op_type"], k["op_info"])]
    return k


def _shape(desc: dict) -> list[int]:
    return [int(v) for v in str(desc.get("shape", "")).split(",") if v]


def _conv_flops(kind: str, info: dict) -> float:
    """2 x N x pad16(Ho*Wo) x K x Cout of a convolution or a gradient (NC1HWC0 / FracZ)."""
    ins = [_shape(v) for k, v in sorted(info.items()) if k.startswith("input")]
    outs = [_shape(v) for k, v in sorted(info.items()) if k.startswith("output")]
    if "Conv2D" in kind and "Backprop" not in kind and len(ins) > 1 and outs:
        img, frac = outs[0], ins[1]
    elif "Conv2DBackpropInput" in kind and len(ins) > 1 and outs:
        img, frac = outs[0], ins[1]
    elif kind in ("Conv2DBackpropFilter", "FusedDbnDw") and outs and ins:
        frac = outs[0]
        five = [s for s in ins if len(s) == 5]
        img = next((s for s in five if len(frac) == 4 and s[1] == frac[1]), five[0] if five
                   else [])
    else:
        return 0.0
    if len(img) != 5 or len(frac) != 4:
        return 0.0
    positions = -(-img[2] * img[3] // 16) * 16
    return 2.0 * img[0] * positions * frac[0] * 16 * frac[1] * 16


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("git_dir", help="a clone (its .git) or mirror of the dataset's repository")
    ap.add_argument("op_summary", help="the emulated model's op_summary CSV (same batch)")
    ap.add_argument("--rev", default="6066283e4ee22d0b5f5cb3c58cd1099f2ba8192a")
    ap.add_argument("--case", default="resnet50_32_224_224",
                    help="the dataset's run: resnet50_{16,32,64}_224_224, inceptionv3_{16,32,64}")
    a = ap.parse_args()
    real = real_kernels(a.git_dir, a.rev, a.case)
    emu = pd.read_csv(a.op_summary)
    emu["us"] = pd.to_numeric(emu["Task Duration(us)"], errors="coerce")
    # the steps in the file: how often the first convolution ran
    convs = emu.loc[emu["OP Type"] == "Conv2D", "Op Name"]
    steps = max(int(convs.value_counts().max()) if len(convs) else 1, 1)
    print(f"real: {real['us'].sum():.0f} us a step over {len(real)} kernels; emulated: "
          f"{emu['us'].sum() / steps:.0f} us a step ({steps} steps in the file)")
    print(f"{'kernels':52} {'real':>8} {'emulated':>9} {'ratio':>6}")
    for label, (rt, et) in GROUPS.items():
        r = real.loc[real["op_type"].isin(rt), "us"].sum()
        e = emu.loc[emu["OP Type"].isin(et), "us"].sum() / steps
        print(f"{label:52} {r:8.0f} {e:9.0f} {e / r:6.2f}")
    for kinds in (("FusionOp_Conv2D_BNTrainingReduce", "Conv2D"),
                  ("FusionOp_Conv2DBackpropInput_ReluGradV2",
                   "FusionOp_Conv2DBackpropInput_AddN_ReluGradV2", "Conv2DBackpropInput"),
                  ("Conv2DBackpropFilter",)):
        k = real[real["op_type"].isin(kinds) & (real["flops"] > 0)]
        print(f"real {kinds[-1]}: {k['flops'].sum() / k['us'].sum() / 1e6:.1f} TFLOPS "
              f"over {len(k)} kernels (median block dim {np.median(k['block_dim']):.0f})")
    emu_blocks = emu.loc[emu["OP Type"] == "Conv2D", "Block Dim"]
    print(f"emulated Conv2D: median block dim {emu_blocks.median():.0f}")
    print_per_output(real, emu.iloc[:len(emu) // steps])
    print_grouped_im2col(real)


PEAK_PER_CORE = 216e12 / 32 / 1e9  # FLOP a core does in a ns at the measured peak


def _real_forward(real: pd.DataFrame) -> pd.DataFrame:
    k = real[real["op_type"].isin(GROUPS[next(iter(GROUPS))][0]) & (real["flops"] > 0)]
    outs = [float(np.prod(_shape(orjson.loads(i)["output_0"]))) for i in k["op_info"]]
    return pd.DataFrame({"K": k["flops"].to_numpy() / (2 * np.array(outs)),
                         "ns": k["us"].to_numpy() * 1e3 * k["block_dim"].to_numpy() / outs})


def _emulated_forward(emu: pd.DataFrame) -> pd.DataFrame:
    k = emu[emu["OP Type"] == "Conv2D"]

    def dims(cell: object, i: int) -> list[int]:
        return [int(v) for v in str(cell).strip('"').split(";")[i].split(",") if v]

    w = [dims(c, 1) for c in k["Input Shapes"]]  # HWIO
    o = [dims(c, 0) for c in k["Output Shapes"]]  # NHWC
    pad = [-(-d // 16) * 16 for d in (x[-1] for x in o)]
    outs = np.array([float(np.prod(x[:-1])) * p for x, p in zip(o, pad)])
    kk = np.array([x[0] * x[1] * -(-x[2] // 16) * 16 for x in w], float)
    return pd.DataFrame({"K": kk, "ns": k["us"].to_numpy() * 1e3
                         * k["Block Dim"].to_numpy() / outs})


def print_per_output(real: pd.DataFrame, emu: pd.DataFrame) -> None:
    """Median ns a core spends on an output element, per forward convolution's K."""
    r, e = _real_forward(real), _emulated_forward(emu)
    bins = [0, 100, 200, 400, 700, 1500, 3000, 1e9]
    r["bin"], e["bin"] = pd.cut(r["K"], bins), pd.cut(e["K"], bins)
    print(f"{'forward conv K':16} {'real ns':>8} {'real - cube':>12} {'emulated ns':>12}")
    for b, g in r.groupby("bin", observed=True):
        em = e.loc[e["bin"] == b, "ns"]
        extra = (g["ns"] - 2 * g["K"] / PEAK_PER_CORE).median()
        emu_ns = f"{em.median():12.3f}" if len(em) else f"{'-':>12}"
        print(f"{str(b):16} {g['ns'].median():8.3f} {extra:12.3f} {emu_ns}")


def print_grouped_im2col(real: pd.DataFrame) -> None:
    """The bytes of im2col a core moves a cycle (1 GHz) in the real windowed AvgPool kernels,
    which TBE runs as a depthwise convolution on the cube (`avg_pool.py`: conv2d_compute with
    groups = C): kh*kw*16 fp16 values a position of each 16 channels, the whole kernel's time
    charged to it (docs/device-model.md 1, "Grouped im2col per core").  A stride-1 window is
    3 x 3 (Inception-v3's); a shrinking one 5 x 5 (its auxiliary head's, stride 3)."""
    k = real[real["op_type"] == "AvgPool"]
    rates = []
    for info, blocks, us in zip(k["op_info"], k["block_dim"], k["us"]):
        d = orjson.loads(info)
        x, y = _shape(d["input_0"]), _shape(d["output_0"])
        if len(y) != 5 or y[2] * y[3] == 1:  # a global pool is a vector reduction
            continue
        window = 9 if y[2:4] == x[2:4] else 25
        positions = y[0] * -(-y[2] * y[3] // 16) * 16
        rates.append((window, 2.0 * positions * window * y[1] * 16 / blocks / (us * 1e3)))
    for window in sorted({w for w, _ in rates}):
        got = np.array([r for w, r in rates if w == window])
        print(f"AvgPool {window} taps: im2col {np.median(got):.1f} B a cycle a core (median; "
              f"{got.min():.1f}-{got.max():.1f} over {len(got)} kernels)")


if __name__ == "__main__":
    main()
