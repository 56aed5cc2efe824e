"""The msprof json's "AI Core Freq" counter lane of an Atlas A2 device (docs/formats/timeline.md,
docs/formats/ascend910b.md 3.2), drawn as the analysis draws it (Ascend/msprof analysis/msparser/
freq/freq_parser.py, viewer/lpm/ai_core_freq_viewer.py, lpm_viewer.py): the rated MHz of
info.json at the device's sync point (dev_start.log's syscnt; a change logged before it
replaces that value), then each change lpmFreqConv.data logs, each point repeated every
1,000 µs until the next (the float of the point before plus 1000, written as Python's ``str``
of that float), and the last once more at the collection's end (end_info collectionTimeEnd as
written; without end_info, 1 µs after the last point).  The emulated A2 runs at its rated
clock and logs no change.  (The PMU time columns keep the rated clock: the analysis's use of
the clock in force at each task is not reproduced.)
"""
from __future__ import annotations

import json
from decimal import Decimal

import numpy as np

from msprof_cli.raw import control

from ..decode.control_info import to_mono_ns
from ..decode.data import DeviceData
from ..decode.rawread import DecodeLog, device_records
from ..fmt import us_list
from .trace import Layer, pid_of, process_meta

SORT_FREQ = 15  # the analysis's LAYER_ASCEND_AICORE_FREQ_SORT
FILL_US = 1000.0  # lpm_viewer.py FILL_STEP
NAME = "AI Core Freq"


def freq_meta(device_id: int, app_pid: int) -> list[str]:
    return process_meta(pid_of(app_pid, SORT_FREQ, device_id), NAME, f"NPU {device_id}",
                        SORT_FREQ, [])


def _end_text(dev: DeviceData, first: str) -> str:
    rd = dev.rd
    try:
        end = control.read_json_line(rd.path / f"end_info.{rd.device_id}")
        text = str(end["collectionTimeEnd"])
        float(text)
        return text
    except (OSError, ValueError, KeyError, TypeError):
        return str(Decimal(first) + 1)


def freq_changes(dev: DeviceData) -> tuple[float | int, np.ndarray, np.ndarray]:
    """(MHz at the sync point, syscnt and MHz of each later change) of lpmFreqConv.data: the
    rated clock a float (info.json's, as the analysis reads it), a logged one an int."""
    rd = dev.rd
    mhz0: float | int = float(rd.aic_mhz)
    c = device_records(rd.data_dir, "lpm_freq", DecodeLog(), ["count", "entries"])
    if not len(c["count"]):
        return mhz0, np.zeros(0, np.uint64), np.zeros(0)
    n = np.minimum(c["count"].astype(np.int64), 55)
    valid = np.arange(55)[None, :] < n[:, None]
    ticks = c["entries"]["syscnt"][valid]
    mhz = c["entries"]["mhz"][valid].astype(np.int64)
    before = ticks < np.uint64(rd.dev_cntvct)
    if before.any():
        mhz0 = int(mhz[np.flatnonzero(before)[-1]])
    return mhz0, ticks[~before], mhz[~before]


def _fill(times: list[str], values: list[float]) -> tuple[list[str], list[float]]:
    """lpm_viewer._split_and_fill_data: a point every FILL_US between two points."""
    out_t, out_v = [times[0]], [values[0]]
    for t, v in zip(times[1:], values[1:]):
        cur, nxt = float(out_t[-1]), float(t)
        if nxt - cur > FILL_US:
            n = min(int((nxt - cur) // FILL_US), int((nxt - 1 - cur) // FILL_US))
            for k in range(1, n + 1):
                out_t.append(str(cur + k * FILL_US))
                out_v.append(out_v[-1])
        out_t.append(t)
        out_v.append(v)
    return out_t, out_v


def freq_layer(dev: DeviceData, app_pid: int) -> Layer:
    """The lane's events (device data of a chip with the lane: `dev.rd.stars`)."""
    rd = dev.rd
    if not rd.stars:
        return Layer()
    pid = pid_of(app_pid, SORT_FREQ, dev.device_id)
    mhz0, ticks, mhz = freq_changes(dev)
    first_ns = rd.host_sync_ns + rd.offset_ns
    ns = np.concatenate([[first_ns], to_mono_ns(ticks, rd) + np.int64(rd.offset_ns)])
    times = us_list(ns.astype(np.int64))
    values = [mhz0] + mhz.tolist()
    end = _end_text(dev, times[-1])
    times, values = _fill(times + [end], values + [values[-1]])
    if first_ns < rd.begin_local_ns:  # the timeline keeps no event before the collection
        times, values = times[1:], values[1:]  # began (the sync point may be, by < 1 us)
    tmpl = '{"name": "' + NAME + '", "ts": "%s", "pid": ' + str(pid) + ', "tid": 0, "args": ' \
        '%s, "ph": "C"}'
    events = np.array([tmpl % (t, json.dumps({"MHz": v})) for t, v in zip(times, values)],
                      dtype=object)
    return Layer(freq_meta(dev.device_id, app_pid), events=events,
                 keys=np.array([float(t) for t in times], np.float64))
