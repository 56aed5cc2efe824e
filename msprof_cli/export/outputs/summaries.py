"""CSV summary tables (docs/formats/export-files.md 3): each builder returns (header, DataFrame of
str).

Values are formatted here, vectorised, exactly as the real analysis prints them: absolute
times as local µs with 3 decimals plus a TAB, durations as Python floats, ``N/A`` for missing.
The mindstudio layout prepends ``Device_id``; the legacy layout uses the tables as they are.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from msprof_cli.raw import layouts as L

from ..decode.data import COPY_SOURCE, DROPPED_GE_TYPES, MEMCPY_SOURCE, MIX_GE_TYPES, DeviceData
from ..decode.host import NA
from ..decode.join import sorted_groups
from ..decode.pmu import stars_tail_columns, stars_tail_header, tail_columns, tail_header
from ..decode.steptrace import step_columns
from ..fmt import float_str, int_str, obj_full, py_round, text_frame, us_list

Table = tuple[list[str], pd.DataFrame]
RowRender = Callable[[int, int], pd.DataFrame]  # rows [lo, hi) of a table as str cells

OP_SUMMARY_BASE = ["Model ID", "Task ID", "Stream ID", "Op Name", "OP Type", "OP State",
                   "Task Type", "Task Start Time(us)", "Task Duration(us)", "Task Wait Time(us)",
                   "Block Dim", "HF32 Eligible", "Input Shapes", "Input Data Types",
                   "Input Formats", "Output Shapes", "Output Data Types", "Output Formats"]
OP_STATISTIC = ["OP Type", "Core Type", "Count", "Total Time(us)", "Min Time(us)",
                "Avg Time(us)", "Max Time(us)", "Ratio(%)"]
TASK_TIME = ["kernel_name", "kernel_type", "stream_id", "task_id", "task_time(us)",
             "task_start(us)", "task_stop(us)"]
STEP_TRACE = ["Iteration ID", "FP Start(us)", "BP End(us)", "Iteration End(us)",
              "Iteration Time(us)", "FP to BP Time(us)", "Iteration Refresh(us)",
              "Data Aug Bound(us)", "Model ID"]
API_STATISTIC = ["Level", "API Name", "Time(us)", "Count", "Avg(us)", "Min(us)", "Max(us)",
                 "Variance"]
L2_CACHE = ["Stream Id", "Task Id", "Hit Rate", "Victim Rate", "Op Name"]


def stamp(ns: np.ndarray) -> np.ndarray:
    """Absolute local time column: µs with 3 decimals and the trailing TAB."""
    return np.array(us_list(ns, "\t"), dtype=object)


def dur_str(ns: np.ndarray) -> np.ndarray:
    return float_str(py_round(np.asarray(ns, dtype=np.int64) / 1000.0, 3))


def not_memcpy(tasks: pd.DataFrame) -> np.ndarray:
    """Rows that are not MEMCPY_ASYNC copies (ts_track "ts memcpy" tasks)."""
    return tasks["source"].to_numpy(object) != MEMCPY_SOURCE


def not_copy(tasks: pd.DataFrame) -> np.ndarray:
    """Rows that are not host<->device copies of either chip (no op_summary rows)."""
    return ~np.isin(tasks["source"].to_numpy(object), [MEMCPY_SOURCE, COPY_SOURCE])


class OpRows:
    """The op_summary rows of a task table without a copy of it (a filtered copy of every
    task column was ~270 MB at 1M tasks): row positions into the table; a column is
    gathered when first read (and kept), ``iloc[lo:hi]`` gives those rows as a real frame.
    Supports what the summaries and timelines read: ``len``, ``in``, ``[col]``,
    ``[[cols]]``, ``iloc[a:b]``."""

    def __init__(self, tasks: pd.DataFrame, keep: np.ndarray) -> None:
        self.tasks = tasks
        self.pos = np.flatnonzero(keep)
        self._cols: dict[str, pd.Series] = {}

    def __len__(self) -> int:
        return len(self.pos)

    def __contains__(self, col: str) -> bool:
        return col in self.tasks

    @property
    def columns(self) -> pd.Index:
        return self.tasks.columns

    def __getitem__(self, key):
        if isinstance(key, list):
            return pd.DataFrame({k: self[k] for k in key})
        if key not in self._cols:
            self._cols[key] = self.tasks[key].iloc[self.pos].reset_index(drop=True)
        return self._cols[key]

    @property
    def iloc(self) -> "_OpRowsRange":
        return _OpRowsRange(self)


class _OpRowsRange:
    def __init__(self, rows: OpRows) -> None:
        self.rows = rows

    def __getitem__(self, sl: slice) -> pd.DataFrame:
        if not isinstance(sl, slice):
            raise TypeError("OpRows.iloc takes a slice of rows")
        return self.rows.tasks.iloc[self.rows.pos[sl]]


def op_rows(dev: DeviceData, tasks: pd.DataFrame | None = None) -> pd.DataFrame | OpRows:
    """Device tasks that are op_summary rows (WRITE_BACK / INVALID dropped; host<->device
    copies are not ops), by start: the task table itself when nothing is dropped, else an
    OpRows view of it."""
    t = dev.tasks if tasks is None else tasks
    keep = ~t["task_type"].isin(list(DROPPED_GE_TYPES)).to_numpy() & not_copy(t)
    if "comm_step" in t:
        keep &= ~t["comm_step"].to_numpy(bool)
    if dev.comm_ops is not None and len(dev.comm_ops):
        return with_comm_rows(t[keep], dev.comm_ops)
    if keep.all() and isinstance(t.index, pd.RangeIndex) and t.index.start == 0 \
            and t.index.step == 1:
        return t  # nothing dropped: no copy of the whole task table (copy-on-write frames)
    return OpRows(t, keep)


COMM_TASK_TYPE = "COMMUNICATION"


def with_comm_rows(t: pd.DataFrame, ops: pd.DataFrame) -> pd.DataFrame:
    """The op rows `t` with one COMMUNICATION row per collective (communication.comm_ops),
    by start: the analysis's op_summary rows of a collective (Task / Stream ID, OP State,
    HF32, shapes and PMU columns N/A, Block Dim 0)."""
    n = len(ops)
    extra = {}
    for c in t.columns:
        dt = t[c].dtype
        if dt == bool:
            extra[c] = np.zeros(n, bool)
        elif isinstance(dt, np.dtype) and dt.kind in "iuf":
            extra[c] = np.zeros(n, dt)
        else:
            extra[c] = obj_full(n, NA)
    extra.update({
        "stream_id": np.full(n, -1, np.int64), "task_id": np.full(n, -1, np.int64),
        "start_local": ops["start_local"].to_numpy(np.int64),
        "end_local": ops["end_local"].to_numpy(np.int64),
        "recv_local": ops["start_local"].to_numpy(np.int64),
        "dur_ns": ops["dur_ns"].to_numpy(np.int64), "source": obj_full(n, "comm"),
        "host_known": np.ones(n, bool), "op_name": ops["op_name"].to_numpy(object),
        "op_type": ops["op_type"].to_numpy(object), "task_type": obj_full(n, COMM_TASK_TYPE),
        "model_id": ops["model_id"].to_numpy(np.int64),
        "connection_id": ops["connection_id"].to_numpy(np.int64)})
    rows = pd.concat([t, pd.DataFrame({c: extra[c] for c in t.columns})], ignore_index=True)
    return rows.sort_values("start_local", kind="stable", ignore_index=True)


def wait_times(start: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """First row literal ``0``; then max(start - prev_start - prev_dur, 0) µs, rounded."""
    n = len(start)
    if n == 0:
        return np.zeros(0, dtype=object)
    gap = np.maximum(start[1:] - start[:-1] - dur[:-1], 0)
    out = np.empty(n, dtype=object)
    out[0] = "0"
    out[1:] = dur_str(gap)
    return out


def quoted_shapes(v: np.ndarray) -> np.ndarray:
    """Shapes in quotes, N/A as is; formatted once per distinct value (ops repeat their
    shapes every iteration)."""
    v = np.asarray(v, dtype=object)
    codes, uniq = pd.factorize(v)
    if (codes < 0).any():  # missing values: str() of each, as written before
        return np.where(v == NA, NA, '"' + v.astype(str).astype(object) + '"')
    uniq = np.asarray(uniq, dtype=object)
    text = np.where(uniq == NA, NA, '"' + uniq.astype(str).astype(object) + '"')
    return np.asarray(text, dtype=object)[codes]


def op_summary_header(dev: DeviceData) -> list[str]:
    metrics = dev.rd.ai_core_metrics if dev.pmu_events else None
    if dev.rd.stars:  # the Atlas A2: Mix Block Dim, Context ID, the per-core-kind tail
        base = OP_SUMMARY_BASE[:]
        base.insert(base.index("Block Dim") + 1, "Mix Block Dim")
        return base + ["Context ID"] + stars_tail_header(
            dev.rd.aiv_metrics if metrics else None, dev.pmu_events, dev.rd.aiv_events)
    return OP_SUMMARY_BASE + tail_header(metrics, dev.pmu_events)


def op_summary(dev: DeviceData, rows: pd.DataFrame, lo: int = 0, hi: int | None = None
               ) -> Table:
    """op_summary of `rows` (all, or rows [lo, hi) only: the chunked writer renders a few
    hundred thousand rows at a time; the wait time of row lo still sees row lo - 1)."""
    metrics = dev.rd.ai_core_metrics if dev.pmu_events else None
    header = op_summary_header(dev)
    hi = len(rows) if hi is None else hi
    first = max(lo - 1, 0)
    start_w = rows["start_local"].to_numpy(np.int64)[first:hi]
    dur_w = rows["dur_ns"].to_numpy(np.int64)[first:hi]
    wait = wait_times(start_w, dur_w)[lo - first:]
    if lo != 0 or hi != len(rows):
        rows = rows.iloc[lo:hi]
    start = rows["start_local"].to_numpy(np.int64)
    dur = rows["dur_ns"].to_numpy(np.int64)
    comm = rows["task_type"].to_numpy(object) == COMM_TASK_TYPE
    cols = {
        "Model ID": int_str(rows["model_id"]),
        "Task ID": np.where(comm, NA, int_str(rows["task_id"])),
        "Stream ID": np.where(comm, NA, int_str(rows["stream_id"])),
        "Op Name": rows["op_name"].to_numpy(object),
        "OP Type": rows["op_type"].to_numpy(object),
        "OP State": rows["op_state"].to_numpy(object),
        "Task Type": rows["task_type"].to_numpy(object),
        "Task Start Time(us)": stamp(start),
        "Task Duration(us)": dur_str(dur),
        "Task Wait Time(us)": wait,
        "Block Dim": int_str(rows["block_dim"]),
        "HF32 Eligible": rows["hf32"].to_numpy(object),
        "Input Shapes": quoted_shapes(rows["in_shapes"].to_numpy(object)),
        "Input Data Types": rows["in_types"].to_numpy(object),
        "Input Formats": rows["in_formats"].to_numpy(object),
        "Output Shapes": quoted_shapes(rows["out_shapes"].to_numpy(object)),
        "Output Data Types": rows["out_types"].to_numpy(object),
        "Output Formats": rows["out_formats"].to_numpy(object),
    }
    if dev.rd.stars:
        # kernels outside FFTS+ graphs: no context id (a MIX kernel's op_summary row is its
        # FFTS+ task's, as the analysis shows it: context N/A)
        mix = rows["mix_block_dim"].to_numpy(np.int64) if "mix_block_dim" in rows \
            else np.zeros(len(rows), np.int64)
        cols["Mix Block Dim"] = np.where(comm, NA, int_str(mix)).astype(object)
        cols["Context ID"] = obj_full(len(rows), NA)
        if metrics:
            cols.update(stars_tail_columns(
                rows, metrics, dev.rd.aiv_metrics or "", dev.pmu_events, dev.rd.aiv_events,
                float(dev.rd.aic_mhz), dev.rd.ai_core_num, dev.rd.aiv_num))
    else:
        cols.update(tail_columns(rows, metrics, dev.pmu_events, float(dev.rd.aic_mhz),
                                 dev.rd.ai_core_num))
    return header, text_frame({h: cols[h] for h in header})


def op_statistic_agg(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (op_type, task_type), sorted: count, total, min, max of the durations (ns) --
    exact integers, so the aggregates of several windows combine (`combine_op_statistic`)."""
    # the groups on numpy (a pandas groupby of two keys cost ~3 ms even on a few rows):
    # (op_type, task_type) in sorted order, rows of a missing key left out, as groupby does
    op = rows["op_type"].to_numpy(object)
    kind = rows["task_type"].to_numpy(object)
    keep = (kind != COMM_TASK_TYPE) & ~pd.isna(op) & ~pd.isna(kind)  # not in the op counter
    op, kind = op[keep], kind[keep]
    dur = rows["dur_ns"].to_numpy(np.int64)[keep]
    c_op, u_op = pd.factorize(op, sort=True)
    c_kind, u_kind = pd.factorize(kind, sort=True)
    key = c_op.astype(np.int64) * max(len(u_kind), 1) + c_kind
    order, groups, first, last = sorted_groups(key)
    d = dur[order]
    total = np.add.reduceat(d, first) if len(d) else np.zeros(0, np.int64)
    out = pd.DataFrame({
        "op_type": np.asarray(u_op, dtype=object)[groups // max(len(u_kind), 1)],
        "task_type": np.asarray(u_kind, dtype=object)[groups % max(len(u_kind), 1)],
        "count": (last - first).astype(np.int64), "total": total.astype(np.int64),
        "min": np.minimum.reduceat(d, first) if len(d) else np.zeros(0, np.int64),
        "max": np.maximum.reduceat(d, first) if len(d) else np.zeros(0, np.int64),
        "total_f": total.astype(np.float64)})
    # the analysis's durations: INTEGER ns, but its AI CPU tasks' (ts_track times in float
    # ms, ai_cpu_model.py) are REAL -- their sums and averages are float (`dur_f`); those
    # sums stay pandas' own (compensated) group sums, so the averages print as before
    if "dur_f" in rows:
        real = kind == "AI_CPU"
        if real.any():
            f = pd.DataFrame({"op_type": op[real], "task_type": kind[real],
                              "dur_f": rows["dur_f"].to_numpy(np.float64)[keep][real]})
            sums = f.groupby(["op_type", "task_type"], sort=True)["dur_f"].sum()
            at = out["task_type"].to_numpy(object) == "AI_CPU"
            got = out.loc[at, ["op_type", "task_type"]]
            out.loc[at, "total_f"] = sums.reindex(
                pd.MultiIndex.from_frame(got)).to_numpy(np.float64)
    return out


def combine_op_statistic(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """`op_statistic_agg` of the union of the rows of `parts` (aggregates of each)."""
    if len(parts) == 1:  # one window (every export below the window size): already it
        return parts[0]
    g = pd.concat(parts, ignore_index=True).groupby(["op_type", "task_type"], sort=True)
    return pd.DataFrame({"count": g["count"].sum(), "total": g["total"].sum(),
                         "min": g["min"].min(), "max": g["max"].max(),
                         "total_f": g["total_f"].sum()}).reset_index()


def op_statistic(rows: pd.DataFrame, agg: pd.DataFrame | None = None) -> Table:
    """`agg`: the rows' `op_statistic_agg` when already known (windowed export)."""
    if agg is None:
        agg = op_statistic_agg(rows)
    agg = agg[agg["op_type"] != NA].reset_index(drop=True)  # the viewer's op_type != 'N/A'
    total_all = agg["total"].sum()
    total_ns = agg["total"].to_numpy(np.int64)
    total_us = total_ns / 1000.0
    count = agg["count"].to_numpy(np.int64)
    # OpCounterOpSceneCalculator.create_report: ratio = round(total / ΣTotal * 100, 6), then the
    # viewer (ReportOPCounter._format_statistic_data) rounds it to 3; Avg = SQLite
    # sum(duration) / count(op_type) over INTEGER ns -- an integer division -- then / 1000
    # rounded to 3.
    ratio = py_round(py_round(total_ns / float(total_all) * 100, 6), 3) if total_all \
        else np.zeros(len(agg))
    avg_ns = total_ns // np.maximum(count, 1)
    if "total_f" in agg:  # REAL durations (AI CPU): a float sum and division
        real = agg["task_type"].to_numpy(object) == "AI_CPU"
        avg_ns = np.where(real, agg["total_f"].to_numpy(np.float64) / np.maximum(count, 1),
                          avg_ns)
    agg["_total_us"] = total_us
    order = np.argsort(-total_us, kind="stable")
    df = text_frame({
        "OP Type": agg["op_type"].to_numpy(object),
        "Core Type": agg["task_type"].to_numpy(object),
        "Count": int_str(count),
        "Total Time(us)": float_str(py_round(total_us, 3)),
        "Min Time(us)": dur_str(agg["min"].to_numpy(np.int64)),
        "Avg Time(us)": float_str(py_round(avg_ns / 1000.0, 3)),
        "Max Time(us)": dur_str(agg["max"].to_numpy(np.int64)),
        "Ratio(%)": float_str(ratio),
    }).iloc[order].reset_index(drop=True)
    return OP_STATISTIC, df


def task_time(dev: DeviceData, tasks: pd.DataFrame) -> Table:
    ge = tasks["task_type"].to_numpy(object)
    rt = tasks["rt_type"].to_numpy(object)
    known = tasks["host_known"].to_numpy(bool)
    kind = np.where(ge != NA, ge, np.where(known & (rt != NA), rt, "Other"))
    if "comm_step" in tasks:  # a collective's step: its runtime type (not an op row)
        kind = np.where(tasks["comm_step"].to_numpy(bool), rt, kind)
    kind = np.where(np.isin(ge, MIX_GE_TYPES), rt, kind)  # an A2 MIX kernel's context
    start = tasks["start_local"].to_numpy(np.int64)
    end = tasks["end_local"].to_numpy(np.int64)
    df = text_frame({
        "kernel_name": tasks["op_name"].to_numpy(object),
        "kernel_type": kind,
        "stream_id": int_str(tasks["stream_id"]),
        "task_id": int_str(tasks["task_id"]),
        "task_time(us)": dur_str(tasks["dur_ns"].to_numpy(np.int64)),
        "task_start(us)": stamp(start),
        "task_stop(us)": stamp(end),
    })
    return TASK_TIME, df


def task_time_memcpy(dev: DeviceData, tasks: pd.DataFrame) -> Table:
    """The ts memcpy tasks' task_time rows as the analysis writes them after the other
    tasks' (Ascend/msprof viewer/training/task_op_viewer.py _add_memcpy_data, memory_copy_
    viewer.get_memory_copy_non_chip0_summary): "MemcopyAsync", "other", in the order of the
    copies' first records (ordered by time: by start)."""
    from ..decode.device import analysis_us

    off = np.int64(dev.rd.offset_ns)
    start = tasks["start_local"].to_numpy(np.int64)
    end = tasks["end_local"].to_numpy(np.int64)
    dur = analysis_us(end - off, dev.rd) - analysis_us(start - off, dev.rd)
    n = len(tasks)
    df = text_frame({
        "kernel_name": obj_full(n, "MemcopyAsync"),
        "kernel_type": obj_full(n, "other"),
        "stream_id": int_str(tasks["stream_id"]),
        "task_id": int_str(tasks["task_id"]),
        "task_time(us)": float_str(py_round(dur, 3)),
        "task_start(us)": stamp(start),
        "task_stop(us)": stamp(end),
    })
    return TASK_TIME, df


def _opt(ns: np.ndarray, ok: np.ndarray, fn) -> np.ndarray:
    out = obj_full(len(ns), NA)
    if ok.any():
        out[ok] = fn(ns[ok])
    return out


def step_trace(its: pd.DataFrame) -> Table:
    its = its.sort_values("step_end_ns", kind="stable")
    start, end, fp, bp, aug, has_fp, has_bp = step_columns(its)
    df = text_frame({
        "Iteration ID": int_str(its["iteration_id"]),
        "FP Start(us)": _opt(fp, has_fp, stamp),
        "BP End(us)": _opt(bp, has_bp, stamp),
        "Iteration End(us)": stamp(end),
        "Iteration Time(us)": dur_str(end - start),
        "FP to BP Time(us)": _opt(bp - fp, has_fp & has_bp, dur_str),
        "Iteration Refresh(us)": _opt(end - bp, has_bp, dur_str),
        "Data Aug Bound(us)": _opt(aug, aug >= 0, dur_str),
        "Model ID": int_str(its["model_id"]),
    })
    header = list(STEP_TRACE)
    # multi-device: Reduce Start/Duration per AllReduce k (docs/formats/export-files.md 3.4); N/A if
    # missing
    ks = sorted({int(c.rsplit("_", 1)[1]) for c in its.columns if c.startswith("reduce_start_")})
    for k in ks:
        rs = its[f"reduce_start_{k}"].to_numpy(np.int64)
        re_ = its.get(f"reduce_end_{k}", pd.Series(-1, index=its.index)).to_numpy(np.int64)
        df[f"Reduce Start(us) {k}"] = _opt(rs, rs >= 0, stamp)
        df[f"Reduce Duration(us) {k}"] = _opt(re_ - rs, (rs >= 0) & (re_ >= 0), dur_str)
        header += ["Reduce Start(us)", "Reduce Duration(us)"]
    return header, df


def api_groups(apis: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per API row the code of its (API Name, Level) group, and the groups' names and level
    names (objects), numbered by first appearance."""
    lvl = apis["level"].to_numpy()
    lcode, lvals = pd.factorize(lvl)
    lnames = np.array([L.LEVEL_NAMES.get(int(v), str(int(v))) for v in lvals], dtype=object)
    name = np.where(lvl == L.LEVEL_HCCL, apis["item_name"].to_numpy(object),
                    apis["type_name"].to_numpy(object))
    ncode, nvals = pd.factorize(name)
    codes, pairs = pd.factorize(ncode.astype(np.int64) * max(len(lvals), 1) + lcode)
    pairs = np.asarray(pairs, dtype=np.int64)
    return (codes.astype(np.int64), np.asarray(nvals, dtype=object)[pairs // max(len(lvals), 1)],
            lnames[pairs % max(len(lvals), 1)])


def api_statistic(apis: pd.DataFrame) -> Table:
    if len(apis) == 0:
        return API_STATISTIC, pd.DataFrame({h: [] for h in API_STATISTIC})
    codes, names, levels = api_groups(apis)
    return api_statistic_of(codes, apis["dur_ns"].to_numpy(np.int64), names, levels)


def api_statistic_of(codes: np.ndarray, dur_ns: np.ndarray, names: np.ndarray,
                     levels: np.ndarray) -> Table:
    """api_statistic from per-call group codes (into `names` / `levels`) and durations, in
    call (record) order -- the windowed export keeps only these three columns."""
    # the groups in id order: the calls sorted by group (stable: call order inside)
    codes = np.asarray(codes)
    order, gid, bounds, ends = sorted_groups(codes)
    gid = gid.astype(np.int64)
    count = (ends - bounds).astype(np.int64)
    dur_sorted = np.asarray(dur_ns, np.int64)[order]
    mins = np.minimum.reduceat(dur_sorted, bounds) if len(bounds) else dur_sorted
    maxs = np.maximum.reduceat(dur_sorted, bounds) if len(bounds) else dur_sorted
    # the analysis's sums are Python's sum() of the per-call float µs (left to right, in
    # call order; api_statistic_viewer._api_statistic_reformat), not the exact ns total
    dur_us = dur_sorted / 1000.0
    time_us = py_round(np.array([sum(dur_us[a:b].tolist()) for a, b in zip(bounds, ends)]),
                       3)
    avg = py_round(time_us / count, 3)
    # variance: mean of the per-call squared deviations, each rounded to 3 decimals
    avg_of = np.zeros(int(gid.max()) + 1 if len(gid) else 0)
    avg_of[gid] = avg
    dev = py_round((dur_us - avg_of[np.asarray(codes)[order]]) ** 2, 3)
    sq = np.array([sum(dev[a:b].tolist()) for a, b in zip(bounds, ends)])
    df = text_frame({
        "Level": levels[gid],
        "API Name": names[gid],
        "Time(us)": float_str(time_us),
        "Count": int_str(count),
        "Avg(us)": float_str(avg),
        "Min(us)": dur_str(mins),
        "Max(us)": dur_str(maxs),
        "Variance": float_str(py_round(sq / count, 3)),
    })
    # ordered by (API Name, Level) in byte order (the analysis's SQLite ``ORDER BY api_name,
    # level``, ApiDataViewModel.get_api_statistic_data); one key per group, a prefix first
    # (``X`` before ``X_1``: a "\x00"-joined string key does not survive pandas' str ops)
    key = list(zip((str(x).encode("utf-8") for x in df["API Name"].to_numpy(object)),
                   (str(x).encode("utf-8") for x in df["Level"].to_numpy(object))))
    order = sorted(range(len(key)), key=key.__getitem__)
    return API_STATISTIC, df.iloc[order].reset_index(drop=True)




def l2_cache(dev: DeviceData, tasks: pd.DataFrame, restrict: bool = False) -> Table | None:
    """`restrict` (legacy iteration window): keep only records of the (stream, task) pairs
    among `tasks` -- l2_cache.data has no time of its own."""
    l2 = dev.l2
    if l2 is None or len(l2) == 0:
        return None
    return l2_cache_of(l2, l2_names(tasks), dev.rd.l2_events, restrict)


def l2_names(tasks: pd.DataFrame) -> pd.DataFrame:
    """The op name of each (stream, task) pair: its first task's."""
    return tasks.drop_duplicates(["stream_id", "task_id"], keep="first")[
        ["stream_id", "task_id", "op_name"]]


def l2_cache_of(l2: pd.DataFrame, names: pd.DataFrame, events: list[int],
                restrict: bool = False) -> Table | None:
    """l2_cache rows of the records `l2` (l2_names of the exported tasks; `restrict`: only
    their pairs, None when none is left).  Row by row, so records can come in chunks."""
    if restrict:
        l2 = l2.merge(names[["stream_id", "task_id"]], on=["stream_id", "task_id"],
                      how="inner")
        if len(l2) == 0:
            return None
    pos = {e: i for i, e in enumerate(events[:8])}
    n = len(l2)
    req = l2[f"ev_{pos[0x59]}"].to_numpy(np.float64) if 0x59 in pos else np.zeros(n)
    hit = l2[f"ev_{pos[0x5B]}"].to_numpy(np.float64) if 0x5B in pos else np.zeros(n)
    vic = l2[f"ev_{pos[0x5C]}"].to_numpy(np.float64) if 0x5C in pos else np.zeros(n)
    safe = np.where(req == 0, 1, req)
    m = l2.merge(names, on=["stream_id", "task_id"], how="left")
    df = text_frame({
        "Stream Id": int_str(l2["stream_id"]),
        "Task Id": int_str(l2["task_id"]),
        "Hit Rate": float_str(py_round(np.where(req == 0, 0, hit / safe), 6)),
        "Victim Rate": float_str(py_round(np.where(req == 0, 0, vic / safe), 6)),
        "Op Name": m["op_name"].fillna(NA).to_numpy(object),
    })
    return L2_CACHE, df

