"""Decode the Atlas A2 (Ascend 910B) task log and PMU (docs/formats/ascend910b.md 1.2-1.3):
stars_soc.data's ACSQ start / end pairs become the device tasks, ffts_profile.data's context
PMU records the per-task counters, tagged with the core kind that ran the task.

The tasks come out in the 910 decoder's columns (device.py `DeviceTables.tasks`): `source`
is "hwts" for AI Core kernels (either core kind) and for SDMA tasks (copies, the
collectives' steps: plain device tasks on this chip), "aicpu" for AI CPU kernels.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from msprof_cli.raw import stars_layouts as SL

from .control_info import ResultDirInfo, to_mono_ns
from .rawread import DecodeLog, device_records

STREAM_MASK = 0x7FF  # no stream expansion: 11-bit stream ids (docs/formats/ascend910b.md 1.2)


def stars_tasks(rd: ResultDirInfo, log: DecodeLog, pair, select: np.ndarray | None = None
                ) -> pd.DataFrame:
    """The device tasks of the ACSQ log (`pair`: device.pair_hwts, whose start / end pairing
    per (stream, task) in record order is the analysis's on a time-ordered log; `select`: the
    records of a window, windows.py)."""
    cols = device_records(rd.data_dir, "stars_soc", log,
                          ["head", "stream_id", "task_id", "syscnt"], select)
    func = SL.func_type(cols["head"])
    acsq = (func == SL.FUNC_ACSQ_START) | (func == SL.FUNC_ACSQ_END)
    head = cols["head"][acsq]
    stream = cols["stream_id"][acsq].astype(np.int64) & STREAM_MASK
    # the SQE type rides in the pairing key's low bits: a start pairs with its own end
    sqe = SL.sqe_type(head).astype(np.int64)
    p = pair(stream, cols["task_id"][acsq].astype(np.int64) * 64 + sqe,
             SL.func_type(head), cols["syscnt"][acsq], log, "stars_soc",
             SL.FUNC_ACSQ_START, SL.FUNC_ACSQ_END)
    key = p["task_id"].to_numpy(np.int64)
    return pd.DataFrame({
        "stream_id": p["stream_id"].to_numpy(np.int64),
        "task_id": key // 64,
        "start_ns": to_mono_ns(p["start_tick"].to_numpy(), rd),
        "end_ns": to_mono_ns(p["end_tick"].to_numpy(), rd),
        "source": np.where(key % 64 == SL.SQE_AI_CPU, "aicpu", "hwts").astype(object),
    })


def context_pmu(cols) -> np.ndarray:
    """The records of ffts_profile columns (head, subtask_type, ffts_type) that are a task's
    PMU: not an FFTS+ context's (a MIX kernel's, keyed by its context id; the ACSQ task of
    its FFTS+ task has none, as the analysis finds), not overflowed."""
    return (SL.func_type(cols["head"]) == SL.FUNC_CONTEXT_PMU) \
        & ((cols["subtask_type"] >> 10) & 1 == 0) \
        & (((cols["ffts_type"] >> 13) & 0x7) != SL.FFTS_PLUS)


def pmu_aiv(cols) -> np.ndarray:
    """Whether each ffts_profile record (ffts_type, subtask_type columns) is an AIV core's."""
    return SL.is_aiv((cols["ffts_type"] >> 13) & 0x7, cols["subtask_type"] & 0xFF)


def stars_pmu(rd: ResultDirInfo, log: DecodeLog) -> pd.DataFrame | None:
    """The context PMU records (stream_id, task_id, total_cycles, pmu_0..7, pmu_aiv: the
    task ran on the AI Vector cores), in record order; records whose overflow bit is set
    are dropped, as the analysis drops them."""
    cols = device_records(rd.data_dir, "ffts_profile", log,
                          ["head", "stream_id", "task_id", "subtask_type", "ffts_type",
                           "total_cycle", "pmu"])
    if not len(cols["head"]):
        return None
    ok = context_pmu(cols)
    overflow = (SL.func_type(cols["head"]) == SL.FUNC_CONTEXT_PMU) \
        & ((cols["subtask_type"] >> 10) & 1 == 1)
    if overflow.any():
        log.warn(f"{rd.data_dir}: {int(overflow.sum())} PMU records with an overflowed "
                 "counter dropped")
    aiv = pmu_aiv(cols)[ok]
    return pd.DataFrame({
        "stream_id": cols["stream_id"][ok].astype(np.int64) & STREAM_MASK,
        "task_id": cols["task_id"][ok].astype(np.int64),
        "total_cycles": cols["total_cycle"][ok].astype(np.int64),
        **{f"pmu_{k}": cols["pmu"][ok][:, k].astype(np.int64) for k in range(8)},
        "pmu_aiv": aiv,
    })
