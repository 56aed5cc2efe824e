"""decode/join.py: the numpy (group, occurrence) join equals the pandas merge it replaced."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from msprof_cli.export.decode.join import group_codes, occurrence_match, stable_order


def _merge_rows(left: list[np.ndarray], right: list[np.ndarray]) -> np.ndarray:
    keys = [f"k{i}" for i in range(len(left))]
    lf = pd.DataFrame(dict(zip(keys, left)))
    rf = pd.DataFrame(dict(zip(keys, right)))
    lf["occ"] = lf.groupby(keys, sort=False).cumcount()
    rf["occ"] = rf.groupby(keys, sort=False).cumcount()
    rf["_row"] = np.arange(len(rf))
    got = lf.merge(rf, on=keys + ["occ"], how="left")["_row"]
    return got.fillna(-1).to_numpy(np.int64)


@pytest.mark.parametrize("seed", range(12))
def test_occurrence_match_is_the_cumcount_merge(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, m = rng.integers(0, 400, 2)
    hi = [4, 7, 3] if seed % 3 else [2**62, 2**40, 5]  # packed keys; wide ones (fallback)
    lo = [0, 0, 0] if seed % 4 else [-5, -(2**40), 0]
    left = [rng.integers(a, b, n) for a, b in zip(lo, hi)]
    right = [rng.integers(a, b, m) for a, b in zip(lo, hi)]
    if seed % 3 == 0 and n and m:  # make some wide keys meet
        for c in range(3):
            right[c][: min(n, m) // 2] = left[c][: min(n, m) // 2]
    assert occurrence_match(left, right).tolist() == _merge_rows(left, right).tolist()


def test_stable_order_is_a_stable_argsort() -> None:
    rng = np.random.default_rng(7)
    for bits in (1, 15, 16, 17, 33, 62):
        key = rng.integers(0, 2**bits, 5000) if bits < 62 else \
            rng.integers(0, 2**62, 5000)
        key[::3] = key[0]  # ties
        assert (stable_order(key, bits) == np.argsort(key, kind="stable")).all()


def test_group_codes_equal_iff_rows_equal() -> None:
    a = np.array([5, 5, -3, 2**62, 5], np.int64)
    b = np.array([1, 1, 1, 0, 2], np.int64)
    codes, _ = group_codes([a, b])
    assert codes[0] == codes[1] and len(set(codes.tolist())) == 4
    empty, _ = group_codes([np.zeros(0, np.int64)])
    assert len(empty) == 0


def _op_statistic_agg_by_groupby(rows: pd.DataFrame) -> pd.DataFrame:
    """op_statistic_agg as it was: one pandas groupby of (op_type, task_type)."""
    from msprof_cli.export.outputs.summaries import COMM_TASK_TYPE

    r = rows[["op_type", "task_type", "dur_ns", "dur_f"] if "dur_f" in rows
             else ["op_type", "task_type", "dur_ns"]]
    if "dur_f" not in r:
        r = r.assign(dur_f=r["dur_ns"].to_numpy(np.float64))
    r = r[r["task_type"].to_numpy(object) != COMM_TASK_TYPE]
    g = r.groupby(["op_type", "task_type"], sort=True)
    return pd.DataFrame({"count": g["dur_ns"].size(), "total": g["dur_ns"].sum(),
                         "min": g["dur_ns"].min(), "max": g["dur_ns"].max(),
                         "total_f": g["dur_f"].sum()}).reset_index()


@pytest.mark.parametrize("seed", range(16))
def test_op_statistic_agg_is_the_groupby(seed: int) -> None:
    """Sorted groups, collectives and missing keys left out, exact integer sums, and the AI
    CPU float sums (the analysis' REAL durations) equal to pandas' compensated ones."""
    from msprof_cli.export.outputs.summaries import COMM_TASK_TYPE, op_statistic_agg

    rng = np.random.default_rng(seed)
    n = [0, 1, 7, 60, 500, 3000][seed % 6]
    ops = np.array(["Conv2D", "MatMul", "N/A", "Add", "Cast", None], dtype=object)
    kinds = np.array(["AI_CORE", "AI_CPU", COMM_TASK_TYPE, "AI_VECTOR_CORE", None],
                     dtype=object)
    rows = pd.DataFrame({"op_type": ops[rng.integers(0, len(ops) - (seed % 2), n)],
                         "task_type": kinds[rng.integers(0, len(kinds) - (seed % 2), n)],
                         "dur_ns": rng.integers(0, 10**9, n)})
    if seed % 3:  # float durations of the AI CPU tasks (fractions of a ns)
        f = rows["dur_ns"].to_numpy(np.float64)
        ai = rows["task_type"].to_numpy(object) == "AI_CPU"
        f[ai] = f[ai] + rng.random(int(ai.sum())) * 0.999 + 1e-7
        rows["dur_f"] = f
    got, want = op_statistic_agg(rows), _op_statistic_agg_by_groupby(rows)
    assert list(got.columns) == list(want.columns)
    assert got["op_type"].tolist() == want["op_type"].tolist()
    assert got["task_type"].tolist() == want["task_type"].tolist()
    for c in ("count", "total", "min", "max"):
        assert got[c].to_numpy(np.int64).tolist() == want[c].to_numpy(np.int64).tolist(), c
    real = got["task_type"].to_numpy(object) == "AI_CPU"
    assert got["total_f"].to_numpy()[real].tolist() == want["total_f"].to_numpy()[real].tolist()


def test_sorted_positions_is_the_left_merge_on_one_key() -> None:
    from msprof_cli.export.decode.join import sorted_positions

    rng = np.random.default_rng(7)
    keys = np.unique(rng.integers(0, 50, 30))
    want = rng.integers(-5, 60, 200)
    got = sorted_positions(keys, want)
    merged = pd.DataFrame({"k": want}).merge(
        pd.DataFrame({"k": keys, "pos": np.arange(len(keys))}), on="k", how="left")
    assert got.tolist() == merged["pos"].fillna(-1).astype(np.int64).tolist()
    assert sorted_positions(np.array([1.0, 2.0]), np.array([np.nan, 2.0])).tolist() == [-1, 1]
    assert sorted_positions(np.zeros(0, np.int64), np.array([1, 2])).tolist() == [-1, -1]
