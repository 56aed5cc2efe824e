"""The msprof json's "AI Core Freq" counter lane of an Atlas A2 device (docs/formats/timeline.md,
docs/formats/ascend910b.md 3.2).

The chip changes its AI Core clock and logs each change in lpmFreqConv.data; the emulated
910B runs at its rated clock throughout and logs no change, so the lane is what the analysis
draws from info.json alone (Ascend/msprof analysis/viewer/lpm/ai_core_freq_viewer.py,
lpm_viewer.py): the rated MHz at the device's sync point (dev_start.log's syscnt), repeated
every 1,000 µs -- each point the float of the one before plus 1000, written as Python's
``str`` of that float -- and once more at the collection's end (end_info collectionTimeEnd,
as written; without end_info, 1 µs after the last point).
"""
from __future__ import annotations

import json
from decimal import Decimal

import numpy as np

from msprof_cli.raw import control

from ..decode.data import DeviceData
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


def freq_layer(dev: DeviceData, app_pid: int) -> Layer:
    """The lane's events (device data of a chip with the lane: `dev.rd.stars`)."""
    rd = dev.rd
    if not rd.stars:
        return Layer()
    pid = pid_of(app_pid, SORT_FREQ, dev.device_id)
    first_ns = rd.host_sync_ns + rd.offset_ns
    first = us_list(np.array([first_ns], np.int64))[0]
    end = _end_text(dev, first)
    f0, f_end = float(first), float(end)
    n_fill = max(0, min(int((f_end - f0) // FILL_US), int((f_end - 1 - f0) // FILL_US))) \
        if f_end - f0 > FILL_US else 0
    times = [first] + [str(f0 + k * FILL_US) for k in range(1, n_fill + 1)] + [end]
    if first_ns < rd.begin_local_ns:  # the timeline keeps no event before the collection
        times = times[1:]                # began (the sync point may be, by < 1 us)
    mhz = json.dumps({"MHz": float(rd.aic_mhz)})
    tmpl = '{"name": "' + NAME + '", "ts": "%s", "pid": ' + str(pid) + ', "tid": 0, "args": ' \
        + mhz + ', "ph": "C"}'
    events = np.array([tmpl % t for t in times], dtype=object)
    return Layer(freq_meta(dev.device_id, app_pid), events=events,
                 keys=np.array([float(t) for t in times], np.float64))
