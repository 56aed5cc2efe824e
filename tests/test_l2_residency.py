"""The L2 residency of a task's reads (msprof_cli/device/l2_residency.py) against a brute-force
LRU cache at tensor granularity, and its effect on a task's cost."""
from __future__ import annotations

import numpy as np
import pytest

from msprof_cli.device import l2_residency as L2
from msprof_cli.device.chip import get_chip
from msprof_cli.device.cost_model import evaluate
from msprof_cli.device.op_map import COST_VECTOR, KIND_AI_CORE
from msprof_cli.device.op_table import SignatureRegistry


def _lru_shares(sizes: list[int], reads: list[list[int]], outside: list[int],
                capacity: int) -> list[float]:
    """Run the step twice through an LRU cache of whole tensors (`capacity` bytes); per task
    of the second run, the share of its read bytes that hit.  Tensor t is task t's output;
    tensor n + j is task j's outside input (a variable read once a step)."""
    n = len(sizes)
    stack: list[tuple[int, int]] = []  # (key, bytes), most recent last

    def touch(key: tuple[int, int], size: int) -> bool:
        hit = False
        above = 0
        for k, b in reversed(stack):  # distinct bytes touched since this key's last use
            if k == key:
                hit = above + size <= capacity
                break
            above += b
        stack[:] = [e for e in stack if e[0] != key] + [(key, size)]
        return hit

    shares: list[float] = []
    for step in range(2):
        for j in range(n):
            got = total = 0
            for p in reads[j]:
                total += sizes[p]
                got += sizes[p] * touch((step, p), sizes[p])
            if outside[j]:
                total += outside[j]
                got += outside[j] * touch((-1, n + j), outside[j])
            touch((step, j), sizes[j])  # the write
            if step == 1:
                shares.append(got / total if total else 1.0)
    return shares


def _residual_graph(rng: np.random.Generator, n: int) -> tuple[list[int], list[list[int]],
                                                                  list[int]]:
    """A chain with residual edges whose windows do not nest, and variables read outside
    them: every read in a window is of a tensor written in it (where the model is exact)."""
    sizes = rng.integers(1, 9, n).tolist()
    reads: list[list[int]] = [[]] + [[j - 1] for j in range(1, n)]
    outside = [0] * n
    j = 1
    while j < n:
        span = int(rng.integers(2, 7))
        if j + span < n and rng.random() < 0.6:
            reads[j + span].append(j - 1)  # a skip from the window's start
            j += span + 1
        else:
            if rng.random() < 0.5:
                outside[j] = int(rng.integers(1, 9))
            j += 1
    return sizes, reads, outside


@pytest.mark.parametrize("seed", range(12))
def test_shares_match_brute_force_lru(seed: int) -> None:
    rng = np.random.default_rng(seed)
    sizes, reads, outside = _residual_graph(rng, 40)
    # every tensor either fits or does not: capacity beyond each distance's granularity
    capacity = int(rng.integers(8, 30))
    src = np.array([p for j, r in enumerate(reads) for p in r], np.int64)
    dst = np.array([j for j, r in enumerate(reads) for _ in r], np.int64)
    edge = np.array(sizes, np.float64)[src]
    out = np.array(outside, np.float64)
    model = L2.resident_share(np.array(sizes, np.float64) + out, src, dst, edge, out,
                              float(capacity))
    want = _lru_shares(sizes, reads, outside, capacity)
    # the model keeps the last-written part of a tensor that straddles the capacity; the
    # brute force counts whole tensors: they agree on every task whose reads are all in or
    # all out
    done = np.cumsum(np.array(sizes) + out)
    left = capacity - ((done - np.array(sizes) - out)[dst] - done[src])
    straddles = set(dst[(left > 0) & (left < edge)].tolist())
    checked = [j for j in range(len(sizes)) if j not in straddles]
    assert len(checked) > 30
    assert model[checked].tolist() == pytest.approx([want[j] for j in checked])
    assert min(want) < 1.0  # some reads miss


def test_partial_tensor_and_empty_reads() -> None:
    # a 10-byte tensor read after 25 new bytes in a 30-byte cache: its last 5 bytes remain
    share = L2.resident_share(np.array([10.0, 25.0, 0.0]), np.array([0]), np.array([2]),
                              np.array([10.0]), np.zeros(3), 30.0)
    assert share.tolist() == [1.0, 1.0, 0.5]


