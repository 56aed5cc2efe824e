"""Deterministic roofline cost of each device task (docs/device-model.md 3).

Input: signature feature columns (op_table.SignatureRegistry.arrays()); output: per signature
block dim, duration in hwts ticks and per-core pipe cycles, all computed with numpy over whole
columns.  Nothing depends on the host machine or on measured host times, so the same op shapes
(and, for the reads' L2 hits, the same place in the same graph: l2_residency.py) give the same
durations on every run.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from msprof_cli.device import op_map
from msprof_cli.device.chip import ChipSpec
from msprof_cli.device.op_table import DT_FP16, DT_INT8

OVERLAP_LOSS = 0.15  # share of the non-critical pipes that double buffering fails to hide
SCALAR_SHARE = 0.05  # scalar issue cycles per pipe cycle
MTE1_PER_CUBE = 0.5  # L1->L0A/L0B feed time relative to cube time (double buffered)
CUBE_UNIT_FLOPS = 2.0 * 64 * 64 * 64  # smallest cube tile worth giving a core (64x64x64)
VECTOR_UNIT_BYTES = 32 * 1024  # smallest UB tile worth giving a core
AICPU_BASE_NS = 20_000.0  # AI CPU kernel: dispatch + framework overhead
AICPU_NS_PER_ELEM = 2.0
HCCL_BASE_NS = 15_000.0  # collective: notify/handshake latency
L2_HIT_IN_L2 = 0.9  # L2 hit rate when the task's working set fits in L2
DRAIN_OPS = 2.0  # vector instructions an output element of a cube kernel: copy, convert
FP32_LANES = 64.0  # the vector unit's fp32 lanes (256 B a cycle)
CUBE_ELEM_BYTES = 2.0  # a cube op's tensors count 2 bytes an element (docs/device-model.md 3.2)
# MIX_AIC matmuls of the Atlas A2 (_mix_matmul): the documented thresholds, and the two AI
# Vector cores beside each AI Cube core (cube_vector_combine=split)
MIX_MIN_K = 1000
MIX_MIN_MAC_US = 50.0
MIX_ALIGN_BYTES = 512
MIX_RATIO = 2


@dataclass
class CostTable:
    """Per-signature cost columns (index = signature id)."""

    block_dim: np.ndarray  # u2
    waves: np.ndarray  # i8: ceil(block_dim / ai_core_num)
    dur_ticks: np.ndarray  # i8: device task duration in hwts ticks
    core_cycles: np.ndarray  # f8: busy cycles of one core for one wave
    cube: np.ndarray  # f8 per-core pipe cycles
    vec: np.ndarray
    scalar: np.ndarray
    mte1: np.ndarray
    mte2: np.ndarray
    mte3: np.ndarray
    total_cycles: np.ndarray  # u8 PMU totalCycles (docs/formats/raw-format.md 5.2 convention)
    l2_hit: np.ndarray  # f8 L2 hit rate of the task's reads
    l2_hit_out: np.ndarray  # f8 ... and of its writes
    ai_core: np.ndarray  # bool
    # an AI Core kernel that runs on the AI Vector cores (a chip with them, vector work only):
    # the Atlas A2's AI_VECTOR_CORE tasks (docs/formats/ascend910b.md 1.5)
    vector_core: np.ndarray  # bool
    # AIV blocks per AIC block of a MIX_AIC kernel (0: not MIX; docs/device-model.md 11)
    mix_ratio: np.ndarray  # u1

    def ratio(self, pipe: str) -> np.ndarray:
        """Pipe busy ratio as the PMU reports it (pipe cycles / task cycles of one core)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            r = getattr(self, pipe) / self.core_cycles
        return np.where(self.ai_core, np.nan_to_num(r), 0.0)


