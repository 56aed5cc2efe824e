"""The aicpu summary (docs/formats/export-files.md): the AI CPU scheduler's timings of each AI CPU
task (aicpu.data), named by the task they ran in."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..decode.data import DeviceData
from ..decode.host import NA
from ..fmt import float_str, int_str, text_frame
from .summaries import dur_str, stamp

AICPU = ["Timestamp(us)", "Node", "Compute_time(us)", "Memcpy_time(us)", "Task_time(us)",
         "Dispatch_time(us)", "Total_time(us)", "Stream ID", "Task ID"]
Table = tuple[list[str], pd.DataFrame]


def aicpu(dev: DeviceData, tasks: pd.DataFrame, analysis: bool = False) -> Table | None:
    """`analysis` (mindstudio): a record's Node as the analysis finds it (see below)."""
    a = dev.aicpu
    if a is None or len(a) == 0:
        return None
    t = tasks[tasks["source"] == "aicpu"][["stream_id", "task_id", "start_local", "op_name",
                                           "dur_ns"]]
    a = a.copy()
    a["start_local"] = a["start_ns"] + dev.rd.offset_ns
    m = a.merge(t, on=["stream_id", "task_id", "start_local"], how="inner")
    m = m.sort_values("start_local", kind="stable")
    # the analysis names a record by the AI CPU task whose [start, end] holds the record's
    # end, both in its float arithmetic (Ascend/msprof viewer/aicpu_viewer.py
    # _match_aicpu_data_by_task_time: the record's end from aicpu.data in ms * 1e6, the
    # task's from the ts_track times in ms, start * 1e6 + (end - start) * 1e6); a record
    # that rounding puts past its task's end is "N/A"
    from ..decode.device import analysis_time

    rd = dev.rd
    start = m["start_local"].to_numpy(np.int64) - np.int64(rd.offset_ns)
    end = start + m["dur_ns"].to_numpy(np.int64)
    a_end = analysis_time(m["end_ns"].to_numpy(np.int64), rd, 1e3) * 1000.0 * 1000.0
    if rd.stars:  # an A2's AI CPU tasks: the ACSQ log's times, float ns of their syscnt
        t0, t1 = analysis_time(start, rd, 1e9), analysis_time(end, rd, 1e9)
    else:
        s_ms = analysis_time(start, rd, 1e9) / 1e6
        e_ms = analysis_time(end, rd, 1e9) / 1e6
        t0 = s_ms * 1e6
        t1 = t0 + (e_ms - s_ms) * 1e6
    node = m["op_name"].to_numpy(object)
    if analysis:
        node = np.where((t0 <= a_end) & (a_end <= t1), node, NA)
    df = text_frame({
        "Timestamp(us)": stamp(m["start_local"].to_numpy(np.int64)),
        "Node": node,
        "Compute_time(us)": float_str(m["compute_us"].to_numpy(np.float64)),
        "Memcpy_time(us)": float_str(m["memcpy_us"].to_numpy(np.float64)),
        "Task_time(us)": dur_str(m["dur_ns"].to_numpy(np.int64)),
        "Dispatch_time(us)": float_str(m["dispatch_us"].to_numpy(np.float64)),
        "Total_time(us)": dur_str(m["total_ns"].to_numpy(np.int64)),
        "Stream ID": int_str(m["stream_id"]),
        "Task ID": int_str(m["task_id"]),
    })
    return AICPU, df

