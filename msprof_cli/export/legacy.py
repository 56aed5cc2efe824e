"""Layout (a), the project default: ``PROF_X/device_{id}/summary|timeline/{name}_{suffix}``.

Per device, no ``Device_id`` column, one model and an iteration range (selection.py); names
carry ``_{dev}_{model}_{iter}`` with N/A parts omitted.  Every file of the seed's tables 1
and 2 is written exactly when its data exist (docs/export.md 6):
timelines msprof, ai_stack_time, thread_group (dynamic shape only), task_time, runtime_api,
ge, step_trace, hccl, msprof_tx; summaries op_summary, op_statistic, step_trace,
ai_stack_time, runtime_api, fusion_op, task_time, aicpu, l2_cache, msprof_tx and the tuning
advice ``prof_rule_{device_id}.json`` (always).
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from . import advice as A
from . import stack
from . import summaries as S
from . import timeline as T
from .communication import device_comm
from .dataset import DeviceData, ProfData
from .fmt import ts_sort_key
from .fusion import fusion_op, fusion_rows, workspace_kb
from .hccl import hccl_json
from .msproftx import markers, process_name, tx_layer, tx_table
from .parallel import JobPool
from .selection import Selection, in_window, select
from .writers import (CSV_SLICE_ROWS, JSON_SLICE_EVENTS, AtomicFile, SliceNamer, write_csv,
                      write_csv_parts, event_jobs, write_json_parts, write_json_rows,
                      FileJobs)


LEAN_FORK_TASKS = 300_000  # see export_legacy
CONSOLE_MAX_NAMES = 10  # op names per finding on the console (the JSON keeps all)


def task_scheduler_json(dev: DeviceData, tasks: pd.DataFrame, app_pid: int
                        ) -> tuple[list[str], list[str]]:
    """Legacy ``task_time_*.json``: process ``Task Scheduler``, a lane per stream, numeric
    µs ``ts`` (printed with 3 decimals) and ``dur``, pid = application pid."""
    meta = task_scheduler_meta(app_pid, tasks["stream_id"].unique())
    if len(tasks) == 0:
        return meta, []
    kind = T.task_kind(tasks)
    op = tasks["op_name"].to_numpy(object)
    name = np.where(op == S.NA, kind, op)
    stream = tasks["stream_id"].to_numpy(np.int64)
    start = tasks["start_local"].to_numpy(np.int64)
    dur = tasks["dur_ns"].to_numpy(np.int64)
    task = tasks["task_id"].to_numpy(np.int64)
    tmpl = ('{"name": %s, "pid": ' + str(app_pid) + ', "tid": %d, "ts": %d.%03d, "dur": %s, '
            '"args": {"Task Type": %s, "Stream Id": %d, "Task Id": %d}, "ph": "X"}')

    name_j, kind_j = T.JCol(name), T.JCol(kind)

    def render(idx: np.ndarray) -> list[str]:  # rendered per sorted chunk (timeline.Layer)
        st = stream[idx].tolist()
        w, f = T.us_parts(start[idx])
        return list(map(tmpl.__mod__, zip(name_j.take(idx), st, w, f, T.dur_text(dur[idx]),
                                          kind_j.take(idx), st, task[idx].tolist())))

    layer = T.Layer([], keys=ts_sort_key(start), render=render)
    return meta, T.EventStream([layer])


def task_scheduler_meta(app_pid: int, streams) -> list[str]:
    meta = [T.meta("process_name", app_pid, 0, {"name": "Task Scheduler"})]
    for s in sorted(int(s) for s in streams):
        meta.append(T.meta("thread_name", app_pid, s, {"name": f"Stream {s}"}))
        meta.append(T.meta("thread_sort_index", app_pid, s, {"sort_index": s}))
    return meta


def host_models(dev: DeviceData) -> set[int]:
    return set(int(m) for m in dev.tasks.loc[dev.tasks["host_known"], "model_id"].unique())


@dataclass
class Advice:
    """Tuning advice of one device: the prof_rule file and its console report."""

    path: Path
    rule: dict
    text: str  # the real tool's console report (section 5.4), with evidence
    brief: list[str] = field(default_factory=list)  # one line per finding (advice.brief)


def export_legacy(data: ProfData, *, summary_format: str = "csv", model_id: int | None = None,
                  iteration_id: int | None = None, iteration_count: int = 1,
                  reports: Path | None = None, csv_slice_rows: int = CSV_SLICE_ROWS,
                  json_slice_events: int = JSON_SLICE_EVENTS,
                  advice: list[Advice] | None = None) -> list[Path]:
    """Write every device's files; `advice` (if given) receives each device's tuning advice.

    Jobs (JobPool), per device: _JOB_PARTS start first in forked workers while this process
    builds the device's big timelines (msprof, task_time json), each of whose slices (or
    pieces) is then a job."""
    switches = T.read_reports(reports)
    sels = [select(dev.iterations, host_models(dev), model_id, iteration_id, iteration_count)
            for dev in data.devices]  # selection errors are raised before anything is written
    pool = JobPool()
    # big exports: the two longest jobs fork while this process is still lean (before it
    # builds the timeline layers: ~170 MB less in each at 1M tasks), at the price of three
    # busy processes on two cores for a moment -- which small exports only pay for
    pool.caller_busy = sum(len(d.tasks) for d in data.devices) < LEAN_FORK_TASKS
    plan: list[int] = []  # per device: the number of big-timeline results
    for dev, sel in zip(data.devices, sels):
        ctx = _DeviceContext(data, dev, sel, summary_format, switches, csv_slice_rows,
                             json_slice_events)
        # longest first, so that the short jobs fill the gaps at the end
        for part in _JOB_PARTS:
            pool.submit(lambda ctx=ctx, part=part: ctx.job(part))
        n = pool.count
        ctx.big_timelines(pool)
        plan.append(pool.count - n)
    results = iter(pool.results())
    written: list[Path] = []
    for n in plan:
        parts = dict(zip(_JOB_PARTS, [next(results) for _ in _JOB_PARTS]))
        big = [next(results) for _ in range(n)]
        written += [p for paths in big for p in paths] + parts["host"][0]
        for name in ("host", "rest", "task_time", "op_summary"):  # op_summary ends with prof_rule
            _, paths, adv = parts[name]
            written += paths
            if advice is not None:
                advice.extend(adv)
    return written


# a device's jobs besides its big timelines: op_summary (with the advice built from its
# chunks), "host" (the host API scope -- built once, in that worker -- with the small
# timelines and the ai_stack_time / runtime_api summaries), task_time, the other summaries
_JOB_PARTS = ("op_summary", "host", "task_time", "rest")


class _DeviceContext:
    """What one device's jobs share (prepared in the parent, inherited by forked workers)."""

    def __init__(self, data: ProfData, dev: DeviceData, sel: Selection, summary_format: str,
                 switches: dict[str, bool], csv_slice_rows: int, json_slice_events: int
                 ) -> None:
        self.data, self.dev, self.sel = data, dev, sel
        self.summary_format, self.switches = summary_format, switches
        self.csv_slice_rows, self.json_slice_events = csv_slice_rows, json_slice_events
        self.suffix = sel.suffix(dev.device_id)
        self.app_pid = dev.rd.app_pid
        t = dev.tasks
        keep = in_window(t["start_local"], t["end_local"], sel)
        # the whole table when nothing is cut (no copy of every task column)
        self.tasks = t if keep.all() else t[keep].reset_index(drop=True)
        self.rows = S.op_rows(dev, self.tasks)
        its = dev.iterations
        if sel.model_id is not None:
            its = its[(its["model_id"] == sel.model_id) & (its["iteration_id"] >= sel.first)
                      & (its["iteration_id"] <= sel.last)].reset_index(drop=True)
        self.its = its
        self.tx = markers(data)
        self.layer_tx = tx_layer(self.tx, self.app_pid, process_name(data))
        self.fusion = fusion_rows(data, stack.model_names(data))
        self.tdir = dev.rd.path / "timeline"
        self.sdir = dev.rd.path / "summary"

    @functools.cached_property
    def scope(self) -> stack.Scope:
        """The host API scope of ai_stack_time / runtime_api / ge / thread_group, built by
        the jobs that read it (in their worker), never held by this process: at 1M tasks it
        is ~250 MB that every later fork would inherit."""
        return stack.build_scope(self.data, self.dev, self.sel, self.tasks)

    # -- timelines (seed table 1) -------------------------------------------------------
    def _json_jobs(self, name: str, trace: tuple[list[str], list[str]] | None,
                   pieces: bool = False) -> FileJobs | None:
        if trace is None or not trace[1]:
            return None
        meta, events = trace
        return event_jobs(SliceNamer(self.tdir, name, self.suffix, "json"), meta, events,
                          len(events), self.json_slice_events, pieces)

    def big_timelines(self, pool: JobPool) -> None:
        """msprof and task_time json: layers built here, one job per slice."""
        data, dev = self.data, self.dev
        per_dev = [(dev, self.tasks, self.rows, self.its)]
        trace = T.assemble_stream(T.msprof_layers(per_dev, data.host.apis, self.app_pid,
                                                  self.switches, self.layer_tx,
                                                  comm=[device_comm(data, dev, self.sel)]))
        for fj in (self._json_jobs("msprof", trace, pool.parallel),
                   self._json_jobs("task_time", task_scheduler_json(dev, self.tasks, self.app_pid),
                                   pool.parallel) if len(self.tasks) else None):
            if fj is not None:
                fj.submit_to(pool)

    def small_timelines(self) -> list[Path]:
        data, dev, scope, app_pid = self.data, self.dev, self.scope, self.app_pid
        traces = [("ai_stack_time", lambda: stack.ai_stack_json(scope, app_pid)),
                  ("thread_group", lambda: stack.thread_group_json(data, scope)),
                  ("runtime_api", lambda: stack.runtime_api_json(scope, app_pid)),
                  ("ge", lambda: stack.ge_json(scope, app_pid))]
        if len(self.its):
            traces.append(("step_trace", lambda: T.assemble_stream(
                [T.step_layer(dev, self.its, app_pid)])))
        traces.append(("hccl", lambda: hccl_json(data, dev, self.sel, app_pid)))
        if len(self.layer_tx):
            traces.append(("msprof_tx", lambda: T.assemble_stream([self.layer_tx])))
        return [p for name, make in traces if (fj := self._json_jobs(name, make())) is not None
                for p in fj.run()]

    # -- summaries (seed table 2) -------------------------------------------------------
    def _emit(self, written: list[Path], name: str, table: S.Table | None) -> None:
        if table is None:
            return
        header, df = table
        if self.summary_format == "json":
            written.extend(write_json_rows(self.sdir / f"{name}{self.suffix}.json", header, df))
        else:
            written.extend(write_csv(SliceNamer(self.sdir, name, self.suffix, "csv"), header,
                                     df, self.csv_slice_rows))

    def _emit_parts(self, written: list[Path], name: str, header: list[str], n: int,
                    render: S.RowRender) -> None:
        """A table rendered `CHUNK_ROWS` rows at a time (csv): no whole table of strings."""
        if self.summary_format == "json":
            written.extend(write_json_parts(self.sdir / f"{name}{self.suffix}.json", header,
                                            [(n, render)]))
            return
        written.extend(write_csv_parts(SliceNamer(self.sdir, name, self.suffix, "csv"),
                                       header, [(n, render)], self.csv_slice_rows))

    def job(self, part: str) -> tuple[list[Path], list[Path], list[Advice]]:
        """One of _JOB_PARTS: (timeline files, summary files, advice)."""
        if part == "host":
            timelines = self.small_timelines()
            written: list[Path] = []
            self._emit(written, "ai_stack_time", stack.ai_stack_time(self.scope))
            self._emit(written, "runtime_api", stack.runtime_api(self.scope, self.app_pid))
            return timelines, written, []
        return ([], *self.summaries(part))

    def summaries(self, part: str) -> tuple[list[Path], list[Advice]]:
        written: list[Path] = []
        adv: list[Advice] = []
        dev, tasks, rows = self.dev, self.tasks, self.rows
        if part == "op_summary":
            # op_summary is written a chunk at a time; the advice gathers what its rules read
            # from the same chunks (RuleState: no table of all rows)
            state = new_rule_state(dev, self.fusion)
            if dev.has_host_ops and len(rows):
                start = rows["start_local"].to_numpy(np.int64)

                def render(lo: int, hi: int) -> pd.DataFrame:
                    df = S.op_summary(dev, rows, lo, hi)[1]
                    state.add(A.OpTable.from_summary(df, dev.rd.ai_core_num, start[lo:hi]))
                    return df

                self._emit_parts(written, "op_summary", S.op_summary_header(dev), len(rows),
                                 render)
            written.append(write_advice(dev, state, adv))
        elif part == "task_time":
            if len(tasks):  # rendered a chunk at a time
                self._emit_parts(written, "task_time", S.TASK_TIME, len(tasks),
                                 lambda lo, hi: S.task_time(dev, tasks.iloc[lo:hi])[1])
        else:
            emit = lambda name, table: self._emit(written, name, table)  # noqa: E731
            if dev.has_node_info and len(rows):
                emit("op_statistic", S.op_statistic(rows))
            if len(self.its):
                emit("step_trace", S.step_trace(self.its))
            emit("fusion_op", fusion_op(self.fusion, self.sel.model_id))
            emit("aicpu", S.aicpu(dev, tasks))
            emit("l2_cache", S.l2_cache(dev, tasks, restrict=self.sel.start_ns is not None))
            emit("msprof_tx", tx_table(self.tx))
        return written, adv


