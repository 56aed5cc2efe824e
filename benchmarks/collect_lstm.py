"""Collect overhead and raw-data volume of a loop-heavy model.

    python benchmarks/collect_lstm.py [--steps 60] [--repeats 2]

A Keras Bidirectional-LSTM `fit` of `--steps` steps (batch 32, sequence 50, 64 units): each
step runs the recurrent loop's ops once per time step, so a traced step has thousands of op
events.  Prints the median wall time of the plain script and under `msprof collect`
(default options: sampled tracing), their ratio (target <= 1.3) and the size of the PROF
dir's raw data.  Runs are interleaved (plain, collect, plain, ...).
"""
from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCRIPT = '''
import sys
import numpy as np
import tensorflow as tf
steps = int(sys.argv[1])
x = np.random.default_rng(0).random((32 * steps, 50, 16), dtype=np.float32)
y = np.zeros((32 * steps, 1), np.float32)
model = tf.keras.Sequential([tf.keras.layers.Input((50, 16)),
                             tf.keras.layers.Bidirectional(tf.keras.layers.LSTM(64)),
                             tf.keras.layers.Dense(1)])
model.compile("adam", "mse")
model.fit(x, y, batch_size=32, epochs=1, verbose=0)
'''


def _children_cpu() -> float:
    """CPU seconds (user + sys) of the finished children so far: steadier than wall time on a
    shared VM, whose other load stretches the wall clock of both runs differently."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="msprof_lstm_"))
    script = work / "lstm.py"
    script.write_text(SCRIPT)
    plain, profiled, sizes = [], [], []
    plain_cpu, profiled_cpu = [], []
    for k in range(args.repeats):
        t0, c0 = time.perf_counter(), _children_cpu()
        subprocess.run([sys.executable, str(script), str(args.steps)], check=True,
                       capture_output=True)
        plain.append(time.perf_counter() - t0)
        plain_cpu.append(_children_cpu() - c0)
        out = work / f"out{k}"
        t0, c0 = time.perf_counter(), _children_cpu()
        subprocess.run([sys.executable, "-m", "msprof_cli", "collect", "--output", str(out),
                        "--", sys.executable, str(script), str(args.steps)], check=True,
                       capture_output=True)
        profiled.append(time.perf_counter() - t0)
        profiled_cpu.append(_children_cpu() - c0)
        [prof] = sorted(out.glob("PROF_*"))
        sizes.append(_size(prof))
        try:  # which steps were traced (the rest replayed): the raw volume depends on it
            meta = json.loads((prof / "msprof_cli_sampling.json").read_text())
            measured = [r for m in meta["models"].values() for r in m["measured"]]
            print(f"run {k + 1}: plain {plain[-1]:.1f} s, collect {profiled[-1]:.1f} s "
                  f"(CPU {plain_cpu[-1]:.1f} / {profiled_cpu[-1]:.1f} s), "
                  f"raw {sizes[-1] / 2**20:.1f} MiB, traced steps {measured}", flush=True)
        except (OSError, ValueError, KeyError):
            pass
    p, c = statistics.median(plain), statistics.median(profiled)
    print(f"bidirectional LSTM fit, {args.steps} steps: plain {p:.1f} s, msprof collect "
          f"{c:.1f} s, ratio {c / p:.2f} (target <= 1.3); CPU (user + sys of the process "
          f"trees) {statistics.median(plain_cpu):.1f} / {statistics.median(profiled_cpu):.1f} "
          f"s, ratio {statistics.median(profiled_cpu) / statistics.median(plain_cpu):.2f}; "
          f"raw data {statistics.median(sizes) / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
