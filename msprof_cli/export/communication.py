"""HCCL (communication) operators of a device: the rows behind ``communication_statistic``
(export-files.md 3.10), the db's COMMUNICATION_OP table and the ``Communication`` /
Overlap Analysis layers of msprof json.

Sources (project choice, docs/database.md): the ``hccl_info`` step records of the device's
rank grouped into op executions (hccl.op_executions: a new execution starts at stage 0 or at
a change of ``cclTag``; start = first step start, end = last step end); only when the device
has no hccl_info, its device tasks whose GE task type is ``HCCL`` (one execution each -- the
two sources describe the same ops, so they are never added up).  OP Type = node_basic_info
type of the op name (``cclTag``), else ``N/A``.  Both outputs exist only when HCCL data exist.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .dataset import DeviceData, ProfData, comm_ops  # noqa: F401 (comm_ops: see dataset)
from .fmt import float_str, int_str, py_round
from .hccl import OP_COLS, device_rank, hccl_records, op_executions, rank_ids, step_args
from .selection import ALL, Selection, in_window
from .timeline import CommData

HCCL_TASK_TYPE = "HCCL"
COMMUNICATION_STATISTIC = ["OP Type", "Count", "Total Time(us)", "Min Time(us)",
                           "Avg Time(us)", "Max Time(us)", "Ratio(%)"]


COLS = ["op_name", "op_type", "start_local", "end_local", "dur_ns", "connection_id"]


def _from_tasks(dev: DeviceData, data: ProfData | None, sel: Selection) -> pd.DataFrame:
    t = dev.tasks
    t = t[t["task_type"].to_numpy(object) == HCCL_TASK_TYPE]
    t = t[in_window(t["start_local"], t["end_local"], sel)]
    ranks = rank_ids(data) if data is not None else [dev.device_id]
    rank = device_rank(data, dev) if data is not None else None
    # the rank size is not known without hccl_info when each process is a rank
    return t[COLS].assign(group="N/A", local_rank=rank or 0, rank_size=len(ranks))[OP_COLS]


def hccl_rows(dev: DeviceData, data: ProfData | None = None, sel: Selection = ALL
              ) -> pd.DataFrame:
    """Communication op executions of `dev` (OP_COLS), by start: from hccl_info, else from
    the HCCL device tasks; `sel` keeps the executions intersecting the export window."""
    if dev.comm_ops is not None:  # the steps are device tasks (comm_ops)
        c = dev.comm_ops
        out = c[in_window(c["start_local"], c["end_local"], sel)][OP_COLS]
        return out.sort_values("start_local", kind="stable", ignore_index=True)
    out = op_executions(data, dev, sel) if data is not None else pd.DataFrame(columns=OP_COLS)
    if len(out) == 0:
        out = _from_tasks(dev, data, sel)
    if len(out) == 0:
        return pd.DataFrame(columns=OP_COLS)
    return out.sort_values("start_local", kind="stable", ignore_index=True)


def device_comm(data: ProfData, dev: DeviceData, sel: Selection = ALL) -> CommData | None:
    """HCCL data of `dev` for msprof json (timeline.CommData): the op executions of
    `hccl_rows` and the hccl_info steps in the window; None without HCCL data."""
    ops = hccl_rows(dev, data, sel)
    steps = hccl_records(data, dev, sel)
    if len(ops) == 0 and len(steps) == 0:
        return None
    args = step_args(steps) if len(steps) else np.zeros(0, dtype=object)
    return CommData(ops=ops, steps=steps, step_args=args)


def communication_statistic(rows: pd.DataFrame) -> tuple[list[str], pd.DataFrame]:
    """Per OP Type: Count, Total/Min/Avg/Max µs, Ratio of the total (op_statistic rules)."""
    g = rows.groupby("op_type", sort=False)["dur_ns"]  # in order of first appearance
    agg = pd.DataFrame({"count": g.size(), "total": g.sum(), "min": g.min(),
                        "max": g.max()}).reset_index()
    total_us = agg["total"].to_numpy(np.int64) / 1000.0
    count = agg["count"].to_numpy(np.int64)
    all_us = total_us.sum()
    ratio = py_round(total_us / all_us * 100, 3) if all_us else np.zeros(len(agg))
    # by Max descending, stable (hccl_calculator._create_report)
    order = np.argsort(-agg["max"].to_numpy(np.int64), kind="stable")
    df = pd.DataFrame({
        "OP Type": agg["op_type"].to_numpy(object),
        "Count": int_str(count),
        "Total Time(us)": float_str(py_round(total_us, 3)),
        "Min Time(us)": float_str(py_round(agg["min"].to_numpy(np.int64) / 1000.0, 3)),
        "Avg Time(us)": float_str(py_round(total_us / np.maximum(count, 1), 3)),
        "Max Time(us)": float_str(py_round(agg["max"].to_numpy(np.int64) / 1000.0, 3)),
        "Ratio(%)": float_str(ratio),
    }).iloc[order].reset_index(drop=True)
    return COMMUNICATION_STATISTIC, df
