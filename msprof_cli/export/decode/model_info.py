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

from msprof_cli.raw import layouts as L
from msprof_cli.raw.profdir import device_id_of

from .control_info import read_result_dir, to_mono_ns
from .rawread import DecodeLog, device_records, host_records
from .steptrace import TAG_ITER_END, TAG_MODEL_END, TAG_MODEL_START, iteration_spans

Iterations = dict[int, list[tuple[int, int, int]]]


def _from_steps(result_dir: Path) -> Iterations:
    """Iterations per model from the step-trace records (steptrace.iterations without the
    FP/BP columns, numpy only: `msprof query` never imports pandas)."""
    rd = read_result_dir(result_dir)
    ts = device_records(rd.data_dir, "ts_track", DecodeLog(),
                        ["rpt_type", "timestamp", "model_id", "tag_id"])
    st = (ts["rpt_type"] == L.TS_RPT_STEP_TRACE) & np.isin(
        ts["tag_id"], [TAG_MODEL_START, TAG_MODEL_END, TAG_ITER_END])
    t = to_mono_ns(ts["timestamp"][st], rd)
    model = ts["model_id"][st].astype(np.int64)
    tag = ts["tag_id"][st].astype(np.int64)
    order = np.lexsort((t, model))  # by (model, time), stable
    model, tag, t = model[order], tag[order], t[order]
    out: Iterations = {}
    off = rd.offset_ns
    bounds = np.flatnonzero(np.r_[True, model[1:] != model[:-1], True])
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):  # per model
        start, end = iteration_spans(tag[lo:hi], t[lo:hi])
        if len(start):
            out[int(model[lo])] = list(zip(range(1, len(start) + 1), (start + off).tolist(),
                                           (end + off).tolist()))
    return out


def _from_model_execute(host_dir: Path) -> Iterations:
    rd = read_result_dir(host_dir)
    c = host_records(rd.data_dir, "api_event", DecodeLog(),
                     ["level", "type", "begin_time", "end_time", "item_id"])
    me = (c["level"] == L.LEVEL_MODEL) & (c["type"] == L.MODEL_EXECUTE) \
        & (c["end_time"] != np.uint64(L.EVENT_RESERVE))
    model = c["item_id"][me].astype(np.int64)
    begin = c["begin_time"][me].astype(np.int64) + rd.offset_ns
    end = c["end_time"][me].astype(np.int64) + rd.offset_ns
    order = np.lexsort((begin, model))  # by (model, begin), stable
    model, begin, end = model[order], begin[order], end[order]
    out: Iterations = {}
    bounds = np.flatnonzero(np.r_[True, model[1:] != model[:-1], True]) if len(model) else []
    for lo, hi in zip(list(bounds[:-1]), list(bounds[1:])):  # one iteration per call
        out[int(model[lo])] = list(zip(range(1, hi - lo + 1), begin[lo:hi].tolist(),
                                       end[lo:hi].tolist()))
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
