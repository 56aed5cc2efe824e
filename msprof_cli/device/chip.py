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
    l2_bytes_per_s: float = 4.0e12  # assumption (docs/device-model.md)
    mte_bytes_per_cycle_per_core: int = 128  # max GM<->L1/UB per core (assumption)
    hccs_bytes_per_s: float = 30e9  # one HCCS link (inter-chip), assumption for HCCL tasks
    l2_line_bytes: int = 128
    # the task scheduler's dispatch of an AI Core kernel after its predecessor on the stream
    # ended (docs/device-model.md 5: derived from a published batch sweep, not fitted to a
    # calibration model)
    kernel_dispatch_ns: int = 7_500
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def tick_ns(self) -> float:
        return 1000.0 / self.hwts_mhz

    @property
    def kernel_gap_ticks(self) -> int:
        """The in-stream gap before an AI Core kernel, in hwts ticks."""
        return int(round(self.kernel_dispatch_ns / self.tick_ns))

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


ASCEND910 = ChipSpec(
    name="Ascend910",
    platform_version="1",
    ai_core_num=32,
    aiv_num=0,
    aic_mhz=1000,
    hwts_mhz=100,
    ai_cpu_core_num=14,
    ctrl_cpu_core_num=4,
)

CHIPS: dict[str, ChipSpec] = {ASCEND910.name: ASCEND910}


def get_chip(name: str) -> ChipSpec:
    """The chip spec for `name` (case-insensitive)."""
    for key, spec in CHIPS.items():
        if key.lower() == name.lower():
            return spec
    raise OptionsError(f"Unknown chip {name!r}: the emulator supports "
                       + ", ".join(sorted(CHIPS)) + ".")
