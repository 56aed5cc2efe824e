"""The decoded tables every later stage reads: ProfData (one PROF dir, or one window of it),
its HostData and one DeviceData per device (times in local ns), and the task classes the
decode sorts rows by.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from .control_info import ResultDirInfo
from .host import HostTables
from .rawread import DecodeLog

HARDWARE_OP_TYPES = {"AI_CPU", "DSA", "DVPP"}
DROPPED_GE_TYPES = {"WRITE_BACK", "INVALID"}
# runtime task types the analysis takes as kernels besides KERNEL_* (cann_analysis_gear.py
# TaskGear.is_kernel_task)
KERNEL_RT_TYPES = {"STARS_COMMON", "FFTS_PLUS"}
MEMCPY_SOURCE = "memcpy"  # task source of the ts_track "ts memcpy" copies: not op_summary rows
# task source of an Atlas A2's host<->device copies: SDMA tasks of its task log, plain
# device tasks (task_time rows named MEMCPY_ASYNC, no op_summary row, no launch flow), as the
# analysis shows them on that chip
COPY_SOURCE = "sdma"
# an Atlas A2's MIX kernels: the analysis shows their task (task_time, timeline) as the FFTS+
# context it ran, named and typed by its runtime type (KERNEL_MIX_AIC), context 0
MIX_GE_TYPES = ("MIX_AIC", "MIX_AIV")
TENSOR_COLS = ["in_shapes", "in_types", "in_formats", "out_shapes", "out_types", "out_formats"]


@dataclass
class DeviceData:
    """Everything export needs for one device (times in local ns)."""

    rd: ResultDirInfo
    tasks: pd.DataFrame  # one row per device task, joined with host info
    iterations: pd.DataFrame  # step trace iterations (local ns)
    has_host_ops: bool  # host task_track/type info present (op_summary possible)
    has_node_info: bool  # node_basic_info present (op_statistic possible)
    pmu_events: list[int] = field(default_factory=list)
    aicpu: pd.DataFrame | None = None
    l2: pd.DataFrame | None = None
    # the collectives as the analysis shows them (communication.comm_ops), when their steps
    # are device tasks (the hccl steps msprof_cli writes); else None
    comm_ops: pd.DataFrame | None = None

    @property
    def device_id(self) -> int:
        return int(self.rd.device_id or 0)


@dataclass
class HostData:
    """The host result dir of a PROF dir: its control info, its decoded tables and the named
    API table (local times)."""

    rd: ResultDirInfo | None
    tables: HostTables | None
    apis: pd.DataFrame  # named, local-time API table (CANN layer, api_statistic)


@dataclass
class ProfData:
    """Everything one PROF dir's export reads: the host side and every device."""

    prof: Path
    host: HostData
    devices: list[DeviceData]
    log: DecodeLog
    rank_ids: list[int] | None = None  # every device id, when `devices` are only some
