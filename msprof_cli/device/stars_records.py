"""Device-side raw records of the Atlas A2 (Ascend 910B) family: the STARS task log
(stars_soc.data) and the per-task PMU (ffts_profile.data), built as numpy structured arrays
from scheduled tasks (docs/formats/ascend910b.md 1.2, docs/device-model.md 7.2).

The layouts are `raw/stars_layouts.py`'s, shared with the exporter's decoder.  What the
emulated 910B writes, where the sources leave a choice (docs/device-model.md 7.2):
- every task's start and end as an ACSQ log pair (funcType 0 / 1) with its SQE type: 0 for
  AI Core kernels on either core kind (the runtime submits AIC and AIV kernels as SQE type 0
  and tells them apart by the SQE's fftsType), 1 for AI CPU kernels, 11 (SDMA) for copies and
  the collectives' steps;
- one context-PMU record per AI Core kernel, fftsType 0 (AIC only) or 1 (AIV only), its end
  counter inside the task's ACSQ window, as the analysis requires;
- no FFTS+ subtask logs: the emulated kernels are plain (non-MIX) kernels, not FFTS+ graphs.
"""
from __future__ import annotations

import numpy as np

from msprof_cli.raw import stars_layouts as SL

STREAM_MASK = 0x7FF  # stream ids below 2048, bits 12/13/15 clear: no id swapping on decode


def acsq_records(task_id: np.ndarray, stream: np.ndarray, start: np.ndarray, end: np.ndarray,
                 sqe: np.ndarray, counter0: int) -> np.ndarray:
    """Start and end ACSQ log per task, in time order (a start before an end at the same
    tick), 4-bit rolling counter from `counter0`; times in syscnt ticks."""
    n = len(task_id)
    arr = np.zeros(2 * n, SL.ACSQ_LOG)
    func = np.repeat(np.array([[SL.FUNC_ACSQ_START, SL.FUNC_ACSQ_END]], np.uint16), n, 0).ravel()
    ticks = np.stack([start, end], axis=1).ravel()
    order = np.lexsort((func, ticks))
    counter = (counter0 + np.arange(2 * n)) & 0xF
    arr["head"] = SL.head(func[order], counter, np.repeat(sqe, 2)[order])
    arr["magic"] = SL.STARS_MAGIC
    arr["stream_id"] = np.repeat(stream, 2)[order] & STREAM_MASK
    arr["task_id"] = np.repeat(task_id, 2)[order]
    arr["syscnt"] = ticks[order]
    return arr


def context_pmu_records(task_id: np.ndarray, stream: np.ndarray, ffts_type: np.ndarray,
                        total_cycles: np.ndarray, pmu: np.ndarray, start: np.ndarray,
                        end: np.ndarray, counter0: int) -> np.ndarray:
    """One context-PMU record per kernel (in the given order): fftsType 0 for a kernel on
    the AI Cube cores, 1 on the AI Vector cores; start / end syscnt = the task's window."""
    n = len(task_id)
    arr = np.zeros(n, SL.CONTEXT_PMU)
    arr["head"] = SL.head(SL.FUNC_CONTEXT_PMU, (counter0 + np.arange(n)) & 0xF)
    arr["stream_id"] = stream & STREAM_MASK
    arr["task_id"] = task_id
    arr["subtask_type"] = np.where(ffts_type == SL.FFTS_AIV_ONLY, SL.SUBTASK_AIV,
                                   SL.SUBTASK_AIC)
    arr["subtask_id"] = 0
    arr["ffts_type"] = SL.ffts_type_bits(ffts_type)
    arr["total_cycle"] = total_cycles
    arr["pmu"] = pmu
    arr["start_syscnt"] = start
    arr["end_syscnt"] = end
    return arr
