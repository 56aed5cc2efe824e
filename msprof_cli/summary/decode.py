"""The summary's own decode of a whole PROF dir: what `summary.build` reads, and no more.

The export's decode (export.decode.dataset.load_prof) builds every column every output needs: the
six tensor columns of every task (tensor_info decoded and joined in a worker: ~2 s of CPU
at 1M tasks), HF32, OP State, block dim, the analysis's float durations, the named API
table...  The summary reads a few of them, and the shapes of one task per op only.  This
decode runs the same decoders (export.host, export.device, export.steptrace through
dataset.device_iterations, dataset.host_batches, dataset.comm_ops) and builds the same
values of the columns the summary reads -- stream, start, end, duration, source, op name /
type, GE task type, runtime type, model, launch, PMU counters -- but:

* the joins are made on integer columns (summary.joins): dataset.enclose as a search on
  (thread, begin) keys, the task_track <-> device task and the PMU joins on (group,
  occurrence) by sorting, not on frames;
* tensor_info is not decoded: `Shapes` reads the time, thread and op of its records and
  decodes the records of the launches whose shapes are asked for (the first task of each
  op) through export.host.decode_tensors itself;
* the text columns are Categoricals (their values are the export's strings): the
  reduction groups them by code.

It is used for the one-window plans of big PROF dirs (`light_decodable`), where the
summary leaves the advice to `msprof export`.  That it gives the export's values is a test
(tests/test_summary.py compares both decodes column by column and their summaries on the
frozen corpus).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from msprof_cli.export.decode.comm_ops import comm_ops
from msprof_cli.export.decode.control_info import NO_MODEL, ResultDirInfo, read_result_dir
from msprof_cli.export.decode.data import (COPY_SOURCE, DROPPED_GE_TYPES, HARDWARE_OP_TYPES,
                                           KERNEL_RT_TYPES, DeviceData, HostData, ProfData)
from msprof_cli.export.decode.dataset import device_iterations, host_batches
from msprof_cli.export.decode.device import DeviceTables, decode_device
from msprof_cli.export.decode.host import (NA, HostTables, decode_host, decode_tensors, resolve,
                                           type_names, unique_rows)
from msprof_cli.export.decode.rawread import DecodeLog, data_files, device_regex, host_records
from msprof_cli.export.fmt import obj_full
from msprof_cli.export.outputs.summaries import not_copy
from msprof_cli.export.runtime.memory import release
from msprof_cli.raw import enums as EN
from msprof_cli.raw import layouts as L
from msprof_cli.raw.profdir import result_dirs

from .intervals import merged
from .joins import Spans, match

PMU_COLS = ["total_cycles"] + [f"pmu_{k}" for k in range(8)]


def hwts_tasks(rd: ResultDirInfo) -> int:
    """The device's task count as its task log's size says (start + end record a task):
    hwts.data, or an Atlas A2's stars_soc.data."""
    kind = "stars_soc" if rd.stars else "hwts"
    files = data_files(rd.data_dir, device_regex(kind), DecodeLog())
    size = 0
    for p in files:
        try:
            size += p.stat().st_size
        except OSError:
            pass
    return size // L.DEVICE_DTYPES[kind].itemsize // 2


def light_decodable(prof: Path, above: int) -> bool:
    """A PROF dir with a host dir and every device above `above` hwts tasks (the summary
    then has no advice to compute: it needs the export's whole task table)."""
    infos = [read_result_dir(d) for d in result_dirs(prof)]
    devs = [i for i in infos if i.device_id is not None]
    host = [i for i in infos if i.device_id is None]
    return bool(devs) and len(host) == 1 and host[0].data_dir.is_dir() \
        and all(hwts_tasks(rd) > above for rd in devs)


# -- host -----------------------------------------------------------------------------------
@dataclass
class Launches:
    """The task_track rows of dataset.launch_info as columns: per row its launch
    (connection id, -1), model (NO_MODEL), host batch, runtime type name and the node
    basic info row of its launch (-1: none)."""

    cols: dict[str, np.ndarray]
    rt_names: np.ndarray
    nb_row: np.ndarray
    op_name_hash: np.ndarray
    op_type_hash: np.ndarray
    ge_type: np.ndarray


