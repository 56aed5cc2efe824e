"""msproftx user markers: ``msprof_tx`` summary (docs/formats/export-files.md 3.9) and timeline
layer
(docs/formats/timeline.md 9), as the real analysis writes them (docs/export.md "msprof_tx").

Records (additional.msproftx) come in two kinds by infoType.  0 = Mark (the aclprof API):
category, payload and message type, no domain and no mark id.  1 = MarkEx (the mstx API):
mark id and domain; the analysis joins the records of one mark id (message segments) into one
(``MsprofTxParser.save``).  Other infoTypes are dropped there (``Invalid info_type``), here too.

Order (the analysis's db order): the Mark records in file order, then one MarkEx per mark id in
the order the ids first appear.  The summary is that list stably sorted by the start time
string (``MsprofTxViewer.get_summary_data``); a timeline lists the X events in that order, then
one flow start ``MsTx_{mark_id}`` per MarkEx (``HostToDevice.add_msproftx_ex_start_points``,
which also takes ``mark_id`` out of the args), and the json is stably sorted by ``float(ts)``
(``MsprofDataStorage.init_params``) -- a layer in that order with the keys ``float(ts)``.

Summary cells a kind does not carry are ``N/A`` (``format_tx_summary_data`` /
``format_tx_ex_summary_data``): a Mark has no domain / mark_id, a MarkEx no category, payload
type / value or message type.  event_type by name (0 ``marker``, 1 ``push/pop``, 2
``start/end``, 3 ``marker_ex``, others empty: ``MsprofTxParser.EVENT_DICT.get(t, '')``); a
domain missing from hash_dic is ``invalid``.  The merged (mindstudio) file has ``Device_id``
``host`` and N/A device times: our 910 writes no device-side markers (step_trace tags 11/12),
so no host row has a device match (``MsprofOutputSummary._update_msproftx_host_data``).

Layer: the application process (``info.json pid_name``, label ``CPU``, sort index 6, slot 31):
process_name, every ``thread_name``, every ``thread_sort_index`` (threads in the iteration
order of the analysis's Python set of thread ids, ``get_time_timeline_header``), labels, sort
index.  In msprof json (not msprof_tx json) the analysis keeps only the X events that end
after the collection began (``MsprofTimeline.is_in_iteration`` of a whole export; flows are
never filtered): ``tx_layer(..., since_ns=collection_begin_ns(data))``.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..decode.data import ProfData
from ..fmt import int_str, ts_sort_key, us_str
from ..outputs import trace as TR
from ..outputs.summaries import stamp

SORT_APP = 6
MSPROF_TX = ["pid", "tid", "category", "event_type", "payload_type", "payload_value",
             "Start_time(us)", "End_time(us)", "message_type", "message", "domain", "mark_id"]
MSPROF_TX_MERGED = ["Device_id", "pid", "tid", "category", "event_type", "payload_type",
                    "payload_value", "Start_time(us)", "End_time(us)", "message_type", "message",
                    "domain", "Device Start_time(us)", "Device End_time(us)"]
EVENT_TYPES = {0: "marker", 1: "push/pop", 2: "start/end", 3: "marker_ex"}
MARK, MARK_EX = 0, 1  # infoType
NO_MARK_ID = np.uint64(2**64 - 1)  # a MarkEx without flow (NumberConstant.UINT64_MAX)
HOST = "host"
NA = "N/A"

Table = tuple[list[str], pd.DataFrame]


def markers(data: ProfData) -> pd.DataFrame:
    """msproftx records with local times, by start (empty frame when none); ``raw_pos`` is
    the record's position in the raw files."""
    ht = data.host.tables
    if ht is None or len(ht.tx) == 0:
        return pd.DataFrame()
    off = data.host.rd.offset_ns if data.host.rd else 0
    tx = ht.tx.copy()
    tx["raw_pos"] = np.arange(len(tx), dtype=np.int64)
    tx["start_local"] = tx["start_time"] + off
    tx["end_local"] = tx["end_time"] + off
    inv, uniq = pd.factorize(tx["event_type"].to_numpy(np.int64))
    tx["event_name"] = np.array([EVENT_TYPES.get(int(u), "") for u in uniq],
                                dtype=object)[inv]
    hashes = ht.hashes
    dom = tx["domain"].to_numpy(np.uint64)
    if len(dom):
        inv, uniq = pd.factorize(dom)
        tx["domain_name"] = np.array([hashes.get(int(u), "invalid") for u in uniq],
                                     dtype=object)[inv]
    else:
        tx["domain_name"] = np.zeros(0, dtype=object)
    return tx.sort_values("start_local", kind="stable", ignore_index=True)


