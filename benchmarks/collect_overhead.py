"""Collect overhead: steady-state step time of a small Keras CNN without the agent, with full
tracing (--full-trace) and with sampled tracing (the default).

    .venv/bin/python benchmarks/collect_overhead.py [--steps 200] [--repeats 3]

Each mode runs the workload script as a subprocess (`msprof collect` for the agent modes);
the script reports its own steady-state wall time per step after a warm-up, so TF import
and the exit flush are excluded (they are reported separately as whole-process time).
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

WORKLOAD = textwrap.dedent("""
    import os, sys, time, json
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np, tensorflow as tf
    keras = tf.keras
    steps, warm = int(sys.argv[1]), 20
    x = np.random.rand(32 * (steps + warm), 28, 28, 1).astype("float32")
    y = np.random.randint(0, 10, 32 * (steps + warm))
    m = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Conv2D(16, 3, activation="relu"),
        keras.layers.MaxPooling2D(), keras.layers.Conv2D(32, 3, activation="relu"),
        keras.layers.MaxPooling2D(), keras.layers.Flatten(), keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(10)], name="bench_cnn")
    m.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    class T(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            if batch == warm: self.t0 = time.perf_counter()
        def on_train_end(self, logs=None):
            print("RESULT", json.dumps({"ms_per_step": (time.perf_counter() - self.t0) * 1e3 / steps}))
    m.fit(x, y, batch_size=32, epochs=1, verbose=0, callbacks=[T()])
""")


def run(mode: str, script: Path, steps: int, out: Path) -> tuple[float, float]:
    cmd = [sys.executable, str(script), str(steps)]
    if mode != "baseline":
        flags = ["--full-trace"] if mode == "full" else []
        cmd = [sys.executable, "-m", "msprof_cli", "collect", "--output", str(out), *flags,
               "--"] + cmd
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    line = next(l for l in res.stdout.splitlines() if l.startswith("RESULT"))
    return json.loads(line.split(" ", 1)[1])["ms_per_step"], wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "workload.py"
        script.write_text(WORKLOAD)
        results: dict[str, list[tuple[float, float]]] = {"baseline": [], "full": [], "sampled": []}
        for _ in range(args.repeats):  # interleaved: drift hits every mode alike
            for mode in results:
                results[mode].append(run(mode, script, args.steps, Path(tmp) / mode))
    base = statistics.median(r[0] for r in results["baseline"])
    print(f"Keras CNN, batch 32, {args.steps} steady steps, median of {args.repeats} runs")
    print(f"{'mode':10} {'ms/step':>9} {'overhead':>9} {'process s':>10}")
    for mode, rs in results.items():
        ms = statistics.median(r[0] for r in rs)
        wall = statistics.median(r[1] for r in rs)
        print(f"{mode:10} {ms:9.2f} {100 * (ms / base - 1):+8.1f}% {wall:10.2f}")


if __name__ == "__main__":
    main()