def evaluate(sig: dict[str, np.ndarray], chip: ChipSpec, rank_size: int = 1) -> CostTable:
    """Cost of every signature.  `rank_size` = devices taking part in collectives."""
    kind = sig["kind"]
    cost = sig["cost"]
    n = len(kind)
    aic = kind == op_map.KIND_AI_CORE
    is_cube = np.isin(cost, [op_map.COST_MATMUL, op_map.COST_CONV, op_map.COST_CONV_BP_INPUT,
                             op_map.COST_CONV_BP_FILTER, op_map.COST_DEPTHWISE])
    flops = sig["flops"]
    bytes_in = sig["bytes_in"]
    bytes_out = sig["bytes_out"]
    dclass = sig["dtype_class"]
    dbytes = np.maximum(sig["dtype_bytes"], 1.0)

    # --- tiling: block dim = number of worthwhile tiles, at most one per AI Core -------------
    units = np.where(is_cube, np.ceil(flops / CUBE_UNIT_FLOPS),
                     np.ceil(np.maximum(bytes_in, bytes_out) / VECTOR_UNIT_BYTES))
    units = np.maximum(units, 1.0)
    # cube kernels on the AI (Cube) cores; vector kernels on the AI Vector cores of a chip
    # that has them (Atlas A2: two beside each cube core), else on the AI Cores
    cores = chip.cores_for(is_cube)
    block = np.minimum(units, cores)
    block = np.where(aic, block, 1.0)
    waves = np.ceil(block / cores)
    tail = np.ceil(units / block) * block / units  # load imbalance of the last tiles (>= 1)

    # --- per-core pipe cycles ------------------------------------------------------------------
    cube_rate = np.where(dclass == DT_INT8, chip.cube_int8_ops_per_cycle,
                         chip.cube_flops_per_cycle).astype(np.float64)
    cube = np.where(is_cube, flops / (cube_rate * chip.cube_efficiency * block) * tail, 0.0)
    # fp32 work runs on the vector unit at fp32 width; cube ops' fused epilogue at fp16 width
    # (the BatchNorm kernels cast fp16 to fp32 and run at fp32 width: op_map.BN_KERNEL_OPS)
    fp32 = sig.get("fp32_compute", np.zeros(n, bool))
    lane_bytes = np.where(is_cube, 2.0, np.where(fp32, 4.0, np.where(
        dclass == DT_FP16, 2.0, np.where(dclass == DT_INT8, 1.0, 4.0))))
    lanes = chip.vector_bytes_per_cycle / np.maximum(lane_bytes, 1.0)
    lanes = np.minimum(lanes, 128.0)
    vec = sig["vec_elems"] / (lanes * chip.vector_efficiency * block) * tail
    # the coupled AI Core (the 910) has no FixPipe: a cube kernel's results leave L0C through
    # the Unified Buffer, the vector unit copying each output element out of L0C and
    # converting the fp32 accumulator to the output's dtype (DRAIN_OPS at fp32 width; a
    # filter gradient's fp32 output is only copied), and that work -- with the kernel's fused
    # epilogue -- waits for the cube's tile, so it adds to the cube time
    # (docs/device-model.md 3, "The cube's output")
    coupled = is_cube & chip.cube_out_via_ub
    grad_w = cost == op_map.COST_CONV_BP_FILTER
    out_elems = bytes_out / CUBE_ELEM_BYTES
    drain = np.where(coupled, np.where(grad_w, 1.0, DRAIN_OPS) * out_elems
                     / (FP32_LANES * chip.vector_efficiency * block) * tail, 0.0)
    vec = vec + drain
    working = bytes_in + bytes_out
    fits = working <= chip.l2_bytes
    # the traffic the PMU model reports (pmu.py: L2 reads = bytes x hit, main memory = the
    # rest) also sets the bandwidth: hits at L2 speed, misses at HBM speed -- no cliff when
    # the working set outgrows L2.  Writes land in L2 at the working-set rule; reads find
    # the share of their bytes the graph left in L2 (l2_residency.py), or the same rule for
    # a task whose graph is unknown
    l2_hit_out = np.where(fits, L2_HIT_IN_L2,
                          L2_HIT_IN_L2 * chip.l2_bytes / np.maximum(working, 1.0))
    resident = sig.get("l2_resident", np.full(n, np.nan))
    l2_hit = np.where(np.isnan(resident), l2_hit_out, L2_HIT_IN_L2 * resident)
    bw_in = _chip_bandwidth(l2_hit, chip)
    bw_out = _chip_bandwidth(l2_hit_out, chip)
    mte = float(chip.mte_bytes_per_cycle_per_core)
    mte2 = bytes_in / block / np.minimum(mte, bw_in / block) * tail
    mte3 = bytes_out / block / np.minimum(mte, bw_out / block) * tail
    mte1 = np.where(is_cube, MTE1_PER_CUBE * cube, 0.0)
    # a depthwise convolution's im2col: kh*kw*16 fp16 values a position for each 16
    # channels, i.e. FLOPs / 16 bytes (FLOPs = 2*P*kh*kw*16*pad(C)), moved into L0A by load3d
    # at the chip's measured rate; its diagonal cube work is a sixteenth of that in cycles
    # (docs/device-model.md 3, "A depthwise convolution runs on the cube too")
    im2col = sig.get("im2col_bound", np.zeros(n, bool))
    mte1 = np.where(im2col, np.maximum(mte1, flops / 16.0 / (
        chip.grouped_im2col_bytes_per_cycle * block) * tail), mte1)
    pipes = np.stack([np.where(coupled, cube + vec, cube), np.where(coupled, 0.0, vec),
                      mte1, mte2, mte3])
    pmax = pipes.max(axis=0)
    psum = pipes.sum(axis=0)
    # the kernel's start-up (core start, argument and tiling loads: the "header overhead"
    # of CANN's Ascend C best practices), which grows with the cores started (chip.py)
    head = (chip.task_head_ns + chip.task_head_ns_per_core * (block - 1.0)) \
        * chip.aic_mhz / 1000.0
    scalar = head + SCALAR_SHARE * psum
    # MTE2 (reads) and MTE3 (writes) are separate engines in each core, but they share the
    # chip's memory system: the op's whole traffic cannot move faster than chip_bw
    # (reads and writes each at the full bandwidth moved e.g. 2 TB/s against 1.2 TB/s HBM)
    shared = bytes_in / bw_in + bytes_out / bw_out
    core = head + np.maximum(pmax + OVERLAP_LOSS * (psum - pmax), shared)

    # --- durations ---------------------------------------------------------------------------
    aic_ns = waves * core * 1000.0 / chip.aic_mhz
    aicpu_ns = AICPU_BASE_NS + AICPU_NS_PER_ELEM * sig["max_elems"]
    ring = 2.0 * (rank_size - 1) / rank_size if rank_size > 1 else 0.0
    # a rank sends its 2(n-1)/n share to up to hccl_peer_streams peers at once
    peers = max(min(rank_size - 1, chip.hccl_peer_streams), 1)
    hccl_ns = HCCL_BASE_NS + ring * bytes_in / (chip.hccs_bytes_per_s * peers) * 1e9
    dur_ns = np.select([aic, kind == op_map.KIND_AI_CPU, kind == op_map.KIND_HCCL],
                       [aic_ns, aicpu_ns, hccl_ns], 0.0)
    dur_ticks = np.ceil(dur_ns / chip.tick_ns - 1e-9).astype(np.int64)
    dur_ticks = np.where(kind == op_map.KIND_NONE, 0, np.maximum(dur_ticks, 1))

    # totalCycles = duration x aic clock x block dim / waves (docs/formats/raw-format.md 5.2)
    cycles_per_tick = chip.aic_mhz / chip.hwts_mhz
    total = np.where(aic, np.rint(dur_ticks * cycles_per_tick * block / waves), 0.0)
    zero = np.zeros(n)
    return CostTable(
        block_dim=np.where(kind == op_map.KIND_NONE, 0, block).astype(np.uint16),
        waves=waves.astype(np.int64),
        dur_ticks=dur_ticks,
        core_cycles=np.where(aic, core, zero),
        cube=np.where(aic, cube, zero), vec=np.where(aic, vec, zero),
        scalar=np.where(aic, scalar, zero), mte1=np.where(aic, mte1, zero),
        mte2=np.where(aic, mte2, zero), mte3=np.where(aic, mte3, zero),
        total_cycles=total.astype(np.uint64),
        l2_hit=l2_hit, l2_hit_out=l2_hit_out,
        ai_core=aic,
        vector_core=aic & ~is_cube & (chip.aiv_num > 0),
        mix_ratio=np.where(aic & _mix_matmul(sig, chip), MIX_RATIO, 0).astype(np.uint8),
    )