def collection_begin_ns(data: ProfData) -> int | None:
    """Local ns of the host's collectionTimeBegin (None without a host dir)."""
    return data.host.rd.begin_local_ns if data.host.rd else None


def analysis_rows(tx: pd.DataFrame) -> pd.DataFrame:
    """The records as the analysis's db holds them: Marks in file order, then one MarkEx per
    mark id (first record's fields, the messages of all its records joined) by first
    appearance."""
    if len(tx) == 0:
        return tx
    tx = tx.sort_values("raw_pos", kind="stable", ignore_index=True)
    kind = tx["info_type"].to_numpy(np.int64)
    mark = tx[kind == MARK]
    ex = tx[kind == MARK_EX]
    if len(ex) and ex["mark_id"].duplicated().any():  # message segments of one mark
        msg = ex.groupby("mark_id", sort=False)["message"].agg("".join)
        ex = ex.drop_duplicates("mark_id").copy()
        ex["message"] = msg.loc[ex["mark_id"]].to_numpy(object)
    return pd.concat([mark, ex], ignore_index=True)


def _u64_str(x: pd.Series) -> np.ndarray:
    return x.to_numpy(np.uint64).astype(str).astype(object)


def tx_table(tx: pd.DataFrame, merged: bool = False) -> Table | None:
    """The msprof_tx summary: the host dir's file (``MSPROF_TX``), or the mindstudio merge
    (``MSPROF_TX_MERGED``: ``Device_id`` host, no ``mark_id``, N/A device times)."""
    if len(tx) == 0:
        return None
    rows = analysis_rows(tx)
    rows = rows.iloc[np.argsort(rows["start_local"].to_numpy(np.int64), kind="stable")]
    ex = rows["info_type"].to_numpy(np.int64) == MARK_EX

    def only(is_kind: np.ndarray, values: np.ndarray) -> np.ndarray:
        return np.where(is_kind, values, NA).astype(object)

    cols = {
        "Device_id": HOST,
        "pid": int_str(rows["process_id"].to_numpy(np.int64)),
        "tid": int_str(rows["tx_thread_id"].to_numpy(np.int64)),
        "category": only(~ex, int_str(rows["category"].to_numpy(np.int64))),
        "event_type": rows["event_name"].to_numpy(object),
        "payload_type": only(~ex, int_str(rows["payload_type"].to_numpy(np.int64))),
        "payload_value": only(~ex, _u64_str(rows["payload_value"])),
        "Start_time(us)": stamp(rows["start_local"].to_numpy(np.int64)),
        "End_time(us)": stamp(rows["end_local"].to_numpy(np.int64)),
        "message_type": only(~ex, int_str(rows["message_type"].to_numpy(np.int64))),
        "message": rows["message"].to_numpy(object),
        "domain": only(ex, rows["domain_name"].to_numpy(object)),
        "mark_id": only(ex, _u64_str(rows["mark_id"])),
        # no device-side markers: no host row has device times
        "Device Start_time(us)": NA,
        "Device End_time(us)": NA,
    }
    header = MSPROF_TX_MERGED if merged else MSPROF_TX
    return header, pd.DataFrame({h: cols[h] for h in header})


