"""Collect overhead: the same Keras CNN training without the agent, with sampled tracing (the
default) and with `--full-trace`, on a small model (~4-6 ms steps) and a moderate one (~12+ ms).

    .venv/bin/python benchmarks/collect_overhead.py [--steps 300] [--repeats 5]
                                                    [--workloads small,moderate]

Method (overhead):
* every run is its own subprocess (`msprof collect` for the agent modes); runs are interleaved
  (repeat r runs baseline, sampled, full of each workload in turn) so machine drift hits every
  mode alike;
* the script times every step itself (a Keras callback: interval between consecutive
  `on_train_batch_end`); the steady-state step time of a run = the median interval after a
  warm-up of 30 steps; the reported value per mode = median over the repeats;
* ratio = mode / baseline of those medians; the whole-process ratio compares the wall time of
  the whole command (TF import, training, exit flush and, for collect, the raw writing).
Results also go to benchmarks/results/collect_overhead.csv.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_results  # noqa: E402

WARMUP = 30
WORKLOADS = {  # name -> (batch, conv channels, dense units)
    "small": (32, 16, 64),
    "moderate": (96, 24, 96),
}
SCRIPT = textwrap.dedent("""
    import os, sys, time, json, statistics
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np, tensorflow as tf
    keras = tf.keras
    steps, warm, batch, ch, units = (int(a) for a in sys.argv[1:6])
    n = batch * (steps + warm)
    x = np.random.default_rng(0).random((n, 28, 28, 1), dtype=np.float32)
    y = np.random.default_rng(1).integers(0, 10, n)
    m = keras.Sequential([keras.Input((28, 28, 1)),
        keras.layers.Conv2D(ch, 3, activation="relu"), keras.layers.MaxPooling2D(),
        keras.layers.Conv2D(2 * ch, 3, activation="relu"), keras.layers.MaxPooling2D(),
        keras.layers.Flatten(), keras.layers.Dense(units, activation="relu"),
        keras.layers.Dense(10)], name="bench_cnn")
    m.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    ends = []
    class T(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            ends.append(time.perf_counter())
        def on_train_end(self, logs=None):
            d = [b - a for a, b in zip(ends[warm:], ends[warm + 1:])]
            print("RESULT", json.dumps({"ms_per_step": statistics.median(d) * 1e3,
                                        "mean_ms": statistics.fmean(d) * 1e3}))
    m.fit(x, y, batch_size=batch, epochs=1, verbose=0, callbacks=[T()])
""")
MODES = ("baseline", "sampled", "full")


def run(mode: str, script: Path, args: list[str], out: Path) -> dict[str, float]:
    cmd = [sys.executable, str(script), *args]
    if mode != "baseline":
        flags = ["--full-trace"] if mode == "full" else []
        cmd = [sys.executable, "-m", "msprof_cli", "collect", "--output", str(out), *flags,
               "--"] + cmd
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("RESULT"))
    data = json.loads(line.split(" ", 1)[1])
    data["wall_s"] = wall
    return data


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--workloads", default="small,moderate")
    args = ap.parse_args()
    names = [w for w in args.workloads.split(",") if w]
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "workload.py"
        script.write_text(SCRIPT)
        results = {(w, m): [] for w in names for m in MODES}
        for r in range(args.repeats):
            for w in names:
                batch, ch, units = WORKLOADS[w]
                wargs = [str(args.steps), str(WARMUP), str(batch), str(ch), str(units)]
                for mode in MODES:
                    out = Path(tmp) / f"{w}_{mode}_{r}"
                    results[(w, mode)].append(run(mode, script, wargs, out))
    print(f"Keras CNN, {args.steps} steps after {WARMUP} warm-up, median of {args.repeats} "
          "interleaved runs")
    print(f"{'workload':9} {'mode':9} {'ms/step':>8} {'ratio':>6} {'min..max ratio':>15} "
          f"{'process s':>9} {'ratio':>6}")
    for w in names:
        base = statistics.median(x["ms_per_step"] for x in results[(w, "baseline")])
        base_wall = statistics.median(x["wall_s"] for x in results[(w, "baseline")])
        for mode in MODES:
            rs = results[(w, mode)]
            ms = statistics.median(x["ms_per_step"] for x in rs)
            wall = statistics.median(x["wall_s"] for x in rs)
            per_run = [x["ms_per_step"] / b["ms_per_step"]
                       for x, b in zip(rs, results[(w, "baseline")])]
            print(f"{w:9} {mode:9} {ms:8.2f} {ms / base:6.3f} "
                  f"{min(per_run):7.3f}..{max(per_run):5.3f} {wall:9.2f} {wall / base_wall:6.3f}")
            rows.append({"workload": w, "mode": mode, "ms_per_step": round(ms, 3),
                         "step_ratio": round(ms / base, 4), "process_s": round(wall, 3),
                         "process_ratio": round(wall / base_wall, 4),
                         "runs": args.repeats, "steps": args.steps})
    print(f"written {write_results('collect_overhead', rows)}")


if __name__ == "__main__":
    main()
