"""Chip specifications of the emulated NPU (docs/device-model.md section 1).

A `ChipSpec` holds every hardware constant the cost model, the scheduler and the control files
need.  Values come from the reference (docs/formats/raw-format.md section 1: core count, clocks,
control-file
fields) and from public Ascend 910 material (cube/vector widths, buffer sizes, HBM bandwidth);
constants that are our own modelling assumptions are marked so in docs/device-model.md.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from msprof_cli.errors import OptionsError


@dataclass(frozen=True)
class ChipSpec:
    name: str
    platform_version: str  # info.json platform_version (docs/formats/raw-format.md 1)
    ai_core_num: int
    aiv_num: int
    aic_mhz: int  # AI Core clock
    hwts_mhz: int  # device syscnt clock (1 tick = 1000 / hwts_mhz ns)
    ai_cpu_core_num: int
    ctrl_cpu_core_num: int
    # compute units, per AI Core per cycle
    cube_m: int = 16
    cube_k: int = 16
    cube_n: int = 16
    cube_int8_k: int = 32  # int8 doubles K (16x32x16 MACs/cycle)
    vector_bytes_per_cycle: int = 256  # 128 fp16 / 64 fp32 lanes
    # on-core buffers (bytes)
    l0a_bytes: int = 64 * 1024
    l0b_bytes: int = 64 * 1024
    l0c_bytes: int = 256 * 1024
    ub_bytes: int = 256 * 1024
    l1_bytes: int = 1024 * 1024
    # chip level memory
    l2_bytes: int = 32 * 1024 * 1024
    hbm_bytes_per_s: float = 1.2e12
    hbm_capacity_bytes: int = 32 << 30  # the device's HBM
    # HBM the device's system keeps (docs/device-model.md 12: the 910's from GE's 31 GiB cap
    # on a 32 GiB chip, the A2's from the DCMI doc's 3 GB of a 32 GB and 4 GB of a 64 GB card)
    hbm_reserved_bytes: int = 1 << 30
    l2_bytes_per_s: float = 4.0e12  # assumption (docs/device-model.md)
    mte_bytes_per_cycle_per_core: int = 128  # max GM<->L1/UB per core (assumption)
    # an HCCL transfer to one peer (SDMA over HCCS or PCIe), and how many peers a rank sends
    # to at once (one stream each): measured on a 910A 8-device server, the median of 560
    # ~7 MB transfers and the trace's 4 peer streams (docs/device-model.md 3, HCCL tasks)
    hccs_bytes_per_s: float = 14e9
    hccl_peer_streams: int = 4
    l2_line_bytes: int = 128
    # the task scheduler's gap between an AI Core kernel's end and the next one's start on a
    # stream, and a kernel's floor: its start-up, which grows with the cores it starts
    # (head_ns + head_ns_per_core x (block dim - 1)).  Measured on a 910A in the real tool's
    # own output of three real collections (docs/device-model.md 5, "Per-task overheads")
    kernel_dispatch_ns: int = 120
    task_head_ns: float = 1130.0
    task_head_ns_per_core: float = 82.7
    # the share of the HBM's nominal bandwidth a streaming kernel sustains: 965 GB/s measured
    # (the same 910A data: ApplyMomentum on two weight shapes) over the nominal 1.2 TB/s
    hbm_efficiency: float = 965.0 / 1200.0
    # the share of the cube's nominal rate it sustains (a measured peak over the nominal one;
    # docs/device-model.md 1)
    cube_efficiency: float = 216.0 / 262.144
    # the same for the vector unit: 3,390 GFLOPS fp16 measured on a 910 against the nominal
    # 32 cores x 128 lanes x 1 GHz (docs/device-model.md 1)
    vector_efficiency: float = 3390.0 / 4096.0
    # the coupled AI Core (the 910): a cube kernel's results leave L0C only through the
    # Unified Buffer, moved and converted by the vector unit; the separated one (Atlas A2)
    # writes them out through its FixPipe (docs/device-model.md 3, "The cube's output")
    cube_out_via_ub: bool = True
    # what a core's load3d moves a cycle into L0A for a grouped (depthwise) convolution on
    # the cube: its im2col, kh*kw*16 channels a position for every 16 channels.  Measured on
    # real 910 AvgPool kernels (TBE runs them as that convolution: docs/device-model.md 3,
    # "A depthwise convolution runs on the cube too"); the Atlas A2 rows keep it for want of
    # an A2 figure
    grouped_im2col_bytes_per_cycle: float = 46.0
    # the device raw data it writes: "hwts" (hwts.data / aicore.data, the 910) or "stars"
    # (stars_soc.data / ffts_profile.data, the Atlas A2 family: docs/formats/ascend910b.md)
    raw_layout: str = "hwts"
    # per aic_metrics group, the PMU events of the AI Cube cores and of the AI Vector cores
    # when the chip's collector has its own lists (empty: the group's 910 events, options.py)
    metric_events: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = field(
        default_factory=dict)
    # the aic_metrics name the collector writes for a group ("PipeUtilizationExct" on A2)
    metric_names: dict[str, str] = field(default_factory=dict)
    # bytes a counter counts where a group's formulas read an event in other units than
    # pmu.BYTES_PER_COUNT (the A2's MemoryAccess: GM to L1 in 256 B)
    metric_units: dict[str, dict[int, int]] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def pmu_events(self, metrics: str, events: tuple[int, ...]
                   ) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(AI Cube core events, AI Vector core events) of an aic_metrics group whose
        910 events are `events`."""
        return self.metric_events.get(metrics, (events, events))

    def metric_name(self, metrics: str) -> str:
        return self.metric_names.get(metrics, metrics)

    @property
    def ge_variable_limit(self) -> int:
        """GE's variable memory cap: 5/32 of the HBM (5 GiB on a 32 GiB 910; TF adapter's
        variable_memory_max_size default, docs/device-model.md 12)."""
        return self.hbm_capacity_bytes * 5 // 32

    @property
    def ge_graph_limit(self) -> int:
        """GE's graph (feature map) memory cap: 26/32 of the HBM (graph_memory_max_size)."""
        return self.hbm_capacity_bytes * 26 // 32

    @property
    def tick_ns(self) -> float:
        return 1000.0 / self.hwts_mhz

    @property
    def kernel_gap_ticks(self) -> int:
        """The in-stream gap before an AI Core kernel, in hwts ticks."""
        return int(round(self.kernel_dispatch_ns / self.tick_ns))

    def cores_for(self, cube: np.ndarray) -> np.ndarray:
        """The cores a kernel's blocks run on: AI Cube cores for cube work; on a chip with
        separate AI Vector cores (the Atlas A2's two a cube core), those for vector work."""
        return np.where(cube | (self.aiv_num == 0), self.ai_core_num,
                        self.aiv_num).astype(np.float64)

    @property
    def cube_flops_per_cycle(self) -> int:
        """fp16 FLOPs of one AI Core per cycle (2 per MAC)."""
        return 2 * self.cube_m * self.cube_k * self.cube_n

    @property
    def cube_int8_ops_per_cycle(self) -> int:
        return 2 * self.cube_m * self.cube_int8_k * self.cube_n

    def device_info(self, device_id: int) -> dict[str, Any]:
        """DeviceInfo[0] of info.json.N (docs/formats/raw-format.md 3.5), in the collector's key
        order."""
        first_aicpu = self.ctrl_cpu_core_num
        return {
            "id": device_id,
            "env_type": 3,
            "ctrl_cpu_id": "ARMv8_Cortex_A55",
            "ctrl_cpu_core_num": self.ctrl_cpu_core_num,
            "ctrl_cpu_endian_little": 1,
            "ts_cpu_core_num": 1,
            "ai_cpu_core_num": self.ai_cpu_core_num,
            "ai_core_num": self.ai_core_num,
            "ai_cpu_core_id": 2,
            "ai_core_id": 0,
            "aicpu_occupy_bitmap": 65532,
            "ctrl_cpu": ",".join(str(i) for i in range(self.ctrl_cpu_core_num)),
            "ai_cpu": ",".join(str(i) for i in range(first_aicpu,
                                                     first_aicpu + self.ai_cpu_core_num)),
            "aiv_num": self.aiv_num,
            "hwts_frequency": str(self.hwts_mhz),
            "aic_frequency": str(self.aic_mhz),
            "aiv_frequency": str(self.aic_mhz),
        }


