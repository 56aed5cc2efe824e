"""Device-side raw records of the Atlas A2 (Ascend 910B) family: the STARS task log
(stars_soc.data) and the per-task PMU (ffts_profile.data), built as numpy structured arrays
from scheduled tasks (docs/formats/ascend910b.md 1.2, docs/device-model.md 11).

The layouts are `raw/stars_layouts.py`'s, shared with the exporter's decoder.  What the
emulated 910B writes, where the sources leave a choice (docs/device-model.md 11):
- every task's start and end as an ACSQ log pair (funcType 0 / 1) with its SQE type: 0 for
  AI Core kernels on either core kind (the runtime submits AIC and AIV kernels as SQE type 0
  and tells them apart by the SQE's fftsType), 1 for AI CPU kernels, 11 (SDMA) for copies and
  the collectives' steps;
- one context-PMU record per AI Core kernel, fftsType 0 (AIC only) or 1 (AIV only), its end
  counter inside the task's ACSQ window, as the analysis requires;
- a MIX_AIC kernel (cost_model._mix_matmul) is an FFTS+ task: its ACSQ pair, an FFTS+ subtask
  pair of context 0, a context PMU record with fftsType 4 and one block PMU record per AI
  Vector block; no FFTS+ graphs.
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
    the AI Cube cores, 1 on the AI Vector cores, 4 (FFTS+, subtask MIX_AIC, context 0) for
    a MIX_AIC kernel's main cores; start / end syscnt = the task's window."""
    n = len(task_id)
    arr = np.zeros(n, SL.CONTEXT_PMU)
    arr["head"] = SL.head(SL.FUNC_CONTEXT_PMU, (counter0 + np.arange(n)) & 0xF)
    arr["stream_id"] = stream & STREAM_MASK
    arr["task_id"] = task_id
    arr["subtask_type"] = np.select([ffts_type == SL.FFTS_AIV_ONLY, ffts_type == SL.FFTS_PLUS],
                                    [SL.SUBTASK_AIV, SL.SUBTASK_MIX_AIC], SL.SUBTASK_AIC)
    arr["subtask_id"] = 0
    arr["ffts_type"] = SL.ffts_type_bits(ffts_type)
    arr["total_cycle"] = total_cycles
    arr["pmu"] = pmu
    arr["start_syscnt"] = start
    arr["end_syscnt"] = end
    return arr


def ffts_log_records(task_id: np.ndarray, stream: np.ndarray, start: np.ndarray,
                     end: np.ndarray, subtask_type: int) -> np.ndarray:
    """The FFTS+ subtask (context 0) start and end logs of MIX kernels, in task order (the
    rolling counters are set when the log is merged with the ACSQ records: `merge_logs`)."""
    n = len(task_id)
    arr = np.zeros(2 * n, SL.FFTS_LOG)
    func = np.tile(np.array([SL.FUNC_FFTS_START, SL.FUNC_FFTS_END], np.uint16), n)
    arr["head"] = SL.head(func, 0, SL.SQE_AI_CORE)
    arr["magic"] = SL.STARS_MAGIC
    arr["stream_id"] = np.repeat(stream, 2) & STREAM_MASK
    arr["task_id"] = np.repeat(task_id, 2)
    arr["syscnt"] = np.stack([start, end], axis=1).ravel()
    arr["subtask_type"] = subtask_type
    arr["subtask_id"] = 0
    arr["ffts_type"] = SL.ffts_type_bits(SL.FFTS_PLUS)
    return arr


def merge_logs(acsq: np.ndarray, ffts: np.ndarray, counter0: int) -> np.ndarray:
    """One time-ordered stars_soc log of ACSQ records and FFTS+ subtask logs (64 B each): at
    one tick a task's ACSQ start, its subtask's start, the subtask's end, the task's end;
    the 4-bit rolling counter over the merged records from `counter0`."""
    if not len(ffts):
        return acsq
    both = np.concatenate([acsq, ffts.view(SL.ACSQ_LOG)])
    func = SL.func_type(both["head"])
    rank = np.select([func == SL.FUNC_ACSQ_START, func == SL.FUNC_FFTS_START,
                      func == SL.FUNC_FFTS_END], [0, 1, 2], 3)
    out = both[np.lexsort((rank, both["syscnt"]))]
    cnt = ((counter0 + np.arange(len(out))) & 0xF).astype(np.uint16)
    out["head"] = (out["head"] & ~np.uint16(0xF << 6)) | (cnt << 6)
    return out


def block_pmu_records(task_id: np.ndarray, stream: np.ndarray, blocks: np.ndarray,
                      total_cycles: np.ndarray, pmu: np.ndarray, start: np.ndarray,
                      end: np.ndarray, subtask_type: int) -> np.ndarray:
    """The block PMU of a MIX kernel's secondary cores (the AI Vector cores of a MIX_AIC
    kernel): `blocks[i]` records for kernel i, its cycles and counters shared evenly."""
    rep = np.repeat(np.arange(len(task_id)), blocks)
    k = np.arange(len(rep)) - np.repeat(np.cumsum(blocks) - blocks, blocks)
    n_b = np.maximum(blocks[rep], 1).astype(np.uint64)
    arr = np.zeros(len(rep), SL.BLOCK_PMU)
    arr["head"] = SL.head(SL.FUNC_BLOCK_PMU, k & 0xF)
    arr["stream_id"] = stream[rep] & STREAM_MASK
    arr["task_id"] = task_id[rep]
    arr["subtask_type"] = subtask_type
    arr["subtask_id"] = 0
    arr["core"] = ((k % 128) << 1 | 1).astype(np.uint8)  # coreType AIV, its core id
    arr["ffts_type"] = SL.FFTS_PLUS << 5
    arr["block_id"] = k
    arr["total_cycle"] = np.asarray(total_cycles, np.uint64)[rep] // n_b
    arr["pmu"] = np.asarray(pmu, np.uint64)[rep] // n_b[:, None]
    arr["start_syscnt"] = start[rep]
    arr["end_syscnt"] = end[rep]
    return arr
