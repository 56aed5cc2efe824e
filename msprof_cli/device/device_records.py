"""Device-side raw records of Ascend910 (docs/formats/raw-format.md 5): hwts, aicore, ts_track,
aicpu,
l2_cache, built as numpy structured arrays from scheduled tasks."""
from __future__ import annotations

import numpy as np

from msprof_cli.raw import layouts as L

STREAM_MASK = 0x7FF  # stream ids: low 11 bits in device records


def hwts_records(task_id: np.ndarray, stream: np.ndarray, start: np.ndarray, end: np.ndarray,
                 counter0: int) -> np.ndarray:
    """Start and end record per task, in time order, 4-bit rolling counter from counter0."""
    n = len(task_id)
    arr = np.zeros(2 * n, L.HWTS)
    log_type = np.repeat(np.array([[L.HWTS_TASK_START, L.HWTS_TASK_END]], np.uint8), n, 0)
    ticks = np.stack([start, end], axis=1)
    order = np.lexsort((log_type.ravel() == L.HWTS_TASK_START, ticks.ravel()))
    counter = (counter0 + np.arange(2 * n)) & 0xF
    arr["flags"] = L.hwts_flags(log_type.ravel()[order], counter)
    arr["task_type"] = 0
    arr["task_id"] = np.repeat(task_id, 2)[order]
    arr["syscnt"] = ticks.ravel()[order]
    arr["stream_id"] = np.repeat(stream, 2)[order] & STREAM_MASK
    return arr


def aicore_records(task_id: np.ndarray, stream: np.ndarray, total_cycles: np.ndarray,
                   pmu: np.ndarray, counter0: int) -> np.ndarray:
    arr = np.zeros(len(task_id), L.AICORE)
    arr["flags"] = (((counter0 + np.arange(len(task_id))) & 0xF) << 4).astype(np.uint8)
    arr["task_id"] = task_id
    arr["total_cycles"] = total_cycles
    arr["pmu"] = pmu
    arr["stream_id"] = stream & STREAM_MASK
    return arr


def step_trace_records(ts: np.ndarray, index: np.ndarray, model: np.ndarray,
                       stream: np.ndarray, task_id: np.ndarray, tag: np.ndarray) -> np.ndarray:
    arr = np.zeros(len(ts), L.TS_TRACK_STEP)
    arr["rpt_type"] = L.TS_RPT_STEP_TRACE
    arr["buf_size"] = L.TS_TRACK_SIZE
    arr["timestamp"] = ts
    arr["index_id"] = index
    arr["model_id"] = model
    arr["stream_id"] = stream & STREAM_MASK
    arr["task_id"] = task_id
    arr["tag_id"] = tag
    return arr


def flip_records(ts: np.ndarray, stream: np.ndarray, flip_num: np.ndarray,
                 task_id: np.ndarray) -> np.ndarray:
    arr = np.zeros(len(ts), L.TS_TRACK_FLIP)
    arr["rpt_type"] = L.TS_RPT_FLIP
    arr["buf_size"] = L.TS_TRACK_SIZE
    arr["timestamp"] = ts
    arr["stream_id"] = stream & STREAM_MASK
    # flip numbers are u16; 65535 is reserved for "stream destroyed"
    arr["flip_num"] = np.where(flip_num >= L.FLIP_STREAM_DESTROYED, flip_num % 65535, flip_num)
    arr["task_id"] = task_id
    return arr


def memcpy_records(ts: np.ndarray, stream: np.ndarray, task_id: np.ndarray, state: int
                   ) -> np.ndarray:
    """ts_track rptType 11 ("ts memcpy"): one record per state of a copy -- received by the
    TS (taskState 0), started (1), ended (2); see layouts.TS_TRACK_MEMCPY."""
    arr = np.zeros(len(ts), L.TS_TRACK_MEMCPY)
    arr["rpt_type"] = L.TS_RPT_MEMCPY
    arr["buf_size"] = L.TS_TRACK_SIZE
    arr["timestamp"] = ts
    arr["stream_id"] = stream & STREAM_MASK
    arr["task_id"] = task_id
    arr["task_state"] = state
    return arr


def task_type_records(ts: np.ndarray, stream: np.ndarray, task_id: np.ndarray,
                      task_type: int, state: int) -> np.ndarray:
    """ts_track rptType 12 ("task type"): one record per state of a task scheduled by the TS
    -- received (taskState 0), started (1), ended (2); on the 910 the AI CPU tasks' times
    (taskType 1), see layouts.TS_TRACK_TASK_TYPE."""
    arr = np.zeros(len(ts), L.TS_TRACK_TASK_TYPE)
    arr["rpt_type"] = L.TS_RPT_TASK_TYPE
    arr["buf_size"] = L.TS_TRACK_SIZE
    arr["timestamp"] = ts
    arr["stream_id"] = stream & STREAM_MASK
    arr["task_id"] = task_id
    arr["task_type"] = task_type
    arr["task_state"] = state
    return arr


def aicpu_records(device_id: int, stream: np.ndarray, task_id: np.ndarray,
                  ready: np.ndarray, start: np.ndarray, end: np.ndarray,
                  start_ns: np.ndarray, end_ns: np.ndarray, thread: np.ndarray) -> np.ndarray:
    """aicpu.data: ticks are syscnt, *Time fields are CLOCK_MONOTONIC_RAW µs (project)."""
    arr = np.zeros(len(task_id), L.AICPU)
    arr["magic"] = L.MAGIC
    arr["data_tag"] = L.AICPU_DATA_TAG
    arr["stream_id"] = stream & STREAM_MASK
    arr["task_id"] = task_id
    s_us = start_ns // 1000
    e_us = end_ns // 1000
    span = np.maximum(e_us - s_us, 0)
    arr["run_start_time"] = s_us
    arr["run_start_tick"] = start
    arr["compute_start_time"] = s_us + span // 10  # ~10 % dispatch/prepare
    arr["memcpy_start_time"] = s_us + span * 9 // 10  # last ~10 % copies the outputs
    arr["memcpy_end_time"] = e_us
    arr["run_end_time"] = e_us
    arr["run_end_tick"] = end
    arr["thread_id"] = thread
    arr["device_id"] = device_id
    arr["submit_tick"] = ready
    arr["schedule_tick"] = np.minimum(ready + 1, start)
    arr["tick_before_run"] = start
    arr["tick_after_run"] = end
    arr["kernel_type"] = 1
    arr["dispatch_time"] = span // 10
    arr["total_time"] = span
    return arr


def l2_cache_records(stream: np.ndarray, task_id: np.ndarray, events: np.ndarray
                     ) -> np.ndarray:
    arr = np.zeros(len(task_id), L.L2_CACHE)
    arr["task_type"] = 0
    arr["stream_id"] = stream & STREAM_MASK
    arr["task_id"] = task_id
    arr["events"] = events
    return arr