def _chip_bandwidth(hit: np.ndarray, chip: ChipSpec) -> np.ndarray:
    """Bytes a cycle of the chip's memory system at L2 hit rate `hit`: hits at L2 speed,
    misses at HBM speed."""
    hbm = chip.hbm_bytes_per_s * chip.hbm_efficiency  # what a streaming kernel sustains
    return 1.0 / (hit / chip.l2_bytes_per_s + (1.0 - hit) / hbm) \
        / (chip.aic_mhz * 1e6)


def _mix_matmul(sig: dict[str, np.ndarray], chip: ChipSpec) -> np.ndarray:
    """The matmuls CANN compiles as MIX_AIC kernels on a chip with AI Vector cores: inner
    axis > 1000, theoretical MAC time > 50 us and the inner axis' bytes not aligned (the CANN
    profiling reference, Ascend/msprof docs/en/user_guide/profile_data_file_references.md,
    op_summary notes; its "516B-aligned" read as the 512 B of a cube fractal row block)."""
    if chip.aiv_num == 0:
        return np.zeros(len(sig["cost"]), bool)
    k = sig.get("mm_k", np.zeros(len(sig["cost"])))
    mac_us = sig["flops"] / (chip.cube_flops_per_cycle * chip.ai_core_num * chip.aic_mhz)
    k_bytes = k * np.maximum(sig["dtype_bytes"], 1.0)
    return (sig["cost"] == op_map.COST_MATMUL) & (k > MIX_MIN_K) & (mac_us > MIX_MIN_MAC_US) \
        & (np.mod(k_bytes, MIX_ALIGN_BYTES) != 0)
