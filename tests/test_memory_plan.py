"""GE's feature-map plan (device/memory_plan.py) against brute force on small graphs, the
memory verdict (summary/memory.py) and the --max-peak-memory limit (summary/check.py)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from msprof_cli.device import memory_plan as MP
from msprof_cli.raw import memory_plan as RM
from msprof_cli.summary import check as C
from msprof_cli.summary import memory as SM
from msprof_cli.summary.model import SummaryError


def test_ge_tensor_size_rule() -> None:
    # 32 B rounding with at least 32 B of padding, then whole 512 B blocks
    got = MP.ge_tensor_bytes(np.array([0, 1, 32, 448, 449, 480, 481, 1000]))
    assert got.tolist() == [0, 512, 512, 512, 512, 512, 1024, 1536]


def brute_live_peak(size, start, end) -> int:
    nodes = range(int(min(start)), int(max(end)) + 1)
    return max(sum(s for s, a, b in zip(size, start, end) if a <= t <= b) for t in nodes)


def check_plan(nbytes, start, end) -> MP.Plan:
    p = MP.plan(np.array(nbytes), np.array(start), np.array(end))
    size = MP.ge_tensor_bytes(np.array(nbytes))
    # no two tensors live at the same node share an address
    for i, j in itertools.combinations(range(len(nbytes)), 2):
        if size[i] == 0 or size[j] == 0:
            continue
        if start[i] <= end[j] and start[j] <= end[i]:
            a = (p.offset[i], p.offset[i] + size[i])
            b = (p.offset[j], p.offset[j] + size[j])
            assert a[1] <= b[0] or b[1] <= a[0], (i, j, a, b)
    assert all(o % MP.BLOCK_ALIGN == 0 for o in p.offset[size > 0])
    assert p.live_peak == brute_live_peak(size, start, end)
    assert p.total >= p.live_peak
    assert p.total == max(int(o + s) for o, s in zip(p.offset, size) if s)
    return p


def test_chain_reuses_memory() -> None:
    # a chain a -> b -> c -> d: each tensor dies when the next op has read it
    p = check_plan([4096] * 4, [0, 1, 2, 3], [1, 2, 3, 3])
    assert p.live_peak == 2 * 4608 and p.total == 2 * 4608  # two buffers ping-pong


def test_activation_kept_for_backward_raises_the_peak() -> None:
    # forward x0..x2, each kept until its gradient op (5, 4, 3) reads it
    p = check_plan([1000, 1000, 1000, 1000, 1000, 1000], [0, 1, 2, 3, 4, 5], [5, 4, 3, 4, 5, 5])
    # node 3: x0, x1, x2 and g3 are live; node 4: x0, x1, g3 and g4; without the backward
    # pass (each x read by the next op only) two buffers would do
    assert p.live_peak == 4 * 1536 and p.total == 4 * 1536


@pytest.mark.parametrize("seed", range(30))
def test_random_graphs_against_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 25))
    start = rng.integers(0, 20, n)
    end = start + rng.integers(0, 8, n)
    nbytes = rng.integers(0, 20_000, n)
    p = check_plan(nbytes.tolist(), start.tolist(), end.tolist())
    # greedy by size stays close to the least memory any plan needs on these graphs
    assert p.total <= 2 * max(p.live_peak, 1)


def facts(pool: int = 10 << 20, fmap: int = 100 << 20) -> RM.MemoryFacts:
    f = RM.MemoryFacts("Ascend910A", 32 << 30, 1 << 30, 5 << 30, 26 << 30)
    dm = RM.DeviceMemory(weight=pool // 3, optimizer=2 * pool // 3, state=0, count=4,
                         pool=pool)
    dm.models[1] = RM.ModelMemory("m", fmap, fmap - 1024, 3, 10, 2048, fmap // 2, fmap // 4,
                                  0, top=[["conv", 4096, 1, 5, "activation"]])
    f.devices[0] = dm
    return f


def test_verdict_fits_and_categories_sum_to_the_peak(tmp_path) -> None:
    f = facts()
    v = SM.verdict(f)[0]
    assert v.fits and not v.problems
    assert sum(v.parts.values()) == v.peak == f.devices[0].pool + (100 << 20) + 2048
    RM.write(tmp_path, f)
    assert "fits" in SM.one_line(tmp_path)


def test_verdict_names_ge_messages_and_what_dominates(tmp_path) -> None:
    f = facts(pool=6 << 30, fmap=27 << 30)
    v = SM.verdict(f)[0]
    assert not v.fits
    assert v.problems[0].startswith("Out of memory: current var size[")
    assert "exceeds total graph size[" in v.problems[1]
    assert v.dominant == "activations"
    RM.write(tmp_path, f)
    line = SM.one_line(tmp_path)
    assert "does not fit" in line and "smaller batch" in line


def test_memory_file_round_trip(tmp_path) -> None:
    f = facts()
    RM.write(tmp_path, f)
    assert RM.read(tmp_path) == f
    (tmp_path / RM.FILE_NAME).write_text("{broken")
    assert RM.read(tmp_path) is None


@pytest.mark.parametrize("text,expect", [
    ("fit", C.MemoryLimit(fit=True)),
    ("off", C.MemoryLimit(off=True)),
    ("24GiB", C.MemoryLimit(ceiling=24 << 30)),
    ("fit,+5%,+64MiB", C.MemoryLimit(fit=True, growth=C.Threshold(pct=5.0,
                                                                   abs_us=64 << 20))),
])
def test_memory_limit_parsing(text: str, expect: C.MemoryLimit) -> None:
    assert C.parse_memory_limit(text, "--max-peak-memory") == expect


@pytest.mark.parametrize("bad", ["5%", "+5ms", "lots", "fit,24"])
def test_memory_limit_refused(bad: str) -> None:
    with pytest.raises(SummaryError, match="--max-peak-memory"):
        C.parse_memory_limit(bad, "--max-peak-memory")
