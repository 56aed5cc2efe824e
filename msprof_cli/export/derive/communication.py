"""HCCL (communication) operators of a device: the rows behind ``communication_statistic``
(docs/formats/export-files.md 3.10), the db's COMMUNICATION_OP table and the ``Communication`` /
Overlap Analysis layers of msprof json.

Sources (project choice, docs/database.md): the ``hccl_info`` step records of the device's
rank grouped into op executions (hccl.op_executions: a new execution starts at stage 0 or at
a change of ``cclTag``; start = first step start, end = last step end); only when the device
has no hccl_info, its device tasks whose GE task type is ``HCCL`` (one execution each -- the
two sources describe the same ops, so they are never added up).  OP Type = node_basic_info
type of the op name (``cclTag``), else ``N/A``.  Both outputs exist only when HCCL data exist.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from ..decode.data import DeviceData, ProfData
from ..decode.host import resolve
from ..fmt import float_str, int_str, py_round
from ..outputs.comm_layer import CommData
from .hccl import (DATA_TYPES, LINK_TYPES, OP_COLS, TRANSPORT_TYPES, device_rank, enum_names,
                   hccl_records, op_executions, rank_ids, step_args)
from .selection import ALL, Selection, in_window

HCCL_TASK_TYPE = "HCCL"
COMMUNICATION_STATISTIC = ["OP Type", "Count", "Total Time(us)", "Min Time(us)",
                           "Avg Time(us)", "Max Time(us)", "Ratio(%)"]


COLS = ["op_name", "op_type", "start_local", "end_local", "dur_ns", "connection_id"]


def _from_tasks(dev: DeviceData, data: ProfData | None, sel: Selection) -> pd.DataFrame:
    t = dev.tasks
    rows = np.flatnonzero((t["task_type"].to_numpy(object) == HCCL_TASK_TYPE)
                          & in_window(t["start_local"], t["end_local"], sel))
    if len(rows) == 0:  # no HCCL task (most single-device runs): no frame copies
        return pd.DataFrame(columns=OP_COLS)
    t = t[COLS].take(rows)
    ranks = rank_ids(data) if data is not None else [dev.device_id]
    rank = device_rank(data, dev) if data is not None else None
    # the rank size is not known without hccl_info when each process is a rank
    return t.assign(group="N/A", local_rank=rank or 0, rank_size=len(ranks))[OP_COLS]


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


def comm_steps(data: ProfData, dev: DeviceData, sel: Selection = ALL) -> pd.DataFrame:
    """The collectives' steps of `dev` as device tasks (`comm_step` rows) with the hccl_info
    of each (the record in the same HCCL-level API: the last one of the task_track's thread
    before it), in the window, by start -- what the analysis joins (hccl_calculator.py
    HcclViewModel.get_hccl_task_data: hccl_info x ascend task on stream, task, batch)."""
    t = dev.tasks[dev.tasks["comm_step"].to_numpy(bool)]
    t = t[in_window(t["start_local"], t["end_local"], sel)]
    h = data.host.tables.hccl if data.host.tables is not None else pd.DataFrame()
    if len(t) == 0 or len(h) == 0:
        return pd.DataFrame()
    off = np.int64(data.host.rd.offset_ns if data.host.rd else 0)
    h = h.assign(h_local=h["ts_ns"].to_numpy(np.int64) + off,
                 tt_thread=h["thread_id"].to_numpy(np.int64))
    t = t.assign(tt_thread=t["tt_thread"].to_numpy(np.int64),
                 tt_local=t["tt_local"].to_numpy(np.int64), _row=np.arange(len(t)))
    m = pd.merge_asof(t.sort_values("tt_local", kind="stable"),
                      h.sort_values("h_local", kind="stable").drop(columns=["ts_ns"]),
                      left_on="tt_local", right_on="h_local", by="tt_thread")
    m = m[m["h_local"].notna()].sort_values("_row", kind="stable")
    m = m.sort_values("start_local", kind="stable", ignore_index=True)
    ht = data.host.tables
    m["name"] = resolve(m["item_id"].to_numpy(np.uint64), ht.hashes)
    m["plane_id"] = m["plane_id"].to_numpy(np.int64)
    return m


def analysis_step_args(s: pd.DataFrame) -> np.ndarray:
    """The args of a step event as the analysis writes them (viewer/get_hccl_export_data.py
    get_hccl_arg + model id): bandwidth = size * 1e-9 / (duration ns * 1e-9)."""
    dur = s["dur_ns"].to_numpy(np.float64)
    size = s["data_size"].to_numpy(np.uint64).astype(np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        bw = np.where(np.abs(dur) < 1e-15, 0.0, (size * 0.001 ** 3) / (dur * 0.001 ** 3))
    bw_txt = [repr(float(x)) if x != 0 else "0" for x in bw.tolist()]
    est = [repr(float(x)) for x in s["duration_estimated"].to_numpy(np.float64).tolist()]
    out = []
    for i, (nt, e, st, tk, nm, sr, dr, tr, sz, dt, lk, b, md) in enumerate(zip(
            s["notify_id"].to_numpy(np.uint64).tolist(), est,
            s["stream_id"].to_numpy(np.int64).tolist(), s["task_id"].to_numpy(np.int64).tolist(),
            s["name"].tolist(), s["local_rank"].to_numpy(np.int64).tolist(),
            s["remote_rank"].to_numpy(np.int64).tolist(),
            enum_names(s["transport_type"], TRANSPORT_TYPES).tolist(), size.tolist(),
            enum_names(s["data_type"], DATA_TYPES).tolist(),
            enum_names(s["link_type"], LINK_TYPES).tolist(), bw_txt,
            s["model_id"].to_numpy(np.int64).tolist())):
        out.append('{"notify_id": %s, "duration estimated(us)": %s, "stream id": %d, '
                   '"task id": %d, "context id": 4294967295, "task type": %s, '
                   '"src rank": %d, "dst rank": %d, "transport type": %s, "size(Byte)": %d, '
                   '"data type": %s, "link type": %s, "bandwidth(GB/s)": %s, "model id": %d}'
                   % (json.dumps(str(nt)), e, st, tk, json.dumps(nm), sr, dr, json.dumps(tr),
                      sz, json.dumps(dt), json.dumps(lk), b, md))
    return np.array(out, dtype=object)


def device_comm(data: ProfData, dev: DeviceData, sel: Selection = ALL) -> CommData | None:
    """HCCL data of `dev` for msprof json (timeline.CommData): the op executions of
    `hccl_rows` and the hccl_info steps in the window; None without HCCL data."""
    if dev.comm_ops is not None:  # the steps are device tasks: as the analysis shows them
        ops = hccl_rows(dev, data, sel)
        c = dev.comm_ops
        ops = ops.assign(**{k: c.set_index("connection_id")[k].reindex(
            ops["connection_id"].to_numpy(np.int64)).to_numpy() for k in
            ("model_id", "launch_local")})
        steps = comm_steps(data, dev, sel)
        args = analysis_step_args(steps) if len(steps) else np.zeros(0, dtype=object)
        return CommData(ops=ops, steps=steps, step_args=args, analysis=True)
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
