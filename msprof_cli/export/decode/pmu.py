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
    # the Atlas A2's L2 cache requests (raw counts) and memory traffic (KB: counts x bytes a
    # count / 1024; a difference of two events where the formula subtracts one)
    "L2Cache": [(name, ev, "count") for name, ev in (
        ("write_cache_hit", 0x500), ("write_cache_miss_allocate", 0x502),
        ("r0_read_cache_hit", 0x504), ("r0_read_cache_miss_allocate", 0x506),
        ("r1_read_cache_hit", 0x508), ("r1_read_cache_miss_allocate", 0x50A))],
    "MemoryAccess": [
        ("read_main_memory_datas(KB)", (0x50D, 0x50E), "kb", 128, 1),
        ("write_main_memory_datas(KB)", (0x50C, 0x50C), "kb", 128, 0),
        ("GM_to_L1_datas(KB)", (0x32, 0x206), "kb", 256, -1),
        ("L0C_to_L1_datas(KB)", (0x206, 0x206), "kb", 128, 0),
        ("L0C_to_GM_datas(KB)", (0x20C, 0x206), "kb", 128, -1),
        ("GM_to_UB_datas(KB)", (0x3E, 0x3E), "kb", 128, 0),
        ("UB_to_GM_datas(KB)", (0x3D, 0x3D), "kb", 128, 0),
    ],
    # the Atlas A2 AI Cube core's pipe group (docs/formats/ascend910b.md 1.4: mac_ratio_extra =
    # (r416 + r417) / cycles, mte1_ratio_extra = r302, fixpipe = r303)
    "PipeUtilizationExct": [
        ("mac_time(us)", (0x416, 0x417), "time_sum"), ("mac_ratio", (0x416, 0x417), "ratio_sum"),
        ("scalar_time(us)", 0x9, "time"), ("scalar_ratio", 0x9, "ratio"),
        ("mte1_time(us)", 0x302, "time"), ("mte1_ratio", 0x302, "ratio"),
        ("mte2_time(us)", 0xC, "time"), ("mte2_ratio", 0xC, "ratio"),
        ("fixpipe_time(us)", 0x303, "time"), ("fixpipe_ratio", 0x303, "ratio"),
        ("icache_miss_rate", (0x55, 0x54), "quot"),
        ("cube_utilization(%)", None, "cube_utilization"),
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
                 core_num: int, counts_fops: bool = False) -> dict[str, np.ndarray]:
    """Formatted PMU tail columns for the op_summary rows in `tasks`; `counts_fops`: the
    FLOP columns straight from the counters (the A2 analysis), not from their ratios (the
    910's, whose float products it prints)."""
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
        elif kind == "count":
            v, text = sqlite_round_text(counters.get(ev, np.zeros(n)), 3) if have \
                else (None, None)
        elif kind == "kb":  # (a + sign x b) x bytes / 1024 (sign 0: a alone)
            a, b = counters.get(ev[0], np.zeros(n)), counters.get(ev[1], np.zeros(n))
            v, text = sqlite_round_text((a + spec[4] * b) * spec[3] / 1024.0, 3) if have \
                else (None, None)
        elif kind == "time_sum":
            v, text = sqlite_round_text(aicore * (ratio(ev[0]) + ratio(ev[1])), 3) if have \
                else (None, None)
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
            r = (lambda e: counters[e]) if counts_fops else (lambda e: ratio(e) * cyc)
            v = (r(0x49) * 16 * 16 * 16 * 2 + r(0x4A) * 16 * 16 * 32 * 2) if have else None
        elif kind == "vector_fops":
            need = (0x4B, 0x4C, 0x4D, 0x4E, 0x4F)
            have = all(e in counters for e in need)
            r = (lambda e: counters[e]) if counts_fops else (lambda e: ratio(e) * cyc)
            v = (r(0x4B) * 64.0 + r(0x4C) * 128.0 + r(0x4D) * 64.0 + r(0x4E) * 64.0
                 + r(0x4F) * 32.0) if have else None
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


