"""The legacy layout's timelines of their own and the summaries built on the GE executions
(stack.py): task_time json (Task Scheduler, a lane per stream), ai_stack_time json and csv,
runtime_api json and csv, ge json, thread_group json (dynamic shape) and hccl json.

An execution never crosses a cut (no API does); its number per model is carried by the
layout (`w.exec_base`).  The executions of a window (stack.Scope) are built once per job
process (`scope_of`) for every output of the job.  runtime_api keeps exact per-window
aggregates; ai_stack_time and ge are written when any window had their data; the lanes of
every timeline are the union over the windows, given as metadata at the end.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..derive import stack
from ..derive.hccl import hccl_layer, hccl_meta
from ..fmt import ts_sort_key
from ..pipeline import Export, Output, TraceOutput
from ..sinks.streams import CsvStream, JsonRowsStream, JsonStream
from . import summaries as S
from . import timeline as T
from . import trace as TR

HOST, TASK_JSON = "host", "task_json"  # the jobs of these outputs


def scope_of(run: Export, w) -> stack.Scope:
    """The GE executions of window w's device in the selection (once per job process)."""
    if "scope" not in w.cache:
        dw = w.devs[0]
        w.cache["scope"] = stack.build_scope(w.data, dw.d, run.sel, dw.tasks, w.exec_base)
    return w.cache["scope"]


def task_scheduler_json(tasks: pd.DataFrame, app_pid: int) -> TR.EventStream:
    """Legacy ``task_time_*.json`` events: process ``Task Scheduler``, a lane per stream,
    numeric µs ``ts`` (printed with 3 decimals) and ``dur``, pid = application pid."""
    kind = T.task_kind(tasks)
    op = tasks["op_name"].to_numpy(object)
    name = np.where(op == S.NA, kind, op)
    stream = tasks["stream_id"].to_numpy(np.int64)
    start = tasks["start_local"].to_numpy(np.int64)
    dur = tasks["dur_ns"].to_numpy(np.int64)
    task = tasks["task_id"].to_numpy(np.int64)
    tmpl = ('{"name": %s, "pid": ' + str(app_pid) + ', "tid": %d, "ts": %d.%03d, "dur": %s, '
            '"args": {"Task Type": %s, "Stream Id": %d, "Task Id": %d}, "ph": "X"}')

    name_j, kind_j = TR.JCol(name), TR.JCol(kind)

    def render(idx: np.ndarray) -> list[str]:  # rendered per sorted chunk (trace.Layer)
        st = stream[idx].tolist()
        w, f = TR.us_parts(start[idx])
        return list(map(tmpl.__mod__, zip(name_j.take(idx), st, w, f, TR.dur_text(dur[idx]),
                                          kind_j.take(idx), st, task[idx].tolist())))

    return TR.EventStream([TR.Layer([], keys=ts_sort_key(start), render=render)])


def task_scheduler_meta(app_pid: int, streams) -> list[str]:
    meta = [TR.meta("process_name", app_pid, 0, {"name": "Task Scheduler"})]
    for s in sorted(int(s) for s in streams):
        meta.append(TR.meta("thread_name", app_pid, s, {"name": f"Stream {s}"}))
        meta.append(TR.meta("thread_sort_index", app_pid, s, {"sort_index": s}))
    return meta


class LayerJson(TraceOutput):
    """A timeline of the legacy layout: its window events appended to `out`, its metadata
    at the end (a one-window plan: before the first event, the file written in place)."""

    needs_data = False  # written only when a window had its data (`any`)

    def __init__(self, out: JsonStream) -> None:
        self.out = out
        self.any = False  # a window had its data

    def write(self, run: Export, layers: list[TR.Layer],
              stream: TR.EventStream | None = None) -> None:
        if stream is None:
            layers = [lay for lay in layers if len(lay)]
            if not layers:
                return
            stream = TR.EventStream(layers)
        if run.one_window:  # the lanes are known (a subclass updates them before `write`)
            self.out.begin(self.meta(run))
        self.out.write_stream(stream, 0, len(stream))

    def meta(self, run: Export) -> list[str]:
        return []

    def close_jobs(self, run: Export):
        if self.needs_data and not self.any:
            self.out.discard()
            return []
        return self.out.close_jobs(self.meta(run))

    def discard(self) -> None:
        self.out.discard()


