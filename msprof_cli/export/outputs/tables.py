"""The summaries written whole at the end of an export, from small global inputs or from what
the windows accumulated (both layouts unless said): step_trace, fusion_op, l2_cache,
msprof_tx, api_statistic and communication_statistic (mindstudio), and the tuning advice's
prof_rule_{device}.json (legacy).

A layout writes a whole table through `Export.emit` (its file naming and format) and a table
of every device through `Export.emit_devices` (legacy: the device's; mindstudio: merged with
Device_id first) or `Export.emit_host` (host data: api_statistic, fusion_op -- the analysis
exports it in every device dir).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from msprof_cli.raw import layouts as L

from ..derive import advice_table as OT
from ..derive import advice_text as AT
from ..derive import communication as C
from ..derive import fusion as F
from ..derive import msproftx as X
from ..pipeline import Export, Output
from ..sinks.device_rows import DeviceRows
from ..sinks.files import AtomicFile
from . import summaries as S
from .carry import L2Names, window_fusion_rows, write_l2_cache

CONSOLE_MAX_NAMES = 10  # op names per finding on the console (the JSON keeps all)


def with_device(dev_id: int, table: S.Table) -> S.Table:
    """A table with a leading Device_id column (the mindstudio layout's merged files)."""
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


class StepTraceCsv(Output):
    """step_trace summary: the exported iterations of every device (`run.iterations`)."""

    stem = "step_trace"

    def close(self, run: Export) -> list[Path]:
        return run.emit_devices(self.stem, [(j, S.step_trace(its))
                                            for j, its in enumerate(run.iterations)
                                            if len(its)])


class FusionOp(Output):
    """fusion_op: the fusion records (read whole by every window) against the model
    execution spans of every window."""

    stem = "fusion_op"

    def __init__(self) -> None:
        self.model_apis: list[pd.DataFrame] = []

    def feed(self, run: Export, w) -> None:  # in the export process (small)
        if len(w.apis):
            self.model_apis.append(w.apis[w.apis["level"] == L.LEVEL_MODEL])

    def close(self, run: Export) -> list[Path]:
        table = F.fusion_op(window_fusion_rows(run.plan, run.first, self.model_apis),
                            run.model_filter)
        return run.emit_host(self.stem, table)


class L2Cache(Output):
    """l2_cache: the records carry no time; they are read in chunks at the end
    (Plan.l2_chunks) and named after the exported tasks (the first task of each pair)."""

    stem = "l2_cache"

    def __init__(self, sink: DeviceRows, n_devices: int, restrict: bool = False) -> None:
        self.sink, self.restrict = sink, restrict
        self.names = [L2Names() for _ in range(max(n_devices, 1))]

    def prepare(self, run: Export, w) -> None:
        for dw in w.devs:
            if run.plan.facts[dw.j].l2_records:
                self.names[dw.j].add(dw.tasks)

    def close(self, run: Export) -> list[Path]:
        if not any(f.l2_records for f in run.plan.facts):
            return []
        for j in range(len(run.dev_ids)):
            self.sink.ensure(j)
        outs = [_Device(self.sink, j) for j in range(len(run.dev_ids))]
        write_l2_cache(outs, run.plan, self.names, restrict=self.restrict)
        return run.record(self.stem, self.sink.close())

    def discard(self) -> None:
        self.sink.discard()


@dataclass
class _Device:
    """Device j's rows of a DeviceRows, as write_l2_cache writes a stream."""

    sink: DeviceRows
    j: int

    def write(self, df: pd.DataFrame) -> None:
        self.sink.write(self.j, df)

    def discard(self) -> None:
        self.sink.discard()


class MsprofTxCsv(Output):
    """msprof_tx summary: the msproftx markers (mindstudio, `merged`: the analysis's
    columns, Device_id ``host``)."""

    stem = "msprof_tx"

    def __init__(self, merged: bool = False) -> None:
        self.merged = merged

    def close(self, run: Export) -> list[Path]:
        if self.merged:
            if not len(run.tx):
                return []
            return run.emit(self.stem, X.tx_table(run.tx, merged=True))
        return run.emit(self.stem, X.tx_table(run.tx))


class ApiStatistic(Output):
    """api_statistic (mindstudio): the API calls of every window as (record index, group
    code, duration), the (API Name, Level) groups numbered across windows; summed in record
    order at the end, as over the whole API table."""

    stem = "api_statistic"

    def __init__(self) -> None:
        self.ids: dict[tuple[str, str], int] = {}
        self.calls: list[pd.DataFrame] = []

    def feed(self, run: Export, w) -> None:  # in the export process (small)
        apis = w.apis
        if not len(apis):
            return
        codes, names, levels = S.api_groups(apis)
        glob = np.array([self.ids.setdefault((str(n), str(lv)), len(self.ids))
                         for n, lv in zip(names, levels)], dtype=np.int32)
        self.calls.append(pd.DataFrame({"cid": apis["connection_id"].to_numpy(np.int64),
                                        "g": glob[codes],
                                        "dur": apis["dur_ns"].to_numpy(np.int64)}))

    def close(self, run: Export) -> list[Path]:
        if not self.calls:
            return []
        apis = pd.concat(self.calls, ignore_index=True)
        self.calls.clear()
        order = np.argsort(apis["cid"].to_numpy(), kind="stable")
        codes, dur = apis["g"].to_numpy()[order], apis["dur"].to_numpy()[order]
        del apis, order
        keys = list(self.ids)
        table = S.api_statistic_of(codes, dur, np.array([k[0] for k in keys], dtype=object),
                                   np.array([k[1] for k in keys], dtype=object))
        return run.emit_host(self.stem, table)


class CommunicationStatistic(Output):
    """communication_statistic (mindstudio): the HCCL op executions of every window."""

    stem = "communication_statistic"

    def __init__(self, n_devices: int) -> None:
        self.rows: list[list[pd.DataFrame]] = [[] for _ in range(max(n_devices, 1))]

    def prepare(self, run: Export, w) -> None:
        for dw in w.devs:
            if dw.comm is not None:
                self.rows[dw.j].append(dw.comm.ops)

    def close(self, run: Export) -> list[Path]:
        return run.emit_devices(self.stem, [
            (j, C.communication_statistic(pd.concat(rows, ignore_index=True)))
            for j, rows in enumerate(self.rows) if rows and sum(len(r) for r in rows)])


@dataclass
class Advice:
    """Tuning advice of one device: the prof_rule file and its console report."""

    path: Path
    rule: dict
    text: str  # the real tool's console report (section 5.4), with evidence
    brief: list[str] = field(default_factory=list)  # one line per finding (advice.brief)


class ProfRule(Output):
    """``summary/prof_rule_{device_id}.json`` (legacy, always written): the rules of
    docs/formats/step-trace-and-advice.md 5 over the exported op_summary rows (the RuleState the
    op_summary output fed), and its console report appended to `advice`."""

    stem = "prof_rule"

    def __init__(self, rows: "Output", advice: list[Advice] | None) -> None:
        self.rows_stem = rows.stem
        self.advice = advice

    def close(self, run: Export) -> list[Path]:
        d = run.first.devices[0]
        state = run.output(self.rows_stem).rules
        if state.cols is None:  # no op_summary rows: the rules see an empty table
            state.add(OT.OpTable.from_summary(pd.DataFrame(columns=S.OP_SUMMARY_BASE),
                                              d.rd.ai_core_num))
        metrics = (d.rd.ai_core_metrics or "") if d.pmu_events else ""
        rule = state.rule_json(metrics)
        path = d.rd.path / "summary" / f"prof_rule_{d.device_id}.json"
        with AtomicFile(path) as fh:
            fh.write(json.dumps(rule, ensure_ascii=False, indent=4))
        if self.advice is not None:
            self.advice.append(Advice(path, rule, AT.render(
                rule, state.evidence(rule), more_hint=f" in {path.name}",
                max_names=CONSOLE_MAX_NAMES), AT.brief(rule, state)))
        return [path]

