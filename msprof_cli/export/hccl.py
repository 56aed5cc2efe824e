"""Legacy ``hccl_*.json`` (timeline.md 11.2): HCCL task steps of one device from hccl_info.

hccl_info records are host records without a device id: the record's ``local_rank`` is the
rank = index of the device in the PROF dir's sorted device ids (project convention, matching
the emulated device).  Process ``HCCL`` (pid = application pid), one lane per plane
(``Plane {id}``); one X per record: name = task name (itemId resolved), ts = record timestamp,
dur = durationEstimated.  Numeric ts/dur like the other legacy-only files.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from . import timeline as T
from .dataset import DeviceData, ProfData
from .fmt import int_str
from .host import resolve
from .numeric_trace import thread_meta, x_events
from .selection import Selection, in_window

LINK_TYPES = {0: "ON_CHIP", 1: "HCCS", 2: "PCIE", 3: "ROCE", 4: "SIO"}
TRANSPORT_TYPES = {0: "SDMA", 1: "RDMA", 2: "LOCAL"}
DATA_TYPES = {0: "INT8", 1: "INT16", 2: "INT32", 3: "FP16", 4: "FP32", 5: "INT64", 6: "UINT64"}
OP_TYPES = {0: "SUM", 1: "MUL", 2: "MAX", 3: "MIN"}


def _names(values: np.ndarray, table: dict[int, str]) -> np.ndarray:
    inv, uniq = pd.factorize(np.asarray(values, dtype=np.int64))
    return np.array([table.get(int(u), str(int(u))) for u in uniq], dtype=object)[inv]


def hccl_records(data: ProfData, dev: DeviceData, sel: Selection) -> pd.DataFrame:
    ht = data.host.tables
    if ht is None or len(ht.hccl) == 0:
        return pd.DataFrame()
    ranks = sorted(d.device_id for d in data.devices)
    h = ht.hccl[ht.hccl["local_rank"].astype(np.int64) == ranks.index(dev.device_id)]
    off = data.host.rd.offset_ns if data.host.rd else 0
    start = h["ts_ns"].to_numpy(np.int64) + off
    dur = np.rint(h["duration_estimated"].to_numpy(np.float64) * 1000).astype(np.int64)
    h = h.assign(start_local=start, dur_ns=dur, end_local=start + dur)
    return h[in_window(h["start_local"], h["end_local"], sel)].reset_index(drop=True)


def hccl_json(data: ProfData, dev: DeviceData, sel: Selection, app_pid: int
              ) -> tuple[list[str], list[str]] | None:
    h = hccl_records(data, dev, sel)
    if len(h) == 0:
        return None
    ht = data.host.tables
    planes = sorted(int(p) for p in h["plane_id"].unique())
    meta = thread_meta(app_pid, "HCCL", [(p, f"Plane {p}") for p in planes])
    role = np.where(h["role"].to_numpy(np.int64) == 1, "src", "dst")
    args = ('{"Op Name": ' + T.jstr(resolve(h["ccl_tag"].to_numpy(np.uint64), ht.hashes))
            + ', "Stage": ' + int_str(h["stage"].to_numpy(np.int64))
            + ', "Local Rank": ' + int_str(h["local_rank"].to_numpy(np.int64))
            + ', "Remote Rank": ' + int_str(h["remote_rank"].to_numpy(np.int64))
            + ', "Rank Size": ' + int_str(h["rank_size"].to_numpy(np.int64))
            + ', "Role": ' + T.jstr(role)
            + ', "Data Size(Byte)": ' + int_str(h["data_size"].to_numpy(np.uint64)
                                                .astype(np.int64))
            + ', "Op Type": ' + T.jstr(_names(h["op_type"], OP_TYPES))
            + ', "Data Type": ' + T.jstr(_names(h["data_type"], DATA_TYPES))
            + ', "Link Type": ' + T.jstr(_names(h["link_type"], LINK_TYPES))
            + ', "Transport Type": ' + T.jstr(_names(h["transport_type"], TRANSPORT_TYPES))
            + '}')
    name = resolve(h["item_id"].to_numpy(np.uint64), ht.hashes)
    _, events = T.assemble([x_events(name, app_pid, h["plane_id"].to_numpy(np.int64),
                                     h["start_local"], h["dur_ns"], args)])
    return meta, events
