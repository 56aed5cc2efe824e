"""Tuning advice: `prof_rule_{device}.json` and the console "Performance Summary Report"
(reference step-trace-and-advice.md section 5).

Input is the op_summary table with its CSV header names (as written), so the rules read exactly
the numbers the user sees.  Every condition is a vectorised mask over the rows; a rule's result
is the list of op names matching it (first-appearance order, unique).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

RULE_DESCRIPTIONS = {
    "Computation": "Prompt users of some improperly high or low vector/cube/scalar usages of "
                   "operators on AI Cores.",
    "Memory": "Display improper memory usages of operators.",
    "Operator Schedule": "Display inefficient scheduling of operators.",
    "Operator Processing": "Provide various processing suggestions based on operator processing "
                           "policy, including multi-core processing, tiling policy, and reduced "
                           "use of AI CPU operators.",
    "Operator Metrics": "Collect statistics on operator performance efficiency and prompt users "
                        "of high resource consumption.",
    "Operator Parallelism": "Identify the serial wait bottleneck between the AI CPU and AI Core.",
    "Model Bottleneck Analysis": "Identify model bottleneck distribution indicated by cube, "
                                 "vector, scalar and mte utilization.",
}
SECTIONS = {
    "Op Summary": ["Computation", "Memory", "Operator Schedule", "Operator Processing",
                   "Operator Metrics"],
    "Op Parallel": ["Operator Parallelism"],
    "Model Summary": ["Model Bottleneck Analysis"],
}
PARALLELISM_SUGGESTION = (
    "View the Timeline View to find the AI CPU operators serially executed with the AI Core and "
    "place them in the AI Core to execute by using methods such as operator replacement, data "
    "type modification, and fusion. ")
CUBE_AFFINITY = "The Model is Cube Affinity, as the cube utilization rate is high enough"
NOT_CUBE_AFFINITY = "The Model is not Cube Affinity, as the cube utilization rate is not so high"


def field_name(header: str) -> str:
    """op_summary header -> rule field: lower case, unit dropped, spaces -> `_`."""
    base = header.split("(")[0].strip().lower()
    return base.replace(" ", "_")


TEXT_FIELDS = ("op_name", "op_type", "task_type", "input_data_types", "op_state")
NUMERIC_FIELDS = ("task_start_time", "task_duration", "task_wait_time", "block_dim",
                  "memory_bound", "vector_bound", "vec_ratio", "mac_ratio", "scalar_ratio",
                  "mte1_ratio", "mte2_ratio", "mte3_ratio", "vec_bankgroup_cflt_ratio",
                  "vec_bank_cflt_ratio", "memory_workspace")


def _to_number(col: pd.Series) -> np.ndarray:
    """Numeric column (N/A and other text -> NaN; the TAB of time stamps stripped).

    op_summary repeats its values every iteration (durations, ratios, block dims): such a
    column is parsed once per distinct string; a column of mostly distinct values (time
    stamps, judged on its first rows) cell by cell."""
    vals = col.to_numpy(dtype=object)
    if len(vals) > 4096 and len(pd.unique(vals[:2048])) > 1024:
        return _parse(vals)
    codes, uniq = pd.factorize(vals, use_na_sentinel=True)
    parsed = _parse(np.asarray(uniq, dtype=object))
    out = np.full(len(codes), np.nan)
    ok = codes >= 0
    out[ok] = parsed[codes[ok]]
    return out


def _parse(vals: np.ndarray) -> np.ndarray:
    """float of each cell as `_to_number` defines it (missing cells -> NaN)."""
    try:  # all numbers (time stamps, durations): float() per cell, whitespace allowed
        out = vals.astype(np.float64)
    except (TypeError, ValueError):
        pass
    else:  # float() also reads "1_0" and "nan", which to_numeric does not: the slow path
        if not np.isnan(out).any() and "_" not in "".join(map(str, vals)):
            return out
    codes, uniq = pd.factorize(vals, use_na_sentinel=True)
    text = pd.Series(uniq, dtype=object).map(lambda v: v.strip() if isinstance(v, str) else v)
    values = pd.to_numeric(text, errors="coerce").to_numpy(dtype=np.float64)
    out = np.full(len(codes), np.nan)
    ok = codes >= 0
    out[ok] = values[codes[ok]]
    return out


@dataclass
class OpTable:
    """op_summary rows with rule field names; numeric columns coerced (N/A -> NaN)."""

    df: pd.DataFrame
    core_num: int

    @classmethod
    def from_summary(cls, summary: pd.DataFrame, core_num: int) -> "OpTable":
        """Only the columns the rules read are kept; numbers are parsed once per distinct
        string (op_summary repeats the same values every iteration)."""
        df = summary.rename(columns={c: field_name(c) for c in summary.columns})
        df = df.loc[:, ~df.columns.duplicated()]
        keep = [c for c in df.columns if c in TEXT_FIELDS or c in NUMERIC_FIELDS]
        df = df[keep].copy()
        for col in keep:
            if col in NUMERIC_FIELDS:
                df[col] = _to_number(df[col])
        return cls(df=df.reset_index(drop=True), core_num=core_num)

    def has(self, *cols: str) -> bool:
        return all(c in self.df for c in cols)

    def col(self, name: str) -> pd.Series:
        return self.df[name]

    def names(self, mask: pd.Series | np.ndarray) -> list[str]:
        """Op names of the masked rows, unique, in first-appearance order (via the op-name
        codes: iterating a pandas string column row by row is slow)."""
        if "_name_codes" not in self.__dict__:
            codes, uniques = pd.factorize(self.df["op_name"].to_numpy(dtype=object))
            self.__dict__["_name_codes"] = codes
            self.__dict__["_name_uniques"] = np.asarray(uniques, dtype=object)
        codes = self.__dict__["_name_codes"][np.asarray(mask, dtype=bool)]
        first = pd.unique(codes[codes >= 0])
        return [str(n) for n in self.__dict__["_name_uniques"][first]]


Condition = Callable[[OpTable], "list[str] | None"]


def _mask(table: OpTable, col: str, pred: Callable[[pd.Series], pd.Series]) -> list[str] | None:
    if not table.has(col, "op_name"):
        return None
    values = table.col(col)
    return table.names(pred(values).fillna(False))


def _and(*conds: Condition) -> Condition:
    def run(t: OpTable) -> list[str] | None:
        results = [c(t) for c in conds]
        if any(r is None for r in results):
            return None
        keep = set.intersection(*(set(r) for r in results))
        return [n for n in results[0] if n in keep]
    return run


def _block_dim_1(t: OpTable) -> list[str] | None:
    return _mask(t, "block_dim", lambda s: (s / t.core_num) < 1)


def _trans_data_1(t: OpTable) -> list[str] | None:
    return _mask(t, "op_type", lambda s: s.astype(str) == "TransData")


def _trans_data_2(t: OpTable) -> list[str] | None:
    if not t.has("op_type"):
        return None
    mask = t.col("op_type").astype(str) == "TransData"
    return t.names(mask) if int(mask.sum()) > 2 else []


def _wait_time_2(t: OpTable) -> list[str] | None:
    if not t.has("task_wait_time", "task_duration"):
        return None
    wait = t.col("task_wait_time")
    over = (wait > 10).fillna(False)
    total = float((t.col("task_duration").fillna(0) + wait.fillna(0)).sum())
    if total <= 0:
        return []
    return t.names(over) if float(wait[over].sum()) / total > 0.03 else []


def _memory_bound_2(t: OpTable) -> list[str] | None:
    if not t.has("memory_bound", "task_duration"):
        return None
    over = (t.col("memory_bound") > 1).fillna(False)
    total = float(t.col("task_duration").fillna(0).sum())
    if total <= 0:
        return []
    return t.names(over) if float(t.col("task_duration")[over].sum()) / total > 0.5 else []


def _memory_workspace_1(t: OpTable) -> list[str] | None:
    return _mask(t, "memory_workspace", lambda s: s > 0)


def _contains(values: pd.Series, text: str) -> pd.Series:
    """`values` contains `text`, evaluated once per distinct value."""
    codes, uniq = pd.factorize(values.to_numpy(dtype=object))
    hit = np.array([text in str(u) for u in uniq], dtype=bool)
    return pd.Series(np.where(codes >= 0, hit[np.maximum(codes, 0)], False),
                     index=values.index)


def _str_contains(col: str, text: str) -> Condition:
    return lambda t: _mask(t, col, lambda s: _contains(s, text))


def _num(col: str, op: str, value: float) -> Condition:
    preds = {">": lambda s: s > value, "<": lambda s: s < value}
    return lambda t: _mask(t, col, preds[op])


def AICPU_1(t: OpTable) -> list[str] | None:  # noqa: N802 - the rule condition name
    return _mask(t, "task_type", lambda s: s.astype(str) == "AI_CPU")

TASK_DURATION_1 = _num("task_duration", ">", 20)

# (rule, condition, rule type, subtype, suggestion) in the enabled order of section 5.3
OP_RULES: list[tuple[str, Condition, str, str, str]] = [
    ("rule_block_dim_1", _and(_block_dim_1, _num("mac_ratio", ">", 0)), "Operator Processing",
     "", "Use multi-core"),
    ("rule_vector_bound_1", _num("vector_bound", ">", 1), "Memory", "",
     "Check repeat counts and vector mask"),
    ("rule_vector_bound_2", _and(_num("vec_ratio", ">", 0.8), _num("mac_ratio", ">", 0),
                                 TASK_DURATION_1), "Computation", "Cube",
     "Cube operators spend too much time on vector computing"),
    ("rule_scalar_bound_1", _num("scalar_ratio", ">", 0.8), "Computation", "Scalar",
     "High scalar computing usage"),
    ("rule_memory_bound_1", _memory_bound_2, "Memory", "", "Low data memory handling efficiency"),
    ("rule_vec_bankgroup_cflt_ratio_1", _num("vec_bankgroup_cflt_ratio", ">", 0.04),
     "Computation", "Vector", "The vector bank group conflict has reached the upper limit"),
    ("rule_vec_bank_cflt_ratio_1", _num("vec_bank_cflt_ratio", ">", 0.04), "Computation",
     "Vector", "The vector bank conflict has reached the upper limit"),
    ("rule_vector_ratio_1", _num("vec_ratio", "<", 0.8), "Computation", "Vector",
     "Low vector computing usage"),
    ("rule_cube_ratio_1", _num("mac_ratio", "<", 0.8), "Computation", "Cube",
     "Low cube computing usage"),
    ("rule_transData_1", _trans_data_2, "Operator Processing", "",
     "Check and reduce the transData"),
    ("rule_aicpu_1", AICPU_1, "Operator Processing", "", "Check and reduce AI CPU operators"),
    ("rule_aicpu_2", _and(TASK_DURATION_1, AICPU_1, _str_contains("input_data_types", "INT64")),
     "Operator Processing", "", "Try to cast the data type to INT32 for AI Core operators"),
    ("rule_aicpu_3", _and(_str_contains("op_name", "StridedSliceGrad"), AICPU_1,
                          TASK_DURATION_1), "Operator Processing", "",
     "Try StridedSliceGrad on AI Cores"),
    ("rule_wait_time_1", _wait_time_2, "Operator Schedule", "",
     "Task waiting time has reached the upper limit"),
    ("rule_memory_workspace_1", _memory_workspace_1, "Operator Metrics", "Memory",
     "Check and reduce the memory workspace"),
]


def _merged(intervals: np.ndarray) -> np.ndarray:
    """Union of [start, end) intervals, sorted and merged (vectorised)."""
    if len(intervals) == 0:
        return intervals.reshape(0, 2)
    iv = intervals[np.argsort(intervals[:, 0], kind="stable")]
    ends = np.maximum.accumulate(iv[:, 1])
    new = np.empty(len(iv), dtype=bool)
    new[0] = True
    new[1:] = iv[1:, 0] > ends[:-1]
    idx = np.flatnonzero(new)
    starts = iv[idx, 0]
    stops = np.append(ends[idx[1:] - 1], ends[-1])
    return np.column_stack([starts, stops])


def _length(iv: np.ndarray) -> float:
    return float((iv[:, 1] - iv[:, 0]).sum()) if len(iv) else 0.0


def _overlap(a: np.ndarray, b: np.ndarray) -> float:
    """Total overlap of two merged interval sets: sweep over all end points, where the
    coverage count is 2 both sets cover the segment (each set is already merged)."""
    if not len(a) or not len(b):
        return 0.0
    points = np.concatenate([a[:, 0], a[:, 1], b[:, 0], b[:, 1]])
    deltas = np.concatenate([np.ones(len(a)), -np.ones(len(a)), np.ones(len(b)),
                             -np.ones(len(b))])
    order = np.lexsort((deltas, points))  # at equal points close before open
    points, cover = points[order], np.cumsum(deltas[order])
    seg = np.diff(points)
    return float(seg[cover[:-1] == 2].sum())


def parallelism(t: OpTable) -> dict[str, float] | None:
    if not t.has("task_type", "task_start_time", "task_duration"):
        return None
    start = t.col("task_start_time").to_numpy(dtype=float)
    dur = t.col("task_duration").to_numpy(dtype=float)
    kind = t.col("task_type").astype(str).to_numpy()
    ok = ~(np.isnan(start) | np.isnan(dur))
    core = _merged(np.column_stack([start, start + dur])[ok & (kind == "AI_CORE")])
    cpu = _merged(np.column_stack([start, start + dur])[ok & (kind == "AI_CPU")])
    both = _overlap(core, cpu)
    return {"AI Core Execution Time(us)": round(_length(core) - both, 3),
            "AI CPU Execution Time(us)": round(_length(cpu) - both, 3),
            "Concurrent AI Core and AI CPU Execution Time(us)": round(both, 3)}


def bottleneck(t: OpTable) -> dict[str, float] | None:
    need = ("mac_ratio", "vec_ratio", "scalar_ratio", "mte1_ratio", "mte2_ratio", "mte3_ratio",
            "task_duration", "task_type")
    if not t.has(*need):
        return None
    df = t.df[(t.df["task_type"].astype(str) == "AI_CORE")]
    ratios = pd.DataFrame({
        "Cube Utilization": df["mac_ratio"], "Vector Utilization": df["vec_ratio"],
        "Scalar Utilization": df["scalar_ratio"],
        "MTE Utilization": df[["mte1_ratio", "mte2_ratio", "mte3_ratio"]].max(axis=1)})
    valid = ratios.notna().all(axis=1)
    ratios, dur = ratios[valid], df.loc[valid, "task_duration"].fillna(0)
    out = {k: 0.0 for k in ratios.columns}
    if len(ratios):
        dominant = ratios.to_numpy().argmax(axis=1)
        sums = np.bincount(dominant, weights=dur.to_numpy(dtype=float), minlength=4)
        out = {k: round(float(v), 3) for k, v in zip(ratios.columns, sums)}
    return out


def evaluate(summary: pd.DataFrame, core_num: int = 32, aic_metrics: str = "",
             workspace: pd.Series | None = None, table: OpTable | None = None) -> dict:
    """prof_rule JSON content for one device's op_summary (`table`: the OpTable of
    `summary` when already built, e.g. shared with evidence())."""
    t = table if table is not None else OpTable.from_summary(summary, core_num)
    if workspace is not None and "op_name" in t.df:
        t.df["memory_workspace"] = t.df["op_name"].map(workspace).astype(float)
    results: dict[str, list[dict]] = {g: [] for groups in SECTIONS.values() for g in groups}
    for _rule, cond, rtype, subtype, suggestion in OP_RULES:
        names = cond(t)
        if names:
            results[rtype].append({"Rule Subtype": subtype, "Rule Suggestion": suggestion,
                                   "Tuning Data": names})
    par = parallelism(t)
    if par:
        core = par["AI Core Execution Time(us)"]
        cpu = par["AI CPU Execution Time(us)"]
        both = par["Concurrent AI Core and AI CPU Execution Time(us)"]
        total = core + cpu + both
        if total > 0 and cpu / total > 0.05:
            results["Operator Parallelism"].append(
                {"Rule Subtype": "", "Rule Suggestion": PARALLELISM_SUGGESTION,
                 "Tuning Data": par})
    if aic_metrics == "PipeUtilization":
        bn = bottleneck(t)
        if bn is not None:
            total = sum(bn.values())
            cube = bn["Cube Utilization"] / total if total > 0 else 0.0
            suggestion = CUBE_AFFINITY if cube >= 0.5 else NOT_CUBE_AFFINITY
            results["Model Bottleneck Analysis"].append(
                {"Rule Subtype": "", "Rule Suggestion": suggestion, "Tuning Data": bn})
    data = {section: [{"Rule Type": g, "Rule Description": RULE_DESCRIPTIONS[g],
                       "result": results[g]} for g in groups]
            for section, groups in SECTIONS.items()}
    return {"status": 0, "data": data}


# metric shown next to each op of an op-list finding on the console (evidence())
EVIDENCE_FIELDS: dict[str, list[str]] = {
    "Use multi-core": ["block_dim", "mac_ratio"],
    "Check repeat counts and vector mask": ["vector_bound"],
    "Cube operators spend too much time on vector computing": ["vec_ratio", "mac_ratio"],
    "High scalar computing usage": ["scalar_ratio"],
    "Low data memory handling efficiency": ["memory_bound"],
    "The vector bank group conflict has reached the upper limit": ["vec_bankgroup_cflt_ratio"],
    "The vector bank conflict has reached the upper limit": ["vec_bank_cflt_ratio"],
    "Low vector computing usage": ["vec_ratio"],
    "Low cube computing usage": ["mac_ratio"],
    "Check and reduce the transData": [],
    "Check and reduce AI CPU operators": [],
    "Try to cast the data type to INT32 for AI Core operators": [],
    "Try StridedSliceGrad on AI Cores": [],
    "Task waiting time has reached the upper limit": ["task_wait_time"],
    "Check and reduce the memory workspace": ["memory_workspace"],
}


def _num_text(v: float) -> str:
    return f"{v:.3f}".rstrip("0").rstrip(".") if np.isfinite(v) else "N/A"


def evidence(summary: pd.DataFrame, rule_json: dict, core_num: int = 32,
             workspace: pd.Series | None = None, table: OpTable | None = None
             ) -> dict[str, list[tuple[float, str]]]:
    """Per op-list finding (keyed by its suggestion): one text per named op with the numbers
    behind it -- task count, total duration and the mean of the rule's metric(s) --, as
    (total duration, text) so callers can show the heaviest ops first."""
    t = table if table is not None else OpTable.from_summary(summary, core_num)
    if workspace is not None and "op_name" in t.df:
        t.df["memory_workspace"] = t.df["op_name"].map(workspace).astype(float)
    if "op_name" not in t.df or len(t.df) == 0:
        return {}
    df = t.df
    dur = df["task_duration"] if "task_duration" in df else pd.Series(0.0, index=df.index)
    wanted = sorted({f for fields in EVIDENCE_FIELDS.values() for f in fields if f in df})
    g = df.assign(_dur=dur.fillna(0))[["op_name", "_dur"] + wanted].groupby(
        "op_name", sort=False)
    stats = g[wanted].mean() if wanted else pd.DataFrame(index=g.size().index)
    stats["_n"] = g.size()
    stats["_total"] = g["_dur"].sum()
    stats["_wait"] = g["task_wait_time"].sum() if "task_wait_time" in wanted else 0.0
    out: dict[str, list[tuple[float, str]]] = {}
    for groups in rule_json["data"].values():
        for group in groups:
            for res in group["result"]:
                data = res["Tuning Data"]
                if not isinstance(data, list):
                    continue
                fields = [f for f in EVIDENCE_FIELDS.get(res["Rule Suggestion"], [])
                          if f in stats]
                items = []
                for name in data:
                    if name not in stats.index:
                        continue
                    row = stats.loc[name]
                    parts = [f"{f} {_num_text(float(row[f]))}" for f in fields]
                    n = int(row["_n"])
                    parts += [f"{n} task{'s' if n != 1 else ''}",
                              f"{_num_text(float(row['_total']))} us in total"]
                    # the wait-time finding ranks ops by their wait, the others by run time
                    weight = float(row["_wait"]) if "task_wait_time" in fields \
                        else float(row["_total"])
                    items.append((weight, f"{name}: " + ", ".join(parts)))
                out[res["Rule Suggestion"]] = items
    return out


def _evidence_lines(items: list[tuple[float, str]], indent: str, max_ops: int,
                    more_hint: str) -> list[str]:
    top = sorted(items, key=lambda x: -x[0])
    lines = [f"{indent}- {text}" for _, text in top[:max_ops]]
    if len(top) > max_ops:
        lines.append(f"{indent}- ... {len(top) - max_ops} more ops{more_hint}")
    return lines


def _data_text(data, max_names: int | None = None) -> str:
    if isinstance(data, list):
        if max_names is not None and len(data) > max_names:
            # console only: a long op list is cut; the prof_rule JSON keeps every name
            shown = ",".join(str(x) for x in data[:max_names])
            return f"[{shown},... +{len(data) - max_names} more]"
        return "[" + ",".join(str(x) for x in data) + "]"
    if isinstance(data, dict) and "AI CPU Execution Time(us)" in data:
        total = sum(data.values())
        share = data["AI CPU Execution Time(us)"] / total if total else 0.0
        return (f"Percentage of AI CPU Execution Time is {share:.2%}, Exceed the experience "
                "threshold 5%.")
    if isinstance(data, dict) and "Cube Utilization" in data:
        total = sum(data.values())
        if total == 0:
            return "Total Duration Time equals to 0. Please check Aicore operators."
        names = ["Cube", "Vector", "Scalar", "MTE"]
        keys = ["Cube Utilization", "Vector Utilization", "Scalar Utilization",
                "MTE Utilization"]
        lines = [f"\n\t\t{letter}. {n} utilization rate in the model is "
                 f"{round(data[k] / total, 3)}. "
                 for letter, n, k in zip("abcd", names, keys)]
        return "".join(lines)
    return str(data)


def render(rule_json: dict, evidence: dict[str, list[tuple[float, str]]] | None = None,
           max_ops: int = 5, more_hint: str = "", max_names: int | None = None) -> str:
    """The console report (section 5.4).  With `evidence` (see evidence()), every op-list
    finding is followed by indented lines naming its heaviest ops (at most `max_ops`) with
    their numbers.  `max_names` cuts long op lists (the real tool prints them whole, which
    buries the report on real models); None keeps the section 5.4 text exactly."""
    lines = ["", "Performance Summary Report:"]

    def details(res: dict, indent: str) -> None:
        if evidence and res["Rule Suggestion"] in evidence and \
                isinstance(res["Tuning Data"], list):
            lines.extend(_evidence_lines(evidence[res["Rule Suggestion"]], indent, max_ops,
                                         more_hint))
    number = 0
    for groups in rule_json["data"].values():
        for group in groups:
            number += 1
            lines.append(f"{number}. {group['Rule Type']}:")
            results = group["result"]
            if not results:
                lines.append("\tN/A")
                continue
            j = 0
            by_subtype: dict[str, list[dict]] = {}
            order: list[str] = []
            for res in results:
                key = res["Rule Subtype"]
                if key not in by_subtype:
                    order.append(key)
                    by_subtype[key] = []
                by_subtype[key].append(res)
            for key in order:
                if key == "":
                    for res in by_subtype[key]:
                        j += 1
                        lines.append(f"\t{j}){res['Rule Suggestion']}: "
                                     f"{_data_text(res['Tuning Data'], max_names)}")
                        details(res, "\t\t")
                else:
                    j += 1
                    lines.append(f"\t{j}){key}:")
                    for k, res in enumerate(by_subtype[key], 1):
                        lines.append(f"\t\t{k}){res['Rule Suggestion']}: "
                                     f"{_data_text(res['Tuning Data'], max_names)}")
                        details(res, "\t\t\t")
    lines.append("")
    return "\n".join(lines)