def test_saved_activation_misses_a_big_step() -> None:
    """Forward 0..3 writes 16 MiB each; task 4 reads task 3's output (just written) and
    task 0's (written 48 MiB ago): with 32 MiB of L2 the first hits, the second misses."""
    mib = float(1 << 20)
    b_out = np.full(5, 16 * mib)
    b_in = np.array([0.0, 16, 16, 16, 32]) * mib
    src, dst = np.array([0, 1, 2, 3, 0]), np.array([1, 2, 3, 4, 4])
    share = L2.graph_shares(b_in, b_out, src, dst, 32 * mib)
    assert share[4] == pytest.approx(0.5)
    assert share[1] == 1.0


def test_a_missing_read_costs_hbm_bandwidth() -> None:
    """The same element-wise task is slower when its reads miss L2, and a task of unknown
    residency keeps the working-set rule (0.9 hits)."""
    sigs = SignatureRegistry()
    s = sigs.add_features(tf_type="Mul", ge_type="Mul", kind=KIND_AI_CORE, cost=COST_VECTOR,
                          flops=0.0, vec_elems=4e6, bytes_in=16e6, bytes_out=8e6,
                          max_elems=4e6, in_bytes=(8e6, 8e6))
    hot = sigs.with_residency(s, 16, 16)
    cold = sigs.with_residency(s, 0, 16)
    assert sigs.with_residency(s, 0, 16) == cold  # one variant per level
    cost = evaluate(sigs.arrays(), get_chip("Ascend910A"))
    assert cost.l2_hit[s] == pytest.approx(0.9) and cost.l2_hit[hot] == pytest.approx(0.9)
    assert cost.l2_hit[cold] == 0.0
    assert cost.dur_ticks[hot] == cost.dur_ticks[s]
    assert cost.dur_ticks[cold] > 1.3 * cost.dur_ticks[hot]


def test_a_graph_step_runs_on_residency_variants() -> None:
    """Four 16 MiB element-wise ops in a chain, then one that reads the first and the last
    outputs: on the 910A (32 MiB of L2) the last is still cached, the first is not; every
    step of the graph gets the same variants, and the mixed read costs more than the
    working-set rule (0.6 hits for 48 MiB) charges."""
    from test_ub_fusion import make_chunk

    from msprof_cli.capture import TensorSpec
    from msprof_cli.device.op_table import Interner, build_tables
    from msprof_cli.device.ub_fusion import UbFuser

    big = (TensorSpec((4, 1024, 1024), "float32"),)
    ops = [("a", "Relu", big, big), ("b", "Relu", big, big), ("c", "Relu", big, big),
           ("d", "Relu", big, big), ("g", "Mul", big + big, big)]
    prod = {"a": ("x",), "b": ("a",), "c": ("b",), "d": ("c",), "g": ("a", "d")}
    chunk = make_chunk(ops, prod, n_iter=2)
    sigs, names = SignatureRegistry(), Interner()
    table, _ = build_tables(chunk, sigs, names)
    out = L2.L2Pass(float(get_chip("Ascend910A").l2_bytes)).apply(
        table, chunk.models, sigs, names, UbFuser())
    res = sigs.arrays()["l2_resident"][out.sig]
    by_name = {}
    for n, r in zip(out.name_idx.tolist(), res.tolist()):
        by_name.setdefault(names.items[n], []).append(r)
    assert by_name["g"] == [0.5, 0.5]  # d's output cached, a's evicted by b, c and d
    assert by_name["b"] == [1.0, 1.0]  # a's output, just written
    assert by_name["a"] == [0.0, 0.0]  # the feed, a whole step of traffic ago
    cost = evaluate(sigs.arrays(), get_chip("Ascend910A"))
    g_rows = out.sig[[names.items[n] == "g" for n in out.name_idx.tolist()]]
    g_base = table.sig[[names.items[n] == "g" for n in table.name_idx.tolist()]]
    assert (cost.dur_ticks[g_rows] > cost.dur_ticks[g_base]).all()