GIB = 1 << 30
MIB = 1 << 20

# The emulated chips, one row per CANN soc_version (docs/device-model.md 1).  Ascend910A:
# docs/formats/raw-format.md 1 and public Ascend 910 material.  The Atlas A2 family: CANN's SoC
# specification files (hicann/runtime src/platform/platform_config/cann/Ascend910B{1,2,3,4}.ini:
# cube / vector cores, cube clock, L0/L1/UB/L2, HBM size, AI CPUs), the 50 MHz system counter
# of the collector (Ascend/msprof collector config_manager.h), HBM bandwidth and HCCS from
# secondary sources (docs/formats/ascend910b.md 4.3, marked there).
ASCEND910 = ChipSpec(
    name="Ascend910A",
    platform_version="1",
    ai_core_num=32,
    aiv_num=0,
    aic_mhz=1000,
    hwts_mhz=100,
    ai_cpu_core_num=14,
    ctrl_cpu_core_num=4,
)


# The Atlas A2 collector's event lists (Ascend/msprof collector/dvvp/common/platform/
# platform_adapter_cloudv2.cpp:54-73, docs/formats/ascend910b.md 1.4): the AI Cube cores count
# the "Exct" pipe events under PipeUtilization (the collector renames the group
# PipeUtilizationExct, platform_adapter_interface.cpp:352), the AI Vector cores the 910's.
_A2_AIV_PIPE = (0x8, 0xA, 0x9, 0xB, 0xC, 0xD, 0x54, 0x55)
_A2_METRIC_EVENTS: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {
    "PipeUtilization": ((0x416, 0x417, 0x9, 0x302, 0xC, 0x303, 0x54, 0x55), _A2_AIV_PIPE),
    **{group: (ev, ev) for group, ev in {
        "ArithmeticUtilization": (0x49, 0x4A, 0x4B, 0x4C, 0x4D, 0x4E, 0x4F),
        "Memory": (0x15, 0x16, 0x31, 0x32, 0xF, 0x10, 0x12, 0x13),
        "MemoryL0": (0x1B, 0x1C, 0x21, 0x22, 0x27, 0x28, 0x29, 0x2A),
        "ResourceConflictRatio": (0x64, 0x65, 0x66),
        "MemoryUB": (0x10, 0x13, 0x37, 0x38, 0x3D, 0x3E, 0x43, 0x44),
        # the A2's own groups (the 910 has neither)
        "L2Cache": (0x500, 0x502, 0x504, 0x506, 0x508, 0x50A),
        "MemoryAccess": (0x32, 0x3D, 0x3E, 0x206, 0x20C, 0x50C, 0x50D, 0x50E),
    }.items()},
}


