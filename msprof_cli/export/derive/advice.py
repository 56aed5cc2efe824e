"""Tuning advice: `prof_rule_{device}.json` and the console "Performance Summary Report"
(docs/formats/step-trace-and-advice.md section 5).

Input is the op_summary table with its CSV header names (as written), so the rules read exactly
the numbers the user sees.  Every condition is a vectorised mask over the rows; a rule's result
is the list of op names matching it (first-appearance order, unique).
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd

from .advice_table import NA_NS, OpTable, device_waits, model_spans, us_to_ns

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


# the evidence sums metric values as integers: value x scale (ns of µs times, bytes of KB
# workspaces, whole block dims; ratios to 1e-6)
EVIDENCE_SCALE = {"task_wait_time": 1000, "memory_workspace": 1024, "block_dim": 1}


def num_text(v: float) -> str:
    return f"{v:.3f}".rstrip("0").rstrip(".") if np.isfinite(v) else "N/A"


def _contains(values: pd.Series, text: str) -> pd.Series:
    """`values` contains `text`, evaluated once per distinct value."""
    codes, uniq = pd.factorize(values.to_numpy(dtype=object))
    hit = np.array([text in str(u) for u in uniq], dtype=bool)
    return pd.Series(np.where(codes >= 0, hit[np.maximum(codes, 0)], False),
                     index=values.index)


# --- the rules ---------------------------------------------------------------------------------
# An atom is a row condition over some columns (besides op_name); a rule whose atom lacks a
# column does not apply.  A rule's op list is built from its atoms' op names: those of its
# first atom (first-appearance order) that every other atom also names.  Three rules are
# gated on a sum over all rows (`gate`).

def _mask(got: pd.Series | np.ndarray) -> np.ndarray:
    """An atom's rows as a bool array, missing values False (a bool result is taken as it
    is: wrapping it in a Series and filling it cost ~0.1 ms an atom)."""
    if getattr(got, "dtype", None) == bool:
        return np.asarray(got, dtype=bool)
    return np.asarray(pd.Series(got).fillna(False), dtype=bool)


def _cmp(col: str, op: str, value: float) -> tuple[tuple[str, ...], Callable]:
    if op == ">":
        return (col,), lambda t: t.col(col) > value
    return (col,), lambda t: t.col(col) < value


ATOMS: dict[str, tuple[tuple[str, ...], Callable[[OpTable], pd.Series]]] = {
    "block_dim_1": (("block_dim",), lambda t: (t.col("block_dim") / t.core_num) < 1),
    "mac_ratio>0": _cmp("mac_ratio", ">", 0),
    "vector_bound>1": _cmp("vector_bound", ">", 1),
    "vec_ratio>0.8": _cmp("vec_ratio", ">", 0.8),
    "task_duration>20": _cmp("task_duration", ">", 20),
    "scalar_ratio>0.8": _cmp("scalar_ratio", ">", 0.8),
    "memory_bound>1": (("memory_bound", "task_duration"), lambda t: t.col("memory_bound") > 1),
    "vec_bankgroup_cflt_ratio>0.04": _cmp("vec_bankgroup_cflt_ratio", ">", 0.04),
    "vec_bank_cflt_ratio>0.04": _cmp("vec_bank_cflt_ratio", ">", 0.04),
    "vec_ratio<0.8": _cmp("vec_ratio", "<", 0.8),
    "mac_ratio<0.8": _cmp("mac_ratio", "<", 0.8),
    "trans_data": (("op_type",), lambda t: t.col("op_type").astype(str) == "TransData"),
    "aicpu": (("task_type",), lambda t: t.task_type_is("AI_CPU")),
    # INT64 inputs the user cannot cast: a stateless RNG's key and counter (project rule,
    # docs/export.md advice: the real tool flags them too)
    "int64_input": (("input_data_types", "op_type"),
                    lambda t: _contains(t.col("input_data_types"), "INT64")
                    & ~t.col("op_type").astype(str).str.startswith(RNG_KEY_OPS)),
    "strided_slice_grad": ((), lambda t: _contains(t.col("op_name"), "StridedSliceGrad")),
    "wait>10": (("task_wait_time", "task_duration"), lambda t: t.col("task_wait_time") > 10),
    "memory_workspace>0": _cmp("memory_workspace", ">", 0),
}

RNG_KEY_OPS = ("StatelessRandom", "StatelessTruncatedNormal", "RngReadAndSkip")

# (rule, atoms, gate, rule type, subtype, suggestion) in the enabled order of section 5.3
OP_RULES: list[tuple[str, tuple[str, ...], str, str, str, str]] = [
    ("rule_block_dim_1", ("block_dim_1", "mac_ratio>0"), "", "Operator Processing", "",
     "Use multi-core"),
    ("rule_vector_bound_1", ("vector_bound>1",), "", "Memory", "",
     "Check repeat counts and vector mask"),
    ("rule_vector_bound_2", ("vec_ratio>0.8", "mac_ratio>0", "task_duration>20"), "",
     "Computation", "Cube", "Cube operators spend too much time on vector computing"),
    ("rule_scalar_bound_1", ("scalar_ratio>0.8",), "", "Computation", "Scalar",
     "High scalar computing usage"),
    # memory_bound_2: the ops > 1 take more than half of all task time
    ("rule_memory_bound_1", ("memory_bound>1",), "memory", "Memory", "",
     "Low data memory handling efficiency"),
    ("rule_vec_bankgroup_cflt_ratio_1", ("vec_bankgroup_cflt_ratio>0.04",), "", "Computation",
     "Vector", "The vector bank group conflict has reached the upper limit"),
    ("rule_vec_bank_cflt_ratio_1", ("vec_bank_cflt_ratio>0.04",), "", "Computation", "Vector",
     "The vector bank conflict has reached the upper limit"),
    ("rule_vector_ratio_1", ("vec_ratio<0.8",), "", "Computation", "Vector",
     "Low vector computing usage"),
    ("rule_cube_ratio_1", ("mac_ratio<0.8",), "", "Computation", "Cube",
     "Low cube computing usage"),
    # trans_data_2: more than two TransData tasks
    ("rule_transData_1", ("trans_data",), "trans_data", "Operator Processing", "",
     "Check and reduce the transData"),
    ("rule_aicpu_1", ("aicpu",), "", "Operator Processing", "",
     "Check and reduce AI CPU operators"),
    ("rule_aicpu_2", ("task_duration>20", "aicpu", "int64_input"), "", "Operator Processing",
     "", "Try to cast the data type to INT32 for AI Core operators"),
    ("rule_aicpu_3", ("strided_slice_grad", "aicpu", "task_duration>20"), "",
     "Operator Processing", "", "Try StridedSliceGrad on AI Cores"),
    # wait_time_2: waits > 10 µs are more than 3 % of all task and wait time
    ("rule_wait_time_1", ("wait>10",), "wait", "Operator Schedule", "",
     "Task waiting time has reached the upper limit"),
    ("rule_memory_workspace_1", ("memory_workspace>0",), "", "Operator Metrics", "Memory",
     "Check and reduce the memory workspace"),
]

PIPE_FIELDS = ("mac_ratio", "vec_ratio", "scalar_ratio", "mte1_ratio", "mte2_ratio",
               "mte3_ratio")  # per-op means kept for the console summary's bottleneck pipe
BOTTLENECK = ["Cube Utilization", "Vector Utilization", "Scalar Utilization", "MTE Utilization"]
_BOTTLENECK_NEED = ("mac_ratio", "vec_ratio", "scalar_ratio", "mte1_ratio", "mte2_ratio",
                    "mte3_ratio", "task_duration", "task_type")
_PARALLEL_NEED = ("task_type", "task_start_time", "task_duration")


def _merged(intervals: np.ndarray) -> np.ndarray:
    """Union of [start, end) intervals, sorted and merged (vectorised); touching ones join."""
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


def _length(iv: np.ndarray):
    return (iv[:, 1] - iv[:, 0]).sum() if len(iv) else 0


def _overlap(a: np.ndarray, b: np.ndarray):
    """Total overlap of two merged interval sets: sweep over all end points, where the
    coverage count is 2 both sets cover the segment (each set is already merged)."""
    if not len(a) or not len(b):
        return 0
    points = np.concatenate([a[:, 0], a[:, 1], b[:, 0], b[:, 1]])
    deltas = np.concatenate([np.ones(len(a), np.int64), -np.ones(len(a), np.int64),
                             np.ones(len(b), np.int64), -np.ones(len(b), np.int64)])
    order = np.lexsort((deltas, points))  # at equal points close before open
    points, cover = points[order], np.cumsum(deltas[order])
    seg = np.diff(points)
    return seg[cover[:-1] == 2].sum()


def _clip(iv: np.ndarray, lo: int | None, hi: int | None) -> np.ndarray:
    """Merged intervals cut to [lo, hi) (None: open end)."""
    if len(iv) == 0:
        return iv
    a = iv[:, 0] if lo is None else np.maximum(iv[:, 0], lo)
    b = iv[:, 1] if hi is None else np.minimum(iv[:, 1], hi)
    ok = b > a
    return np.column_stack([a[ok], b[ok]])


class _Names:
    """Op names in first-appearance order, unique, gathered chunk by chunk."""

    def __init__(self) -> None:
        self.order: list[str] = []
        self.seen: set[str] = set()

    def add(self, names: list[str]) -> None:
        for n in names:
            if n not in self.seen:
                self.seen.add(n)
                self.order.append(n)


class RuleState:
    """The advice rules over op_summary rows given chunk by chunk (`add`), in row order, or
    as the states of consecutive row ranges (`merge`): op names in first-appearance order,
    and the sums the rules and the console evidence read, in exact integer ns -- so every
    chunking gives the same result (the whole and the windowed exports, tests)."""

    def __init__(self, core_num: int, workspace: pd.Series | None = None) -> None:
        self.core_num, self.workspace = core_num, workspace
        # model executions (begin, end local ns, by begin) of the rows being added: a task
        # waits on the device only inside one; a gap between separate calls (the script's
        # Python between steps, eager ops, warm-up) is host time, not a scheduling wait
        # (docs/export.md, advice).  None: every wait counts (the real analysis's rule)
        self.model_spans: np.ndarray | None = None
        self.cols: set[str] | None = None  # the columns of the rows (first chunk)
        self.names: dict[str, _Names] = {a: _Names() for a in ATOMS}
        self.trans_data = 0
        self.sums = dict.fromkeys(("dur", "mb_over", "wait", "wait_over"), 0)  # ns
        self.busy = dict.fromkeys(("core", "cpu", "both"), 0)  # ns of closed time
        self.open_core = np.zeros((0, 2), np.int64)  # merged intervals after `self.closed`
        self.open_cpu = np.zeros((0, 2), np.int64)
        self.closed: int | None = None
        self.dominant = np.zeros(4, np.int64)  # AI Core time by dominant pipe (ns)
        self._stats: list[pd.DataFrame] = []  # evidence: per op name sums and counts

    # -- input ---------------------------------------------------------------------------
    def add(self, t: OpTable) -> None:
        if self.workspace is not None and "op_name" in t.df:
            t.df["memory_workspace"] = t.df["op_name"].map(self.workspace).astype(float)
        if self.cols is None:
            self.cols = set(t.df.columns)
        if "op_name" not in t.df or len(t.df) == 0:
            return
        if t.has("task_wait_time") and self.model_spans is not None and t.start_ns is not None:
            inside = device_waits(t.start_ns, t.col("task_wait_time"), self.model_spans)
            t.df["task_wait_time"] = t.col("task_wait_time").where(inside, 0.0)
        for atom, (cols, pred) in ATOMS.items():
            if t.has(*cols):
                mask = _mask(pred(t))
                self.names[atom].add(t.names(mask))
                if atom == "trans_data":
                    self.trans_data += int(mask.sum())
        if t.has("task_duration"):
            dur = us_to_ns(t.col("task_duration"))
            self.sums["dur"] += int(dur.sum())
            if t.has("memory_bound"):
                self.sums["mb_over"] += int(dur[(t.col("memory_bound") > 1).to_numpy()].sum())
            if t.has("task_wait_time"):
                wait = us_to_ns(t.col("task_wait_time"))
                self.sums["wait"] += int(dur.sum() + wait.sum())
                self.sums["wait_over"] += int(wait[(t.col("task_wait_time") > 10)
                                                   .to_numpy()].sum())
        if t.has(*_PARALLEL_NEED) and t.start_ns is not None:
            self._busy(t)
        if t.has(*_BOTTLENECK_NEED):
            self._bottleneck(t)
        self._evidence(t)

    def _busy(self, t: OpTable) -> None:
        """AI Core / AI CPU busy time: intervals before the chunk's first start are final
        (rows come in start order), so only the intervals after it stay open."""
        start = t.start_ns
        dur = t.col("task_duration").to_numpy(np.float64)
        ok = (start != NA_NS) & ~np.isnan(dur)
        if not ok.any():
            return
        end = start + us_to_ns(dur)
        self._close(int(start[ok].min()))
        for name, sel in (("open_core", ok & t.task_type_is("AI_CORE")),
                          ("open_cpu", ok & t.task_type_is("AI_CPU"))):
            iv = np.column_stack([start[sel], end[sel]])
            setattr(self, name, _merged(np.concatenate([getattr(self, name), iv])))

    def _close(self, at: int | None) -> None:
        """Count the busy time before `at` (None: all of it) as final."""
        if self.closed is not None and at is not None and at < self.closed:
            at = self.closed  # rows out of start order: nothing more can be closed
        core, cpu = _clip(self.open_core, None, at), _clip(self.open_cpu, None, at)
        self.busy["core"] += int(_length(core))
        self.busy["cpu"] += int(_length(cpu))
        self.busy["both"] += int(_overlap(core, cpu))
        self.open_core = _clip(self.open_core, at, None) if at is not None else core[:0]
        self.open_cpu = _clip(self.open_cpu, at, None) if at is not None else cpu[:0]
        self.closed = at

    def _bottleneck(self, t: OpTable) -> None:
        df = t.df
        core = t.task_type_is("AI_CORE")
        ratios = np.column_stack([
            df["mac_ratio"].to_numpy(np.float64), df["vec_ratio"].to_numpy(np.float64),
            df["scalar_ratio"].to_numpy(np.float64),
            df[["mte1_ratio", "mte2_ratio", "mte3_ratio"]].max(axis=1).to_numpy(np.float64)])
        valid = core & ~np.isnan(ratios).any(axis=1)
        if valid.any():
            dominant = ratios[valid].argmax(axis=1)
            dur = us_to_ns(df["task_duration"].to_numpy(np.float64)[valid])
            for k in range(4):
                self.dominant[k] += int(dur[dominant == k].sum())

    def _evidence(self, t: OpTable) -> None:
        """Per op name: row count, duration and wait (ns) and, per metric, the sum of its
        values as integers (EVIDENCE_SCALE) and their count -- exact, so the means do not
        depend on the chunking."""
        df = t.df
        wanted = sorted({f for fs in EVIDENCE_FIELDS.values() for f in fs if f in df} |
                        {f for f in PIPE_FIELDS if f in df})
        part = {}
        for f in wanted:
            v = df[f].to_numpy(np.float64)
            ok = ~np.isnan(v)
            part[f] = np.where(ok, np.rint(np.nan_to_num(v) * EVIDENCE_SCALE.get(f, 10**6)),
                               0).astype(np.int64)
            part["#" + f] = ok.astype(np.int64)
        part["_n"] = np.ones(len(df), np.int64)
        part["_dur"] = us_to_ns(df["task_duration"]) if "task_duration" in df \
            else np.zeros(len(df), np.int64)
        part["_wait"] = us_to_ns(df["task_wait_time"]) if "task_wait_time" in df \
            else np.zeros(len(df), np.int64)
        codes, names = t.name_codes()
        frame = pd.DataFrame(part)
        if (codes < 0).any():  # rows without an op name (as a groupby by name drops them)
            frame, codes = frame[codes >= 0], codes[codes >= 0]
        g = frame.groupby(codes, sort=False).sum()
        g.index = names[g.index.to_numpy()]
        self._stats.append(g)
        if len(self._stats) > 32:  # a few hundred ops per chunk: combined now and then
            self._stats = [self.stats]

    @property
    def stats(self) -> pd.DataFrame | None:
        if not self._stats:
            return None
        if len(self._stats) == 1:
            return self._stats[0]
        return pd.concat(self._stats).groupby(level=0, sort=False).sum()

    def merge(self, later: "RuleState") -> None:
        """Append the state of the rows after this one's (a window's: its tasks start after
        every task here has ended)."""
        if later.cols is None:
            return
        if self.cols is None:
            self.cols = later.cols
        for atom, names in later.names.items():
            self.names[atom].add(names.order)
        self.trans_data += later.trans_data
        for k, v in later.sums.items():
            self.sums[k] += v
        self._close(None)
        later._close(None)
        for k, v in later.busy.items():
            self.busy[k] += v
        self.dominant += later.dominant
        self._stats += later._stats

    # -- results -------------------------------------------------------------------------
    def _has(self, *cols: str) -> bool:
        return self.cols is not None and all(c in self.cols for c in cols)

    def op_list(self, atoms: tuple[str, ...], gate: str) -> list[str] | None:
        if not all(self._has("op_name", *ATOMS[a][0]) for a in atoms):
            return None
        first = self.names[atoms[0]].order
        names = [n for n in first if all(n in self.names[a].seen for a in atoms[1:])]
        s = self.sums
        if gate == "memory":
            return names if s["dur"] > 0 and 2 * s["mb_over"] > s["dur"] else []
        if gate == "wait":
            return names if s["wait"] > 0 and 100 * s["wait_over"] > 3 * s["wait"] else []
        if gate == "trans_data":
            return names if self.trans_data > 2 else []
        return names

    def parallelism(self) -> dict[str, float] | None:
        if not self._has(*_PARALLEL_NEED):
            return None
        self._close(None)
        b = self.busy
        return {"AI Core Execution Time(us)": round((b["core"] - b["both"]) / 1000, 3),
                "AI CPU Execution Time(us)": round((b["cpu"] - b["both"]) / 1000, 3),
                "Concurrent AI Core and AI CPU Execution Time(us)": round(b["both"] / 1000, 3)}

    def bottleneck(self) -> dict[str, float] | None:
        if not self._has(*_BOTTLENECK_NEED):
            return None
        return {k: round(int(v) / 1000, 3) for k, v in zip(BOTTLENECK, self.dominant)}

    def rule_json(self, aic_metrics: str = "") -> dict:
        """prof_rule JSON content (section 5)."""
        results: dict[str, list[dict]] = {g: [] for groups in SECTIONS.values()
                                          for g in groups}
        for _rule, atoms, gate, rtype, subtype, suggestion in OP_RULES:
            names = self.op_list(atoms, gate)
            if names:
                results[rtype].append({"Rule Subtype": subtype, "Rule Suggestion": suggestion,
                                       "Tuning Data": names})
        par = self.parallelism()
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
            bn = self.bottleneck()
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

    def evidence(self, rule_json: dict) -> dict[str, list[tuple[float, str]]]:
        """Per op-list finding (keyed by its suggestion): one text per named op with the
        numbers behind it -- task count, total duration and the mean of the rule's
        metric(s) --, as (weight, text) so callers can show the heaviest ops first."""
        st = self.stats
        if st is None or len(st) == 0:
            return {}
        out: dict[str, list[tuple[float, str]]] = {}
        # the op's row by name and the columns as plain lists, taken once: a row Series per
        # named op and finding cost ~0.1 ms each (hundreds of ops on a real model)
        at = {name: i for i, name in enumerate(st.index.tolist())}
        col = {c: st[c].tolist() for c in st.columns}
        for groups in rule_json["data"].values():
            for group in groups:
                for res in group["result"]:
                    data = res["Tuning Data"]
                    if not isinstance(data, list):
                        continue
                    fields = [f for f in EVIDENCE_FIELDS.get(res["Rule Suggestion"], [])
                              if f in st]
                    items = []
                    for name in data:
                        i = at.get(name)
                        if i is None:
                            continue
                        means = [int(col[f][i]) / int(col["#" + f][i])
                                 / EVIDENCE_SCALE.get(f, 10**6)
                                 if col["#" + f][i] else np.nan for f in fields]
                        parts = [f"{f} {num_text(m)}" for f, m in zip(fields, means)]
                        n = int(col["_n"][i])
                        total = int(col["_dur"][i]) / 1000
                        parts += [f"{n} task{'s' if n != 1 else ''}",
                                  f"{num_text(total)} us in total"]
                        # the wait-time finding ranks ops by their wait, the others by run
                        # time
                        weight = int(col["_wait"][i]) / 1000 if "task_wait_time" in fields \
                            else total
                        items.append((weight, f"{name}: " + ", ".join(parts)))
                    out[res["Rule Suggestion"]] = items
        return out


def evaluate(summary: pd.DataFrame, core_num: int = 32, aic_metrics: str = "",
             workspace: pd.Series | None = None, table: OpTable | None = None) -> dict:
    """prof_rule JSON content for one device's op_summary (`table`: its OpTable when already
    built)."""
    return state_of(summary, core_num, workspace, table).rule_json(aic_metrics)


def state_of(summary: pd.DataFrame, core_num: int = 32, workspace: pd.Series | None = None,
             table: OpTable | None = None) -> RuleState:
    st = RuleState(core_num, workspace)
    st.add(table if table is not None else OpTable.from_summary(summary, core_num))
    return st


