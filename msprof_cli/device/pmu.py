"""AI Core PMU counters and L2 cache events per task (docs/device-model.md 4).

For every event the emulator knows, the counter is derived from the cost model so that the
export formulas (docs/formats/export-files.md 6) give back the model: ratio events = model ratio x
totalCycles, bandwidth events = bytes moved / bytes-per-count, cube/vector FLOP events =
work / FLOPs-per-count.  Unknown (Custom) events get a deterministic pseudo-random share of the
task cycles.  Everything is vectorised over tasks.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from msprof_cli.device.cost_model import CostTable
from msprof_cli.device.op_table import DT_FP16, DT_FP32, DT_INT, DT_INT8

VEC_MISC_SHARE = 0.05  # vector cycles spent on misc (non-arithmetic) instructions
ICACHE_FETCH_PER_CYCLE = 1.0 / 16  # one instruction-cache request per 16 cycles
CONFLICT_SHARES = {0x64: 0.04, 0x65: 0.02, 0x66: 0.06}  # of vector cycles
# bytes per count of the bandwidth events (docs/formats/export-files.md 6)
BYTES_PER_COUNT = {
    0x15: 1024, 0x16: 1024, 0x31: 4096, 0x32: 2048, 0xF: 2048, 0x10: 2048, 0x12: 64, 0x13: 64,
    0x1B: 4096, 0x1C: 4096, 0x21: 2048, 0x22: 2048, 0x27: 2048, 0x28: 2048, 0x29: 2048,
    0x2A: 2048, 0x37: 128, 0x38: 128, 0x3D: 128, 0x3E: 128, 0x43: 256, 0x44: 256,
    0x50C: 128, 0x50D: 128, 0x50E: 128, 0x20C: 128, 0x206: 128,
}
L2_LINE_BYTES = 128.0  # an L2 request of the A2's L2Cache group (assumption)
MTE1_BYTES_PER_CYCLE = 256.0  # L1 -> L0A/L0B per core
CUBE_L0C_BYTES_PER_CYCLE = 1024.0  # 16x16 fp32 partial sums per cycle
SCALAR_UB_BYTES_PER_CYCLE = 0.5


def _fraction(event: int) -> float:
    """Deterministic plausible share (0.5 % .. 20 %) of the cycles for an unmodelled event."""
    return 0.005 + ((event * 2654435761) % 1951) / 10000.0


def event_counters(cost: CostTable, task_sig: np.ndarray, sig: dict[str, np.ndarray],
                   events: Sequence[int], units: dict[int, int] | None = None) -> np.ndarray:
    """(n_tasks, 8) u64 counters for `events` (AI Core tasks with signature `task_sig`).

    The counters are a function of the signature alone (element-wise arithmetic, no
    transcendental functions, so the same bits whatever the batch): computed once per
    distinct signature, then gathered per task (a loop-heavy chunk has ~200k tasks of a
    few hundred signatures, and ~45 event columns each)."""
    uniq, inv = np.unique(task_sig, return_inverse=True)
    return _sig_event_counters(cost, uniq, sig, events, units or {})[inv.reshape(-1)]


def _sig_event_counters(cost: CostTable, task_sig: np.ndarray, sig: dict[str, np.ndarray],
                        events: Sequence[int], units: dict[int, int]) -> np.ndarray:
    total = cost.total_cycles[task_sig].astype(np.float64)
    n = len(task_sig)
    ratio = {p: cost.ratio(p)[task_sig] for p in ("vec", "cube", "scalar", "mte1", "mte2",
                                                  "mte3")}
    dclass = sig["dtype_class"][task_sig]
    dbytes = np.maximum(sig["dtype_bytes"][task_sig], 1.0)
    bytes_in = sig["bytes_in"][task_sig]
    bytes_out = sig["bytes_out"][task_sig]
    hit = cost.l2_hit[task_sig]  # of the reads
    hit_w = cost.l2_hit_out[task_sig]  # of the writes
    # cycles summed over all cores, as the counters count them
    vec_c = ratio["vec"] * total
    cube_c = ratio["cube"] * total
    scalar_c = ratio["scalar"] * total
    mte1_c = ratio["mte1"] * total
    vec_bytes = sig["vec_elems"][task_sig] * dbytes
    flops = sig["flops"][task_sig]
    icache_req = total * ICACHE_FETCH_PER_CYCLE
    # small kernels are dominated by the prologue and miss the icache more often
    miss_rate = 0.01 + 0.04 * np.clip(ratio["scalar"], 0.0, 1.0)
    fp16 = dclass == DT_FP16
    fp32 = dclass == DT_FP32
    ints = dclass == DT_INT
    arith = vec_c * (1.0 - VEC_MISC_SHARE)
    known: dict[int, np.ndarray] = {
        # PipeUtilization
        0x8: vec_c, 0xA: cube_c, 0x9: scalar_c, 0xB: mte1_c,
        0xC: ratio["mte2"] * total, 0xD: ratio["mte3"] * total,
        0x54: icache_req, 0x55: icache_req * miss_rate,
        # the Atlas A2 AI Cube core's PipeUtilizationExct (docs/formats/ascend910b.md 1.4):
        # cube cycles fp16 / int8, MTE1, and the FixPipe that moves L0C results out (the
        # cube core has no MTE3: its output write-back is FixPipe's)
        0x416: np.where(dclass != DT_INT8, cube_c, 0.0),
        0x417: np.where(dclass == DT_INT8, cube_c, 0.0),
        0x302: mte1_c, 0x303: np.where(cube_c > 0, ratio["mte3"] * total, 0.0),
        # the A2's L2Cache group (requests of L2_LINE_BYTES): writes of the output and reads
        # of the inputs (two read ports, r0 / r1, half each), hits at the task's L2 hit rates
        0x500: bytes_out / L2_LINE_BYTES * hit_w,
        0x502: bytes_out / L2_LINE_BYTES * (1.0 - hit_w),
        0x504: bytes_in / L2_LINE_BYTES / 2 * hit,
        0x506: bytes_in / L2_LINE_BYTES / 2 * (1.0 - hit),
        0x508: bytes_in / L2_LINE_BYTES / 2 * hit,
        0x50A: bytes_in / L2_LINE_BYTES / 2 * (1.0 - hit),
        # the A2's MemoryAccess group (byte counts; BYTES_PER_COUNT): main-memory writes and
        # reads (two counters, half each), the cube's results to GM, none from L0C to L1
        0x50C: bytes_out * (1.0 - hit_w), 0x50D: bytes_in * (1.0 - hit) / 2,
        0x50E: bytes_in * (1.0 - hit) / 2,
        0x20C: np.where(cube_c > 0, bytes_out, 0.0), 0x206: np.zeros(n),
        # ArithmeticUtilization
        # cube instructions (16x16x16 each, 8192 FLOPs; int8 16x32x16): the modelled FLOPs
        # (padded fractals, fractal.py), so the exported cube_fops are they; the cores a
        # task's last tiles leave idle execute none
        0x49: np.where(dclass != DT_INT8, np.minimum(flops / 8192.0, cube_c), 0.0),
        0x4A: np.where(dclass == DT_INT8, np.minimum(flops / 16384.0, cube_c), 0.0),
        0x4B: np.where(fp32, arith, 0.0),
        0x4C: np.where(fp16, arith * 0.75, 0.0),
        0x4D: np.where(fp16, arith * 0.25, 0.0),
        0x4E: np.where(ints, arith, 0.0),
        0x4F: np.where(fp16 | fp32 | ints, vec_c * VEC_MISC_SHARE, vec_c),
        # Memory / MemoryUB / MemoryL0 (byte counts, divided by bytes-per-count below)
        0x15: vec_bytes + bytes_out,  # UB read: vector operands + MTE3 source
        0x16: vec_bytes + np.where(cube_c > 0, 0.0, bytes_in),  # UB write
        0x31: mte1_c * MTE1_BYTES_PER_CYCLE,  # L1 read (MTE1)
        0x32: np.where(cube_c > 0, bytes_in, 0.0),  # L1 write (MTE2 into L1)
        0xF: bytes_in * hit,  # L2 read
        0x10: bytes_out,  # L2 write
        0x12: bytes_in * (1.0 - hit),  # main memory read
        0x13: bytes_out * (1.0 - hit_w),  # main memory write-back
        0x1B: cube_c * MTE1_BYTES_PER_CYCLE / 2,  # L0A read by the cube
        0x1C: mte1_c * MTE1_BYTES_PER_CYCLE / 2,  # L0A write by MTE1
        0x21: cube_c * MTE1_BYTES_PER_CYCLE / 2,
        0x22: mte1_c * MTE1_BYTES_PER_CYCLE / 2,
        0x27: np.where(cube_c > 0, bytes_out * 2.0, 0.0),  # L0C read (fp32 results out)
        0x28: cube_c * CUBE_L0C_BYTES_PER_CYCLE / 2,  # L0C read by the cube (accumulate)
        0x29: np.where(cube_c > 0, bytes_out * 2.0, 0.0),
        0x2A: cube_c * CUBE_L0C_BYTES_PER_CYCLE,  # L0C write by the cube
        0x37: scalar_c * SCALAR_UB_BYTES_PER_CYCLE,
        0x38: scalar_c * SCALAR_UB_BYTES_PER_CYCLE / 2,
        0x3D: bytes_out,  # UB read by MTE
        0x3E: np.where(cube_c > 0, 0.0, bytes_in),  # UB write by MTE
        0x43: vec_bytes,  # UB read by the vector unit
        0x44: vec_bytes / 2,
    }
    for ev, share in CONFLICT_SHARES.items():
        known[ev] = vec_c * share
    out = np.zeros((n, 8), np.uint64)
    for col, ev in enumerate(list(events)[:8]):
        if ev in known:
            val = known[ev] / units.get(ev, BYTES_PER_COUNT.get(ev, 1))
        else:
            val = total * _fraction(ev)
        out[:, col] = np.rint(np.maximum(val, 0.0)).astype(np.uint64)
    return out


# l2CacheTaskProfilingEvents order of the 910 (options.L2_CACHE_EVENTS):
# 0x5b hit, 0x59 request, 0x5c victim, then 0x7d, 0x7e, 0x71, 0x79, 0x7c
def l2_counters(cost: CostTable, task_sig: np.ndarray, sig: dict[str, np.ndarray],
                line_bytes: int, events: Sequence[int]) -> np.ndarray:
    """(n_tasks, 8) u64 L2 cache event counters (hit rate = hit / request); per distinct
    signature, as `event_counters`."""
    uniq, inv = np.unique(task_sig, return_inverse=True)
    return _sig_l2_counters(cost, uniq, sig, line_bytes, events)[inv.reshape(-1)]


def _sig_l2_counters(cost: CostTable, task_sig: np.ndarray, sig: dict[str, np.ndarray],
                     line_bytes: int, events: Sequence[int]) -> np.ndarray:
    bytes_in = sig["bytes_in"][task_sig]
    bytes_out = sig["bytes_out"][task_sig]
    rd = np.ceil(bytes_in / line_bytes)
    wr = np.ceil(bytes_out / line_bytes)
    req = rd + wr
    hit = np.rint(rd * cost.l2_hit[task_sig] + wr * cost.l2_hit_out[task_sig])
    miss = req - hit
    victim = np.rint(miss * 0.5)
    known = {0x59: req, 0x5B: hit, 0x5C: victim, 0x7D: rd, 0x7E: wr, 0x71: np.rint(hit * 0.9),
             0x79: miss, 0x7C: np.rint(victim * 0.5)}
    out = np.zeros((len(task_sig), 8), np.uint64)
    for col, ev in enumerate(list(events)[:8]):
        val = known.get(ev, np.rint(req * _fraction(ev)))
        out[:, col] = np.maximum(val, 0).astype(np.uint64)
    return out
