"""Rendering helpers of the legacy-only timeline files (docs/formats/timeline.md 11.2).

The historic CANN 5.x/6.x files use numeric ``ts`` (µs, printed with exactly 3 decimals from
integer ns, never via float) and numeric ``dur``; pid = the application pid, no layer
encoding.  Events are rendered column-wise from templates in the key order
``name, pid, tid, ts, dur, args, ph`` (the same order as the current-generation X events).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..fmt import int_str, ts_sort_key
from . import trace as TR


@dataclass(frozen=True)
class ArgsTemplate:
    """An args object rendered inside the event's own template (one ``%`` format per event,
    not one for the args and one for the event): `text` with ``%`` fields, `columns(idx)` the
    values of rows `idx`, a list per field."""

    text: str
    columns: Callable[[np.ndarray], list[list]]


def x_events(name: np.ndarray, pid: int | np.ndarray, tid: np.ndarray, start_ns: np.ndarray,
             dur_ns: np.ndarray,
             args: np.ndarray | str | Callable[[np.ndarray], list[str]] | ArgsTemplate
             ) -> TR.Layer:
    """X events with numeric ts/dur; `name` raw strings, `args` pre-rendered JSON objects (one
    string for all rows, one per row, or a function giving the strings of rows `idx`) or an
    ArgsTemplate.

    The layer is lazy (timeline.Layer.render): event text exists only for the chunk being
    written, so a file of millions of events never holds them all as strings."""
    start_ns = np.asarray(start_ns, dtype=np.int64)
    n = len(start_ns)
    if n == 0:
        return TR.Layer()
    name_j = TR.JCol(np.asarray(name, dtype=object))
    tid_a = np.asarray(tid).astype(np.int64)
    pid_a = None if np.isscalar(pid) else np.asarray(pid).astype(np.int64)
    dur = np.asarray(dur_ns, dtype=np.int64)
    tmpl = ('{"name": %s, "pid": %s, "tid": %d, "ts": %d.%03d, "dur": %s, "args": %s, '
            '"ph": "X"}')
    if np.isscalar(pid):
        tmpl = tmpl.replace('"pid": %s', '"pid": ' + str(pid).replace("%", "%%"))
    arg_cols = None
    if isinstance(args, str):
        tmpl = tmpl.replace('"args": %s', '"args": ' + args.replace("%", "%%"))
        args_of = None
    elif isinstance(args, ArgsTemplate):
        tmpl = tmpl.replace('"args": %s', '"args": ' + args.text)
        args_of, arg_cols = None, args.columns
    elif callable(args):
        args_of = args
    else:
        args_arr = np.broadcast_to(np.asarray(args, dtype=object), (n,))
        args_of = lambda idx: args_arr[idx].tolist()  # noqa: E731

    def render(idx: np.ndarray) -> list[str]:
        w, f = TR.us_parts(start_ns[idx])
        cols = [name_j.take(idx)]
        if pid_a is not None:
            cols.append(pid_a[idx].tolist())
        cols += [tid_a[idx].tolist(), w, f, TR.dur_text(dur[idx])]
        if args_of is not None:
            cols.append(list(args_of(idx)))
        if arg_cols is not None:
            cols += arg_cols(idx)
        return list(map(tmpl.__mod__, zip(*cols)))

    return TR.Layer([], keys=ts_sort_key(start_ns), render=render)


def thread_meta(pid: int, process: str, threads: list[tuple[int, str]],
                sort_index: int | None = None) -> list[str]:
    """process_name, then per thread thread_name + thread_sort_index (sort = tid)."""
    out = [TR.meta("process_name", pid, 0, {"name": process})]
    if sort_index is not None:
        out.append(TR.meta("process_sort_index", pid, 0, {"sort_index": sort_index}))
    for tid, name in threads:
        out.append(TR.meta("thread_name", pid, tid, {"name": name}))
        out.append(TR.meta("thread_sort_index", pid, tid, {"sort_index": tid}))
    return out


def json_int(values: np.ndarray) -> np.ndarray:
    return int_str(np.asarray(values))
