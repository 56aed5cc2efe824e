"""Layout (a), the project default: ``PROF_X/device_{id}/summary|timeline/{name}_{suffix}``.

Per device, no ``Device_id`` column, one model and an iteration range (selection.py); names
carry ``_{dev}_{model}_{iter}`` with N/A parts omitted.  Every file of the seed's tables 1
and 2 is written exactly when its data exist (docs/export.md 6): timelines msprof,
ai_stack_time, thread_group (dynamic shape only), task_time, runtime_api, ge, step_trace,
hccl, msprof_tx; summaries op_summary, op_statistic, step_trace, ai_stack_time, runtime_api,
fusion_op, task_time, aicpu, l2_cache, msprof_tx and the tuning advice
``prof_rule_{device_id}.json`` (always).

The layout is its table of outputs (`LegacyExport.table`, pipeline.py), each device written
from its own plan (plan.plan_devices).  What it adds to the mindstudio layout:

* the model / iteration selection is resolved on the first window (the iterations are
  global; the models of the host-known tasks come from the scan, `DeviceFacts.host_models`,
  or the decode), and every window exports what the selection keeps (`selection.in_window`);
* the GE executions' number per model is carried across windows (`exec_base`, stack.py);
* the tuning advice is fed by the op_summary output with its rows as written, in window
  order (no task crosses a cut, so busy intervals never do).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from msprof_cli.errors import ExportError
from msprof_cli.raw import layouts as L
from msprof_cli.raw import sampling
from msprof_cli.raw.profdir import device_id_of, result_dirs

from ..decode.comm_ops import number_comm_ops
from ..decode.data import DeviceData, ProfData
from ..derive import advice as A
from ..derive import msproftx as X
from ..derive import stack
from ..derive.fusion import fusion_rows, workspace_kb
from ..derive.selection import (ModelChoice, Selection, api_window, in_window, iteration_counts,
                               select)
from ..outputs import overlap_layer as OV
from ..outputs import aicpu_table as AT
from ..outputs import summaries as S
from ..outputs import timeline as T
from ..outputs import trace as TR
from ..outputs.carry import WindowTimeline, slim_first, window_comm
from ..outputs.host_json import (HOST, TASK_JSON, AiStackTimeCsv, AiStackTimeJson, GeJson, HcclJson,
                                 RuntimeApiCsv, RuntimeApiJson, TaskTimeJson, ThreadGroupJson)
from ..outputs.memory_files import MemoryFiles, has_npu_mem
from ..outputs.msprof_json import TIMELINE, MsprofJson, StepTraceJson, TxJson
from ..outputs.tables import Advice, FusionOp, L2Cache, MsprofTxCsv, ProfRule, StepTraceCsv
from ..outputs.task_rows import OP_ROWS, TASK_ROWS, AicpuCsv, OpStatistic, OpSummaryCsv, TaskTimeCsv
from ..pipeline import DeviceWindow, Export, Output, Window, drive
from ..plan import Plan
from ..sinks import writers as W
from ..sinks.device_rows import SINGLE, DeviceRows
from ..sinks.files import SliceNamer
from ..sinks.streams import JsonStream, summary_stream
from ..sinks.writers import write_csv, write_json_rows

__all__ = ["Advice", "export_legacy", "host_models"]


def host_models(dev: DeviceData) -> set[int]:
    return set(int(m) for m in dev.tasks.loc[dev.tasks["host_known"], "model_id"].unique())


def default_rows(prof: Path, dev: DeviceData) -> tuple[int | None, pd.DataFrame]:
    """The model a default export of `dev` chooses and the tasks its op_summary holds (as
    `LegacyExport.window` and `of_model` keep them), for the summary's advice."""
    try:
        sel = select(dev.iterations, host_models(dev), None, None, 1,
                     training=sampling.training_models(prof))
    except ExportError:
        return None, dev.tasks
    t = dev.tasks
    keep = in_window(t["start_local"], t["end_local"], sel) & ~other_models(t, sel.model_id)
    return sel.model_id, t if keep.all() else t[keep].reset_index(drop=True)