def _thread_order(tids: np.ndarray) -> list[int]:
    """The iteration order of the analysis's ``set`` of the thread ids (added in db order)."""
    seen: set[int] = set()
    for t in pd.unique(tids):
        seen.add(int(t))
    return list(seen)


def tx_layer(tx: pd.DataFrame, app_pid: int, process_name: str,
             since_ns: int | None = None) -> TR.Layer:
    """The msproftx layer (msprof_tx json; msprof json with ``since_ns``, the local ns of the
    collection's begin: X events that end before it are left out, as the analysis does)."""
    if len(tx) == 0:
        return TR.Layer()
    rows = analysis_rows(tx)
    pid = TR.pid_of(app_pid, SORT_APP, TR.HOST_SLOT)
    threads = _thread_order(rows["tx_thread_id"].to_numpy(np.int64))
    m = ([TR.meta("process_name", pid, 0, {"name": process_name})]
         + [TR.meta("thread_name", pid, t, {"name": f"Thread {t}"}) for t in threads]
         + [TR.meta("thread_sort_index", pid, t, {"sort_index": t}) for t in threads]
         + [TR.meta("process_labels", pid, 0, {"labels": "CPU"}),
            TR.meta("process_sort_index", pid, 0, {"sort_index": SORT_APP})])
    start = rows["start_local"].to_numpy(np.int64)
    dur = np.maximum(rows["end_local"].to_numpy(np.int64) - start, 0)
    ex = rows["info_type"].to_numpy(np.int64) == MARK_EX
    mark_id = rows["mark_id"].to_numpy(np.uint64)
    flow = ex & (mark_id != NO_MARK_ID)
    tid = int_str(rows["tx_thread_id"].to_numpy(np.int64))
    ts = us_str(start)
    ev_name = TR.jstr(rows["event_name"].to_numpy(object))
    mark_args = ('{"Category": ' + TR.jstr(rows["category"].astype(str).to_numpy(object))
                 + ', "Payload_type": ' + int_str(rows["payload_type"].to_numpy(np.int64))
                 + ', "Payload_value": ' + _u64_str(rows["payload_value"])
                 + ', "Message_type": ' + int_str(rows["message_type"].to_numpy(np.int64))
                 + ', "event_type": ' + ev_name + '}')
    ex_args = ('{' + np.where(flow, "", '"mark_id": ' + _u64_str(rows["mark_id"]) + ', ')
               + '"event_type": ' + ev_name + ', "domain": '
               + TR.jstr(rows["domain_name"].to_numpy(object)) + '}')
    x = ('{"name": ' + TR.jstr(rows["message"].to_numpy(object)) + ', "pid": ' + str(pid)
         + ', "tid": ' + tid + ', "ts": "' + ts + '", "dur": ' + TR.dur_json(dur)
         + ', "args": ' + np.where(ex, ex_args, mark_args) + ', "ph": "X"}')
    keep = np.ones(len(rows), dtype=bool)
    if since_ns is not None:  # is_in_iteration: start in [begin, inf) or spanning begin
        keep = (start >= since_ns) | (start + dur > since_ns)
    ids = _u64_str(rows["mark_id"][flow])
    flows = ('{"name": "MsTx_' + ids + '", "ph": "s", "id": "' + ids + '", "ts": "'
             + ts[flow] + '", "cat": "MsTx", "pid": ' + str(pid) + ', "tid": ' + tid[flow]
             + ', "bp": "e"}')
    events = np.concatenate([x[keep], flows]).astype(object)
    keys = ts_sort_key(np.concatenate([start[keep], start[flow]]))
    return TR.Layer(m, events, keys)


def process_name(data: ProfData) -> str:
    rd = data.host.rd or (data.devices[0].rd if data.devices else None)
    return str(rd.info.get("pid_name") or "python3") if rd is not None else "python3"
