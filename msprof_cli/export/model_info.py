"""Cheap model / iteration listing for `msprof query` (reads ts_track and api_event only).

``models_and_iterations(result_dir)`` -> ``{model_id: [(iteration_id, step_start_ns,
step_end_ns), ...]}`` with local-time ns (``collectionTimeBegin`` based, same clock as the
exported timestamps).  For a device dir the iterations come from its step trace
(ts_track rptType 10, same state machine as the export).  Without step trace -- or for the
``host`` dir -- each ModelExecute API of the host api_event data counts as one iteration of
its model (begin/end of the API).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from msprof_cli.raw import layouts as L
from msprof_cli.raw.profdir import device_id_of

from .control_info import read_result_dir
from .device import STREAM_MASK, to_mono_ns
from .rawread import DecodeLog, device_records, host_records
from .steptrace import iterations

Iterations = dict[int, list[tuple[int, int, int]]]


def _from_steps(result_dir: Path) -> Iterations:
    rd = read_result_dir(result_dir)
    ts = device_records(rd.data_dir, "ts_track", DecodeLog(),
                        ["rpt_type", "timestamp", "model_id", "stream_id", "task_id", "tag_id",
                         "index_id"])
    st = ts["rpt_type"] == L.TS_RPT_STEP_TRACE
    steps = pd.DataFrame({
        "ts_ns": to_mono_ns(ts["timestamp"][st], rd),
        "index_id": ts["index_id"][st].astype(np.int64),
        "model_id": ts["model_id"][st].astype(np.int64),
        "stream_id": ts["stream_id"][st].astype(np.int64) & STREAM_MASK,
        "task_id": ts["task_id"][st].astype(np.int64),
        "tag_id": ts["tag_id"][st].astype(np.int64),
    })
    its = iterations(steps)
    out: Iterations = {}
    off = rd.offset_ns
    for m, grp in its.groupby("model_id", sort=True):  # per model, not per record
        out[int(m)] = list(zip(grp["iteration_id"].astype(int).tolist(),
                               (grp["step_start_ns"] + off).astype(int).tolist(),
                               (grp["step_end_ns"] + off).astype(int).tolist()))
    return out


def _from_model_execute(host_dir: Path) -> Iterations:
    rd = read_result_dir(host_dir)
    c = host_records(rd.data_dir, "api_event", DecodeLog(),
                     ["level", "type", "begin_time", "end_time", "item_id"])
    me = (c["level"] == L.LEVEL_MODEL) & (c["type"] == L.MODEL_EXECUTE) \
        & (c["end_time"] != np.uint64(L.EVENT_RESERVE))
    df = pd.DataFrame({"model_id": c["item_id"][me].astype(np.int64),
                       "begin": c["begin_time"][me].astype(np.int64) + rd.offset_ns,
                       "end": c["end_time"][me].astype(np.int64) + rd.offset_ns})
    df = df.sort_values(["model_id", "begin"], kind="stable")
    df["iteration_id"] = df.groupby("model_id").cumcount() + 1
    out: Iterations = {}
    for m, grp in df.groupby("model_id", sort=True):
        out[int(m)] = list(zip(grp["iteration_id"].astype(int).tolist(),
                               grp["begin"].astype(int).tolist(), grp["end"].astype(int).tolist()))
    return out


def models_and_iterations(result_dir: Path) -> Iterations:
    result_dir = Path(result_dir)
    if device_id_of(result_dir) is not None:
        found = _from_steps(result_dir)
        if found:
            return found
        host = result_dir.parent / "host"
        return _from_model_execute(host) if host.is_dir() else {}
    return _from_model_execute(result_dir)