def other_models(tasks: pd.DataFrame, model_id: int | None) -> np.ndarray:
    """The tasks that are not model `model_id`'s rows: another model's, when their host data
    says so (tasks without host data stay); none when no model is selected."""
    if model_id is None or "model_id" not in tasks or not len(tasks):
        return np.zeros(len(tasks), bool)
    other = tasks["model_id"].to_numpy(np.int64) != model_id
    if "host_known" in tasks:
        other &= tasks["host_known"].to_numpy(bool)
    return other


def export_legacy(plan: Plan, *, model_id: int | None = None, iteration_id: int | None = None,
                  iteration_count: int = 1, reports: Path | None = None,
                  csv_slice_rows: int = W.CSV_SLICE_ROWS,
                  json_slice_events: int = W.JSON_SLICE_EVENTS,
                  advice: list[Advice] | None = None, on_window=None,
                  summary_format: str = "csv", choices: list[ModelChoice] | None = None,
                  with_rule: bool = True) -> list[Path]:
    """Every file of the legacy layout of the plan's device, window by window (one window:
    the whole).  `choices` receives what was exported (ModelChoice); `with_rule`: write
    prof_rule_{device}.json (--all-models writes it for the default model only: its name
    has no model)."""
    run = LegacyExport(plan, (model_id, iteration_id, iteration_count), reports,
                       csv_slice_rows, json_slice_events, summary_format, advice, with_rule)
    files = drive(run, on_window)
    if choices is not None and run.choice is not None:
        choices.append(run.choice)
    return files


