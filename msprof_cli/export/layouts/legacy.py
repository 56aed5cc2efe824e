"""Layout (a), the project default: ``PROF_X/device_{id}/summary|timeline/{name}_{suffix}``.

Per device, no ``Device_id`` column, one model and an iteration range (selection.py); names
carry ``_{dev}_{model}_{iter}`` with N/A parts omitted.  Every file of the seed's tables 1
and 2 is written exactly when its data exist (docs/export.md 6):
timelines msprof, ai_stack_time, thread_group (dynamic shape only), task_time, runtime_api,
ge, step_trace, hccl, msprof_tx; summaries op_summary, op_statistic, step_trace,
ai_stack_time, runtime_api, fusion_op, task_time, aicpu, l2_cache, msprof_tx and the tuning
advice ``prof_rule_{device_id}.json`` (always).

Each device is written from its own plan (plan.plan_devices; outputs.py for what every
text output carries across a cut).  What the legacy layout adds to the mindstudio one:

* the model / iteration selection is resolved on the first window (the iterations are
  global; the models of the host-known tasks come from the scan, `DeviceFacts.host_models`,
  or the decode), and every window exports what the selection keeps (`selection.in_window`);
* ai_stack_time, runtime_api and ge are built on the GE executions (stack.py): an execution
  never crosses a cut (no API does), its number per model is carried (`exec_base`);
  runtime_api keeps exact per-window aggregates; ai_stack_time and ge are written when any
  window has their data (a window's events are kept until then);
* task_time json is a lane per stream, the union of the windows' streams;
* the tuning advice gathers each window's op_summary rows in a RuleState (advice.py) and
  merges them in window order (no task crosses a cut, so busy intervals never do);
* HCCL data: the scan cuts outside the op executions and the computing gaps that hold one,
  so each window's Communication, Overlap Analysis and hccl json events are its own;
* dynamic-shape host data (any aging.* host record, `Plan.aging`): every window writes the
  thread_group json events of its APIs, the metadata of all their threads at the end.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from msprof_cli.raw import layouts as L
from msprof_cli.raw.profdir import device_id_of, result_dirs

from ..decode.comm_ops import number_comm_ops
from ..decode.data import DeviceData, ProfData
from ..derive import advice as A
from ..derive import advice_table as OT
from ..derive import advice_text as AT
from ..derive import msproftx as X
from ..derive import stack
from ..derive.fusion import fusion_op, fusion_rows, workspace_kb
from ..derive.hccl import hccl_layer, hccl_meta
from ..derive.selection import ModelChoice, Selection, in_window, select
from ..fmt import ts_sort_key
from ..outputs import comm_layer as CL
from ..outputs import overlap_layer as OV
from ..outputs import summaries as S
from ..outputs import timeline as T
from ..outputs import trace as TR
from ..outputs.carry import (TASK_ROW_JOBS, TASK_ROW_STEMS, L2Names, WindowTimeline,
                             close_json_streams, drive, msprof_meta, slim_first, timeline_window,
                             window_comm, window_fusion_rows, write_l2_cache, write_task_rows)
from ..plan import Plan
from ..runtime.memory import release
from ..runtime.parallel import JobPool
from ..sinks import writers as W
from ..sinks.streams import CsvStream, JsonRowsStream, JsonStream, summary_stream
from ..sinks.writers import AtomicFile, SliceNamer, write_csv, write_json_rows

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

    name_j, kind_j = TR.JCol(name), TR.JCol(kind)

    def render(idx: np.ndarray) -> list[str]:  # rendered per sorted chunk (timeline.Layer)
        st = stream[idx].tolist()
        w, f = TR.us_parts(start[idx])
        return list(map(tmpl.__mod__, zip(name_j.take(idx), st, w, f, TR.dur_text(dur[idx]),
                                          kind_j.take(idx), st, task[idx].tolist())))

    layer = TR.Layer([], keys=ts_sort_key(start), render=render)
    return meta, TR.EventStream([layer])


def task_scheduler_meta(app_pid: int, streams) -> list[str]:
    meta = [TR.meta("process_name", app_pid, 0, {"name": "Task Scheduler"})]
    for s in sorted(int(s) for s in streams):
        meta.append(TR.meta("thread_name", app_pid, s, {"name": f"Stream {s}"}))
        meta.append(TR.meta("thread_sort_index", app_pid, s, {"sort_index": s}))
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


def write_advice(dev: DeviceData, state: A.RuleState, advice: list[Advice] | None) -> Path:
    """``summary/prof_rule_{device_id}.json`` (always written; rules of
    step-trace-and-advice.md 5 over the exported op_summary rows, given as their RuleState)
    and its console report."""
    if state.cols is None:  # no op_summary rows: the rules see an empty table
        state.add(OT.OpTable.from_summary(pd.DataFrame(columns=S.OP_SUMMARY_BASE),
                                         dev.rd.ai_core_num))
    metrics = (dev.rd.ai_core_metrics or "") if dev.pmu_events else ""
    rule = state.rule_json(metrics)
    path = dev.rd.path / "summary" / f"prof_rule_{dev.device_id}.json"
    with AtomicFile(path) as fh:
        fh.write(json.dumps(rule, ensure_ascii=False, indent=4))
    if advice is not None:
        advice.append(Advice(path, rule, AT.render(rule, state.evidence(rule),
                                                      more_hint=f" in {path.name}",
                                                      max_names=CONSOLE_MAX_NAMES),
                             AT.brief(rule, state)))
    return path


JSON_STEMS = ("msprof", "task_time", "ai_stack_time", "thread_group", "runtime_api", "ge",
              "step_trace", "hccl")


def export_legacy(plan: Plan, *, model_id: int | None = None, iteration_id: int | None = None,
                  iteration_count: int = 1, reports: Path | None = None,
                  csv_slice_rows: int = W.CSV_SLICE_ROWS,
                  json_slice_events: int = W.JSON_SLICE_EVENTS,
                  advice: list[Advice] | None = None, on_window=None,
                  summary_format: str = "csv", choices: list[ModelChoice] | None = None,
                  with_rule: bool = True) -> list[Path]:
    """Every file of the legacy layout of the plan's device, window by window (one window:
    the whole).  Pipelined as mindstudio.export_mindstudio.  `choices` receives what was
    exported (ModelChoice); `with_rule`: write prof_rule_{device}.json (--all-models writes
    it for the default model only: its name has no model)."""
    run = _LegacyExport(plan, (model_id, iteration_id, iteration_count), reports,
                        csv_slice_rows, json_slice_events, summary_format)
    files = drive(run, len(plan), on_window, lambda: run.finish(advice, with_rule))
    if choices is not None and run.choice is not None:
        choices.append(run.choice)
    return files


class _LegacyExport:
    """The open outputs and the carried state of one device's legacy export."""

    def __init__(self, plan: Plan, args: tuple[int | None, int | None, int],
                 reports: Path | None, csv_slice_rows: int, json_slice_events: int,
                 summary_format: str = "csv") -> None:
        self.plan, self.args = plan, args
        self.summary_format = summary_format
        self.facts = plan.facts[0]
        self.dev_id = self.facts.rd.device_id or 0
        self.app_pid = plan.app_pid()
        self.aging = plan.aging()
        self.switches = TR.read_reports(reports)
        self.csv_slice_rows, self.json_slice_events = csv_slice_rows, json_slice_events
        self.tdir = self.facts.rd.path / "timeline"
        self.sdir = self.facts.rd.path / "summary"
        self.use_flow = plan.has_apis()
        self.sel: Selection | None = None  # resolved on the first window (_start)
        self.choice: ModelChoice | None = None  # what it is, for the console
        self.suffix = ""
        self.its: pd.DataFrame | None = None  # the selected iterations
        self.models: list[int] = []
        self.first: ProfData | None = None  # what is kept of the first window (slim_first)
        self.tx = pd.DataFrame()
        self.tx_layer: TR.Layer | None = None  # in msprof json (switch msproftx)
        self.workspace: pd.Series | None = None
        self.json: dict[str, JsonStream] = {}
        self.csv: dict[str, CsvStream | JsonRowsStream] = {}  # the summaries' streams
        self.timeline: WindowTimeline | None = None
        self.jobs: JobPool | None = None
        self.prev_op: tuple[int, int] | None = None  # (start, dur) of the last op row
        self.rules: A.RuleState | None = None
        self.op_stat: list[pd.DataFrame] = []
        self.rt_agg: list[pd.DataFrame] = []
        self.exec_base: dict[int, int] = {}  # per model: executions in the windows so far
        self.model_apis: list[pd.DataFrame] = []
        self.threads: set[int] = set()  # CANN lanes
        self.stream_ids: set[int] = set()  # Ascend Hardware / Task Scheduler lanes
        self.comm_seen = 0  # collectives of the windows so far (dataset.number_comm_ops)
        self.ge_threads: set[int] = set()
        self.rt_threads: set[int] = set()
        self.tg_threads: set[int] = set()  # thread_group processes (dynamic shape)
        self.has_stack = self.has_ge = self.any_tasks = self.any_op_rows = False
        self.l2_names = L2Names()
        # HCCL: the Communication lanes (groups, planes: also hccl json's lanes)
        self.any_comm_ops = False
        self.comm_groups: set[str] = set()
        self.comm_planes: set[int] = set()

    # step_json is where timeline_window writes the step_trace json events
    @property
    def step_json(self) -> JsonStream:
        return self.json["step_trace"]

    @property
    def step_outs(self) -> list[JsonStream]:
        return [self.json["step_trace"]]

    @property
    def timelines(self) -> list[WindowTimeline]:
        return [self.timeline]

    @property
    def overlap_sorts(self) -> list[int]:
        """This device's Overlap Analysis sort index among the PROF's device dirs
        (timeline.overlap_sorts): its file is the analysis's per-device file."""
        ids = [i for i in (device_id_of(p) for p in result_dirs(self.plan.prof))
               if i is not None] or [self.dev_id]
        return [OV.overlap_sorts(ids).get(self.dev_id, TR.SORT_OVERLAP)]

    def _name(self, where: Path, stem: str, ext: str) -> SliceNamer:
        return SliceNamer(where, stem, self.suffix, ext)

    def _start(self, data: ProfData) -> None:
        """The first window: selection, output names, the global small inputs."""
        d = data.devices[0]
        its = d.iterations
        known = self.facts.host_models
        if known is None:
            known = host_models(d)
        self.sel = sel = select(its, known, *self.args)
        self.suffix = sel.suffix(self.dev_id)
        names = stack.model_names(data)
        counts = its.groupby("model_id")["iteration_id"].nunique() if len(its) else {}
        self.choice = ModelChoice(self.dev_id, sel.model_id, sel.first, sel.last,
                                  self.args[0] is None, [
                                      (int(m), names.get(int(m), ""), int(n))
                                      for m, n in sorted(dict(counts).items())])
        if sel.model_id is not None:
            its = its[(its["model_id"] == sel.model_id) & (its["iteration_id"] >= sel.first)
                      & (its["iteration_id"] <= sel.last)].reset_index(drop=True)
        self.its = its
        self.models = sorted(int(x) for x in its["model_id"].unique())
        self.first = slim_first(data)
        self.tx = X.markers(data)
        layer_tx = X.tx_layer(self.tx, self.app_pid, X.process_name(data))
        if len(layer_tx) and self.switches.get("msproftx", True):
            self.tx_layer = layer_tx
        fusion = fusion_rows(data, {})  # the workspace per fused op needs no model ids
        self.workspace = workspace_kb(fusion) if len(fusion) else None
        self.rules = A.RuleState(d.rd.ai_core_num, self.workspace)
        # the streams are made here: their temporary files belong to this process
        self.json = {stem: JsonStream(self._name(self.tdir, stem, "json"),
                                      self.json_slice_events) for stem in JSON_STEMS}
        self.timeline = WindowTimeline(self.json["msprof"], [self.dev_id], self.app_pid,
                                       TR.layer_slots(1)["overlap"], self.overlap_sorts)
        self.timeline.parallel = len(self.plan) == 1

    def _csv(self, stem: str, header: list[str]) -> None:
        if stem not in self.csv:
            self.csv[stem] = summary_stream(self.summary_format,
                                            self._name(self.sdir, stem, "csv"), header,
                                            self.csv_slice_rows)

    def window(self, k: int) -> None:
        data = self.plan.load(k)  # while the previous window's jobs run
        d = data.devices[0]
        self.comm_seen = number_comm_ops(d, self.comm_seen)
        if self.sel is None:
            self._start(data)
        t = d.tasks
        keep = in_window(t["start_local"], t["end_local"], self.sel)
        tasks = t if keep.all() else t[keep].reset_index(drop=True)
        rows = S.op_rows(d, tasks)
        apis = data.host.apis
        comm_w, lanes = self._comm(data, d, k)
        base = dict(self.exec_base)  # the executions before this window, per model
        me = apis[(apis["level"] == L.LEVEL_MODEL) & (apis["type"] == L.MODEL_EXECUTE)]
        for m, c in me["item_id"].astype(np.int64).value_counts().items():
            self.exec_base[int(m)] = self.exec_base.get(int(m), 0) + int(c)
        self.collect()  # the previous window's files are where this window continues them
        end = self.sel.end_ns  # tasks starting at or after the selection's end are not kept
        self.timeline.more_rows = end is None or self.plan.cuts[k] < end
        if len(tasks):
            self._csv("task_time", S.TASK_TIME)
        if d.has_host_ops and len(rows):
            self._csv("op_summary", S.op_summary_header(d))
        if d.aicpu is not None and len(d.aicpu):
            self._csv("aicpu", S.AICPU)
        self._csv("ai_stack_time", stack.AI_STACK_TIME)
        pool = JobPool()
        pool.caller_busy = False  # this process only decodes the next window meanwhile
        # the jobs bind their inputs now: jobs that wait for a free core fork later
        pool.submit(lambda d=d, t=tasks, r=rows, a=apis, c=comm_w, ln=lanes:
                    self._timeline(k, d, t, r, a, c, ln))
        # one window: nothing is decoded meanwhile, so the task rows take two jobs
        for stems in (TASK_ROW_JOBS if len(self.plan) == 1 else (TASK_ROW_STEMS,)):
            pool.submit(lambda d=d, t=tasks, r=rows, st=stems: self._summaries(d, t, r, st))
        pool.submit(lambda x=data, d=d, t=tasks: self._host(x, d, t, base))
        pool.submit(lambda d=d, t=tasks, c=comm_w: self._task_time(d, t, c))
        self.jobs = pool
        if d.has_host_ops and len(rows):
            self.prev_op = (int(rows["start_local"].to_numpy(np.int64)[-1]),
                            int(rows["dur_ns"].to_numpy(np.int64)[-1]))
        if len(apis):
            self.model_apis.append(apis[(apis["level"] == L.LEVEL_MODEL)])
            self.threads.update(int(x) for x in apis["thread_id"].unique())
        self.stream_ids.update(int(s) for s in tasks["stream_id"].unique())
        self.any_tasks |= len(tasks) > 0
        self.any_op_rows |= bool(d.has_host_ops and len(rows))  # Overlap Analysis' Computing
        if self.facts.l2_records:
            self.l2_names.add(tasks)
        del data, d, t, tasks, rows, apis, me
        release()

    def _comm(self, data: ProfData, d, k: int) -> tuple[CL.CommData | None, tuple | None]:
        """The HCCL data of window k (outputs.window_comm); the lanes are gathered."""
        comm, lanes, ops = window_comm(data, d, self.sel, *self.plan.bounds(k))
        if comm is not None:
            self.comm_groups.update(lanes[0])
            self.comm_planes.update(lanes[1])  # also hccl json's: the selected steps'
            self.any_comm_ops |= ops
        return comm, lanes

    def collect(self) -> None:
        """Wait for the running window's jobs and take their outputs' state back."""
        if self.jobs is None:
            return
        pool, self.jobs = self.jobs, None
        (timeline, step_json), *rows, host, (task_json, hccl_json) = pool.results()
        self.timeline, self.json["msprof"], self.json["step_trace"] = \
            timeline, timeline.out, step_json
        self.json["task_time"], self.json["hccl"] = task_json, hccl_json
        for csv, op_stat, rules in rows:
            self.csv.update(csv)
            if op_stat is not None:
                self.op_stat.append(op_stat)
            if rules is not None:
                self.rules.merge(rules)
        json_out, stack_csv, agg, flags, ge_threads, rt_threads, tg_threads = host
        self.json.update(json_out)
        self.csv["ai_stack_time"] = stack_csv
        if agg is not None:
            self.rt_agg.append(agg)
        self.has_stack |= flags[0]
        self.has_ge |= flags[1]
        self.ge_threads |= ge_threads
        self.rt_threads |= rt_threads
        self.tg_threads |= tg_threads

    # -- the jobs of a window ------------------------------------------------------------
    def _timeline(self, k: int, d, tasks: pd.DataFrame, rows, apis: pd.DataFrame,
                  comm: CL.CommData | None, lanes) -> tuple[WindowTimeline, JsonStream]:
        """msprof json and step_trace json (a JobPool job)."""
        timeline_window(self, k, [(d, tasks, rows, self.its, self.models, comm, lanes)],
                        apis)
        return self.timeline, self.step_json

    def _summaries(self, d, tasks: pd.DataFrame, rows,
                   stems: tuple[str, ...] = TASK_ROW_STEMS):
        """task_time, op_summary and aicpu rows (`stems` of them), op_statistic aggregates
        and the advice state of the window's op_summary rows (a JobPool job)."""
        rules = A.RuleState(d.rd.ai_core_num, self.workspace) \
            if "op_summary" in stems else None
        csv = {k: v for k, v in self.csv.items() if k in stems}
        op_stat = write_task_rows(csv, d, tasks, rows, self.prev_op, rules=rules,
                                  stems=stems)
        return csv, op_stat, rules

    def _host(self, data: ProfData, d, tasks: pd.DataFrame, base: dict[int, int]):
        """ai_stack_time (json and csv), runtime_api json and aggregates, ge json of the
        window's executions (a JobPool job)."""
        scope = stack.build_scope(data, d, self.sel, tasks, base)
        app_pid = self.app_pid
        if len(scope.execs):  # (no host API at all: a Scope of empty frames)
            self._events("ai_stack_time", stack.ai_stack_layers(scope, app_pid))
            self._events("ge", stack.ge_layers(scope, app_pid))
            self.csv["ai_stack_time"].write(stack.ai_stack_rows(scope))
        self._events("runtime_api", [stack.runtime_layer(scope, app_pid)])
        tg_threads: set[int] = set()
        if self.aging:  # dynamic shape: thread_group (HostTables.aging of the whole)
            tg = stack.thread_group_layer(scope)
            if tg is not None:
                tg_threads = set(tg[0])
                self._events("thread_group", [tg[1]])
        flags = (stack.has_stack_data(scope), stack.has_ge_data(scope))
        ge_threads = set(int(x) for x in scope.execs["thread_id"].unique()) \
            if len(scope.execs) else set()
        rt_threads = set(int(x) for x in scope.runtime["thread_id"].unique()) \
            if len(scope.runtime) else set()
        json_out = {s: self.json[s] for s in ("ai_stack_time", "thread_group", "runtime_api",
                                              "ge")}
        return (json_out, self.csv["ai_stack_time"], stack.runtime_agg(scope), flags,
                ge_threads, rt_threads, tg_threads)

    def _task_time(self, d, tasks: pd.DataFrame, comm: CL.CommData | None
                   ) -> tuple[JsonStream, JsonStream]:
        """task_time json and hccl json events (a JobPool job)."""
        if len(tasks):
            _, events = task_scheduler_json(d, tasks, self.app_pid)
            self._events("task_time", [], events)
        if comm is not None and len(comm.steps):
            self._events("hccl", [hccl_layer(comm.steps, comm.step_args, self.app_pid)])
        return self.json["task_time"], self.json["hccl"]

    def _events(self, stem: str, layers: list[TR.Layer], stream: TR.EventStream | None = None
                ) -> None:
        if stream is None:
            layers = [lay for lay in layers if len(lay)]
            if not layers:
                return
            stream = TR.EventStream(layers)
        self.json[stem].write_stream(stream, 0, len(stream), len(self.plan) == 1)

    # -- the end -------------------------------------------------------------------------
    def finish(self, advice: list[Advice] | None, with_rule: bool = True) -> list[Path]:
        self.timeline.finish()
        app_pid, sw = self.app_pid, self.switches
        d0 = self.first.devices[0]
        step_meta = T.step_layer(d0, self.its.drop_duplicates("model_id"), app_pid).meta
        meta = {
            "msprof": msprof_meta(self.app_pid, self.first, sw, self.threads, [self.stream_ids],
                                  self.tx_layer,
                                  [step_meta if sw.get("step_trace", True) else []],
                                  [self.any_op_rows or self.any_comm_ops],
                                  [CL.comm_meta(self.dev_id, app_pid, (
                                      sorted(self.comm_groups), sorted(self.comm_planes)))
                                   if self.comm_groups or self.comm_planes else None],
                                  self.overlap_sorts),
            "step_trace": step_meta,
            "task_time": task_scheduler_meta(app_pid, self.stream_ids),
            "ai_stack_time": stack.ai_stack_meta(app_pid),
            "thread_group": stack.thread_group_meta(self.tg_threads),
            "runtime_api": stack.runtime_meta(app_pid, self.rt_threads),
            "ge": stack.ge_meta(app_pid, self.ge_threads),
            "hccl": hccl_meta(app_pid, self.comm_planes),
        }
        if not self.has_stack:
            self.json.pop("ai_stack_time").discard()
            self.csv.pop("ai_stack_time").discard()
        if not self.has_ge:
            self.json.pop("ge").discard()
        # timelines, then summaries
        written: list[Path] = []
        stems = [stem for stem in ("msprof", "task_time", "ai_stack_time", "thread_group",
                                   "runtime_api", "ge", "step_trace", "hccl")
                 if stem in self.json]
        for stem, files in close_json_streams([(stem, self.json[stem], meta[stem])
                                               for stem in stems]):
            written += files
            del self.json[stem]
        if len(self.tx):  # msprof_tx json: the msproftx layer alone (small)
            layer = X.tx_layer(self.tx, app_pid, X.process_name(self.first))
            m, events = TR.assemble_stream([layer])
            written += W.write_events(self._name(self.tdir, "msprof_tx", "json"), m, events,
                                      len(events), self.json_slice_events)
        release()  # the last window's heap, before the global summaries
        if "ai_stack_time" in self.csv:
            written += self.csv.pop("ai_stack_time").close()
        if self.rt_agg:
            written += self._emit("runtime_api", stack.runtime_api_of(
                stack.combine_runtime(self.rt_agg), self.app_pid))
        written += self._rest()
        for stem in ("task_time", "op_summary"):
            if stem in self.csv:
                written += self.csv.pop(stem).close()
        if with_rule:
            written.append(write_advice(d0, self.rules, advice))
        return written

    def _emit(self, stem: str, table) -> list[Path]:
        if table is None:
            return []
        header, df = table
        if self.summary_format == "json":
            return write_json_rows(self._name(self.sdir, stem, "json").single(), header, df)
        return write_csv(self._name(self.sdir, stem, "csv"), header, df, self.csv_slice_rows)

    def _rest(self) -> list[Path]:
        """The summaries of _DeviceContext.summaries("rest"), in its order, from the
        windows' accumulators and the global small inputs."""
        out: list[Path] = []
        if self.op_stat:
            out += self._emit("op_statistic",
                              S.op_statistic(None, S.combine_op_statistic(self.op_stat)))
        if len(self.its):
            out += self._emit("step_trace", S.step_trace(self.its))
        # fusion_op: the fusion records against the model spans of every window
        out += self._emit("fusion_op", fusion_op(
            window_fusion_rows(self.plan, self.first, self.model_apis), self.sel.model_id))
        if "aicpu" in self.csv:  # a window had AI CPU records: the file, even without rows
            out += self.csv.pop("aicpu").close(empty_file=True)
        if self.facts.l2_records:
            l2 = summary_stream(self.summary_format, self._name(self.sdir, "l2_cache", "csv"),
                                S.L2_CACHE, self.csv_slice_rows)
            write_l2_cache([l2], self.plan, [self.l2_names],
                           restrict=self.sel.start_ns is not None)
            out += l2.close()
        out += self._emit("msprof_tx", X.tx_table(self.tx))
        return out

    def discard(self) -> None:
        if self.jobs is not None:
            self.jobs.cancel()  # no worker writes on after the files are removed
            self.jobs = None
        for st in (*self.json.values(), *self.csv.values()):
            st.discard()
