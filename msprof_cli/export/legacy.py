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

import json
from dataclasses import dataclass
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
from .parallel import run_jobs
from .selection import Selection, in_window, select
from .writers import (CSV_SLICE_ROWS, JSON_SLICE_EVENTS, AtomicFile, SliceNamer, write_csv,
                      write_csv_parts, write_events, write_json_rows)


CONSOLE_MAX_NAMES = 10  # op names per finding on the console (the JSON keeps all)


def task_scheduler_json(dev: DeviceData, tasks: pd.DataFrame, app_pid: int
                        ) -> tuple[list[str], list[str]]:
    """Legacy ``task_time_*.json``: process ``Task Scheduler``, a lane per stream, numeric
    µs ``ts`` (printed with 3 decimals) and ``dur``, pid = application pid."""
    streams = sorted(int(s) for s in tasks["stream_id"].unique())
    meta = [T.meta("process_name", app_pid, 0, {"name": "Task Scheduler"})]
    for s in streams:
        meta.append(T.meta("thread_name", app_pid, s, {"name": f"Stream {s}"}))
        meta.append(T.meta("thread_sort_index", app_pid, s, {"sort_index": s}))
    if len(tasks) == 0:
        return meta, []
    kind = T.task_kind(tasks)
    op = tasks["op_name"].to_numpy(object)
    name = np.where(op == S.NA, kind, op)
    stream = tasks["stream_id"].to_numpy(np.int64)
    start = tasks["start_local"].to_numpy(np.int64)
    dur = tasks["dur_ns"].to_numpy(np.int64)
    task = tasks["task_id"].to_numpy(np.int64)
    tmpl = ('{"name": %s, "pid": ' + str(app_pid) + ', "tid": %d, "ts": %d.%03d, "dur": %r, '
            '"args": {"Task Type": %s, "Stream Id": %d, "Task Id": %d}, "ph": "X"}')

    name_j, kind_j = T.JCol(name), T.JCol(kind)

    def render(idx: np.ndarray) -> list[str]:  # rendered per sorted chunk (timeline.Layer)
        st = stream[idx].tolist()
        w, f = T._us_parts(start[idx])
        return list(map(tmpl.__mod__, zip(name_j.take(idx), st, w, f, T._floats(dur[idx]),
                                          kind_j.take(idx), st, task[idx].tolist())))

    layer = T.Layer([], keys=ts_sort_key(start), render=render)
    return meta, T.EventStream([layer])


def host_models(dev: DeviceData) -> set[int]:
    return set(int(m) for m in dev.tasks.loc[dev.tasks["host_known"], "model_id"].unique())


@dataclass
class Advice:
    """Tuning advice of one device: the prof_rule file and its console report."""

    path: Path
    rule: dict
    text: str


def export_legacy(data: ProfData, *, summary_format: str = "csv", model_id: int | None = None,
                  iteration_id: int | None = None, iteration_count: int = 1,
                  reports: Path | None = None, csv_slice_rows: int = CSV_SLICE_ROWS,
                  json_slice_events: int = JSON_SLICE_EVENTS,
                  advice: list[Advice] | None = None) -> list[Path]:
    """Write every device's files; `advice` (if given) receives each device's tuning advice."""
    written: list[Path] = []
    switches = T.read_reports(reports)
    sels = [select(dev.iterations, host_models(dev), model_id, iteration_id, iteration_count)
            for dev in data.devices]  # selection errors are raised before anything is written
    one = len(data.devices) == 1

    def job(dev: DeviceData, sel: Selection):
        def run() -> tuple[list[Path], list[Advice]]:
            adv: list[Advice] = []
            # one device: its timelines and summaries are the two parallel jobs instead
            paths = export_device(data, dev, sel, summary_format, switches, csv_slice_rows,
                                  json_slice_events, adv, split=one)
            return paths, adv
        return run

    # several devices: one forked worker per device (device order kept in the results)
    for paths, adv in run_jobs([job(d, s) for d, s in zip(data.devices, sels)]):
        written += paths
        if advice is not None:
            advice.extend(adv)
    return written


def export_device(data: ProfData, dev: DeviceData, sel: Selection, summary_format: str,
                  switches: dict[str, bool], csv_slice_rows: int, json_slice_events: int,
                  advice: list[Advice] | None = None, split: bool = False) -> list[Path]:
    """One device's files; `split`: its timelines and summaries as two parallel jobs."""
    written: list[Path] = []
    base = dev.rd.path
    suffix = sel.suffix(dev.device_id)
    app_pid = dev.rd.app_pid
    t = dev.tasks
    keep = in_window(t["start_local"], t["end_local"], sel)
    # the whole table when nothing is cut (no copy of every task column)
    tasks = t if keep.all() else t[keep].reset_index(drop=True)
    rows = S.op_rows(dev, tasks)
    its = dev.iterations
    if sel.model_id is not None:
        its = its[(its["model_id"] == sel.model_id) & (its["iteration_id"] >= sel.first)
                  & (its["iteration_id"] <= sel.last)].reset_index(drop=True)
    scope = stack.build_scope(data, dev, sel, tasks)
    tx = markers(data)
    fusion = fusion_rows(data, scope.model_names)

    def emit(name: str, table: S.Table | None) -> None:
        if table is None:
            return
        header, df = table
        sdir = base / "summary"
        if summary_format == "json":
            written.extend(write_json_rows(sdir / f"{name}{suffix}.json", header, df))
        else:
            written.extend(write_csv(SliceNamer(sdir, name, suffix, "csv"), header, df,
                                     csv_slice_rows))

    tdir = base / "timeline"
    t_written: list[Path] = []

    def emit_json(name: str, trace: tuple[list[str], list[str]] | None) -> None:
        if trace is None or not trace[1]:
            return
        meta, events = trace
        t_written.extend(write_events(SliceNamer(tdir, name, suffix, "json"), meta, events,
                                      len(events), json_slice_events))

    def emit_parts(name: str, header: list[str], n: int, render: S.RowRender) -> None:
        """A table rendered `CHUNK_ROWS` rows at a time (csv): no whole table of strings."""
        if summary_format == "json":
            emit(name, (header, render(0, n)))
            return
        written.extend(write_csv_parts(SliceNamer(base / "summary", name, suffix, "csv"),
                                       header, [(n, render)], csv_slice_rows))

    def timelines() -> list[Path]:
        _timelines(data, dev, tasks, rows, its, sel, scope, tx, app_pid, switches, emit_json)
        return t_written

    def summaries() -> None:
        _summaries(data, dev, tasks, rows, its, sel, scope, tx, fusion, app_pid, emit,
                   emit_parts, written, advice)

    t_paths, _ = run_jobs([timelines, summaries], workers=None if split else 1)
    return t_paths + written