@dataclass
class Nodes:
    """The node launches (LEVEL_NODE APIs) of the host: connection id, begin, end per row
    and their `Spans`."""

    cid: np.ndarray
    begin: np.ndarray
    end: np.ndarray
    spans: Spans

    @classmethod
    def of(cls, apis: pd.DataFrame) -> "Nodes":
        nodes = apis[apis["level"].to_numpy() == L.LEVEL_NODE]
        return cls(nodes["connection_id"].to_numpy(np.int64),
                   nodes["begin_ns"].to_numpy(np.int64), nodes["end_ns"].to_numpy(np.int64),
                   Spans.of(nodes))

    def launch(self, thread: np.ndarray, ts: np.ndarray) -> np.ndarray:
        """The connection id of the launch enclosing each record (dataset.enclose), -1."""
        row = self.spans.find(thread, ts)
        return np.where(row >= 0, self.cid[np.maximum(row, 0)] if len(self.cid) else -1, -1)


def launches(host: HostTables, nodes: Nodes) -> Launches:
    """dataset.launch_info's values, on columns (the runtime type as a code into
    `rt_names`)."""
    tt = host.task_track
    rt_types, rt_code = np.unique(tt["rt_type"].to_numpy(np.int64), return_inverse=True)
    rt_names = type_names(np.full(len(rt_types), L.LEVEL_RUNTIME), rt_types, host.types)
    flip = np.isin(rt_code, np.flatnonzero(rt_names == "FLIP_TASK"))
    keep = ~flip & ~np.isin(rt_code, np.flatnonzero(rt_names == "MAINTENANCE"))
    cols = {c: tt[c].to_numpy()[keep] for c in ("thread_id", "ts_ns", "device_id",
                                                "stream_id", "task_id", "kernel_name")}
    cols["rt_code"] = rt_code[keep]
    cols["launch"] = nodes.launch(cols["thread_id"], cols["ts_ns"])
    apis = host.apis
    models = apis[(apis["level"].to_numpy() == L.LEVEL_MODEL)
                  & np.isin(apis["type"].to_numpy(), L.MODEL_STEP_TYPES)]
    row = Spans.of(models).find(cols["thread_id"], cols["ts_ns"])
    # the model id as launch_info's enclose gives it (through float64)
    mid = models["item_id"].to_numpy().astype(np.int64).astype(np.float64).astype(np.int64)
    cols["model"] = np.where(row >= 0, mid[np.maximum(row, 0)] if len(mid) else 0, NO_MODEL)
    flips = tt[flip][["ts_ns", "stream_id", "task_id", "device_id"]]
    cols["batch"] = host_batches(pd.DataFrame(
        {c: cols[c] for c in ("ts_ns", "stream_id", "task_id", "device_id")}), flips)
    nb = host.node_basic
    nb_cid = nodes.launch(nb["thread_id"].to_numpy(np.int64), nb["ts_ns"].to_numpy(np.int64))
    # the last node_basic_info record inside each launch (connection ids: API record
    # numbers, a table of them is as long as the API table)
    rows = np.flatnonzero(nb_cid >= 0)
    size = max(int(nb_cid.max(initial=-1)), int(cols["launch"].max(initial=-1))) + 1
    last = np.full(size, -1, np.int64)
    np.maximum.at(last, nb_cid[rows], rows)
    launch = cols["launch"]
    nb_row = np.where(launch >= 0, last[np.maximum(launch, 0)], -1) if size \
        else np.full(len(launch), -1, np.int64)
    return Launches(cols, rt_names, nb_row, nb["op_name_hash"].to_numpy(np.uint64),
                    nb["op_type_hash"].to_numpy(np.uint64), nb["ge_type"].to_numpy(np.int64))


