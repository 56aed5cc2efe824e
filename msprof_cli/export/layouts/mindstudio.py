"""Layout (b): ``PROF_X/mindstudio_profiler_output/{name}_{YYYYmmddHHMMSS}.{csv,json}``.

All data of the PROF dir (all models, all iterations); devices merged, ``Device_id`` first in
every CSV; host API summaries (api_statistic, fusion_op) once per device, with its number (the
analysis exports them in every device dir and merges the dirs); msprof_tx rows carry the PROF's
first device.

The layout is its table of outputs (`MindstudioExport.table`, pipeline.py) over the plan of
every device with the same cuts: a window decodes every device; msprof json merges them by
time with a Free carry per device; the CSVs stay device-major (sinks.device_rows).  Devices
whose op_summary columns differ (one collected without PMU) share one header, the union,
N/A where a device has none.  A README.txt lists what was written.
"""
from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

from ..decode.comm_ops import number_comm_ops
from ..decode.data import ProfData
from ..derive import msproftx as X
from ..derive.selection import ALL
from ..outputs import overlap_layer as OV
from ..outputs import aicpu_table as AT
from ..outputs import summaries as S
from ..outputs import timeline as T
from ..outputs import trace as TR
from ..outputs.carry import WindowTimeline, slim_first, window_comm
from ..outputs.memory_files import MemoryFiles, has_npu_mem
from ..outputs.msprof_json import TIMELINE, MsprofJson, StepTraceJson, TxJson
from ..outputs.readme import readme_text, summary_json_stem
from ..outputs.tables import (ApiStatistic, CommunicationStatistic, FusionOp, L2Cache, MsprofTxCsv,
                              StepTraceCsv, merge_tables, with_device)
from ..outputs.task_rows import OP_ROWS, TASK_ROWS, AicpuCsv, OpStatistic, OpSummaryCsv, TaskTimeCsv
from ..pipeline import DeviceWindow, Export, Output, Window, drive
from ..plan import Plan
from ..sinks import files as FS
from ..sinks import writers as W
from ..sinks.device_rows import MERGED, PER_DEVICE, DeviceRows
from ..sinks.files import SliceNamer
from ..sinks.streams import DeferredEvents, JsonStream
from ..sinks.writers import write_csv, write_json_rows

OUTPUT_DIR = "mindstudio_profiler_output"
MEMCPY_ROWS = "task_time_memcpy"  # a device's ts memcpy rows, kept until its others are out


def stamp() -> str:
    return time.strftime("%Y%m%d%H%M%S", time.localtime())


