"""Agent memory over a long run: RSS of the training process with and without `msprof collect`.

    .venv/bin/python benchmarks/collect_memory.py [--seconds 90] [--modes baseline,sampled,full]

The workload trains a small Keras CNN in a loop for `--seconds`; the benchmark samples the
VmRSS of the Python process running it (for collect: the launcher's child) every 0.5 s and
reports the RSS after warm-up (10 s), at the end, the peak, and the growth rate over the second
half of the run (MB/min).  Bounded memory = the growth rate of the agent modes is about the
baseline's and the peak stays well under +300 MB.  Chunks are flushed every
`MSPROF_CLI_FLUSH_SECONDS` (default 10 s), so a 90 s run goes through ~9 flushes.
Results also go to benchmarks/results/collect_memory.csv.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_results  # noqa: E402

SCRIPT = textwrap.dedent("""
    import os, sys, time
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np, tensorflow as tf
    keras = tf.keras
    seconds = float(sys.argv[1])
    x = np.random.default_rng(0).random((512, 28, 28, 1), dtype=np.float32)
    y = np.random.default_rng(1).integers(0, 10, 512)
    m = keras.Sequential([keras.Input((28, 28, 1)),
        keras.layers.Conv2D(16, 3, activation="relu"), keras.layers.MaxPooling2D(),
        keras.layers.Flatten(), keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(10)], name="mem_cnn")
    m.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    t_end = time.monotonic() + seconds
    steps = 0
    while time.monotonic() < t_end:
        m.fit(x, y, batch_size=32, epochs=1, verbose=0)
        steps += 16
    print("STEPS", steps)
""")


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def python_child(pid: int) -> int:
    """The launcher's child (the profiled script), or `pid` itself for the baseline."""
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return pid
    return int(kids[0]) if kids else pid


def run(mode: str, script: Path, seconds: float, out: Path) -> dict[str, float]:
    cmd = [sys.executable, str(script), str(seconds)]
    if mode != "baseline":
        flags = ["--full-trace"] if mode == "full" else []
        cmd = [sys.executable, "-m", "msprof_cli", "collect", "--output", str(out), *flags,
               "--"] + cmd
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    t0 = time.monotonic()
    samples: list[tuple[float, float]] = []
    target = proc.pid
    while proc.poll() is None:
        if mode != "baseline" and target == proc.pid:
            target = python_child(proc.pid)
        v = rss_mb(target)
        if v is not None:
            samples.append((time.monotonic() - t0, v))
        time.sleep(0.5)
    steps = next((int(ln.split()[1]) for ln in proc.stdout.read().splitlines()
                  if ln.startswith("STEPS")), 0)
    warm = [v for t, v in samples if t >= 10.0] or [v for _, v in samples]
    half = [(t, v) for t, v in samples if t >= 10.0 + (seconds - 10.0) / 2]
    slope = 0.0
    if len(half) >= 4:  # least-squares MB per minute over the second half
        n = len(half)
        mt = sum(t for t, _ in half) / n
        mv = sum(v for _, v in half) / n
        den = sum((t - mt) ** 2 for t, _ in half) or 1.0
        slope = sum((t - mt) * (v - mv) for t, v in half) / den * 60
    return {"rss_after_warmup_mb": warm[0], "rss_end_mb": warm[-1],
            "rss_peak_mb": max(v for _, v in samples), "growth_mb_per_min": slope,
            "steps": steps}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=90.0)
    ap.add_argument("--modes", default="baseline,sampled,full")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "workload.py"
        script.write_text(SCRIPT)
        for mode in args.modes.split(","):
            r = run(mode, script, args.seconds, Path(tmp) / mode)
            rows.append({"mode": mode, "seconds": args.seconds,
                         **{k: round(v, 1) for k, v in r.items()}})
            print(rows[-1], flush=True)
    print(f"written {write_results('collect_memory', rows)}")


if __name__ == "__main__":
    main()
