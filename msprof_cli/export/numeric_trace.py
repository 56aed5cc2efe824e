"""Rendering helpers of the legacy-only timeline files (timeline.md 11.2).

The historic CANN 5.x/6.x files use numeric ``ts`` (µs, printed with exactly 3 decimals from
integer ns, never via float) and numeric ``dur``; pid = the application pid, no layer
encoding.  Events are rendered column-wise from templates in the key order
``name, pid, tid, ts, dur, args, ph`` (the same order as the current-generation X events).
"""
from __future__ import annotations

import numpy as np

from . import timeline as T
from .fmt import float_str, int_str, ts_sort_key, us_str


def x_events(name: np.ndarray, pid: int | np.ndarray, tid: np.ndarray, start_ns: np.ndarray,
             dur_ns: np.ndarray, args: np.ndarray | str) -> T.Layer:
    """X events with numeric ts/dur; `name` raw strings, `args` pre-rendered JSON objects."""
    start_ns = np.asarray(start_ns, dtype=np.int64)
    n = len(start_ns)
    if n == 0:
        return T.Layer()
    pid_s = str(pid) if np.isscalar(pid) else int_str(np.asarray(pid))
    ev = ('{"name": ' + T.jstr(np.asarray(name, dtype=object)) + ', "pid": ' + pid_s
          + ', "tid": ' + int_str(np.asarray(tid)) + ', "ts": ' + us_str(start_ns)
          + ', "dur": ' + float_str(np.asarray(dur_ns, dtype=np.int64) / 1000.0)
          + ', "args": ' + args + ', "ph": "X"}')
    ev = np.broadcast_to(np.asarray(ev, dtype=object), (n,)).copy()
    return T.Layer([], ev, ts_sort_key(start_ns))


def thread_meta(pid: int, process: str, threads: list[tuple[int, str]],
                sort_index: int | None = None) -> list[str]:
    """process_name, then per thread thread_name + thread_sort_index (sort = tid)."""
    out = [T.meta("process_name", pid, 0, {"name": process})]
    if sort_index is not None:
        out.append(T.meta("process_sort_index", pid, 0, {"sort_index": sort_index}))
    for tid, name in threads:
        out.append(T.meta("thread_name", pid, tid, {"name": name}))
        out.append(T.meta("thread_sort_index", pid, tid, {"sort_index": tid}))
    return out


def json_int(values: np.ndarray) -> np.ndarray:
    return int_str(np.asarray(values))