def _timelines(data: ProfData, dev: DeviceData, tasks: pd.DataFrame, rows: pd.DataFrame,
               its: pd.DataFrame, sel: Selection, scope, tx, app_pid: int,
               switches: dict[str, bool], emit_json) -> None:
    # --- timelines (seed table 1) ---
    per_dev = [(dev, tasks, rows, its)]
    layer_tx = tx_layer(tx, app_pid, process_name(data))
    emit_json("msprof", T.assemble_stream(T.msprof_layers(per_dev, data.host.apis, app_pid, switches,
                                                   layer_tx,
                                                   comm=[device_comm(data, dev, sel)])))
    emit_json("ai_stack_time", stack.ai_stack_json(scope, app_pid))
    emit_json("thread_group", stack.thread_group_json(data, scope))
    if len(tasks):
        emit_json("task_time", task_scheduler_json(dev, tasks, app_pid))
    emit_json("runtime_api", stack.runtime_api_json(scope, app_pid))
    emit_json("ge", stack.ge_json(scope, app_pid))
    if len(its):
        emit_json("step_trace", T.assemble_stream([T.step_layer(dev, its, app_pid)]))
    emit_json("hccl", hccl_json(data, dev, sel, app_pid))
    if len(layer_tx):
        emit_json("msprof_tx", T.assemble_stream([layer_tx]))


def _summaries(data: ProfData, dev: DeviceData, tasks: pd.DataFrame, rows: pd.DataFrame,
               its: pd.DataFrame, sel: Selection, scope, tx, fusion, app_pid: int, emit,
               emit_parts, written: list[Path], advice: list[Advice] | None) -> None:
    # --- summaries (seed table 2) ---
    op_table = None
    if dev.has_host_ops and len(rows):
        # op_summary is written a chunk at a time; the advice keeps only the columns its
        # rules read (OpTable), gathered from the same chunks (no whole frame of strings)
        parts: list[pd.DataFrame] = []

        def render(lo: int, hi: int) -> pd.DataFrame:
            df = S.op_summary(dev, rows, lo, hi)[1]
            parts.append(A.OpTable.from_summary(df, dev.rd.ai_core_num).df)
            return df

        emit_parts("op_summary", S.op_summary_header(dev), len(rows), render)
        op_table = A.OpTable(pd.concat(parts, ignore_index=True), dev.rd.ai_core_num)
        del parts
    if dev.has_node_info and len(rows):
        emit("op_statistic", S.op_statistic(rows))
    if len(its):
        emit("step_trace", S.step_trace(its))
    emit("ai_stack_time", stack.ai_stack_time(scope))
    emit("runtime_api", stack.runtime_api(scope, app_pid))
    emit("fusion_op", fusion_op(fusion, sel.model_id))
    if len(tasks):  # rendered a chunk at a time
        emit_parts("task_time", S.TASK_TIME, len(tasks),
                   lambda lo, hi: S.task_time(dev, tasks.iloc[lo:hi])[1])
    emit("aicpu", S.aicpu(dev, tasks))
    emit("l2_cache", S.l2_cache(dev, tasks, restrict=sel.start_ns is not None))
    emit("msprof_tx", tx_table(tx))
    written.append(write_advice(dev, op_table, fusion, advice))


def write_advice(dev: DeviceData, table: A.OpTable | None, fusion: pd.DataFrame,
                 advice: list[Advice] | None) -> Path:
    """``summary/prof_rule_{device_id}.json`` (always written; rules of
    step-trace-and-advice.md 5 over the exported op_summary rows, given as their OpTable;
    None = no op_summary) and its console report."""
    frame = pd.DataFrame(columns=S.OP_SUMMARY_BASE)  # the rules read `table` only
    metrics = (dev.rd.ai_core_metrics or "") if dev.pmu_events else ""
    ws = workspace_kb(fusion) if len(fusion) else None
    if table is None:
        table = A.OpTable.from_summary(frame, dev.rd.ai_core_num)
    rule = A.evaluate(frame, core_num=dev.rd.ai_core_num, aic_metrics=metrics, workspace=ws,
                      table=table)
    path = dev.rd.path / "summary" / f"prof_rule_{dev.device_id}.json"
    with AtomicFile(path) as fh:
        fh.write(json.dumps(rule, ensure_ascii=False, indent=4))
    if advice is not None:
        ev = A.evidence(frame, rule, core_num=dev.rd.ai_core_num, workspace=ws, table=table)
        advice.append(Advice(path, rule, A.render(rule, ev, more_hint=f" in {path.name}",
                                                      max_names=CONSOLE_MAX_NAMES)))
    return path
