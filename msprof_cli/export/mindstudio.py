"""Layout (b): ``PROF_X/mindstudio_profiler_output/{name}_{YYYYmmddHHMMSS}.{csv,json}``.

All data of the PROF dir (all models, all iterations); devices merged, ``Device_id`` first in
every CSV; host API rows carry the number of the PROF's (first) device (910 Python engine).
"""
from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

from . import communication as C
from . import fusion as F
from . import msproftx as X
from . import summaries as S
from . import timeline as T
from .dataset import ProfData
from .parallel import JobPool
from .readme import readme_text, summary_json_stem
from .stack import model_names
from .writers import (CSV_SLICE_ROWS, JSON_SLICE_EVENTS, AtomicFile, SliceNamer, write_csv,
                      write_csv_parts, event_jobs, write_json_parts,
                      write_json_rows)

OUTPUT_DIR = "mindstudio_profiler_output"


def stamp() -> str:
    return time.strftime("%Y%m%d%H%M%S", time.localtime())


def with_device(dev_id: int, table: S.Table) -> S.Table:
    header, df = table
    df = df.copy()
    df.insert(0, "Device_id", str(dev_id))
    return ["Device_id"] + header, df


def merge_tables(tables: list[S.Table]) -> S.Table | None:
    tables = [t for t in tables if t is not None]
    if not tables:
        return None
    # the widest header wins (step_trace: devices with fewer Reduce pairs get N/A there)
    header = max((t[0] for t in tables), key=len)
    df = pd.concat([t[1] for t in tables], ignore_index=True)
    return header, df.fillna("N/A") if df.isna().any(axis=None) else df


def json_per_device(out_dir: Path, name: str, header: list[str], df: pd.DataFrame
                     ) -> list[Path]:
    """``--summary-format json``: the per-device summaries copied as they are (no Device_id,
    export-files.md 2.2): ``{name}_{ts}.json`` for one device, ``{name}_device_{id}_{ts}.json``
    each when the PROF dir holds several (project choice: keeps the devices apart)."""
    devices = list(dict.fromkeys(df["Device_id"].tolist())) if len(df) else []
    stem = summary_json_stem(name)
    if len(devices) <= 1:
        return write_json_rows(out_dir / f"{stem}_{stamp()}.json", header[1:],
                               df.drop(columns="Device_id"))
    out: list[Path] = []
    for dev in devices:
        part = df[df["Device_id"] == dev].drop(columns="Device_id")
        out += write_json_rows(out_dir / f"{stem}_device_{dev}_{stamp()}.json", header[1:], part)
    return out


def export_mindstudio(data: ProfData, *, summary_format: str = "csv", reports: Path | None = None,
                      csv_slice_rows: int = CSV_SLICE_ROWS,
                      json_slice_events: int = JSON_SLICE_EVENTS) -> list[Path]:
    """Every file of the layout.  Jobs (JobPool): the big summaries start first, in forked
    workers, while this process builds the timeline layers; then every msprof json slice is
    a job of its own, so the two cores stay busy until the end."""
    out_dir = data.prof / OUTPUT_DIR
    devs = data.devices
    app_pid = devs[0].rd.app_pid if devs else (data.host.rd.app_pid if data.host.rd else 0)
    host_dev = devs[0].device_id if devs else 0
    per_dev = []
    for d in devs:
        rows = S.op_rows(d)
        per_dev.append((d, d.tasks, rows, d.iterations))
    tx = X.markers(data)
    pool = JobPool()
    # summaries: (file names, summary names) per job; the biggest tables first
    for part in _SUMMARY_PARTS:
        pool.submit(lambda part=part: _summary_job(part, data, per_dev, tx, out_dir,
                                                   summary_format, csv_slice_rows, host_dev))
    timelines: list[str] = []  # in the real tool's README order: msprof_tx, msprof, step_trace
    switches = T.read_reports(reports)
    layers = T.msprof_layers(per_dev, data.host.apis, app_pid, switches,
                             comm=[C.device_comm(data, d) for d, _, _, _ in per_dev])
    if len(tx):  # msproftx markers: msprof_tx json + the application layer of msprof json
        tx_layer = X.tx_layer(tx, app_pid, X.process_name(data))
        layers.append(tx_layer)
        tmeta, tev = T.assemble_stream([tx_layer])
        event_jobs(SliceNamer(out_dir, "msprof_tx", f"_{stamp()}", "json"), tmeta, tev,
                   len(tev), json_slice_events, pool.parallel).submit_to(pool)
        timelines.append("msprof_tx")
    meta, events = T.assemble_stream(layers)
    del layers
    if events:
        event_jobs(SliceNamer(out_dir, "msprof", f"_{stamp()}", "json"), meta, events,
                   len(events), json_slice_events, pool.parallel).submit_to(pool)
        timelines.append("msprof")
    step_layers = [T.step_layer(d, its, app_pid) for d, _, _, its in per_dev]
    smeta, sev = T.assemble_stream(step_layers)
    if sev:
        event_jobs(SliceNamer(out_dir, "step_trace", f"_{stamp()}", "json"), smeta, sev,
                   len(sev), json_slice_events, pool.parallel).submit_to(pool)
        timelines.append("step_trace")
    results = pool.results()
    written: list[Path] = []
    summaries: set[str] = set()
    for res in results[len(_SUMMARY_PARTS):]:  # timelines first, as before
        written.extend(res)
    summary_results = dict(zip(_SUMMARY_PARTS, results))
    for part in ("task_time", "op_summary", "rest"):  # the real tool's order
        paths, names = summary_results[part]
        written.extend(paths)
        summaries |= names
    if written:
        readme = out_dir / "README.txt"
        with AtomicFile(readme) as fh:
            fh.write(readme_text(set(timelines), summaries, summary_format))
        written.append(readme)
    return written


