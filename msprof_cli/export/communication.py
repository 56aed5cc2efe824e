"""HCCL (communication) operators of a device: the rows behind ``communication_statistic``
(export-files.md 3.10) and the db's COMMUNICATION_OP table.

Sources (project choice, docs/database.md): the ``hccl_info`` step records of the device's
rank (rank = index of the device in the PROF's sorted device ids, the convention of the
emulated device and of hccl.py) grouped into op executions -- a new execution starts at
stage 0 or at a change of ``cclTag`` -- with start = first step start and end = last step
end; plus device tasks whose GE task type is ``HCCL``.  OP Type = node_basic_info type of the
op name (``cclTag``), else ``N/A``.  Both outputs exist only when HCCL data exist.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .dataset import DeviceData, ProfData
from .fmt import float_str, int_str, py_round
from .host import NA, resolve

HCCL_TASK_TYPE = "HCCL"
COMMUNICATION_STATISTIC = ["OP Type", "Count", "Total Time(us)", "Min Time(us)",
                           "Avg Time(us)", "Max Time(us)", "Ratio(%)"]


COLS = ["op_name", "op_type", "start_local", "end_local", "dur_ns", "connection_id"]


def _from_hccl_info(data: ProfData, dev: DeviceData) -> pd.DataFrame:
    ht = data.host.tables
    h = getattr(ht, "hccl", None) if ht is not None else None
    if h is None or len(h) == 0:
        return pd.DataFrame(columns=COLS)
    ranks = sorted(d.device_id for d in data.devices)
    h = h[h["local_rank"].to_numpy(np.int64) == ranks.index(dev.device_id)]
    if len(h) == 0:
        return pd.DataFrame(columns=COLS)
    h = h.sort_values(["ccl_tag", "ts_ns"], kind="stable")
    tag = h["ccl_tag"].to_numpy(np.uint64)
    new = (h["stage"].to_numpy(np.int64) == 0)
    new[0] = True
    new[1:] |= tag[1:] != tag[:-1]
    off = data.host.rd.offset_ns if data.host.rd else 0
    start = h["ts_ns"].to_numpy(np.int64) + off
    end = start + np.rint(h["duration_estimated"].to_numpy(np.float64) * 1000).astype(np.int64)
    g = pd.DataFrame({"op": np.cumsum(new), "tag": tag, "start": start, "end": end}) \
        .groupby("op", sort=True).agg(tag=("tag", "first"), start=("start", "min"),
                                       end=("end", "max"))
    names = resolve(g["tag"].to_numpy(np.uint64), ht.hashes)
    nb = ht.node_basic
    types = dict(zip(nb["op_name_hash"].to_numpy(np.uint64).tolist(),
                     nb["op_type_hash"].to_numpy(np.uint64).tolist())) if len(nb) else {}
    codes, uniq = pd.factorize(g["tag"].to_numpy(np.uint64))  # Python work per distinct op
    th = np.array([types.get(int(u), 0) for u in uniq], dtype=np.uint64)
    op_type = np.where(th != 0, resolve(th, ht.hashes), NA).astype(object)[codes]
    s, e = g["start"].to_numpy(np.int64), g["end"].to_numpy(np.int64)
    return pd.DataFrame({"op_name": names, "op_type": op_type, "start_local": s,
                         "end_local": e, "dur_ns": e - s,
                         "connection_id": np.full(len(g), -1, np.int64)})


def hccl_rows(dev: DeviceData, data: ProfData | None = None) -> pd.DataFrame:
    """Communication op executions of `dev` (hccl_info + HCCL device tasks), by start."""
    t = dev.tasks
    tasks = t[t["task_type"].to_numpy(object) == HCCL_TASK_TYPE][COLS]
    parts = [tasks] + ([_from_hccl_info(data, dev)] if data is not None else [])
    parts = [p for p in parts if len(p)]
    if not parts:
        return pd.DataFrame(columns=COLS)
    out = pd.concat(parts, ignore_index=True)
    return out.sort_values("start_local", kind="stable", ignore_index=True)


def communication_statistic(rows: pd.DataFrame) -> tuple[list[str], pd.DataFrame]:
    """Per OP Type: Count, Total/Min/Avg/Max µs, Ratio of the total (op_statistic rules)."""
    g = rows.groupby("op_type", sort=True)["dur_ns"]
    agg = pd.DataFrame({"count": g.size(), "total": g.sum(), "min": g.min(),
                        "max": g.max()}).reset_index()
    total_us = agg["total"].to_numpy(np.int64) / 1000.0
    count = agg["count"].to_numpy(np.int64)
    all_us = total_us.sum()
    ratio = py_round(total_us / all_us * 100, 3) if all_us else np.zeros(len(agg))
    order = np.argsort(-total_us, kind="stable")
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
