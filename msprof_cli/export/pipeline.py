"""The one export pipeline (docs/export.md "One pipeline"): plan -> decode ->
derive -> outputs -> layouts -> sinks.

A text layout is a *table of outputs* (layouts/legacy.py, layouts/mindstudio.py): one
`Output` object per output file, each defined once and used by every layout that writes
the file.  The driver (`drive`) runs a plan's windows through them -- a plan of one window is
the whole collection, the same code in one pass:

* the layout's `Export.window(k, data)` derives what every output reads of window k (the
  selection, the op_summary rows, HCCL data, ...) in the export process: a `Window`;
* every output's `prepare(run, w)` runs in the export process (it opens its streams on
  first use -- their temporary files belong to this process -- and keeps the small
  carries, such as lane sets);
* then the outputs are fed by *job*: the outputs that share a job name are fed
  (`feed(run, w)`, in table order) in one forked worker while the export process decodes
  the next window; the worker hands the fed outputs back pickled, and they replace the
  export process's before the next window (so a carry such as op_summary's previous op or
  the msprof json's Free gap crosses the cut inside its output);
* at the end every output is closed in table order; the Chrome traces' final files are
  written by jobs of their own, all traces at once (`TraceOutput.close_jobs`).

A small plan (one window of at most `parallel.IN_PROCESS_TASKS` device tasks) runs all its
jobs in the export process (`parallel.in_process`): the same bytes, without forks.

An output that is fed in a job must not keep a reference to the run: it is pickled back.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from .decode.data import DeviceData, ProfData
from .derive.selection import in_api_window
from .outputs.comm_layer import CommData
from .plan import Plan
from .runtime.memory import release
from .runtime.parallel import JobPool, in_process, run_jobs


@dataclass
class DeviceWindow:
    """What the outputs read of one device in a window (derived by the layout)."""

    j: int  # the device's position in the export (Export.dev_ids)
    d: DeviceData
    tasks: pd.DataFrame  # the exported tasks (legacy: of the selection)
    rows: pd.DataFrame  # their op_summary rows (summaries.op_rows)
    its: pd.DataFrame  # the iterations of its step-trace lanes
    models: list[int]  # every model of those lanes
    comm: CommData | None = None  # HCCL data starting in the window (carry.window_comm)
    lanes: tuple | None = None  # the Communication lanes of the whole export
    comm_ops: bool = False  # the export has HCCL op executions
    # op_summary / op_statistic rows when they are not `rows` (legacy: the selected model's
    # tasks only, LegacyExport.of_model)
    model_rows: pd.DataFrame | None = None

    def summary_rows(self) -> pd.DataFrame:
        """The rows op_summary and op_statistic write."""
        return self.rows if self.model_rows is None else self.model_rows


@dataclass
class Window:
    """Window k of a plan as the outputs read it; `cache`: what several outputs of one job
    derive from it, made once per process (e.g. the window's Step Trace layer)."""

    k: int
    data: ProfData
    devs: list[DeviceWindow]
    apis: pd.DataFrame  # the host API rows of the window
    exec_base: dict[int, int] = field(default_factory=dict)  # legacy: executions before
    cache: dict = field(default_factory=dict)


class Output:
    """One output file of a layout (with its slices and per-device parts)."""

    job: str | None = None  # the job it is fed in (None: in the export process)

    def prepare(self, run: "Export", w) -> None:
        """Every window, in the export process, before the jobs start."""

    def feed(self, run: "Export", w) -> None:
        """Every window: append the window's part (in its job's worker)."""

    def close(self, run: "Export") -> list[Path]:
        """The final files, after the last window."""
        return []

    def discard(self) -> None:
        """Remove every temporary file (a failed export)."""


class TraceOutput(Output):
    """A Chrome trace: its final slices are written by jobs (`close_jobs`), the traces of a
    layout all at once, so the copies of their bodies share the cores."""

    def close_jobs(self, run: "Export") -> list[Callable[[], list[Path]]]:
        return []


class Export:
    """The shared state of one layout's export of a plan (subclassed by each layout):
    the options, what the first window fixes (selection, names, the first window's small
    tables), and `outputs`, the layout's table of outputs."""

    jobs: tuple[str, ...] = ()  # the job names in submission order
    # what the outputs read of the run (set by the layout; the first window fixes most)
    analysis_memcpy: bool = False  # ts memcpy tasks as the real analysis shows them
    app_pid: int = 0
    switches: dict[str, bool]  # the --reports layer switches
    use_flow: bool = False  # HostToDevice flows (host API rows exist)
    dev_ids: list[int]  # the devices, in export order (j)
    overlap_sorts: list[int]  # per device: its Overlap Analysis sort index
    first: ProfData | None = None  # what is kept of the first window (carry.slim_first)
    iterations: list[pd.DataFrame]  # per device: the exported iterations
    step_meta: list[list[str]]  # per device: its Step Trace metadata
    tx: pd.DataFrame  # the msproftx markers
    tx_layer: object = None  # msprof json's msproftx layer (None: none or switched off)
    tx_layer_all: object = None  # msprof_tx json's
    rows_end: int | None = None  # no rows at or after it (a legacy selection's end)
    model_filter: int | None = None  # fusion_op's model (legacy selection)
    api_window: tuple[int, int] | None = None  # msprof json's CANN rows (legacy step export)

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.outputs: list[Output] = []
        self.pending: tuple[JobPool, list[list[int]]] | None = None

    @property
    def one_window(self) -> bool:
        return len(self.plan) == 1

    def window(self, k: int, data):
        """What the outputs read of window k (the first window also sets up the run)."""
        raise NotImplementedError

    def output(self, stem: str) -> Output:
        """The layout's output of that stem (the first, when a stem has a csv and a json)."""
        return next(o for o in self.outputs if getattr(o, "stem", None) == stem)

    def record(self, stem: str, files: list[Path], timeline: bool = False) -> list[Path]:
        """Files an output wrote: a summary's, or a `timeline`'s (mindstudio's README lists
        what was written)."""
        return files

    def emit(self, stem: str, table) -> list[Path]:
        """A whole summary table `(header, frame)` (None: no file), named by the layout."""
        raise NotImplementedError

    def emit_devices(self, stem: str, tables: list) -> list[Path]:
        """A summary of per-device tables `[(j, table)]`."""
        raise NotImplementedError

    def emit_host(self, stem: str, table) -> list[Path]:
        """A summary of host data (api_statistic, fusion_op)."""
        raise NotImplementedError

    def cann_apis(self, w: Window) -> pd.DataFrame:
        """The host API rows of msprof json's CANN layer in window w: those of `api_window`
        in a step export (selection.api_window), else all; selected once per window (in
        `prepare`, which the job's fork inherits)."""
        apis = w.apis
        if self.api_window is None or apis is None or not len(apis):
            return apis
        if "cann_apis" not in w.cache:
            keep = in_api_window(apis["begin_local"], apis["end_local"], self.api_window)
            w.cache["cann_apis"] = apis if keep.all() else apis[keep].reset_index(drop=True)
        return w.cache["cann_apis"]

    def ended(self, k: int) -> bool:
        """Nothing of window k or later is exported (a step export that ended before it:
        the later windows are not decoded)."""
        return False

    def job_of(self, out: Output) -> str | None:
        """The job an output is fed in (a layout may merge jobs, e.g. for many windows)."""
        return out.job

    def finish(self) -> list[Path]:
        """Close every output in table order (the traces together, at the first one)."""
        written: list[Path] = []
        traces = [o for o in self.outputs if isinstance(o, TraceOutput)]
        closed_traces = False
        for out in self.outputs:
            if isinstance(out, TraceOutput):
                if not closed_traces:
                    for trace, files in zip(traces, close_traces(self, traces)):
                        written += self.record(trace.stem, files, timeline=True)
                    closed_traces = True
                    release()  # the last window's heap, before the global summaries
                continue
            written += out.close(self)
        return written

    def discard(self) -> None:
        if self.pending is not None:
            self.pending[0].cancel()  # no worker writes on after the files are removed
            self.pending = None
        for out in self.outputs:
            out.discard()


def close_traces(run: Export, traces: list[TraceOutput]) -> list[list[Path]]:
    """Every trace's final files (per trace), written by one batch of jobs; a job marked
    `inline` (the rename that ends a trace written in place, JsonStream.close_jobs) runs
    here, without a worker."""
    jobs = [t.close_jobs(run) for t in traces]
    flat = [j for js in jobs for j in js]
    heavy = iter(run_jobs([j for j in flat if not getattr(j, "inline", False)]))
    results = iter([j() if getattr(j, "inline", False) else next(heavy) for j in flat])
    return [[p for _ in js for p in next(results)] for js in jobs]


def _feed(run: Export, idx: list[int], w) -> list[Output]:
    outs = [run.outputs[i] for i in idx]
    for out in outs:
        out.feed(run, w)
    return outs


def collect(run: Export) -> None:
    """Wait for the running window's jobs and take their outputs back."""
    if run.pending is None:
        return
    pool, groups = run.pending
    run.pending = None
    for idx, outs in zip(groups, pool.results()):
        for i, out in zip(idx, outs):
            run.outputs[i] = out


def drive(run: Export, on_window: Callable[[int], None] | None = None) -> list[Path]:
    """Every window of the run's plan through its outputs, then their final files; on any
    failure the running jobs are stopped and every temporary output removed."""
    try:
        with in_process(plan_tasks(run.plan)):
            return _drive(run, on_window)
    except BaseException:
        run.discard()
        raise


def plan_tasks(plan: Plan) -> float:
    """The device tasks of a one-window plan (its decode, which the first window reads
    anyway); a windowed plan is big (inf)."""
    if not plan.whole:
        return float("inf")
    return sum(len(d.tasks) for d in plan.load(0).devices)


def _drive(run: Export, on_window: Callable[[int], None] | None) -> list[Path]:
    """Every window through the outputs, then the final files (see `drive`)."""
    for k in range(len(run.plan)):
        if k and run.ended(k):
            break
        w = run.window(k, run.plan.load(k))  # while the previous window's jobs run
        collect(run)  # the previous window's files are where this window continues
        for out in run.outputs:
            out.prepare(run, w)
        groups: dict[str, list[int]] = {name: [] for name in run.jobs}
        for i, out in enumerate(run.outputs):
            job = run.job_of(out)
            if job is None:
                out.feed(run, w)
            else:
                groups.setdefault(job, []).append(i)
        pool = JobPool()
        pool.caller_busy = False  # this process only decodes the next window meanwhile
        # ... or, in a one-window plan, nothing: it runs jobs itself while it waits
        pool.caller_runs = run.one_window
        order = [idx for idx in groups.values() if idx]
        for idx in order:  # the jobs bind their window now (a job may fork later)
            pool.submit(lambda idx=idx, w=w: _feed(run, idx, w))
        run.pending = (pool, order)
        del w
        release()
        if on_window is not None:
            on_window(k)
    collect(run)
    return run.finish()