class LegacyExport(Export):
    """One device's legacy export: the selection, names and small inputs of the first
    window, and the table of outputs."""

    # submitted longest first (at 50k: msprof json 0.44 s, op_summary 0.39 s, host 0.22 s,
    # task_time json 0.14 s, task_time csv 0.10 s): the two lanes of a one-window plan
    # (parallel.JobPool._lanes) take them in this order and end about together
    jobs = (TIMELINE, OP_ROWS, HOST, TASK_JSON, TASK_ROWS)
    analysis_memcpy = False  # the ts memcpy tasks are tasks like the others here

    def __init__(self, plan: Plan, args: tuple[int | None, int | None, int],
                 reports: Path | None, csv_slice_rows: int, json_slice_events: int,
                 summary_format: str = "csv", advice: list[Advice] | None = None,
                 with_rule: bool = True) -> None:
        super().__init__(plan)
        self.args, self.summary_format = args, summary_format
        self.advice, self.with_rule = advice, with_rule
        self.facts = plan.facts[0]
        self.dev_id = self.facts.rd.device_id or 0
        self.dev_ids = [self.dev_id]
        self.app_pid = plan.app_pid()
        self.switches = TR.read_reports(reports)
        self.csv_slice_rows, self.json_slice_events = csv_slice_rows, json_slice_events
        self.tdir = self.facts.rd.path / "timeline"
        self.sdir = self.facts.rd.path / "summary"
        self.use_flow = plan.has_apis()
        ids = [i for i in (device_id_of(p) for p in result_dirs(plan.prof))
               if i is not None] or [self.dev_id]
        # this device's Overlap Analysis sort index among the PROF's device dirs: its file
        # is the analysis's per-device file
        # (a device dir with device memory samples has an NPU MEM lane before it)
        self.npu_mem_sorts = {i: 0 for i in ids
                              if has_npu_mem(plan.prof / f"device_{i}" / "data")}
        self.overlap_sorts = [OV.overlap_sorts(ids, self.npu_mem_sorts).get(self.dev_id,
                                                                           TR.SORT_OVERLAP)]
        self.sel: Selection | None = None  # resolved on the first window (_start)
        self.choice: ModelChoice | None = None  # what it is, for the console
        self.suffix = ""
        self.first: ProfData | None = None
        self.iterations: list[pd.DataFrame] = []  # the selected iterations
        self.models: list[int] = []
        self.step_meta: list[list[str]] = []
        self.tx = pd.DataFrame()
        self.tx_layer: TR.Layer | None = None  # in msprof json (switch msproftx)
        self.tx_layer_all: TR.Layer | None = None  # msprof_tx json
        self.rows_end: int | None = None
        self.model_filter: int | None = None
        self.exec_base: dict[int, int] = {}  # per model: executions in the windows so far
        self.comm_seen = 0  # collectives of the windows so far (comm_ops.number_comm_ops)

    def job_of(self, out: Output) -> str | None:
        # one window: nothing is decoded meanwhile, so the task rows take two jobs
        return OP_ROWS if out.job == TASK_ROWS and not self.one_window else out.job

    def ended(self, k: int) -> bool:
        # a step export: every task it keeps starts before rows_end and every CANN row at
        # or before the API window's end; a window starting after both holds none of them
        if self.api_window is None or self.rows_end is None:
            return False
        return self.plan.cuts[k] > max(self.rows_end, self.api_window[1])

    def name(self, where: Path, stem: str, ext: str) -> SliceNamer:
        return SliceNamer(where, stem, self.suffix, ext)

    def window(self, k: int, data: ProfData) -> Window:
        d = data.devices[0]
        self.comm_seen = number_comm_ops(d, self.comm_seen)
        if self.sel is None:
            self._start(data)
        t = d.tasks
        keep = in_window(t["start_local"], t["end_local"], self.sel)
        tasks = t if keep.all() else t[keep].reset_index(drop=True)
        apis = data.host.apis
        comm, lanes, ops = window_comm(data, d, self.sel, *self.plan.bounds(k))
        base = dict(self.exec_base)  # the executions before this window, per model
        if apis is not None and "level" in apis:  # device-only data has no host API table
            me = apis[(apis["level"] == L.LEVEL_MODEL) & (apis["type"] == L.MODEL_EXECUTE)]
            for m, c in me["item_id"].astype(np.int64).value_counts().items():
                self.exec_base[int(m)] = self.exec_base.get(int(m), 0) + int(c)
        mine = self.of_model(tasks)
        dw = DeviceWindow(0, d, tasks, S.op_rows(d, tasks), self.iterations[0], self.models,
                          comm, lanes, ops,
                          model_rows=None if mine is tasks else S.op_rows(d, mine))
        return Window(k, data, [dw], apis, base)

    def of_model(self, tasks: pd.DataFrame) -> pd.DataFrame:
        """The tasks of the selected model (op_summary and op_statistic rows): the real
        analysis joins a step export's tasks with the GE task data of the model's (iteration,
        model) pairs only (parse_aicore_op_summary_calculator._get_ge_data,
        MsprofIteration.get_index_id_list_with_index_and_model in Ascend/msprof analysis/),
        so the single-op tasks and other models' tasks inside the window are not its rows
        (task_time and the timelines keep the whole window).  Tasks without host data stay."""
        other = other_models(tasks, self.model_filter)
        return tasks if not other.any() else tasks[~other].reset_index(drop=True)

    def _start(self, data: ProfData) -> None:
        """The first window: selection, output names, the global small inputs, outputs."""
        d = data.devices[0]
        its = d.iterations
        known = self.facts.host_models
        if known is None:
            known = host_models(d)
        training = sampling.training_models(self.plan.prof)
        self.sel = sel = select(its, known, *self.args, training=training)
        self.suffix = sel.suffix(self.dev_id)
        self.rows_end, self.model_filter = sel.end_ns, sel.model_id
        if self.args[1] is not None:  # a step export: the CANN rows of its steps
            self.api_window = api_window(its, sel)
        names = stack.model_names(data)
        counts = iteration_counts(its)
        self.choice = ModelChoice(self.dev_id, sel.model_id, sel.first, sel.last,
                                  self.args[0] is None, [
                                      (int(m), names.get(int(m), ""), int(n))
                                      for m, n in sorted(counts.items())], training)
        if sel.model_id is not None:
            its = its[(its["model_id"] == sel.model_id) & (its["iteration_id"] >= sel.first)
                      & (its["iteration_id"] <= sel.last)].reset_index(drop=True)
        self.iterations = [its]
        self.models = sorted(int(x) for x in its["model_id"].unique())
        self.step_meta = [T.step_meta(d, self.models, self.app_pid)]
        self.first = slim_first(data)
        self.tx = X.markers(data)
        self.tx_layer_all = X.tx_layer(self.tx, self.app_pid, X.process_name(data))
        if len(self.tx_layer_all) and self.switches.get("msproftx", True):
            self.tx_layer = self.tx_layer_all
        fusion = fusion_rows(data, {})  # the workspace per fused op needs no model ids
        workspace = workspace_kb(fusion) if len(fusion) else None
        self.outputs = self.table(A.RuleState(d.rd.ai_core_num, workspace))

    def table(self, rules: A.RuleState) -> list[Output]:
        """The legacy layout's outputs; their order is the order they are closed in (the
        traces together, at the first)."""
        def trace(stem: str) -> JsonStream:  # made here: its temporary files are ours
            return JsonStream(self.name(self.tdir, stem, "json"), self.json_slice_events)

        def rows(stem: str, header: list[str]) -> DeviceRows:
            return DeviceRows(SINGLE, self.name(self.sdir, stem, "csv"), header,
                              self.dev_ids, self.csv_slice_rows, self.summary_format)

        msprof = trace("msprof")
        timeline = WindowTimeline(msprof, [self.dev_id], self.app_pid,
                                  TR.layer_slots(1)["overlap"], self.overlap_sorts)
        op_summary = OpSummaryCsv(rows("op_summary", []), 1, rules=rules)
        out: list[Output] = [
            MsprofJson(msprof, [timeline], None, 1),
            TaskTimeJson(trace("task_time")),
            AiStackTimeJson(trace("ai_stack_time")),
            ThreadGroupJson(trace("thread_group"), self.plan.aging()),
            RuntimeApiJson(trace("runtime_api")),
            GeJson(trace("ge")),
            StepTraceJson([trace("step_trace")]),
            HcclJson(trace("hccl")),
            TxJson(self.name(self.tdir, "msprof_tx", "json"), self.json_slice_events),
            AiStackTimeCsv(summary_stream(self.summary_format,
                                          self.name(self.sdir, "ai_stack_time", "csv"),
                                          stack.AI_STACK_TIME, self.csv_slice_rows)),
            RuntimeApiCsv(),
            OpStatistic(1),
            StepTraceCsv(),
            FusionOp(),
            AicpuCsv(rows("aicpu", AT.AICPU)),
            L2Cache(rows("l2_cache", S.L2_CACHE), 1, restrict=self.sel.start_ns is not None),
            MsprofTxCsv(),
            TaskTimeCsv(rows("task_time", S.TASK_TIME)),
            MemoryFiles(merged=False),
            op_summary,
        ]
        if self.with_rule:
            out.append(ProfRule(op_summary, self.advice))
        return out

    # -- whole summaries ------------------------------------------------------------------
    def emit(self, stem: str, table) -> list[Path]:
        if table is None:
            return []
        header, df = table
        if self.summary_format == "json":
            return write_json_rows(self.name(self.sdir, stem, "json").single(), header, df)
        return write_csv(self.name(self.sdir, stem, "csv"), header, df, self.csv_slice_rows)

    def emit_devices(self, stem: str, tables: list) -> list[Path]:
        return self.emit(stem, tables[0][1]) if tables else []

    def emit_host(self, stem: str, table) -> list[Path]:
        return self.emit(stem, table)
