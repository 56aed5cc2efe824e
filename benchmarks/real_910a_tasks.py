"""The per-task figures of a real Ascend 910A that the cost model takes (docs/device-model.md
5, "Per-task overheads"; 1, "Sustained HBM bandwidth"), re-derived from the real profilers'
own output of three real collections, kept as test data in MindInsight's repository
(github.com/mindspore-ai/mindinsight, Apache-2.0, at commit e233ee19a350):

- tests/utils/resource/profiler/PROF_000001_20230818142704322_COJGGGCANRMICFBC: a CANN msprof
  collection (info.json: ai_core_num 32, aiv_num 0, aic_frequency 1000: a 910A) of AlexNet,
  ten iterations of its msprof timeline (task start, duration, AI Core time, total cycles);
- tests/utils/resource/run_1 and run_2/normal_run/profiler: MindSpore profiler output of LeNet
  and AlexNet (batch 2) training on a 910 (op durations with block dims and shapes).

    fetch github:mindspore-ai/mindinsight (or git clone it), then
    .venv/bin/python benchmarks/real_910a_tasks.py /path/to/mindinsight.git

Prints: the gap between back-to-back AI Core tasks on a stream; the shortest task per block
dim (the start-up floor) pooled over the three collections and the line through its 1-core
and 32-core floors; the HCCL transfers' rate to a peer and the all-reduce's peer streams (the
collection's 8-rank all-reduce); ApplyMomentum's sustained HBM bandwidth on the two fully
connected weights of known shape."""
from __future__ import annotations

import argparse
import io

import numpy as np
import orjson
import pandas as pd
from _common import git_show as show

PROF = ("tests/utils/resource/profiler/PROF_000001_20230818142704322_COJGGGCANRMICFBC/"
        "device_0/timeline/msprof_0_2_{}.json")
HCCL = PROF.replace("msprof_0_2_", "hccl_0_2_")
RUNS = {"run_1": ("full_kernel_name", "kernel_type"), "run_2": ("full_op_name", "op_type")}
RUN_DIR = "tests/utils/resource/{}/normal_run/profiler/"



def msprof_tasks(git_dir: str, rev: str) -> pd.DataFrame:
    """The AI Core tasks of the ten iterations of the CANN collection."""
    frames = []
    for i in range(1, 11):
        ev = pd.DataFrame(orjson.loads(show(git_dir, rev, PROF.format(i))))
        ev = ev[(ev["ph"] == "X") & (ev["pid"] == 3)]
        args = pd.DataFrame(ev["args"].tolist(), index=ev.index)
        ev = ev.join(args)[lambda d: d["Task Type"] == "AI_CORE"]
        frames.append(ev.assign(iteration=i))
    t = pd.concat(frames).sort_values(["iteration", "tid", "ts"])
    # the block dim: total cycles over the AI Core time at 1 GHz (the column says ms, the
    # values are us)
    cycles = pd.to_numeric(t["Total Cycle"]).to_numpy(np.float64)
    busy = pd.to_numeric(t["Aicore Time(ms)"]).to_numpy(np.float64)
    t["block_dim"] = np.rint(cycles / (busy * 1000.0))
    prev_end = (t["ts"] + t["dur"]).groupby([t["iteration"], t["tid"]]).shift()
    t["gap_us"] = t["ts"] - prev_end
    return t


def hccl_transfers(git_dir: str, rev: str) -> tuple[pd.DataFrame, list[float]]:
    """The all-reduce's transfers to its peers (Memcpy / Reduce_Inline: bytes, us, link,
    stream) and the all-reduce's durations, over the ten iterations."""
    frames, ops = [], []
    for i in range(1, 11):
        ev = pd.DataFrame(orjson.loads(show(git_dir, rev, HCCL.format(i))))
        ev = ev[ev["ph"] == "X"]
        ops += ev.loc[ev["name"].str.contains("AllReduce"), "dur"].tolist()
        ev = ev[ev["name"].isin(["Memcpy", "Reduce_Inline"])]
        args = pd.DataFrame(ev["args"].tolist(), index=ev.index)
        frames.append(ev[["dur", "tid"]].join(args[["size(Byte)", "link type"]]))
    return pd.concat(frames), ops


def mindspore_tasks(git_dir: str, rev: str) -> pd.DataFrame:
    frames = []
    for run, (key, kind) in RUNS.items():
        det = pd.read_csv(io.BytesIO(show(git_dir, rev, RUN_DIR.format(run)
                                          + "aicore_intermediate_1_detail.csv")))
        raw = pd.read_csv(io.BytesIO(show(git_dir, rev, RUN_DIR.format(run)
                                          + "framework_raw_1.csv")))
        m = det.merge(raw[[key, "block_dim", kind, "op_info"]], on=key)
        frames.append(pd.DataFrame({"run": run, "op_type": m[kind], "op_info": m["op_info"],
                                    "block_dim": m["block_dim"],
                                    "dur": m["execution_time"] * 1000.0}))
    return pd.concat(frames)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("git_dir", help="a clone (its .git) or mirror of mindspore-ai/mindinsight")
    ap.add_argument("--rev", default="e233ee19a350be07bc448268ae9bd47728907dea")
    a = ap.parse_args()
    cann = msprof_tasks(a.git_dir, a.rev)
    ms = mindspore_tasks(a.git_dir, a.rev)
    gaps = cann["gap_us"].dropna()
    gaps = gaps[gaps >= 0]
    q = np.percentile(gaps, [5, 50, 95])
    print(f"gap between back-to-back AI Core tasks: n={len(gaps)}  p5 {q[0]:.2f}  "
          f"median {q[1]:.2f}  p95 {q[2]:.2f} us")
    pooled = pd.concat([cann[["block_dim", "dur"]].assign(run="msprof"),
                        ms[["block_dim", "dur", "run"]]])
    pooled = pooled[pooled["dur"] >= 0.5]  # a 0.01 us AtomicAddrClean row is no kernel
    floor = pooled.groupby("block_dim")["dur"].agg(["count", "min", "median"])
    print(floor.to_string(float_format=lambda v: f"{v:.2f}"))
    one, full = floor.loc[1.0, "min"], floor.loc[32.0, "min"]
    print(f"start-up floor: {one * 1000:.0f} ns + {(full - one) / 31 * 1000:.1f} ns x "
          "(block dim - 1)")
    xfer, ops = hccl_transfers(a.git_dir, a.rev)
    peer = xfer[xfer["link type"].isin(["HCCS", "PCIE"])]
    rate = peer["size(Byte)"] / peer["dur"] / 1e3
    print(f"HCCL transfer to a peer: n={len(peer)}  median {rate.median():.1f} GB/s  "
          f"p10 {rate.quantile(0.1):.1f}  p90 {rate.quantile(0.9):.1f}; peer streams "
          f"{peer['tid'].nunique()}; all-reduce {sorted(round(d) for d in ops)} us")
    mom = ms[(ms["run"] == "run_2") & (ms["op_type"] == "ApplyMomentum")]
    for shape in ("4096,9216", "4096,4096"):
        row = mom[mom["op_info"].str.contains(f'"shape": "{shape}"', regex=False)]
        elems = np.prod([int(v) for v in shape.split(",")])
        moved = 5 * elems * 4  # var, accum, grad read; var, accum written (fp32)
        for us in row["dur"]:
            print(f"ApplyMomentum [{shape}] fp32: {moved / 1e6:.1f} MB in {us:.2f} us = "
                  f"{moved / us / 1e3:.0f} GB/s")


if __name__ == "__main__":
    main()
