"""What the passes over one chunk share (device.py, host_pass.py, task_schedule.py,
stream_records.py): `ChunkCtx`, the chunk's columns and host-side spans prepared once by
`Device`; `DeviceDir`, one emulated device's directory and stream state; `kind_lut`, the
per-kind lookup tables the passes map `ChunkCtx.kind` through."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from msprof_cli.device import scheduler as S
from msprof_cli.device.cost_model import CostTable
from msprof_cli.device.op_table import IterTable, OpTable
from msprof_cli.device.writer import DataDir


def kind_lut(mapping: dict[int, int], default: int = 0) -> np.ndarray:
    """A lookup table indexed by op kind (op_map.KIND_*): `lut[ctx.kind]` maps a column."""
    lut = np.full(256, default, np.int64)
    for k, v in mapping.items():
        lut[k] = v
    return lut


@dataclass
class DeviceDir:
    device_id: int
    path: Path
    data: DataDir
    state: S.DeviceState


@dataclass
class ChunkCtx:
    """Everything of one chunk that the per-device passes share."""

    ops: OpTable
    iters: IterTable
    sig: dict[str, np.ndarray]
    cost: CostTable
    kind: np.ndarray  # per op row
    win: object  # LaunchWindows
    me_begin: np.ndarray  # per iteration
    me_end: np.ndarray
    fp_name: dict[int, np.ndarray]  # per device, per iteration: name idx of the fp op (-1)
    bp_name: dict[int, np.ndarray]
    # per name idx (step_trace.NameClasses): the op's While loop (-1: none), backward op
    name_loop: np.ndarray
    name_backward: np.ndarray
    # GE InputCopy / OutputCopy spans per iteration (in_b, in_e, in_ok, out_b, out_e, out_ok);
    # None with task_time off (no copies, no memcpy tasks)
    copies: tuple[np.ndarray, ...] | None = None
    # the time model's InputCopy / OutputCopy spans (in_b, in_e, out_b, out_e) per iteration
    copy_spans: tuple[np.ndarray, ...] | None = None
    # the ModelExecute API's (begin, end) per iteration: the step span less the copies, which
    # GE reports beside it, not inside (host_pass.copy_apis); None = the step span
    execute: tuple[np.ndarray, np.ndarray] | None = None
