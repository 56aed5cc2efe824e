"""msproftx user markers: ``msprof_tx`` summary (export-files.md 3.9) and timeline layer
(timeline.md 9).

Layer: the application process (``info.json pid_name``, label ``CPU``, sort index 6, slot 31),
lanes ``Thread {tid}``; one X per marker (name = message, ts/dur from start/end, a mark has
dur 0.0).  Args by record kind (raw infoType): 0 = Mark -> ``Category``, ``Payload_type``,
``Payload_value``, ``Message_type``, ``event_type``; 1 = MarkEx -> ``mark_id``, ``event_type``,
``domain``.  Project choices: event_type printed by name (0 ``marker``, 1 ``push/pop``,
2 ``start/end``, 3 ``marker_ex``; others as the number); markers are host events, so like the
CANN layer they are not restricted to the exported iteration window.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..decode.data import ProfData
from ..decode.host import resolve
from ..fmt import int_str, ts_sort_key, us_str
from ..outputs import trace as TR
from ..outputs.summaries import stamp

SORT_APP = 6
MSPROF_TX = ["pid", "tid", "category", "event_type", "payload_type", "payload_value",
             "Start_time(us)", "End_time(us)", "message_type", "message", "domain", "mark_id"]
MSPROF_TX_MERGED = ["pid", "tid", "category", "event_type", "payload_type", "payload_value",
                    "Start_time(us)", "End_time(us)", "message_type", "message", "domain",
                    "Device Start_time(us)", "Device End_time(us)"]
EVENT_TYPES = {0: "marker", 1: "push/pop", 2: "start/end", 3: "marker_ex"}

Table = tuple[list[str], pd.DataFrame]


def markers(data: ProfData) -> pd.DataFrame:
    """msproftx records with local times, by start (empty frame when none)."""
    ht = data.host.tables
    if ht is None or len(ht.tx) == 0:
        return pd.DataFrame()
    off = data.host.rd.offset_ns if data.host.rd else 0
    tx = ht.tx.copy()
    tx["start_local"] = tx["start_time"] + off
    tx["end_local"] = tx["end_time"] + off
    inv, uniq = pd.factorize(tx["event_type"].to_numpy(np.int64))
    tx["event_name"] = np.array([EVENT_TYPES.get(int(u), str(int(u))) for u in uniq],
                                dtype=object)[inv]
    tx["domain_name"] = resolve(tx["domain"].to_numpy(np.uint64), ht.hashes)
    return tx.sort_values("start_local", kind="stable", ignore_index=True)


def tx_table(tx: pd.DataFrame, merged: bool = False) -> Table | None:
    if len(tx) == 0:
        return None
    cols = {
        "pid": int_str(tx["process_id"].to_numpy(np.int64)),
        "tid": int_str(tx["tx_thread_id"].to_numpy(np.int64)),
        "category": int_str(tx["category"].to_numpy(np.int64)),
        "event_type": tx["event_name"].to_numpy(object),
        "payload_type": int_str(tx["payload_type"].to_numpy(np.int64)),
        "payload_value": int_str(tx["payload_value"].to_numpy(np.uint64).astype(np.int64)),
        "Start_time(us)": stamp(tx["start_local"].to_numpy(np.int64)),
        "End_time(us)": stamp(tx["end_local"].to_numpy(np.int64)),
        "message_type": int_str(tx["message_type"].to_numpy(np.int64)),
        "message": tx["message"].to_numpy(object),
        "domain": tx["domain_name"].to_numpy(object),
        "mark_id": int_str(tx["mark_id"].to_numpy(np.uint64).astype(np.int64)),
        # host markers carry no device time
        "Device Start_time(us)": "N/A",
        "Device End_time(us)": "N/A",
    }
    header = MSPROF_TX_MERGED if merged else MSPROF_TX
    return header, pd.DataFrame({h: cols[h] for h in header})


def tx_layer(tx: pd.DataFrame, app_pid: int, process_name: str) -> TR.Layer:
    if len(tx) == 0:
        return TR.Layer()
    pid = TR.pid_of(app_pid, SORT_APP, TR.HOST_SLOT)
    threads = sorted(int(t) for t in tx["tx_thread_id"].unique())
    m = TR.process_meta(pid, process_name, "CPU", SORT_APP,
                       [(t, f"Thread {t}", t) for t in threads])
    tid = int_str(tx["tx_thread_id"].to_numpy(np.int64))
    ev_name = TR.jstr(tx["event_name"].to_numpy(object))
    mark = ('{"Category": ' + TR.jstr(tx["category"].astype(str).to_numpy(object))
            + ', "Payload_type": ' + int_str(tx["payload_type"].to_numpy(np.int64))
            + ', "Payload_value": ' + int_str(tx["payload_value"].to_numpy(np.uint64)
                                              .astype(np.int64))
            + ', "Message_type": ' + int_str(tx["message_type"].to_numpy(np.int64))
            + ', "event_type": ' + ev_name + '}')
    mark_ex = ('{"mark_id": ' + int_str(tx["mark_id"].to_numpy(np.uint64).astype(np.int64))
               + ', "event_type": ' + ev_name + ', "domain": '
               + TR.jstr(tx["domain_name"].to_numpy(object)) + '}')
    args = np.where(tx["info_type"].to_numpy(np.int64) == 1, mark_ex, mark)
    start = tx["start_local"].to_numpy(np.int64)
    dur = np.maximum(tx["end_local"].to_numpy(np.int64) - start, 0)
    ev = ('{"name": ' + TR.jstr(tx["message"].to_numpy(object)) + ', "pid": ' + str(pid)
          + ', "tid": ' + tid + ', "ts": "' + us_str(start) + '", "dur": ' + TR.dur_json(dur)
          + ', "args": ' + args + ', "ph": "X"}')
    return TR.Layer(m, np.asarray(ev, dtype=object), ts_sort_key(start))


def process_name(data: ProfData) -> str:
    rd = data.host.rd or (data.devices[0].rd if data.devices else None)
    return str(rd.info.get("pid_name") or "python3") if rd is not None else "python3"
