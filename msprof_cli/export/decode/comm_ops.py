"""The collectives of a device whose steps are device tasks, as the real analysis makes them (one
per op execution of the HCCL stream's step tasks), and their numbering across the windows of a
windowed export.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .data import DeviceData
from .host import resolve

# the columns of hccl.OP_COLS (communication.hccl_rows)
COMM_OP_COLS = ["op_name", "op_type", "group", "local_rank", "rank_size", "start_local",
                "end_local", "dur_ns", "connection_id"]


def comm_ops(dev: DeviceData, host) -> pd.DataFrame:
    """The collectives of `dev` whose steps are device tasks (`comm_step` rows: hwts tasks of
    the HCCL stream launched in an HCCL-level API with their hccl_info), as the analysis
    makes them (Ascend/msprof mscalculate/hccl/hccl_calculator.py): one per op execution
    (the steps of one node launch), start = first step start, end = last step end, named
    ``{op}_{group[-3:]}_{k}_1`` (update_op_name_by_group_name: the group name as printed --
    the hccl_info's group number -- and k = the device's executions of that group so far;
    iter 1: each step task occurs once).  Columns: OP_COLS + model_id, tt_local, group_id."""
    t = dev.tasks[dev.tasks["comm_step"].to_numpy(bool)]
    if len(t) == 0:
        return pd.DataFrame(columns=COMM_OP_COLS + ["base", "seq", "model_id", "tt_local",
                                                    "group_id", "thread", "launch_local"])
    g = t.groupby("connection_id", sort=False).agg(
        op_name=("op_name", "first"), op_type=("op_type", "first"),
        model_id=("model_id", "first"), tt_local=("tt_local", "min"),
        thread=("tt_thread", "first"),
        start_local=("start_local", "min"), end_local=("end_local", "max")).reset_index()
    g = g.sort_values(["tt_local", "start_local"], kind="stable", ignore_index=True)
    h = getattr(host.tables, "hccl", None) if host is not None and host.tables else None
    group_id = int(h["group_name"].to_numpy(np.uint64)[0]) if h is not None and len(h) \
        else 0
    rank_size = int(h["rank_size"].to_numpy(np.int64)[0]) if h is not None and len(h) else 0
    local_rank = int(h["local_rank"].to_numpy(np.int64)[0]) if h is not None and len(h) \
        else 0
    k = np.arange(len(g))
    suffix = f"_{str(group_id)[-3:]}_"
    s, e = g["start_local"].to_numpy(np.int64), g["end_local"].to_numpy(np.int64)
    group = "N/A"
    if h is not None and len(h) and host.tables.hashes:
        group = resolve(np.array([group_id], np.uint64), host.tables.hashes)[0]
    return pd.DataFrame({
        "op_name": [f"{n}{suffix}{i}_1" for n, i in zip(g["op_name"].tolist(), k.tolist())],
        "base": [f"{n}{suffix}" for n in g["op_name"].tolist()], "seq": k,
        "op_type": g["op_type"].to_numpy(object), "group": group,
        "local_rank": local_rank, "rank_size": rank_size,
        "start_local": s, "end_local": e, "dur_ns": e - s,
        "connection_id": g["connection_id"].to_numpy(np.int64),
        "model_id": g["model_id"].to_numpy(np.int64),
        "tt_local": g["tt_local"].to_numpy(np.int64), "group_id": group_id,
        "thread": g["thread"].to_numpy(np.int64),
        "launch_local": launch_begin(host, g["connection_id"].to_numpy(np.int64))})


def number_comm_ops(dev: DeviceData, before: int) -> int:
    """A window of a windowed export: number its collectives after the `before` ones of the
    windows before (comm_ops numbers the device's collectives from 0); returns the count so
    far."""
    c = dev.comm_ops
    if c is None or len(c) == 0:
        return before
    c["op_name"] = [f"{b}{q + before}_1" for b, q in zip(c["base"].tolist(),
                                                          c["seq"].tolist())]
    return before + len(c)


def launch_begin(host, cid: np.ndarray) -> np.ndarray:
    """Local begin of the host API with connection id `cid` (the collectives' node launch:
    where the analysis starts their HostToDevice flows); -1 when unknown."""
    apis = host.tables.apis if host is not None and host.tables is not None else None
    if apis is None or len(apis) == 0 or host.rd is None:
        return np.full(len(cid), -1, np.int64)
    m = pd.Series(apis["begin_ns"].to_numpy(np.int64) + np.int64(host.rd.offset_ns),
                  index=apis["connection_id"].to_numpy(np.int64))
    m = m[~m.index.duplicated()]
    return m.reindex(cid).fillna(-1).to_numpy(np.int64)