# The Atlas A2's op_summary PMU tail (docs/formats/ascend910b.md 1.5-1.6): per aic_metrics
# group, the columns of the AI Cube core block and of the AI Vector core block (the names of
# GROUPS' columns, prefixed aic_ / aiv_); read off the real analysis's export of emulated
# 910B collections of every group, the same as the released CANN tails.
STARS_TAILS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "PipeUtilization": (
        ("mac_time(us)", "mac_ratio", "scalar_time(us)", "scalar_ratio", "mte1_time(us)",
         "mte1_ratio", "mte2_time(us)", "mte2_ratio", "fixpipe_time(us)", "fixpipe_ratio",
         "icache_miss_rate"),
        ("vec_time(us)", "vec_ratio", "scalar_time(us)", "scalar_ratio", "mte2_time(us)",
         "mte2_ratio", "mte3_time(us)", "mte3_ratio", "icache_miss_rate")),
    "ArithmeticUtilization": (
        ("mac_fp16_ratio", "mac_int8_ratio", "cube_fops"),
        ("vec_fp32_ratio", "vec_fp16_ratio", "vec_int32_ratio", "vec_misc_ratio", "vector_fops")),
    "Memory": (
        ("l1_read_bw(GB/s)", "l1_write_bw(GB/s)", "main_mem_read_bw(GB/s)",
         "main_mem_write_bw(GB/s)"),
        ("ub_read_bw(GB/s)", "ub_write_bw(GB/s)", "main_mem_read_bw(GB/s)",
         "main_mem_write_bw(GB/s)")),
    "MemoryL0": (
        ("l0a_read_bw(GB/s)", "l0a_write_bw(GB/s)", "l0b_read_bw(GB/s)", "l0b_write_bw(GB/s)",
         "l0c_read_bw_cube(GB/s)", "l0c_write_bw_cube(GB/s)"),
        ("l0c_read_bw(GB/s)", "l0c_write_bw(GB/s)")),
    "MemoryUB": (
        ("ub_read_bw_scalar(GB/s)", "ub_write_bw_scalar(GB/s)"),
        ("ub_read_bw_vector(GB/s)", "ub_write_bw_vector(GB/s)", "ub_read_bw_scalar(GB/s)",
         "ub_write_bw_scalar(GB/s)")),
    "ResourceConflictRatio": (
        (), ("vec_bankgroup_cflt_ratio", "vec_bank_cflt_ratio", "vec_resc_cflt_ratio")),
    "L2Cache": (tuple(c[0] for c in GROUPS["L2Cache"]),) * 2,
    # the C++ engine's names: the Python engine writes no tail for this group
    "MemoryAccess": (tuple(c[0] for c in GROUPS["MemoryAccess"]),) * 2,
}
CUBE_UTILIZATION = "cube_utilization(%)"


def _stars_group(aiv_metrics: str | None) -> str | None:
    """The A2 tail group of an aiv_metrics name (None: Custom events)."""
    return aiv_metrics if aiv_metrics in STARS_TAILS else None


def stars_tail_header(aiv_metrics: str | None, aic_events: list[int],
                      aiv_events: list[int]) -> list[str]:
    """The A2 tail: AI Cube block, AI Vector block, then cube_utilization (pipe group); a
    Custom group gives each block its raw counters."""
    if not aiv_metrics:
        return []
    group = _stars_group(aiv_metrics)
    if group is None:
        aic, aiv = [f"0x{e:x}" for e in aic_events], [f"0x{e:x}" for e in aiv_events]
    else:
        aic, aiv = list(STARS_TAILS[group][0]), list(STARS_TAILS[group][1])
    return (["aicore_time(us)", "aic_total_cycles", *(f"aic_{c}" for c in aic),
             "aiv_time(us)", "aiv_total_cycles", *(f"aiv_{c}" for c in aiv)]
            + ([CUBE_UTILIZATION] if group == "PipeUtilization" else []))


def stars_tail_columns(tasks: pd.DataFrame, aic_metrics: str, aiv_metrics: str,
                       aic_events: list[int], aiv_events: list[int], mhz: float,
                       aic_cores: int, aiv_cores: int) -> dict[str, np.ndarray]:
    """The A2 tail of the op_summary rows in `tasks`: each block from the counters of the
    tasks that ran on its core kind (the other kind's rows count zero cycles), with its own
    core count in the time formula (docs/formats/ascend910b.md 1.4)."""
    header = stars_tail_header(aiv_metrics, aic_events, aiv_events)
    if not header:
        return {}
    n = len(tasks)
    aiv = tasks["pmu_aiv"].to_numpy(bool) if "pmu_aiv" in tasks else np.zeros(n, bool)
    cols: dict[str, np.ndarray] = {}
    group = _stars_group(aiv_metrics)
    for prefix, mine, metrics, events, cores in (
            ("aic_", ~aiv, aic_metrics if group else "Custom", aic_events, aic_cores),
            ("aiv_", aiv, aiv_metrics if group else "Custom", aiv_events, aiv_cores)):
        # the columns tail_columns reads, the other core kind's counters zeroed
        view = pd.DataFrame({c: tasks[c].to_numpy() for c in ("pmu_ok", "block_dim", "dur_ns")
                             if c in tasks})
        for c in ["total_cycles"] + [f"pmu_{k}" for k in range(8)]:
            if c in tasks:
                view[c] = np.where(mine, tasks[c].to_numpy(np.int64), 0)
        got = tail_columns(view, metrics, events, mhz, cores, counts_fops=True)
        time_name = "aicore_time(us)" if prefix == "aic_" else "aiv_time(us)"
        cols[time_name] = got.pop("aicore_time(us)")
        cols[f"{prefix}total_cycles"] = got.pop("total_cycles")
        for name, v in got.items():
            if name != CUBE_UTILIZATION:
                cols[prefix + name] = v
            elif prefix == "aic_":  # the cube's, from the AI Cube cores' counters
                cols[name] = v
    return {h: cols[h] if h in cols else obj_full(n, NA) for h in header}
