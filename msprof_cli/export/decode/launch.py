"""The host side of the host-to-device join (docs/formats/raw-format.md 4.12): each task_track
record with
its launch (the node-level API enclosing it), its model (the ModelExecute enclosing it), the
op info of its launch (the last node_basic_info record inside it) and its host batch id.

The table is built from numpy columns: the frame copies, filters, per-join enclose frames and
the left merge with node_basic_info were ~40 ms at 50k launches, on the export's critical
path.  The table is the one those pandas steps gave, dtypes included (the merge's: an int
column with rows of no match is float64, a bool one object, the u64 hashes nullable UInt64).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from msprof_cli.raw import layouts as L

from .data import TENSOR_COLS
from .device import assign_batches
from .enclose import enclosing, payload_at
from .join import last_of_each, sorted_positions
from .host import HostTables, type_name_codes

__all__ = ["host_batches", "host_task_info", "launch_info", "tensors_by_launch",
           "with_tensors"]


def host_task_info(host: HostTables, tensors: pd.DataFrame | None = None) -> pd.DataFrame:
    """task_track rows with launch connection id, model id, op info, tensor info and host
    batch id.  `tensors`: `tensors_by_launch` of the host tables when already computed (a
    worker does it while this process decodes the rest, see load_prof)."""
    tt = launch_info(host)
    if tensors is None:
        tensors = tensors_by_launch(host.tensors, host.apis)
    return with_tensors(tt, tensors)


def _spans(apis: pd.DataFrame, rows: np.ndarray) -> tuple[np.ndarray, ...]:
    """(thread, begin, end) of the API rows `rows` (enclosing's spans)."""
    return tuple(apis[c].to_numpy(np.int64)[rows] for c in ("thread_id", "begin_ns", "end_ns"))


def _enclosed(values: np.ndarray, at: np.ndarray, n_spans: int) -> np.ndarray:
    """enclose's payload column: float64 NaN throughout when there are no records or no
    spans, else `payload_at`."""
    if len(at) == 0 or n_spans == 0:
        return np.full(len(at), np.nan)
    return payload_at(values, at)


def _left_take(col: np.ndarray | pd.api.extensions.ExtensionArray, m: np.ndarray):
    """`col[m]` with NaN where `m` is -1, in the dtype a pandas left merge gives such a
    column: its own when every row has a match, else float64 for numbers, object for bools
    and objects; a nullable column keeps its dtype (NA)."""
    hit = m >= 0
    if hit.all():
        return col[m]
    if isinstance(col, pd.api.extensions.ExtensionArray):
        return col.take(m, allow_fill=True)
    got = np.empty(len(m), np.float64 if col.dtype.kind in "iuf" else object)
    got[:] = np.nan
    got[hit] = col[m[hit]]
    return got


def _last_inside(span_cid: np.ndarray, nb_at: np.ndarray, tt_at: np.ndarray) -> np.ndarray:
    """Per task_track row (`tt_at`: its launch span, -1 none), the last node_basic_info row
    inside a launch of the same connection id (`nb_at`: each record's span), or -1 -- the
    dropna / drop_duplicates(keep="last") / left merge on the connection id.  Connection
    ids are record numbers: increasing over the API table, so one span per id, and the join
    is on the span; else on the id values (sorted)."""
    rows = np.flatnonzero(nb_at >= 0)
    m = np.full(len(tt_at), -1, np.int64)
    if len(rows) == 0:
        return m
    if len(span_cid) < 2 or bool((np.diff(span_cid) > 0).all()):
        last = np.full(len(span_cid), -1, np.int64)
        np.maximum.at(last, nb_at[rows], rows)  # the last record of each span wins
        has = tt_at >= 0
        m[has] = last[tt_at[has]]
        return m
    keys, at_last = last_of_each(span_cid[nb_at[rows]])
    last = rows[at_last]  # per distinct id, its last record
    has = np.flatnonzero(tt_at >= 0)
    at = sorted_positions(keys, span_cid[tt_at[has]])
    ok = at >= 0
    m[has[ok]] = last[at[ok]]
    return m


def launch_info(host: HostTables) -> pd.DataFrame:
    """task_track rows with launch connection id, model id, op info and host batch id."""
    src = host.task_track
    codes, names = type_name_codes(np.full(len(src), L.LEVEL_RUNTIME),
                                   src["rt_type"].to_numpy(), host.types)
    is_flip = (names == "FLIP_TASK")[codes]
    keep = np.flatnonzero(~is_flip & ~(names == "MAINTENANCE")[codes])
    flip_rows = np.flatnonzero(is_flip)
    flips = pd.DataFrame({c: src[c].to_numpy()[flip_rows]
                          for c in ("ts_ns", "stream_id", "task_id", "device_id")})
    cols: dict = {c: src[c].to_numpy()[keep] for c in src.columns}
    cols["rt_name"] = names[codes[keep]]
    apis = host.apis
    level = apis["level"].to_numpy()
    node_rows = np.flatnonzero(level == L.LEVEL_NODE)
    model_rows = np.flatnonzero((level == L.LEVEL_MODEL)
                                & np.isin(apis["type"].to_numpy(), L.MODEL_STEP_TYPES))
    nodes = _spans(apis, node_rows)
    span_cid = apis["connection_id"].to_numpy()[node_rows]
    thread = cols["thread_id"].astype(np.int64, copy=False)
    ts = cols["ts_ns"].astype(np.int64, copy=False)
    tt_at = enclosing(thread, ts, *nodes)
    cols["launch_cid"] = _enclosed(span_cid, tt_at, len(node_rows))
    model_id = apis["item_id"].to_numpy()[model_rows].astype(np.int64)
    cols["model_id"] = _enclosed(model_id, enclosing(thread, ts, *_spans(apis, model_rows)),
                                 len(model_rows))
    # op info of the launch (last record inside it)
    nb = host.node_basic
    nb_at = enclosing(nb["thread_id"].to_numpy(np.int64), nb["ts_ns"].to_numpy(np.int64),
                      *nodes)
    m = _last_inside(span_cid, nb_at, tt_at)
    for c in ("op_name_hash", "ge_type", "op_type_hash", "block_dim", "mix_block_dim", "hf32",
              "aging"):
        if c not in nb:  # (mix_block_dim: node tables of an older decode)
            continue
        col = nb[c].to_numpy()
        if c in ("op_name_hash", "op_type_hash"):
            # u64 hashes stay exact for task_track rows without op info (MEMCPY_ASYNC
            # copies): a plain u64 column holding NaN would be float64
            col = pd.array(col.astype(np.uint64), dtype="UInt64")
        cols[c] = _left_take(col, m)
    cols["batch_id"] = host_batches(pd.DataFrame(
        {c: cols[c] for c in ("ts_ns", "stream_id", "task_id", "device_id")}), flips)
    return pd.DataFrame(cols)


def tensors_by_launch(tensors: pd.DataFrame, apis: pd.DataFrame) -> pd.DataFrame:
    """launch_cid and TENSOR_COLS of the last tensor_info record inside each launch (in the
    order of those records)."""
    if len(tensors) == 0:
        return pd.DataFrame(columns=["launch_cid"] + TENSOR_COLS)
    node_rows = np.flatnonzero(apis["level"].to_numpy() == L.LEVEL_NODE)
    at = enclosing(tensors["thread_id"].to_numpy(np.int64), tensors["ts_ns"].to_numpy(np.int64),
                   *_spans(apis, node_rows))
    inside = np.flatnonzero(at >= 0)
    cid = apis["connection_id"].to_numpy(np.int64)[node_rows][at[inside]]
    keep = np.sort(last_of_each(cid)[1])  # the last record of each launch id, in order
    rows = inside[keep]
    out = {"launch_cid": cid[keep]}
    for c in TENSOR_COLS:
        out[c] = _column(tensors[c])[rows]
    return pd.DataFrame(out)


def _column(s: pd.Series):
    """A column's values: its extension array (nullable, str) or its numpy array."""
    return s.array if isinstance(s.dtype, pd.api.extensions.ExtensionDtype) else s.to_numpy()


def with_tensors(tt: pd.DataFrame, tens: pd.DataFrame) -> pd.DataFrame:
    """`launch_info` rows with the tensor columns of their launch (N/A: NaN), behind them the
    batch id: the values of a left merge on launch_cid, without the merge (~1 ms a call).
    A text column may be str where the merge made it object: its one reader
    (dataset.build_device) takes it as an object array and N/A for NaN."""
    out = tt.drop(columns="batch_id")
    if len(tens):
        keys = tens["launch_cid"].to_numpy(np.float64)
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        at = sorted_positions(keys, tt["launch_cid"].to_numpy(np.float64))  # NaN: none
        m = np.where(at >= 0, order[np.maximum(at, 0)], -1)
        for c in TENSOR_COLS:
            out[c] = _left_take(_column(tens[c]), m)
    else:
        for c in TENSOR_COLS:
            out[c] = np.nan
    out["batch_id"] = tt["batch_id"].to_numpy()
    return out


def host_batches(tt: pd.DataFrame, flips: pd.DataFrame) -> np.ndarray:
    """Batch id of each task_track launch: the FLIP records of its device and stream passed
    (device.assign_batches on the launches in time order; a device's flips do not move
    another device's launches)."""
    out = np.zeros(len(tt), np.int64)
    if len(tt) == 0 or len(flips) == 0:
        return out
    dev = tt["device_id"].to_numpy(np.int64)
    fdev = flips["device_id"].to_numpy(np.int64)
    for d in np.unique(dev):
        rows = np.flatnonzero(dev == d)
        f = flips[fdev == d]
        if len(f) == 0:
            continue
        sub = tt.iloc[rows]
        order = np.argsort(sub["ts_ns"].to_numpy(np.int64), kind="stable")
        out[rows[order]] = assign_batches(sub.iloc[order], f, "ts_ns")
    return out
