"""The msprof_tx summary and timeline layer (export/msproftx.py) on hand-made records: the rules
of the real analysis that the oracle fixtures (tests/test_oracle_cases.py, fresh_tx_mlp and
rich_two_devices) do not reach -- message segments, a MarkEx without flow, the thread order of
a Python set, the collection-begin filter of msprof json, ties of a Mark and a MarkEx."""
import json

import numpy as np
import pandas as pd

from msprof_cli.export.derive import msproftx as X

T0 = 1_700_000_000_000_000_000  # local ns
NO_ID = 2**64 - 1


def _tx(rows: list[dict]) -> pd.DataFrame:
    base = dict(info_type=1, process_id=7, tx_thread_id=4242, category=0, event_type=2,
                payload_type=0, payload_value=0, start=0, end=0, mark_id=0,
                message_type=0, message="m", domain_name="default")
    df = pd.DataFrame([{**base, **r} for r in rows])
    df["raw_pos"] = np.arange(len(df))
    df["start_local"] = T0 + 1000 * df.pop("start")  # start / end in µs after T0 (float keys
    df["end_local"] = T0 + 1000 * df.pop("end")  # of 16-digit µs are 0.25 µs apart)
    df["mark_id"] = df["mark_id"].astype(np.uint64)
    df["payload_value"] = df["payload_value"].astype(np.uint64)
    df["event_name"] = [X.EVENT_TYPES.get(int(t), "") for t in df["event_type"]]
    return df.sort_values("start_local", kind="stable", ignore_index=True)


def _events(layer) -> tuple[list[dict], list[dict]]:
    meta = [json.loads(m) for m in layer.meta]
    order = np.argsort(layer.keys, kind="stable")
    return meta, [json.loads(layer.events[i]) for i in order]


def test_summary_cells_a_record_kind_does_not_carry_are_na():
    tx = _tx([dict(info_type=0, event_type=0, start=1000, end=1000, category=3,
                   payload_value=2**63 + 5, message="mark"),
              dict(start=1000, end=3000, mark_id=9, event_type=7, message="range")])
    header, df = X.tx_table(tx)
    rows = [dict(zip(header, r)) for r in df.itertuples(index=False)]
    # same start: the Mark first (the analysis's db holds the Marks before the MarkEx rows)
    assert [r["message"] for r in rows] == ["mark", "range"]
    assert (rows[0]["category"], rows[0]["payload_value"], rows[0]["domain"],
            rows[0]["mark_id"]) == ("3", str(2**63 + 5), "N/A", "N/A")
    assert (rows[1]["category"], rows[1]["payload_type"], rows[1]["message_type"],
            rows[1]["domain"], rows[1]["mark_id"]) == ("N/A", "N/A", "N/A", "default", "9")
    assert rows[1]["event_type"] == ""  # EVENT_DICT.get(7, '')
    header, df = X.tx_table(tx, merged=True)
    assert header[0] == "Device_id" and "mark_id" not in header
    assert set(df["Device_id"]) == {"host"} and set(df["Device Start_time(us)"]) == {"N/A"}


def test_message_segments_of_one_mark_id_are_one_marker():
    tx = _tx([dict(start=10, end=90, mark_id=4, message="first half, "),
              dict(start=10, end=90, mark_id=4, message="second half")])
    _, df = X.tx_table(tx)
    assert df["message"].tolist() == ["first half, second half"]
    meta, ev = _events(X.tx_layer(tx, 1, "python3"))
    assert [(e["ph"], e["name"]) for e in ev] == [("X", "first half, second half"),
                                                  ("s", "MsTx_4")]


def test_flows_follow_their_markers_and_take_mark_id_out_of_the_args():
    tx = _tx([dict(start=20, end=50, mark_id=1, message="b"),
              dict(start=10, end=60, mark_id=0, message="a"),
              dict(start=30, end=40, mark_id=NO_ID, message="no flow"),
              dict(info_type=0, event_type=0, start=20, end=20, message="mark")])
    _, ev = _events(X.tx_layer(tx, 1, "python3"))
    # X events (Marks first, then MarkEx by first appearance), then the flows; stably by ts
    assert [(e["ph"], e["name"]) for e in ev] == [
        ("X", "a"), ("s", "MsTx_0"), ("X", "mark"), ("X", "b"), ("s", "MsTx_1"),
        ("X", "no flow")]
    x = {e["name"]: e for e in ev if e["ph"] == "X"}
    assert x["a"]["args"] == {"event_type": "start/end", "domain": "default"}
    assert x["no flow"]["args"]["mark_id"] == NO_ID  # kept: no flow for UINT64_MAX
    assert x["mark"]["args"] == {"Category": "0", "Payload_type": 0, "Payload_value": 0,
                                 "Message_type": 0, "event_type": "marker"}
    flow = next(e for e in ev if e["name"] == "MsTx_0")
    assert flow == {"name": "MsTx_0", "ph": "s", "id": "0", "ts": x["a"]["ts"], "cat": "MsTx",
                    "pid": x["a"]["pid"], "tid": 4242, "bp": "e"}


def test_thread_lanes_in_the_order_of_a_python_set():
    tx = _tx([dict(tx_thread_id=4242, start=1, mark_id=0),
              dict(tx_thread_id=100000, start=2, mark_id=1)])
    meta, _ = _events(X.tx_layer(tx, 1, "python3"))
    names = [m["name"] for m in meta]
    assert names == ["process_name", "thread_name", "thread_name", "thread_sort_index",
                     "thread_sort_index", "process_labels", "process_sort_index"]
    tids = [m["tid"] for m in meta if m["name"] == "thread_name"]
    assert tids == list({4242, 100000}) == [100000, 4242]


def test_msprof_json_keeps_the_markers_that_end_after_the_collection_began():
    tx = _tx([dict(start=0, end=100, mark_id=0, message="before"),
              dict(start=50, end=150, mark_id=1, message="spans"),
              dict(start=100, end=100, info_type=0, event_type=0, message="at"),
              dict(start=90, end=90, info_type=0, event_type=0, message="mark before")])
    meta, ev = _events(X.tx_layer(tx, 1, "python3", since_ns=T0 + 100_000))
    assert [e["name"] for e in ev if e["ph"] == "X"] == ["spans", "at"]
    assert [e["name"] for e in ev if e["ph"] == "s"] == ["MsTx_0", "MsTx_1"]  # never filtered
    assert len(meta) == 5
    _, every = _events(X.tx_layer(tx, 1, "python3"))
    assert len([e for e in every if e["ph"] == "X"]) == 4