def _atlas_a2(name: str, cube_cores: int, mhz: int, hbm_gib: int, l2_mib: int,
              hbm_tb_s: float) -> ChipSpec:
    return ChipSpec(
        name=name, platform_version="5", ai_core_num=cube_cores, aiv_num=2 * cube_cores,
        aic_mhz=mhz, hwts_mhz=50, ai_cpu_core_num=6, ctrl_cpu_core_num=4,
        l0c_bytes=128 * 1024, ub_bytes=192 * 1024, l1_bytes=512 * 1024, l2_bytes=l2_mib * MIB,
        hbm_bytes_per_s=hbm_tb_s * 1e12, hbm_capacity_bytes=hbm_gib * GIB,
        hbm_reserved_bytes=(4 if hbm_gib > 32 else 3) * GIB,
        # one HCCS link of the data sheet (secondary source), one peer at a time: no A2
        # trace was found
        hccs_bytes_per_s=56e9, hccl_peer_streams=1,
        raw_layout="stars", metric_events=_A2_METRIC_EVENTS,
        metric_names={"PipeUtilization": "PipeUtilizationExct"},
        metric_units={"MemoryAccess": {0x32: 256}},
        # a measured 328 TFLOPS bf16 matmul on a 910B against the 353.9 derived for 24 cores
        # at 1.8 GHz (secondary source: docs/formats/ascend910b.md 4.2)
        cube_efficiency=328.0 / 353.9,
        # no measured vector peak or streaming bandwidth of an Atlas A2 was found: the
        # nominal rates (its task floor and gap are the 910A's, docs/device-model.md 11)
        vector_efficiency=1.0, hbm_efficiency=1.0, cube_out_via_ub=False)


ASCEND910B = (_atlas_a2("Ascend910B1", 24, 1850, 64, 192, 1.6),
              _atlas_a2("Ascend910B2", 24, 1800, 64, 192, 1.6),
              _atlas_a2("Ascend910B3", 20, 1800, 64, 192, 1.6),
              _atlas_a2("Ascend910B4", 20, 1500, 32, 96, 0.8))
CHIPS: dict[str, ChipSpec] = {c.name: c for c in (ASCEND910, *ASCEND910B)}
ALIASES = {"ascend910": ASCEND910.name}  # the name the first 910 went by
DEFAULT_CHIP = ASCEND910.name


def get_chip(name: str) -> ChipSpec:
    """The chip spec for CANN soc_version `name` (case-insensitive)."""
    key = ALIASES.get(name.lower(), name)
    for k, spec in CHIPS.items():
        if k.lower() == key.lower():
            return spec
    raise OptionsError(f"Unknown chip {name!r}: the CANN soc_version names are "
                       + ", ".join(CHIPS) + ".")


def emulated_chip(name: str, where: str = "--soc-version") -> str:
    """The chip `name` names (every chip of the table is emulated); OptionsError otherwise,
    naming the choices."""
    try:
        spec = get_chip(name)
    except OptionsError:
        raise OptionsError(f'{where} "{name}" is not a CANN soc_version; use one of '
                           + ", ".join(CHIPS) + f" (default {DEFAULT_CHIP}).") from None
    return spec.name
