"""A graph step's data edges (msprof_cli/device/step_graph.py) and the L2 residency of its
tasks' reads (msprof_cli/device/l2_residency.py) on synthetic graphs: once per model and
device at collect, beside the memory plan (memory_plan_bench.py).

    .venv/bin/python benchmarks/step_graph_bench.py [--sizes 2000,10000,20000]

Tasks: a chain, half of them with one more input from a random earlier task (the skips and
the saved activations of a training step); outputs of 1 kB .. 10 MB."""
from __future__ import annotations

import argparse
import time

import numpy as np

from msprof_cli.capture import ModelInfo
from msprof_cli.device import l2_residency as L2
from msprof_cli.device import step_graph as SG
from msprof_cli.device.op_table import Interner
from msprof_cli.device.ub_fusion import UbFuser

L2_BYTES = 32 << 20  # the 910A's


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="2000,10000,20000")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"{'tasks':>8}  {'edges':>7}  {'edge walk':>9}  {'L2 shares':>9}  {'read share':>10}")
    for n in (int(x) for x in args.sizes.split(",")):
        names = [f"op{i}" for i in range(n)]
        prods = {names[i]: (names[i - 1],) + ((names[int(rng.integers(0, i))],)
                                              if rng.random() < 0.5 else ())
                 for i in range(1, n)}
        model = ModelInfo(1, "m", "k", op_order={m: i for i, m in enumerate(names)},
                          producers=prods)
        t0 = time.perf_counter()
        src, dst = SG.step_edges(1, model, names, Interner(), UbFuser())
        t1 = time.perf_counter()
        out = rng.integers(1000, 10**7, n).astype(np.float64)
        b_in = np.bincount(dst, out[src], minlength=n)
        share = L2.graph_shares(b_in, out, src, dst, float(L2_BYTES))
        t2 = time.perf_counter()
        read = float((share * b_in).sum() / max(b_in.sum(), 1.0))
        print(f"{n:>8}  {len(src):>7}  {(t1 - t0) * 1000:>6.0f} ms  {(t2 - t1) * 1000:>6.1f} ms"
              f"  {read:>10.2f}")


if __name__ == "__main__":
    main()