class TaskTimeJson(LayerJson):
    stem, job = "task_time", TASK_JSON

    def __init__(self, out: JsonStream) -> None:
        super().__init__(out)
        self.streams: set[int] = set()

    def prepare(self, run: Export, w) -> None:
        self.streams.update(int(s) for s in w.devs[0].tasks["stream_id"].unique())

    def feed(self, run: Export, w) -> None:
        tasks = w.devs[0].tasks
        if len(tasks):
            self.write(run, [], task_scheduler_json(tasks, run.app_pid))

    def meta(self, run: Export) -> list[str]:
        return task_scheduler_meta(run.app_pid, self.streams)


class HcclJson(LayerJson):
    stem, job = "hccl", TASK_JSON

    def __init__(self, out: JsonStream) -> None:
        super().__init__(out)
        self.planes: set[int] = set()

    def prepare(self, run: Export, w) -> None:
        if w.devs[0].lanes is not None:  # the selected steps' planes
            self.planes.update(w.devs[0].lanes[1])

    def feed(self, run: Export, w) -> None:
        comm = w.devs[0].comm
        if comm is not None and len(comm.steps):
            self.write(run, [hccl_layer(comm.steps, comm.step_args, run.app_pid)])

    def meta(self, run: Export) -> list[str]:
        return hccl_meta(run.app_pid, self.planes)


class AiStackTimeJson(LayerJson):
    stem, job = "ai_stack_time", HOST
    needs_data = True

    def feed(self, run: Export, w) -> None:
        scope = scope_of(run, w)
        if len(scope.execs):
            self.write(run, stack.ai_stack_layers(scope, run.app_pid))
        self.any |= stack.has_stack_data(scope)

    def meta(self, run: Export) -> list[str]:
        return stack.ai_stack_meta(run.app_pid)


class GeJson(LayerJson):
    stem, job = "ge", HOST
    needs_data = True

    def __init__(self, out: JsonStream) -> None:
        super().__init__(out)
        self.threads: set[int] = set()

    def feed(self, run: Export, w) -> None:
        scope = scope_of(run, w)
        if len(scope.execs):
            self.threads.update(int(x) for x in scope.execs["thread_id"].unique())
            self.write(run, stack.ge_layers(scope, run.app_pid))
        self.any |= stack.has_ge_data(scope)

    def meta(self, run: Export) -> list[str]:
        return stack.ge_meta(run.app_pid, self.threads)


class RuntimeApiJson(LayerJson):
    stem, job = "runtime_api", HOST

    def __init__(self, out: JsonStream) -> None:
        super().__init__(out)
        self.threads: set[int] = set()

    def feed(self, run: Export, w) -> None:
        scope = scope_of(run, w)
        if len(scope.runtime):
            self.threads.update(int(x) for x in scope.runtime["thread_id"].unique())
        self.write(run, [stack.runtime_layer(scope, run.app_pid)])

    def meta(self, run: Export) -> list[str]:
        return stack.runtime_meta(run.app_pid, self.threads)


class ThreadGroupJson(LayerJson):
    """Dynamic-shape host data (any aging.* host record, `Plan.aging`): every window writes
    the thread_group events of its APIs, the metadata of all their threads at the end."""

    stem, job = "thread_group", HOST

    def __init__(self, out: JsonStream, aging: bool) -> None:
        super().__init__(out)
        self.aging = aging
        self.threads: set[int] = set()

    def feed(self, run: Export, w) -> None:
        if not self.aging:
            return
        tg = stack.thread_group_layer(scope_of(run, w))
        if tg is not None:
            self.threads.update(tg[0])
            self.write(run, [tg[1]])

    def meta(self, run: Export) -> list[str]:
        return stack.thread_group_meta(self.threads)


class AiStackTimeCsv(Output):
    stem, job = "ai_stack_time", HOST

    def __init__(self, out: CsvStream | JsonRowsStream) -> None:
        self.out = out
        self.any = False

    def feed(self, run: Export, w) -> None:
        scope = scope_of(run, w)
        if len(scope.execs):
            self.out.write(stack.ai_stack_rows(scope))
        self.any |= stack.has_stack_data(scope)

    def close(self, run: Export) -> list[Path]:
        if not self.any:
            self.out.discard()
            return []
        return self.out.close()

    def discard(self) -> None:
        self.out.discard()


class RuntimeApiCsv(Output):
    """runtime_api summary: exact per-window aggregates of the runtime APIs."""

    stem, job = "runtime_api", HOST

    def __init__(self) -> None:
        self.aggs: list[pd.DataFrame] = []

    def feed(self, run: Export, w) -> None:
        agg = stack.runtime_agg(scope_of(run, w))
        if agg is not None:
            self.aggs.append(agg)

    def close(self, run: Export) -> list[Path]:
        if not self.aggs:
            return []
        return run.emit(self.stem, stack.runtime_api_of(stack.combine_runtime(self.aggs),
                                                        run.app_pid))
