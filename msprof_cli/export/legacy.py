"""Layout (a), the project default: ``PROF_X/device_{id}/summary|timeline/{name}_{suffix}``.

Per device, no ``Device_id`` column, one model and an iteration range (selection.py); names
carry ``_{dev}_{model}_{iter}`` with N/A parts omitted.  Timelines: msprof (this device + host
CANN data), step_trace, task_time (historic Task Scheduler form, timeline.md 11.2).
Summaries: op_summary, op_statistic, task_time, step_trace.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from . import summaries as S
from . import timeline as T
from .dataset import DeviceData, ProfData
from .fmt import float_str, int_str, ts_sort_key, us_str
from .selection import Selection, in_window, select
from .writers import (CSV_SLICE_ROWS, JSON_SLICE_EVENTS, SliceNamer, write_csv, write_events,
                      write_json_rows)


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
    name = np.where(tasks["op_name"].to_numpy(object) == S.NA, kind,
                    tasks["op_name"].to_numpy(object))
    stream = int_str(tasks["stream_id"])
    ev = ('{"name": ' + T.jstr(name) + ', "pid": ' + str(app_pid) + ', "tid": ' + stream
          + ', "ts": ' + us_str(tasks["start_local"]) + ', "dur": '
          + float_str(tasks["dur_ns"].to_numpy(np.int64) / 1000.0) + ', "args": {"Task Type": '
          + T.jstr(kind) + ', "Stream Id": ' + stream + ', "Task Id": ' + int_str(tasks["task_id"])
          + '}, "ph": "X"}')
    order = np.argsort(ts_sort_key(tasks["start_local"].to_numpy(np.int64)), kind="stable")
    return meta, np.asarray(ev, dtype=object)[order].tolist()


def host_models(dev: DeviceData) -> set[int]:
    return set(int(m) for m in dev.tasks.loc[dev.tasks["host_known"], "model_id"].unique())


def export_legacy(data: ProfData, *, summary_format: str = "csv", model_id: int | None = None,
                  iteration_id: int | None = None, iteration_count: int = 1,
                  reports: Path | None = None, csv_slice_rows: int = CSV_SLICE_ROWS,
                  json_slice_events: int = JSON_SLICE_EVENTS) -> list[Path]:
    written: list[Path] = []
    switches = T.read_reports(reports)
    for dev in data.devices:
        sel = select(dev.iterations, host_models(dev), model_id, iteration_id, iteration_count)
        written += export_device(data, dev, sel, summary_format, switches, csv_slice_rows,
                                 json_slice_events)
    return written


def export_device(data: ProfData, dev: DeviceData, sel: Selection, summary_format: str,
                  switches: dict[str, bool], csv_slice_rows: int, json_slice_events: int
                  ) -> list[Path]:
    written: list[Path] = []
    base = dev.rd.path
    suffix = sel.suffix(dev.device_id)
    app_pid = dev.rd.app_pid
    t = dev.tasks
    tasks = t[in_window(t["start_local"], t["end_local"], sel)].reset_index(drop=True)
    rows = S.op_rows(dev, tasks)
    its = dev.iterations
    if sel.model_id is not None:
        its = its[(its["model_id"] == sel.model_id) & (its["iteration_id"] >= sel.first)
                  & (its["iteration_id"] <= sel.last)].reset_index(drop=True)

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
    per_dev = [(dev, tasks, rows, its)]
    meta, events = T.assemble(T.msprof_layers(per_dev, data.host.apis, app_pid, switches))
    if events:
        written += write_events(SliceNamer(tdir, "msprof", suffix, "json"), meta, events,
                                len(events), json_slice_events)
    if len(its):
        smeta, sev = T.assemble([T.step_layer(dev, its, app_pid)])
        written += write_events(SliceNamer(tdir, "step_trace", suffix, "json"), smeta, sev,
                                len(sev), json_slice_events)
    if len(tasks):
        tmeta, tev = task_scheduler_json(dev, tasks, app_pid)
        written += write_events(SliceNamer(tdir, "task_time", suffix, "json"), tmeta, tev,
                                len(tev), json_slice_events)
    if dev.has_host_ops and len(rows):
        emit("op_summary", S.op_summary(dev, rows))
    if dev.has_node_info and len(rows):
        emit("op_statistic", S.op_statistic(rows))
    if len(tasks):
        emit("task_time", S.task_time(dev, tasks))
    if len(its):
        emit("step_trace", S.step_trace(its))
    emit("aicpu", S.aicpu(dev, tasks))
    emit("l2_cache", S.l2_cache(dev, tasks))
    return written