def new_rule_state(dev: DeviceData, fusion: pd.DataFrame) -> A.RuleState:
    """The advice state of one device's op_summary rows (none added yet)."""
    return A.RuleState(dev.rd.ai_core_num, workspace_kb(fusion) if len(fusion) else None)


def write_advice(dev: DeviceData, state: A.RuleState, advice: list[Advice] | None) -> Path:
    """``summary/prof_rule_{device_id}.json`` (always written; rules of
    step-trace-and-advice.md 5 over the exported op_summary rows, given as their RuleState)
    and its console report."""
    if state.cols is None:  # no op_summary rows: the rules see an empty table
        state.add(A.OpTable.from_summary(pd.DataFrame(columns=S.OP_SUMMARY_BASE),
                                         dev.rd.ai_core_num))
    metrics = (dev.rd.ai_core_metrics or "") if dev.pmu_events else ""
    rule = state.rule_json(metrics)
    path = dev.rd.path / "summary" / f"prof_rule_{dev.device_id}.json"
    with AtomicFile(path) as fh:
        fh.write(json.dumps(rule, ensure_ascii=False, indent=4))
    if advice is not None:
        advice.append(Advice(path, rule, A.render(rule, state.evidence(rule),
                                                      more_hint=f" in {path.name}",
                                                      max_names=CONSOLE_MAX_NAMES),
                             A.brief(rule, state)))
    return path