def json_per_device(out_dir: Path, name: str, header: list[str], df: pd.DataFrame
                     ) -> list[Path]:
    """``--summary-format json``: the per-device summaries copied as they are (no Device_id,
    docs/formats/export-files.md 2.2): ``{name}_{ts}.json`` for one device,
    ``{name}_device_{id}_{ts}.json``
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


def export_mindstudio(plan: Plan, *, reports: Path | None = None,
                      csv_slice_rows: int = W.CSV_SLICE_ROWS,
                      json_slice_events: int = W.JSON_SLICE_EVENTS,
                      on_window=None, summary_format: str = "csv") -> list[Path]:
    """Every file of the mindstudio layout, window by window (one window: the whole)."""
    run = MindstudioExport(plan, reports, csv_slice_rows, json_slice_events, summary_format)
    return drive(run, on_window)


class MindstudioExport(Export):
    """The mindstudio export of a plan (one device, or the devices of `plan_all_devices`
    with the same cuts)."""

    jobs = (TIMELINE, OP_ROWS, TASK_ROWS)  # longest first (legacy.LegacyExport.jobs)
    # the ts memcpy tasks as the real analysis shows them (summaries.task_time,
    # timeline.hardware_layer / memcpy_events): after the other task_time rows, as
    # "MemcopyAsync" events without a lane name or flows
    analysis_memcpy = True

    def __init__(self, plan: Plan, reports: Path | None, csv_slice_rows: int,
                 json_slice_events: int, summary_format: str = "csv") -> None:
        super().__init__(plan)
        self.summary_format = summary_format
        self.out_dir = plan.prof / OUTPUT_DIR
        self.dev_ids = [f.rd.device_id or 0 for f in plan.facts]
        # host API rows carry the first device's number
        self.host_dev = self.dev_ids[0] if self.dev_ids else 0
        self.app_pid = plan.app_pid()
        self.switches = TR.read_reports(reports)
        self.csv_slice_rows, self.json_slice_events = csv_slice_rows, json_slice_events
        self.use_flow = plan.has_apis()  # flows only with host API rows
        # the devices with an NPU MEM lane -> its sort index (memory_files.py)
        self.npu_mem_sorts = {f.rd.device_id or 0: 0 for f in plan.facts
                              if has_npu_mem(f.rd)}
        sorts = OV.overlap_sorts(self.dev_ids, self.npu_mem_sorts)
        self.overlap_sorts = [sorts[i] for i in self.dev_ids]
        self.sel = ALL
        self.rows_end: int | None = None
        self.model_filter: int | None = None
        self.first: ProfData | None = None
        self.iterations: list[pd.DataFrame] = []
        self.step_meta: list[list[str]] = []
        self.tx = pd.DataFrame()
        self.tx_layer: TR.Layer | None = None
        self.tx_layer_all: TR.Layer | None = None
        self.comm_seen = [0] * len(self.dev_ids)  # collectives so far, per device
        self.timelines: set[str] = set()  # the stems written (README.txt)
        self.summaries: set[str] = set()

    def job_of(self, out: Output) -> str | None:
        return OP_ROWS if out.job == TASK_ROWS and not self.one_window else out.job

    def name(self, stem: str, ext: str) -> SliceNamer:
        return SliceNamer(self.out_dir, stem, f"_{stamp()}", ext)

    def window(self, k: int, data: ProfData) -> Window:
        if self.first is None:
            self._start(data)
        lo, hi = self.plan.bounds(k)
        devs = []
        for j, d in enumerate(data.devices):
            self.comm_seen[j] = number_comm_ops(d, self.comm_seen[j])
            comm, lanes, ops = window_comm(data, d, ALL, lo, hi)
            models = sorted(int(x) for x in d.iterations["model_id"].unique())
            devs.append(DeviceWindow(j, d, d.tasks, S.op_rows(d), d.iterations, models,
                                     comm, lanes, ops))
        return Window(k, data, devs, data.host.apis)

    def _start(self, data: ProfData) -> None:
        """The first window: what is kept of it, the step-trace metadata, the markers."""
        # devices with other PMU columns (one collected without): one header, the union
        # in device order, N/A in the columns a device has not
        op_header: list[str] = []
        for d in data.devices:
            if d.has_host_ops:
                op_header += [c for c in S.op_summary_header(d) if c not in op_header]
        self.first = slim_first(data)
        self.iterations = [d.iterations for d in self.first.devices]
        # the step layer's metadata depends on the models only; its events (a few hundred
        # MB of text at 10M tasks) are made per window
        self.step_meta = [T.step_meta(d, T.step_models(d.iterations), self.app_pid)
                          for d in data.devices]
        self.tx = X.markers(data)
        if len(self.tx):  # msprof json's last layer (if switched on): the markers since the
            # collection began; msprof_tx json: every marker
            self.tx_layer = X.tx_layer(self.tx, self.app_pid, X.process_name(data),
                                       X.collection_begin_ns(data))
            self.tx_layer_all = X.tx_layer(self.tx, self.app_pid, X.process_name(data))
        self.outputs = self.table(op_header)

    def table(self, op_header: list[str]) -> list[Output]:
        """The mindstudio layout's outputs, in the order they are closed in (the traces
        together, at the first)."""
        n = len(self.dev_ids)

        def rows(stem: str, header: list[str]) -> DeviceRows:
            if self.summary_format == "json":  # a file per device (json_per_device)
                return DeviceRows(PER_DEVICE, self.name(summary_json_stem(stem), "json"),
                                  header, self.dev_ids, self.csv_slice_rows, names=[
                                      self.name(f"{summary_json_stem(stem)}_device_{i}",
                                                "json") for i in self.dev_ids],
                                  extra_names=[self.name(f"{MEMCPY_ROWS}_device_{j}", "csv")
                                               for j in range(n)])
            return DeviceRows(MERGED, self.name(stem, "csv"), header, self.dev_ids,
                              self.csv_slice_rows,
                              names=[self.name(f"{stem}_device_{j}", "csv") for j in range(n)],
                              extra_names=[self.name(f"{MEMCPY_ROWS}_device_{j}", "csv")
                                           for j in range(n)])

        msprof = JsonStream(self.name("msprof", "json"), self.json_slice_events)
        step_json = JsonStream(self.name("step_trace", "json"), self.json_slice_events)
        at = TR.layer_slots(1)["overlap"]
        # one timeline per device: the first writes the files, the later ones are kept
        # (DeferredEvents) and appended after it at the end -- device-major, as the
        # analysis's merge of its per-device files
        timelines = [WindowTimeline(
            msprof if j == 0 else DeferredEvents(self.name(f"msprof_device_{i}", "json")),
            [i], self.app_pid, at, [self.overlap_sorts[j]]) for j, i in enumerate(self.dev_ids)] \
            or [WindowTimeline(msprof, [], self.app_pid, at)]  # a host dir alone
        # msproftx events: the analysis's host file, merged after the device files
        tx_out = DeferredEvents(self.name("msprof_host", "json"))
        return [
            TxJson(self.name("msprof_tx", "json"), self.json_slice_events),
            MsprofJson(msprof, timelines, tx_out, n),
            StepTraceJson([step_json] + [DeferredEvents(self.name(f"step_trace_device_{i}",
                                                                  "json"))
                                         for i in self.dev_ids[1:]]),
            TaskTimeCsv(rows("task_time", S.TASK_TIME), analysis=True),
            OpSummaryCsv(rows("op_summary", op_header), n, union_header=True),
            ApiStatistic(),
            OpStatistic(n),
            StepTraceCsv(),
            FusionOp(),
            AicpuCsv(rows("aicpu", AT.AICPU), analysis=True),
            L2Cache(rows("l2_cache", S.L2_CACHE), n),
            CommunicationStatistic(n),
            MsprofTxCsv(merged=True),
            MemoryFiles(),
        ]

    def finish(self) -> list[Path]:
        written = super().finish()
        if written:
            readme = self.out_dir / "README.txt"
            with FS.AtomicFile(readme) as fh:
                fh.write(readme_text(self.timelines, self.summaries, self.summary_format))
            written.append(readme)
        return written

    # -- whole summaries ------------------------------------------------------------------
    def record(self, stem: str, files: list[Path], timeline: bool = False) -> list[Path]:
        if files:
            (self.timelines if timeline else self.summaries).add(stem)
        return files

    def emit(self, stem: str, table) -> list[Path]:
        if table is None:
            return []
        header, df = table
        if self.summary_format == "json":
            return self.record(stem, json_per_device(self.out_dir, stem, header, df))
        return self.record(stem, write_csv(self.name(stem, "csv"), header, df,
                                           self.csv_slice_rows))

    def emit_devices(self, stem: str, tables: list) -> list[Path]:
        return self.emit(stem, merge_tables([with_device(self.dev_ids[j], table)
                                             for j, table in tables]))

    def emit_host(self, stem: str, table) -> list[Path]:
        """A summary of host data (api_statistic, fusion_op) in the merged file: the
        analysis exports it in every device dir, with that device's number, and the merge
        (MsprofOutputSummary._save_summary_data) appends the device dirs in sorted order --
        so one copy of the rows per device, device-major (the PROF's first device alone
        when it has no device dir)."""
        if table is None:
            return []
        return self.emit(stem, merge_tables([with_device(i, table)
                                             for i in self.dev_ids or [self.host_dev]]))
