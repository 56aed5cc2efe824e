"""The per-task summaries, appended window by window in time order (both layouts):
task_time, op_summary (with the tuning advice's rule state, legacy), aicpu, and op_statistic
(exact per-window aggregates, combined at the end).

Each writes its rows through a sinks.device_rows.DeviceRows (one file per device, or the
devices merged device-major), in chunks of writers.CHUNK_ROWS.  Two things cross a cut
inside these outputs: op_summary's previous op (the wait time of a window's first row is the
gap after it) and the advice's RuleState (legacy: fed with the op_summary rows as written).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..derive import advice as A
from ..derive import advice_table as OT
from ..pipeline import Export, Output
from ..sinks import writers as W
from ..sinks.device_rows import DeviceRows
from . import aicpu_table as AT
from . import summaries as S

# the jobs of the per-task rows: a one-window plan writes op_summary (with aicpu,
# op_statistic; ~60 % of the rendering) and task_time in two jobs, a windowed plan in one
OP_ROWS, TASK_ROWS = "op_rows", "task_rows"


class TaskTimeCsv(Output):
    """task_time: a row per exported task; `analysis` (mindstudio): the ts memcpy tasks'
    rows after each device's others, as the analysis writes them (summaries.task_time_memcpy)."""

    stem = "task_time"
    job = TASK_ROWS

    def __init__(self, sink: DeviceRows, analysis: bool = False) -> None:
        self.sink, self.analysis = sink, analysis

    def prepare(self, run: Export, w) -> None:
        for dw in w.devs:
            if len(dw.tasks):
                self.sink.ensure(dw.j)
                if self.analysis and (~S.not_memcpy(dw.tasks)).any():
                    self.sink.ensure_extra(dw.j)

    def feed(self, run: Export, w) -> None:
        for dw in w.devs:
            tasks, copies = dw.tasks, None
            if self.analysis:
                mc = ~S.not_memcpy(tasks)
                if mc.any():
                    copies, tasks = tasks[mc], tasks[~mc]
            for lo in range(0, len(tasks), W.CHUNK_ROWS):
                self.sink.write(dw.j, S.task_time(dw.d, tasks.iloc[lo:lo + W.CHUNK_ROWS])[1])
            if copies is not None:
                self.sink.write(dw.j, S.task_time_memcpy(dw.d, copies)[1], extra=True)

    def close(self, run: Export) -> list[Path]:
        return run.record(self.stem, self.sink.close())

    def discard(self) -> None:
        self.sink.discard()


class OpSummaryCsv(Output):
    """op_summary: a row per op task (summaries.op_rows) of a device with host data;
    `header`: the file's columns (mindstudio: the union over the devices, N/A where a device
    has no such column; legacy: the first window's); `rules`: the advice's RuleState fed with
    the rows as written (legacy; None: no advice)."""

    stem = "op_summary"
    job = OP_ROWS

    def __init__(self, sink: DeviceRows, n_devices: int, union_header: bool = False,
                 rules: A.RuleState | None = None) -> None:
        self.sink, self.union_header, self.rules = sink, union_header, rules
        self.prev_op: list[tuple[int, int] | None] = [None] * max(n_devices, 1)

    def prepare(self, run: Export, w) -> None:
        for dw in w.devs:
            if dw.d.has_host_ops and len(dw.summary_rows()):
                if not self.sink.opened and not self.union_header:
                    self.sink.header = S.op_summary_header(dw.d)
                self.sink.ensure(dw.j)

    def feed(self, run: Export, w) -> None:
        for dw in w.devs:
            d, rows = dw.d, dw.summary_rows()
            if not (d.has_host_ops and len(rows)):
                continue
            start = rows["start_local"].to_numpy(np.int64)
            prev = self.prev_op[dw.j]
            rules = None if self.rules is None else \
                A.RuleState(d.rd.ai_core_num, self.rules.workspace)
            if rules is not None:
                rules.model_spans = A.model_spans(w.apis)
            for lo in range(0, len(rows), W.CHUNK_ROWS):
                hi = min(lo + W.CHUNK_ROWS, len(rows))
                part = S.op_summary(d, rows, lo, hi)[1]
                if lo == 0 and prev is not None:  # the wait after the last window
                    gap = max(int(start[0]) - prev[0] - prev[1], 0)
                    part.iloc[0, part.columns.get_loc("Task Wait Time(us)")] = \
                        S.dur_str(np.array([gap]))[0]
                if rules is not None:
                    rules.add(OT.OpTable.from_summary(part, d.rd.ai_core_num, start[lo:hi]))
                if self.union_header and len(part.columns) != len(self.sink.header):
                    part = part.reindex(columns=self.sink.header, fill_value="N/A")
                self.sink.write(dw.j, part)
            if rules is not None:
                self.rules.merge(rules)
            self.prev_op[dw.j] = (int(start[-1]), int(rows["dur_ns"].to_numpy(np.int64)[-1]))

    def close(self, run: Export) -> list[Path]:
        return run.record(self.stem, self.sink.close())

    def discard(self) -> None:
        self.sink.discard()


class AicpuCsv(Output):
    """aicpu: the AI CPU tasks' rows; the file exists when any window had AI CPU records,
    even without rows (`analysis`, mindstudio: the Node as the analysis makes it)."""

    stem = "aicpu"
    job = OP_ROWS

    def __init__(self, sink: DeviceRows, analysis: bool = False) -> None:
        self.sink, self.analysis = sink, analysis

    def prepare(self, run: Export, w) -> None:
        for dw in w.devs:
            if dw.d.aicpu is not None and len(dw.d.aicpu):
                self.sink.ensure(dw.j)

    def feed(self, run: Export, w) -> None:
        for dw in w.devs:
            a = AT.aicpu(dw.d, dw.tasks, analysis=self.analysis)
            if a is not None:
                self.sink.write(dw.j, a[1])

    def close(self, run: Export) -> list[Path]:
        return run.record(self.stem, self.sink.close(empty_file=True))

    def discard(self) -> None:
        self.sink.discard()


class OpStatistic(Output):
    """op_statistic: exact per-window aggregates of the op rows of devices with node info,
    combined at the end."""

    stem = "op_statistic"
    job = OP_ROWS

    def __init__(self, n_devices: int) -> None:
        self.aggs: list[list[pd.DataFrame]] = [[] for _ in range(max(n_devices, 1))]

    def feed(self, run: Export, w) -> None:
        for dw in w.devs:
            rows = dw.summary_rows()
            if dw.d.has_node_info and len(rows):
                self.aggs[dw.j].append(S.op_statistic_agg(rows))

    def close(self, run: Export) -> list[Path]:
        return run.emit_devices(self.stem, [
            (j, S.op_statistic(None, S.combine_op_statistic(aggs)))
            for j, aggs in enumerate(self.aggs) if aggs])
