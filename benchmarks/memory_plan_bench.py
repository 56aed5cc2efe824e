"""GE's feature-map plan (msprof_cli/device/memory_plan.py) on synthetic graphs: the time of one
plan (once per model and device at collect) and its total against the live peak.

    .venv/bin/python benchmarks/memory_plan_bench.py [--sizes 2000,5000,10000,20000]

Tensors: random sizes (100 B .. 10 MB), starts spread over the graph, lives of up to 200
nodes (activations kept for a backward pass live longer in a real graph: this is the harder
case for the greedy placement)."""
from __future__ import annotations

import argparse
import time

import numpy as np

from msprof_cli.device import memory_plan as MP


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="2000,5000,10000,20000")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"{'tensors':>8}  {'plan':>9}  {'total / live peak':>17}")
    for n in (int(x) for x in args.sizes.split(",")):
        start = rng.integers(0, n, n)
        end = start + rng.integers(0, 200, n)
        nbytes = rng.integers(100, 10**7, n)
        t = time.perf_counter()
        plan = MP.plan(nbytes, start, end)
        dt = time.perf_counter() - t
        print(f"{n:>8}  {dt * 1000:>6.0f} ms  {plan.total / plan.live_peak:>17.3f}")


if __name__ == "__main__":
    main()
