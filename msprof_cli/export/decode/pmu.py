"""op_summary PMU tails for every Ascend910 aic_metrics group (docs/formats/export-files.md 3.1.1,
6).

Ratio/time/bandwidth columns go through SQLite-style rounding (the analysis rounds them in
SQL); memory_bound and cube_utilization through Python ``round`` on the already rounded
ratios (the analysis adds them in Python afterwards).  Missing PMU for a task -> ``N/A``.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..fmt import float_str, int_str, obj_full, py_round, sqlite_round_text

NA = "N/A"
GB = 8589934592.0

# (column, event, kind[, bytes per count]) -- kind: ratio | time (of a ratio) | bw
GROUPS: dict[str, list[tuple]] = {
    "PipeUtilization": [
        ("vec_time(us)", 0x8, "time"), ("vec_ratio", 0x8, "ratio"),
        ("mac_time(us)", 0xA, "time"), ("mac_ratio", 0xA, "ratio"),
        ("scalar_time(us)", 0x9, "time"), ("scalar_ratio", 0x9, "ratio"),
        ("mte1_time(us)", 0xB, "time"), ("mte1_ratio", 0xB, "ratio"),
        ("mte2_time(us)", 0xC, "time"), ("mte2_ratio", 0xC, "ratio"),
        ("mte3_time(us)", 0xD, "time"), ("mte3_ratio", 0xD, "ratio"),
        ("icache_miss_rate", (0x55, 0x54), "quot"),
        ("memory_bound", None, "memory_bound"),
        ("cube_utilization(%)", None, "cube_utilization"),
    ],
    "ArithmeticUtilization": [
        ("mac_fp16_ratio", 0x49, "ratio"), ("mac_int8_ratio", 0x4A, "ratio"),
        ("vec_fp32_ratio", 0x4B, "ratio"), ("vec_fp16_ratio", (0x4C, 0x4D), "ratio_sum"),
        ("vec_int32_ratio", 0x4E, "ratio"), ("vec_misc_ratio", 0x4F, "ratio"),
        ("cube_fops", None, "cube_fops"), ("vector_fops", None, "vector_fops"),
    ],
    "Memory": [
        ("ub_read_bw(GB/s)", 0x15, "bw", 1024), ("ub_write_bw(GB/s)", 0x16, "bw", 1024),
        ("l1_read_bw(GB/s)", 0x31, "bw", 4096), ("l1_write_bw(GB/s)", 0x32, "bw", 2048),
        ("main_mem_read_bw(GB/s)", 0x12, "bw", 64), ("main_mem_write_bw(GB/s)", 0x13, "bw", 64),
    ],
    "MemoryL0": [
        ("l0a_read_bw(GB/s)", 0x1B, "bw", 4096), ("l0a_write_bw(GB/s)", 0x1C, "bw", 4096),
        ("l0b_read_bw(GB/s)", 0x21, "bw", 2048), ("l0b_write_bw(GB/s)", 0x22, "bw", 2048),
        ("l0c_read_bw(GB/s)", 0x27, "bw", 2048), ("l0c_write_bw(GB/s)", 0x29, "bw", 2048),
        ("l0c_read_bw_cube(GB/s)", 0x28, "bw", 2048),
        ("l0c_write_bw_cube(GB/s)", 0x2A, "bw", 2048),
    ],
    "MemoryUB": [
        ("ub_read_bw_vector(GB/s)", 0x43, "bw", 256), ("ub_write_bw_vector(GB/s)", 0x44, "bw", 256),
        ("ub_read_bw_scalar(GB/s)", 0x37, "bw", 128), ("ub_write_bw_scalar(GB/s)", 0x38, "bw", 128),
    ],
    "ResourceConflictRatio": [
        ("vec_bankgroup_cflt_ratio", 0x64, "ratio"), ("vec_bank_cflt_ratio", 0x65, "ratio"),
        ("vec_resc_cflt_ratio", 0x66, "ratio"),
    ],
}


def tail_header(metrics: str | None, events: list[int]) -> list[str]:
    if not metrics:
        return []
    if metrics in GROUPS:
        return ["aicore_time(us)", "total_cycles"] + [c[0] for c in GROUPS[metrics]]
    # Custom:<events> -- raw counters, named by event code (project choice, docs/export.md)
    return ["aicore_time(us)", "total_cycles"] + [f"0x{e:x}" for e in events]


def _na_where(values: np.ndarray, ok: np.ndarray) -> np.ndarray:
    if ok.all():
        return values
    out = np.array(values, dtype=object)  # copy; filling N/A into it beats np.full(object)
    out[~ok] = NA
    return out


def tail_columns(tasks: pd.DataFrame, metrics: str | None, events: list[int], aic_mhz: float,
                 core_num: int) -> dict[str, np.ndarray]:
    """Formatted PMU tail columns for the op_summary rows in `tasks`."""
    header = tail_header(metrics, events)
    if not header:
        return {}
    n = len(tasks)
    ok = tasks["pmu_ok"].to_numpy(bool) if "pmu_ok" in tasks else np.zeros(n, bool)
    cyc = tasks["total_cycles"].to_numpy(np.float64) if "total_cycles" in tasks \
        else np.zeros(n)
    counters: dict[int, np.ndarray] = {}
    for k, e in enumerate(events[:8]):
        col = f"pmu_{k}"
        counters[e] = tasks[col].to_numpy(np.float64) if col in tasks else np.zeros(n)
    block = tasks["block_dim"].to_numpy(np.int64)
    safe_cyc = np.where(cyc == 0, 1.0, cyc)
    with np.errstate(divide="ignore", invalid="ignore"):
        base = cyc / float(aic_mhz)  # µs of all blocks
        waves = np.floor((block + core_num - 1) / core_num)
        aicore = np.where(block > 0, base / np.where(block > 0, block, 1) * waves, base)
    aicore = py_round(aicore, 2)
    cols: dict[str, np.ndarray] = {
        "aicore_time(us)": _na_where(sqlite_round_text(aicore, 3)[1], ok),
        "total_cycles": _na_where(int_str(cyc), ok),
    }
    if metrics not in GROUPS:
        for e in events:
            vals = counters.get(e, np.zeros(n))
            cols[f"0x{e:x}"] = _na_where(int_str(vals), ok)
        return cols

    def ratio(e: int) -> np.ndarray:
        return np.where(cyc == 0, 0.0, counters.get(e, np.zeros(n)) / safe_cyc)

    rounded: dict[str, np.ndarray] = {}
    for spec in GROUPS[metrics]:
        name, ev, kind = spec[0], spec[1], spec[2]
        text = None  # the texts of v when made with its rounding (one factorization)
        have = all(e in counters for e in (ev if isinstance(ev, tuple) else (ev,))) \
            if ev is not None else True
        if kind == "ratio":
            v, text = sqlite_round_text(ratio(ev), 3) if have else (None, None)
        elif kind == "ratio_sum":
            v, text = sqlite_round_text(ratio(ev[0]) + ratio(ev[1]), 3) if have else (None, None)
        elif kind == "time":
            v, text = sqlite_round_text(aicore * ratio(ev), 3) if have else (None, None)
        elif kind == "quot":
            with np.errstate(divide="ignore", invalid="ignore"):
                num, den = ratio(ev[0]), ratio(ev[1])
                v, text = sqlite_round_text(np.where(den == 0, 0.0, num / np.where(
                    den == 0, 1, den)), 3) if have else (None, None)
        elif kind == "bw":
            with np.errstate(divide="ignore", invalid="ignore"):
                secs = cyc / (float(aic_mhz) * 1e6)
                raw = counters.get(ev, np.zeros(n)) * float(spec[3]) / np.where(secs == 0, 1,
                                                                                  secs) / GB
            v, text = sqlite_round_text(np.where(secs == 0, 0.0, raw), 3) if have \
                else (None, None)
        elif kind == "cube_fops":
            have = 0x49 in counters and 0x4A in counters
            v = (ratio(0x49) * cyc * 16 * 16 * 16 * 2 + ratio(0x4A) * cyc * 16 * 16 * 32 * 2) \
                if have else None
        elif kind == "vector_fops":
            need = (0x4B, 0x4C, 0x4D, 0x4E, 0x4F)
            have = all(e in counters for e in need)
            v = (ratio(0x4B) * cyc * 64.0 + ratio(0x4C) * cyc * 128.0 + ratio(0x4D) * cyc * 64.0
                 + ratio(0x4E) * cyc * 64.0 + ratio(0x4F) * cyc * 32.0) if have else None
        elif kind == "memory_bound":
            need = ("mte2_ratio", "vec_ratio", "mac_ratio")
            if all(k in rounded for k in need):
                mx = np.maximum(rounded["vec_ratio"], rounded["mac_ratio"])
                with np.errstate(divide="ignore", invalid="ignore"):
                    mb = py_round(rounded["mte2_ratio"] / np.where(mx == 0, 1, mx), 3)
                s = float_str(mb)
                s[mx == 0] = "0"
                cols[name] = _na_where(s, ok)
            continue
        elif kind == "cube_utilization":
            if "mac_ratio" in rounded:
                dur = tasks["dur_ns"].to_numpy(np.float64)
                zero = (rounded["mac_ratio"] == 0) | (cyc == 0) | (dur == 0)
                with np.errstate(divide="ignore", invalid="ignore"):
                    u = cyc / (float(aic_mhz) * core_num * np.where(dur == 0, 1, dur)) * 1000
                s = float_str(py_round(u * 100, 3))
                s[zero] = "0"
                cols[name] = _na_where(s, ok)
            continue
        else:  # pragma: no cover
            v = None
        if v is None:
            cols[name] = obj_full(n, NA)
            continue
        rounded[name] = v
        cols[name] = _na_where(float_str(v) if text is None else text, ok)
    return {h: cols[h] if h in cols else obj_full(n, NA) for h in header}