# the summaries in three jobs of similar size at 1M tasks (op_summary ≈ 60 % of the work)
_SUMMARY_PARTS = ("op_summary", "task_time", "rest")


def _summary_job(part: str, data: ProfData, per_dev: list, tx: pd.DataFrame,
                 out_dir: Path, summary_format: str, csv_slice_rows: int, host_dev: int
                 ) -> tuple[list[Path], set[str]]:
    written: list[Path] = []
    summaries: set[str] = set()

    def emit(name: str, table: S.Table | None) -> None:
        if table is None:
            return
        header, df = table
        if summary_format == "json":
            written.extend(json_per_device(out_dir, name, header, df))
        else:
            written.extend(write_csv(SliceNamer(out_dir, name, f"_{stamp()}", "csv"), header, df,
                                     csv_slice_rows))
        summaries.add(name)

    def emit_chunked(name: str, header: list[str], parts: list[tuple[int, int, S.RowRender]],
                     whole) -> None:
        """Per-device tables written CHUNK_ROWS rows at a time (no full table of strings);
        `whole()` = the (header, frame) fallback for json output or differing headers."""
        if not parts:
            return
        if summary_format == "json":  # per device, as `json_per_device` splits `whole()`
            several = len(parts) > 1
            for d, n, r in parts:
                stem = summary_json_stem(name) + (f"_device_{d}" if several else "")
                written.extend(write_json_parts(out_dir / f"{stem}_{stamp()}.json", header,
                                                [(n, r)], fill_na=True))
            summaries.add(name)
            return
        full = ["Device_id"] + header

        def with_dev(dev_id: int, render: S.RowRender) -> S.RowRender:
            def part(lo: int, hi: int) -> pd.DataFrame:
                df = render(lo, hi)
                df.insert(0, "Device_id", str(dev_id))
                return df
            return part

        written.extend(write_csv_parts(SliceNamer(out_dir, name, f"_{stamp()}", "csv"), full,
                                       [(n, with_dev(d, r)) for d, n, r in parts],
                                       csv_slice_rows))
        summaries.add(name)

    _summaries(part, data, per_dev, tx, emit, emit_chunked, host_dev)
    return written, summaries


def _summaries(part: str, data: ProfData, per_dev: list, tx: pd.DataFrame, emit, emit_chunked,
               host_dev: int) -> None:
    """The mindstudio summaries of one job (`part`: "task_time", "op_summary" or "rest"),
    in the real tool's order."""
    devs = data.devices
    if part == "task_time":
        _task_time(per_dev, emit, emit_chunked)
    elif part == "op_summary":
        _op_summary(per_dev, emit, emit_chunked)
    else:
        _rest(data, devs, per_dev, tx, emit, host_dev)


def _task_time(per_dev: list, emit, emit_chunked) -> None:
    emit_chunked("task_time", S.TASK_TIME, [
        (d.device_id, len(t), lambda lo, hi, d=d, t=t: S.task_time(d, t.iloc[lo:hi])[1])
        for d, t, _, _ in per_dev if len(t)],
        lambda: merge_tables([with_device(d.device_id, S.task_time(d, t))
                        for d, t, _, _ in per_dev if len(t)]))


def _op_summary(per_dev: list, emit, emit_chunked) -> None:
    op_devs = [(d, rows) for d, _, rows, _ in per_dev if d.has_host_ops and len(rows)]
    op_headers = {tuple(S.op_summary_header(d)) for d, _ in op_devs}
    op_whole = lambda: merge_tables([with_device(d.device_id, S.op_summary(d, rows))  # noqa: E731
                               for d, rows in op_devs])
    if len(op_headers) == 1:
        emit_chunked("op_summary", list(op_headers.pop()), [
            (d.device_id, len(rows),
             lambda lo, hi, d=d, rows=rows: S.op_summary(d, rows, lo, hi)[1])
            for d, rows in op_devs], op_whole)
    else:  # devices with different PMU columns: merged whole (widest header, N/A)
        emit("op_summary", op_whole() if op_devs else None)


def _rest(data: ProfData, devs: list, per_dev: list, tx: pd.DataFrame, emit, host_dev: int
          ) -> None:
    if data.host.apis is not None and len(data.host.apis):
        emit("api_statistic", with_device(host_dev, S.api_statistic(data.host.apis)))
    emit("op_statistic", merge_tables([with_device(d.device_id, S.op_statistic(rows))
                                 for d, _, rows, _ in per_dev if d.has_node_info and len(rows)]))
    emit("step_trace", merge_tables([with_device(d.device_id, S.step_trace(its))
                               for d, _, _, its in per_dev if len(its)]))
    fusion = F.fusion_op(F.fusion_rows(data, model_names(data)))
    emit("fusion_op", with_device(host_dev, fusion) if fusion is not None else None)
    emit("aicpu", merge_tables([with_device(d.device_id, t) for d, tasks, _, _ in per_dev
                          if (t := S.aicpu(d, tasks)) is not None]))
    emit("l2_cache", merge_tables([with_device(d.device_id, t) for d, tasks, _, _ in per_dev
                             if (t := S.l2_cache(d, tasks)) is not None]))
    emit("communication_statistic", merge_tables([
        with_device(d.device_id, C.communication_statistic(r)) for d in devs
        if len(r := C.hccl_rows(d, data))]))
    if len(tx):
        emit("msprof_tx", with_device(host_dev, X.tx_table(tx, merged=True)))