@dataclass
class Shapes:
    """The input / output shapes of launches, decoded when asked for: of the tensor_info
    rows inside a launch (export.host.decode_tensors: a record, or one row for the records
    of an op with more than 5 tensors, after the single records), the last one, as
    dataset.tensors_by_launch keeps it."""

    data_dir: Path | None
    nodes: Nodes | None = None
    ts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # per record
    thread: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    op: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    whole: pd.DataFrame | None = None  # tensors_by_launch itself (damaged tensor_info)

    def of(self, conn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(in_shapes, out_shapes) of launches `conn` (-1: none) as attach_tensors gives."""
        conn = np.asarray(conn, np.int64)
        ins, outs = obj_full(len(conn), NA), obj_full(len(conn), NA)
        tens = self.whole if self.whole is not None else \
            self._decode(np.unique(conn[conn >= 0]))
        if tens is None or len(tens) == 0:
            return ins, outs
        at = pd.Index(tens["launch_cid"].to_numpy(np.int64)).get_indexer(conn)
        ok = (at >= 0) & (conn >= 0)
        for col, c in ((ins, "in_shapes"), (outs, "out_shapes")):
            col[ok] = tens[c].to_numpy(object)[at[ok]]
            col[pd.isna(col)] = NA
        return ins, outs

    def _decode(self, asked: np.ndarray) -> pd.DataFrame | None:
        """tensors_by_launch rows (launch_cid, in_shapes, out_shapes) of launches `asked`."""
        nd = self.nodes
        if self.data_dir is None or nd is None or len(self.ts) == 0 or len(asked) == 0:
            return None
        at = pd.Index(nd.cid).get_indexer(asked)
        at = at[at >= 0]
        # the records in the time of an asked launch (any thread), then exactly: those
        # whose launch is asked
        ms, me = merged(nd.begin[at], nd.end[at] + 1)
        k = np.searchsorted(ms, self.ts, side="right") - 1
        cand = np.flatnonzero((k >= 0) & (self.ts < me[np.maximum(k, 0)]))
        cid = nd.launch(self.thread[cand], self.ts[cand])
        keep = np.isin(cid, asked)
        cand, cid = cand[keep], cid[keep]
        if len(cand) == 0:
            return None
        # decode_tensors' rows: records of equal (time, thread, op) form one row after the
        # single records, in order of their first record (a launch holds all of a group)
        gid, _ = unique_rows(np.stack([self.ts[cand], self.thread[cand], self.op[cand]], 1))
        multi = np.bincount(gid)[gid] > 1
        order = np.where(multi, len(self.ts) + gid, cand)
        by = np.lexsort((order, cid))
        last = by[np.r_[cid[by][1:] != cid[by][:-1], True]]
        chosen = np.isin(gid, gid[last])  # the records of the kept rows
        t = decode_tensors(self.data_dir, DecodeLog(), select=cand[chosen])
        # the kept rows in decode_tensors' order: singles by record, then groups by gid
        single = ~multi[last]
        n_single = int((chosen & ~multi).sum())
        rows = np.empty(len(last), np.int64)
        rows[single] = np.searchsorted(cand[chosen & ~multi], cand[last[single]])
        groups = np.unique(gid[chosen & multi])
        rows[~single] = n_single + np.searchsorted(groups, gid[last[~single]])
        return pd.DataFrame({"launch_cid": cid[last],
                             "in_shapes": t["in_shapes"].to_numpy(object)[rows],
                             "out_shapes": t["out_shapes"].to_numpy(object)[rows]})


def tensor_index(data_dir: Path, apis: pd.DataFrame, nodes: Nodes, log: DecodeLog
                 ) -> Shapes:
    """`Shapes` of the host's tensor_info: the time, thread and op of its records (the
    warnings of its files are the decode's)."""
    before = log.bad_records
    c = host_records(data_dir, "tensor_info", log, ["thread_id", "timestamp", "op_name"])
    if len(c["thread_id"]) == 0:
        return Shapes(None)
    if log.bad_records != before:  # records skipped: record numbers no longer positions
        from msprof_cli.export.decode.dataset import tensors_by_launch

        tens = tensors_by_launch(decode_tensors(data_dir, DecodeLog()), apis)
        return Shapes(data_dir, whole=tens)
    return Shapes(data_dir, nodes, c["timestamp"].astype(np.int64),
                  c["thread_id"].astype(np.int64), c["op_name"].view(np.int64))


# -- device ---------------------------------------------------------------------------------
class Text:
    """A text column of n rows built as codes into its names (N/A where nothing is put),
    given as a pandas Categorical: the values of the export's object column, and the
    reduction groups on the codes."""

    def __init__(self, n: int) -> None:
        self.codes = np.zeros(n, np.int32)
        self.names: list[np.ndarray] = [np.array([NA], object)]
        self.size = 1

    def put(self, rows: np.ndarray, codes: np.ndarray, names: np.ndarray) -> None:
        self.codes[rows] = self.size + codes
        self.names.append(np.asarray(names, object))
        self.size += len(names)

    def put_resolved(self, rows: np.ndarray, values: np.ndarray, table: dict) -> None:
        """`rows` get export.host.resolve(values, table)."""
        codes, uniq = pd.factorize(np.asarray(values, np.uint64))
        self.put(rows, codes, resolve(uniq, table))

    def column(self) -> pd.Categorical:
        codes, cats = pd.factorize(np.concatenate(self.names))  # equal names: one category
        return pd.Categorical.from_codes(codes[self.codes].astype(np.int32),
                                         categories=pd.Index(cats, dtype=object))


def device_data(rd: ResultDirInfo, dev: DeviceTables, host: HostData,
                lt: Launches | None) -> DeviceData:
    """dataset.build_device's columns that the summary reads (`lt`: the host's launches,
    None without host task data); the text columns as Categoricals."""
    tasks = dev.tasks
    off = np.int64(rd.offset_ns)
    start = tasks["start_ns"].to_numpy(np.int64) + off
    keep = start >= rd.begin_local_ns
    every = bool(keep.all())
    t = {c: tasks[c].to_numpy(np.int64) if every else tasks[c].to_numpy(np.int64)[keep]
         for c in ("stream_id", "task_id", "batch_id", "start_ns", "end_ns")}
    src = tasks["source"].to_numpy(object)
    src = src if every else src[keep]
    n = len(src)
    ht = host.tables
    has_host = lt is not None
    op_name, op_type, ge, rt = Text(n), Text(n), Text(n), Text(n)
    model_id = np.full(n, NO_MODEL, np.int64)
    conn = np.full(n, -1, np.int64)
    tt_thread = np.zeros(n, np.int64)
    tt_ts = np.zeros(n, np.int64)
    known = np.zeros(n, bool)
    if has_host:
        hc = lt.cols
        mine = np.flatnonzero(hc["device_id"] == (rd.device_id or 0))
        mine = mine[np.argsort(hc["ts_ns"][mine], kind="stable")]
        at = match((t["stream_id"], t["task_id"], t["batch_id"]),
                   (hc["stream_id"][mine], hc["task_id"][mine], hc["batch"][mine]))
        known = at >= 0
        kr = np.flatnonzero(known)
        row = mine[at[kr]]  # task_track row of each known task
        nbr = lt.nb_row[row]
        has_nb = nbr >= 0
        nb_rows, nbr = kr[has_nb], nbr[has_nb]
        src_hash = hc["kernel_name"][row].astype(np.uint64)
        src_hash[has_nb] = lt.op_name_hash[nbr]
        op_name.put_resolved(kr, src_hash, ht.hashes)
        op_type.put_resolved(nb_rows, lt.op_type_hash[nbr], ht.hashes)
        ge.put_resolved(nb_rows, lt.ge_type[nbr], EN.GE_TASK_TYPES)
        rt.put(kr, hc["rt_code"][row], lt.rt_names)
        model_id[kr] = hc["model"][row]
        conn[kr] = hc["launch"][row]
        tt_thread[kr] = hc["thread_id"][row]
        tt_ts[kr] = hc["ts_ns"][row]
    task_type = ge.column()
    cats = np.asarray(task_type.categories, object)
    if "AI_CPU" not in cats:  # AI CPU tasks of aicpu.data are AI_CPU without node info
        task_type = task_type.add_categories(["AI_CPU"])
        cats = np.asarray(task_type.categories, object)
    tcode = task_type.codes.copy()
    tcode[(src == "aicpu") & (cats[tcode] == NA)] = int(np.flatnonzero(cats == "AI_CPU")[0])
    task_type = pd.Categorical.from_codes(tcode, dtype=task_type.dtype)
    rt_type = rt.column()
    rcat = np.asarray(rt_type.categories, object)
    # the steps of a collective: dataset.build_device's comm_step, per runtime type name
    step_rt = (rcat != NA) & ~np.isin(rcat, list(KERNEL_RT_TYPES)) \
        & ~np.char.startswith(rcat.astype(str), "KERNEL_")
    comm_step = (cats[tcode] == "HCCL") & step_rt[rt_type.codes]
    if rd.stars:  # the Atlas A2's copies: dataset.build_device's COPY_SOURCE
        src = np.where((src == "hwts") & (rcat[rt_type.codes] == "MEMCPY_ASYNC")
                       & (cats[tcode] == NA), COPY_SOURCE, src).astype(object)
    out = pd.DataFrame({
        "stream_id": t["stream_id"], "task_id": t["task_id"], "batch_id": t["batch_id"],
        "start_local": t["start_ns"] + off, "end_local": t["end_ns"] + off,
        "dur_ns": t["end_ns"] - t["start_ns"], "source": src, "host_known": known,
        "op_name": op_name.column(), "op_type": op_type.column(), "task_type": task_type,
        "rt_type": rt_type, "model_id": model_id, "connection_id": conn,
        "tt_thread": tt_thread,
        "tt_local": tt_ts + np.int64(host.rd.offset_ns if host.rd else 0),
        "comm_step": comm_step}, copy=False)
    if not out["start_local"].is_monotonic_increasing:
        out = out.sort_values("start_local", kind="stable", ignore_index=True)
    _pmu(out, dev.pmu)
    d = DeviceData(rd=rd, tasks=out, iterations=device_iterations(rd, dev.steps),
                   has_host_ops=has_host, has_node_info=has_host and len(ht.node_basic) > 0,
                   pmu_events=rd.pmu_events if dev.pmu is not None else [])
    if comm_step.any():
        d.comm_ops = comm_ops(d, host)
    return d


def _pmu(out: pd.DataFrame, pmu: pd.DataFrame | None) -> None:
    """dataset.build_device's PMU columns: candidates (hwts tasks but AI CPU / DSA / DVPP)
    matched to the aicore records on (stream, task, occurrence)."""
    n = len(out)
    ok = np.zeros(n, bool)
    if pmu is not None and n:
        cand = np.flatnonzero((out["source"].to_numpy(object) == "hwts")
                              & ~out["task_type"].isin(list(HARDWARE_OP_TYPES)).to_numpy())
        key = (out["stream_id"].to_numpy(np.int64)[cand],
               out["task_id"].to_numpy(np.int64)[cand])
        # the aicore records' occurrences are theirs in record order (pmu["occ"])
        at = match(key, (pmu["stream_id"].to_numpy(np.int64),
                         pmu["task_id"].to_numpy(np.int64)))
        rows, at = cand[at >= 0], at[at >= 0]
        for name in PMU_COLS:
            v = np.zeros(n, np.int64)
            v[rows] = pmu[name].to_numpy(np.int64)[at]
            out[name] = v
        if "pmu_aiv" in pmu:  # the Atlas A2: the core kind the counters are of
            aiv = np.zeros(n, bool)
            aiv[rows] = pmu["pmu_aiv"].to_numpy(bool)[at]
            out["pmu_aiv"] = aiv
        ok[rows] = True
    out["pmu_ok"] = ok


# -- the PROF dir -----------------------------------------------------------------------------
def load(prof: Path) -> tuple[ProfData, Shapes]:
    """The summary's decode of `prof` (a `light_decodable` one): its devices' task tables
    hold the columns the summary reads, without the shapes (`Shapes.of`).  Warnings in the
    order of the export's decode."""
    log = DecodeLog()
    infos = [read_result_dir(d) for d in result_dirs(prof)]
    for i in infos:
        log.warnings.extend(i.warnings)
    host_rd = next(i for i in infos if i.device_id is None)
    post = DecodeLog()
    tables = decode_host(host_rd.data_dir, log, post, tensors=False)
    nodes = Nodes.of(tables.apis)
    shapes = tensor_index(host_rd.data_dir, tables.apis, nodes, log)
    log.merge(post)
    host = HostData(rd=host_rd, tables=tables, apis=pd.DataFrame())
    has_host = len(tables.task_track) > 0 and bool(tables.types)
    lt = launches(tables, nodes) if has_host else None
    tables.task_track = tables.task_track.iloc[:0]
    release()
    devices = []
    for rd in (i for i in infos if i.device_id is not None):
        dev = decode_device(rd, log)
        devices.append(device_data(rd, dev, host, lt))
        del dev
        release()
    tables.apis = tables.apis.iloc[:0]
    return ProfData(prof=prof, host=host, devices=devices, log=log), shapes


def op_row_count(dev: DeviceData) -> int:
    """len(export.outputs.summaries.op_rows(dev)) without building the rows: the tasks but
    WRITE_BACK / INVALID, copies and collective steps, plus one row per collective."""
    t = dev.tasks
    keep = ~t["task_type"].isin(list(DROPPED_GE_TYPES)).to_numpy() & not_copy(t) \
        & ~t["comm_step"].to_numpy(bool)
    return int(keep.sum()) + (len(dev.comm_ops) if dev.comm_ops is not None else 0)
