"""HCCL data of one device from ``hccl_info`` (docs/formats/raw-format.md 4.7): the task steps, the
op
executions they form, and the legacy ``hccl_*.json`` (docs/formats/timeline.md 11.2).

hccl_info records are host records without a device id: the record's ``local_rank`` is the
rank = index of the device in the PROF dir's sorted device ids, or, in a PROF dir of one
device with a rank id (one process per rank), that rank id (project convention, matching
the emulated device, see `device_rank`).  One step = one record: name = task name (itemId resolved), start =
record timestamp (host clock, local time), dur = durationEstimated.  An op execution = the
steps of one cclTag from a stage-0 step (or a change of cclTag) to the next; start = first
step start, end = last step end.

The same steps and step args feed the ``Communication`` process of msprof json
(timeline.communication_layer) and ``hccl_*.json`` (numeric ts/dur like the other
legacy-only files), so both show identical tasks.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..decode.data import DeviceData, ProfData
from ..decode.host import NA, resolve
from ..fmt import int_str
from ..outputs import trace as TR
from ..outputs.numeric_trace import thread_meta, x_events
from .selection import ALL, Selection, in_window

LINK_TYPES = {0: "ON_CHIP", 1: "HCCS", 2: "PCIE", 3: "ROCE", 4: "SIO"}
TRANSPORT_TYPES = {0: "SDMA", 1: "RDMA", 2: "LOCAL"}
DATA_TYPES = {0: "INT8", 1: "INT16", 2: "INT32", 3: "FP16", 4: "FP32", 5: "INT64", 6: "UINT64"}
OP_TYPES = {0: "SUM", 1: "MUL", 2: "MAX", 3: "MIN"}

# op executions of a device (also communication.hccl_rows' columns, plus group / ranks)
OP_COLS = ["op_name", "op_type", "group", "local_rank", "rank_size", "start_local",
           "end_local", "dur_ns", "connection_id"]


def enum_names(values: np.ndarray, table: dict[int, str]) -> np.ndarray:
    inv, uniq = pd.factorize(np.asarray(values, dtype=np.int64))
    return np.array([table.get(int(u), str(int(u))) for u in uniq], dtype=object)[inv]


def rank_ids(data: ProfData) -> list[int]:
    """The device ids of the PROF dir in rank order (a window's ProfData holds one device;
    it carries the whole list)."""
    return data.rank_ids if data.rank_ids is not None \
        else sorted(d.device_id for d in data.devices)


def device_rank(data: ProfData, dev: DeviceData) -> int | None:
    """The HCCL rank of `dev` (the ``local_rank`` of its hccl_info records): in a PROF dir
    with one device and a rank id >= 0 in its info.json (one process per rank: RANK_ID,
    TF_CONFIG, ...), that rank id; else the device's index among the PROF dir's sorted
    device ids (the replicas of one process); None for a device not in the list."""
    ranks = rank_ids(data)
    if dev.device_id not in ranks:
        return None
    rank = dev.rd.info.get("rank_id", -1) if dev.rd is not None else -1
    if len(ranks) == 1 and isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0:
        return rank
    return ranks.index(dev.device_id)


def rank_steps(h: pd.DataFrame, rank: int, offset_ns: int) -> pd.DataFrame:
    """The hccl_info records of one rank (`local_rank`) in time order, with local start /
    end / duration and the op execution number `op` (0, 1, ... in order of the op's first
    step): per cclTag in time order, a new execution at stage 0 or after another tag."""
    h = h[h["local_rank"].to_numpy(np.int64) == rank]
    if len(h) == 0:
        return pd.DataFrame()
    start = h["ts_ns"].to_numpy(np.int64) + offset_ns
    dur = np.rint(h["duration_estimated"].to_numpy(np.float64) * 1000).astype(np.int64)
    h = h.assign(start_local=start, dur_ns=dur, end_local=start + dur)
    h = h.sort_values(["start_local"], kind="stable", ignore_index=True)
    by_tag = h.sort_values(["ccl_tag", "start_local"], kind="stable")
    tag = by_tag["ccl_tag"].to_numpy(np.uint64)
    new = by_tag["stage"].to_numpy(np.int64) == 0
    new[0] = True
    new[1:] |= tag[1:] != tag[:-1]
    grp = pd.Series(np.cumsum(new) - 1, index=by_tag.index).sort_index().to_numpy()
    first = pd.Series(h["start_local"].to_numpy()).groupby(grp).transform("min").to_numpy()
    # renumber executions by (first step start, tag order) so `op` follows time
    key = pd.DataFrame({"g": grp, "first": first}).drop_duplicates("g") \
        .sort_values(["first", "g"], kind="stable")
    rank_of = pd.Series(np.arange(len(key)), index=key["g"].to_numpy())
    h["op"] = rank_of.reindex(grp).to_numpy(np.int64)
    return h


def _all_steps(data: ProfData, dev: DeviceData) -> pd.DataFrame:
    """This device's hccl_info records in time order (`rank_steps`), with `name` /
    `op_name` resolved."""
    ht = data.host.tables
    h = getattr(ht, "hccl", None) if ht is not None else None
    if h is None or len(h) == 0:
        return pd.DataFrame()
    rank = device_rank(data, dev)
    if rank is None:
        return pd.DataFrame()
    off = data.host.rd.offset_ns if data.host.rd else 0
    h = rank_steps(h, rank, off)
    if len(h) == 0:
        return h
    h["name"] = resolve(h["item_id"].to_numpy(np.uint64), ht.hashes)
    h["op_name"] = resolve(h["ccl_tag"].to_numpy(np.uint64), ht.hashes)
    return h


def hccl_records(data: ProfData, dev: DeviceData, sel: Selection = ALL) -> pd.DataFrame:
    """The steps of `dev` (see `_all_steps`) inside the export window, by start."""
    h = _all_steps(data, dev)
    if len(h) == 0:
        return h
    return h[in_window(h["start_local"], h["end_local"], sel)].reset_index(drop=True)


def step_args(h: pd.DataFrame) -> np.ndarray:
    """The args JSON object of each step (same text in msprof json and hccl json)."""
    role = np.where(h["role"].to_numpy(np.int64) == 1, "src", "dst")
    return ('{"Op Name": ' + TR.jstr(h["op_name"].to_numpy(object))
            + ', "Stage": ' + int_str(h["stage"].to_numpy(np.int64))
            + ', "Local Rank": ' + int_str(h["local_rank"].to_numpy(np.int64))
            + ', "Remote Rank": ' + int_str(h["remote_rank"].to_numpy(np.int64))
            + ', "Rank Size": ' + int_str(h["rank_size"].to_numpy(np.int64))
            + ', "Role": ' + TR.jstr(role)
            + ', "Data Size(Byte)": ' + int_str(h["data_size"].to_numpy(np.uint64)
                                                .astype(np.int64))
            + ', "Op Type": ' + TR.jstr(enum_names(h["op_type"], OP_TYPES))
            + ', "Data Type": ' + TR.jstr(enum_names(h["data_type"], DATA_TYPES))
            + ', "Link Type": ' + TR.jstr(enum_names(h["link_type"], LINK_TYPES))
            + ', "Transport Type": '
            + TR.jstr(enum_names(h["transport_type"], TRANSPORT_TYPES))
            + '}')


def op_executions(data: ProfData, dev: DeviceData, sel: Selection = ALL) -> pd.DataFrame:
    """One row per HCCL op execution of `dev` from its hccl_info steps (OP_COLS), by start;
    with a window: the executions that intersect it (all their steps counted)."""
    h = _all_steps(data, dev)
    if len(h) == 0:
        return pd.DataFrame(columns=OP_COLS)
    ht = data.host.tables
    g = h.groupby("op", sort=True).agg(
        op_name=("op_name", "first"), tag=("ccl_tag", "first"), group=("group_name", "first"),
        local_rank=("local_rank", "first"), rank_size=("rank_size", "first"),
        start_local=("start_local", "min"), end_local=("end_local", "max"))
    nb = ht.node_basic
    types = dict(zip(nb["op_name_hash"].to_numpy(np.uint64).tolist(),
                     nb["op_type_hash"].to_numpy(np.uint64).tolist())) if len(nb) else {}
    codes, uniq = pd.factorize(g["tag"].to_numpy(np.uint64))  # Python work per distinct op
    th = np.array([types.get(int(u), 0) for u in uniq], dtype=np.uint64)
    op_type = np.where(th != 0, resolve(th, ht.hashes), NA).astype(object)[codes]
    s, e = g["start_local"].to_numpy(np.int64), g["end_local"].to_numpy(np.int64)
    out = pd.DataFrame({
        "op_name": g["op_name"].to_numpy(object), "op_type": op_type,
        "group": resolve(g["group"].to_numpy(np.uint64), ht.hashes),
        "local_rank": g["local_rank"].to_numpy(np.int64),
        "rank_size": g["rank_size"].to_numpy(np.int64),
        "start_local": s, "end_local": e, "dur_ns": e - s,
        "connection_id": np.full(len(g), -1, np.int64)})
    out = out[in_window(s, e, sel)]
    return out.sort_values("start_local", kind="stable", ignore_index=True)


def hccl_meta(app_pid: int, planes) -> list[str]:
    return thread_meta(app_pid, "HCCL", [(p, f"Plane {p}")
                                         for p in sorted(int(p) for p in planes)])


def hccl_layer(h: pd.DataFrame, args: np.ndarray, app_pid: int) -> TR.Layer:
    """One X per step (`h`: hccl_records rows, `args`: their step_args)."""
    return x_events(h["name"].to_numpy(object), app_pid, h["plane_id"].to_numpy(np.int64),
                    h["start_local"], h["dur_ns"], args)
