"""The summary's own decode of a whole PROF dir: what `summary.build` reads, and no more.

The export's decode (export.dataset.load_prof) builds every column every output needs: the
six tensor columns of every task (tensor_info decoded and joined in a worker: ~2 s of CPU
at 1M tasks), HF32, OP State, block dim, the analysis's float durations, the named API
table...  The summary reads a few of them, and the shapes of one task per op only.  This
decode runs the same decoders (export.host, export.device) and the same joins
(dataset.enclose, host_batches, comm_ops, steptrace) and builds the same values of the
columns the summary reads -- stream, start, end, duration, source, op name / type, GE task
type, runtime type, model, launch, PMU counters -- but:

* the task_track <-> device task join (stream, task, batch, occurrence) is made on integer
  keys (occurrences by a stable sort, the match by a hash index), not on frames;
* tensor_info is not decoded: `Shapes` indexes its records by launch (thread and time
  only) and decodes the records of the launches whose shapes are asked for (the first
  task of each op), through export.host.decode_tensors itself.

It is used for the one-window plans of big PROF dirs (`light_decodable`), where the
summary leaves the advice to `msprof export`.  That it gives the export's values is a test
(tests/test_summary.py compares the summaries of both decodes on the frozen corpus).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from msprof_cli.export.decode.comm_ops import comm_ops
from msprof_cli.export.decode.control_info import NO_MODEL, ResultDirInfo, read_result_dir
from msprof_cli.export.decode.data import (DROPPED_GE_TYPES, HARDWARE_OP_TYPES, KERNEL_RT_TYPES,
                                           DeviceData, HostData, ProfData)
from msprof_cli.export.decode.dataset import device_iterations, enclose, host_batches
from msprof_cli.export.decode.device import DeviceTables, decode_device
from msprof_cli.export.decode.host import (NA, HostTables, decode_host, decode_tensors, resolve,
                                           type_names, unique_rows)
from msprof_cli.export.decode.rawread import DecodeLog, data_files, device_regex, host_records
from msprof_cli.export.fmt import obj_full
from msprof_cli.export.outputs.summaries import not_memcpy
from msprof_cli.export.runtime.memory import release
from msprof_cli.raw import layouts as L
from msprof_cli.raw.profdir import result_dirs

PMU_COLS = ["total_cycles"] + [f"pmu_{k}" for k in range(8)]


def hwts_tasks(rd: ResultDirInfo) -> int:
    """The device's task count as its hwts files' size says (start + end record a task)."""
    files = data_files(rd.data_dir, device_regex("hwts"), DecodeLog())
    size = 0
    for p in files:
        try:
            size += p.stat().st_size
        except OSError:
            pass
    return size // L.DEVICE_DTYPES["hwts"].itemsize // 2


def light_decodable(prof: Path, above: int) -> bool:
    """A PROF dir with a host dir and every device above `above` hwts tasks (the summary
    then has no advice to compute: it needs the export's whole task table)."""
    infos = [read_result_dir(d) for d in result_dirs(prof)]
    devs = [i for i in infos if i.device_id is not None]
    host = [i for i in infos if i.device_id is None]
    return bool(devs) and len(host) == 1 and host[0].data_dir.is_dir() \
        and all(hwts_tasks(rd) > above for rd in devs)


# -- integer-key joins -----------------------------------------------------------------------
def group_codes(*cols: np.ndarray) -> np.ndarray:
    """One int64 code per distinct tuple of the int64 columns (equal tuples, equal codes)."""
    n = len(cols[0])
    if n == 0:
        return np.zeros(0, np.int64)
    if all(c.min() >= 0 for c in cols):
        bits = [max(int(c.max()).bit_length(), 1) for c in cols]
        if sum(bits) <= 62:  # packed: the tuple itself
            key = np.zeros(n, np.int64)
            for c, b in zip(cols, bits):
                key = (key << b) | c
            return key
    return pd.DataFrame({i: c for i, c in enumerate(cols)}).groupby(
        list(range(len(cols))), sort=False).ngroup().to_numpy(np.int64)


def occurrences(group: np.ndarray) -> np.ndarray:
    """Per row, its rank among the earlier rows of its group (groupby.cumcount)."""
    order = np.argsort(group, kind="stable")
    g = group[order]
    first = np.flatnonzero(np.r_[True, g[1:] != g[:-1]]) if len(g) else np.zeros(0, np.int64)
    occ = np.empty(len(g), np.int64)
    occ[order] = np.arange(len(g)) - np.repeat(first, np.diff(np.r_[first, len(g)]))
    return occ


def match(left: tuple[np.ndarray, ...], right: tuple[np.ndarray, ...]) -> np.ndarray:
    """Per left row, the right row with equal key columns (unique on the right), or -1:
    the row map of ``left.merge(right, how="left", on=key)``."""
    n = len(left[0])
    if n == 0 or len(right[0]) == 0:
        return np.full(n, -1, np.int64)
    both = group_codes(*(np.concatenate([a, b]) for a, b in zip(left, right)))
    return pd.Index(both[n:]).get_indexer(both[:n]).astype(np.int64)


def _int(values: np.ndarray, fill: int) -> np.ndarray:
    """A float payload of `enclose` (NaN: no span) as int64, NaN -> `fill`."""
    v = np.asarray(values, np.float64)
    return np.where(np.isnan(v), fill, v).astype(np.int64)


# -- host -----------------------------------------------------------------------------------
@dataclass
class Launches:
    """The task_track rows of dataset.launch_info as columns: per row its launch
    (connection id, -1), model (NO_MODEL), host batch, runtime type name and the node
    basic info row of its launch (-1: none)."""

    cols: dict[str, np.ndarray]
    nb_row: np.ndarray
    op_name_hash: np.ndarray
    op_type_hash: np.ndarray
    ge_type: np.ndarray


def launches(host: HostTables) -> Launches:
    """dataset.launch_info's values, on columns."""
    tt = host.task_track
    rt_name = type_names(np.full(len(tt), L.LEVEL_RUNTIME), tt["rt_type"].to_numpy(),
                         host.types)
    is_flip = rt_name == "FLIP_TASK"
    flips = tt[is_flip][["ts_ns", "stream_id", "task_id", "device_id"]]
    keep = ~is_flip & (rt_name != "MAINTENANCE")
    tt = tt[keep].reset_index(drop=True)
    apis = host.apis
    level = apis["level"].to_numpy()
    nodes = apis[level == L.LEVEL_NODE]
    models = apis[(level == L.LEVEL_MODEL) & (apis["type"].to_numpy() == L.MODEL_EXECUTE)]
    models = models.assign(model_id=models["item_id"].astype(np.int64))
    cols = {c: tt[c].to_numpy() for c in ("thread_id", "ts_ns", "device_id", "stream_id",
                                          "task_id", "kernel_name")}
    cols["rt_name"] = rt_name[keep]
    cols["launch"] = _int(enclose(tt, nodes, "ts_ns", ["connection_id"])["connection_id"], -1)
    cols["model"] = _int(enclose(tt, models, "ts_ns", ["model_id"])["model_id"], NO_MODEL)
    cols["batch"] = host_batches(tt, flips)
    nb = host.node_basic
    nb_cid = _int(enclose(nb, nodes, "ts_ns", ["connection_id"])["connection_id"], -1)
    # the last node_basic_info record inside each launch
    rows = np.flatnonzero(nb_cid >= 0)
    cid = nb_cid[rows]
    last = rows[len(cid) - 1 - np.unique(cid[::-1], return_index=True)[1]]
    at = pd.Index(nb_cid[last]).get_indexer(cols["launch"]) if len(last) \
        else np.full(len(tt), -1)
    nb_row = np.where((cols["launch"] >= 0) & (at >= 0), last[np.maximum(at, 0)]
                      if len(last) else -1, -1).astype(np.int64)
    return Launches(cols, nb_row, nb["op_name_hash"].to_numpy(np.uint64),
                    nb["op_type_hash"].to_numpy(np.uint64), nb["ge_type"].to_numpy(np.int64))


@dataclass
class Shapes:
    """The input / output shapes of launches, decoded when asked for: per launch that
    holds tensor_info records, the record (or the group of records of one op with more
    than 5 tensors) that dataset.tensors_by_launch keeps -- the last one of its rows."""

    data_dir: Path | None
    launch: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    rep: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # record or ~gid
    gid: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # per record
    multi: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))  # per record
    whole: pd.DataFrame | None = None  # tensors_by_launch itself (damaged tensor_info)

    def of(self, conn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(in_shapes, out_shapes) of launches `conn` (-1: none) as attach_tensors gives."""
        conn = np.asarray(conn, np.int64)
        ins, outs = obj_full(len(conn), NA), obj_full(len(conn), NA)
        if self.whole is not None:
            tens = self.whole
        else:
            tens = self._decode(np.unique(conn[conn >= 0]))
        if tens is None or len(tens) == 0:
            return ins, outs
        at = pd.Index(tens["launch_cid"].to_numpy(np.int64)).get_indexer(conn)
        ok = (at >= 0) & (conn >= 0)
        for col, c in ((ins, "in_shapes"), (outs, "out_shapes")):
            col[ok] = tens[c].to_numpy(object)[at[ok]]
            col[pd.isna(col)] = NA
        return ins, outs

    def _decode(self, conn: np.ndarray) -> pd.DataFrame | None:
        """tensors_by_launch rows (launch_cid, in_shapes, out_shapes) of launches `conn`."""
        if self.data_dir is None or len(self.launch) == 0 or len(conn) == 0:
            return None
        pos = pd.Index(self.launch).get_indexer(conn)
        conn, rep = conn[pos >= 0], self.rep[pos[pos >= 0]]
        single = rep[rep >= 0]
        groups = ~rep[rep < 0]
        recs = np.union1d(single, np.flatnonzero(self.multi & np.isin(self.gid, groups)))
        t = decode_tensors(self.data_dir, DecodeLog(), select=recs.astype(np.int64))
        # decode_tensors: the single records in order, then one row per group in order of
        # its first record: row of each asked launch
        n_single = len(recs) - int(self.multi[recs].sum())
        row_of_rec = pd.Index(recs[~self.multi[recs]]).get_indexer(single)
        sel_groups = np.unique(self.gid[recs[self.multi[recs]]])  # ascending gid: that order
        row_of_grp = n_single + np.searchsorted(sel_groups, groups)
        rows = np.empty(len(conn), np.int64)
        rows[rep >= 0], rows[rep < 0] = row_of_rec, row_of_grp
        return pd.DataFrame({"launch_cid": conn,
                             "in_shapes": t["in_shapes"].to_numpy(object)[rows],
                             "out_shapes": t["out_shapes"].to_numpy(object)[rows]})


def tensor_index(data_dir: Path, apis: pd.DataFrame, log: DecodeLog) -> Shapes:
    """`Shapes` of the host's tensor_info: its records' thread and time enclosed in the node
    launches (the warnings of its files are the decode's)."""
    before = log.bad_records
    c = host_records(data_dir, "tensor_info", log, ["thread_id", "timestamp", "op_name"])
    n = len(c["thread_id"])
    if n == 0:
        return Shapes(None)
    if log.bad_records != before:  # records skipped: record numbers no longer positions
        from msprof_cli.export.decode.dataset import tensors_by_launch

        tens = tensors_by_launch(decode_tensors(data_dir, DecodeLog()), apis)
        return Shapes(data_dir, whole=tens)
    rec = pd.DataFrame({"thread_id": c["thread_id"].astype(np.int64),
                        "ts_ns": c["timestamp"].astype(np.int64)})
    key3 = np.stack([rec["ts_ns"].to_numpy(), rec["thread_id"].to_numpy(),
                     c["op_name"].view(np.int64)], axis=1)
    gid, _ = unique_rows(key3)  # decode_tensors' groups (numbered by first record)
    del key3
    multi = np.bincount(gid)[gid] > 1
    nodes = apis[apis["level"].to_numpy() == L.LEVEL_NODE]
    cid = _int(enclose(rec, nodes, "ts_ns", ["connection_id"])["connection_id"], -1)
    # decode_tensors' row order: single records in file order, then the groups by gid; the
    # last row of a launch is kept (tensors_by_launch's drop_duplicates keep="last")
    order_key = np.where(multi, n + gid, np.arange(n))
    rows = np.flatnonzero(cid >= 0)
    by = rows[np.lexsort((order_key[rows], cid[rows]))]
    last = np.r_[cid[by][1:] != cid[by][:-1], True] if len(by) else np.zeros(0, bool)
    keep = by[last]
    rep = np.where(multi[keep], ~gid[keep], keep)
    return Shapes(data_dir, cid[keep], rep, gid, multi)


# -- device ---------------------------------------------------------------------------------
def device_data(rd: ResultDirInfo, dev: DeviceTables, host: HostData,
                lt: Launches | None) -> DeviceData:
    """dataset.build_device's columns that the summary reads (`lt`: the host's launches,
    None without host task data)."""
    tasks = dev.tasks
    off = np.int64(rd.offset_ns)
    start = tasks["start_ns"].to_numpy(np.int64) + off
    keep = start >= rd.begin_local_ns
    t = {c: tasks[c].to_numpy(np.int64)[keep] for c in ("stream_id", "task_id", "batch_id",
                                                         "start_ns", "end_ns")}
    src = tasks["source"].to_numpy(object)[keep]
    n = len(src)
    ht = host.tables
    has_host = lt is not None
    op_name, op_type, ge, rt_name = (obj_full(n, NA) for _ in range(4))
    model_id = np.full(n, NO_MODEL, np.int64)
    conn = np.full(n, -1, np.int64)
    tt_thread = np.zeros(n, np.int64)
    tt_ts = np.zeros(n, np.int64)
    known = np.zeros(n, bool)
    if has_host:
        hc = lt.cols
        mine = np.flatnonzero(hc["device_id"] == (rd.device_id or 0))
        mine = mine[np.argsort(hc["ts_ns"][mine], kind="stable")]
        hkey = (hc["stream_id"][mine], hc["task_id"][mine], hc["batch"][mine])
        dkey = (t["stream_id"], t["task_id"], t["batch_id"])
        at = match((*dkey, occurrences(group_codes(*dkey))),
                   (*hkey, occurrences(group_codes(*hkey))))
        known = at >= 0
        row = mine[at[known]]  # task_track row of each known task
        nbr = np.full(n, -1, np.int64)
        nbr[known] = lt.nb_row[row]
        has_nb = nbr >= 0
        src_hash = np.zeros(n, np.uint64)
        src_hash[known] = hc["kernel_name"][row]
        src_hash[has_nb] = lt.op_name_hash[nbr[has_nb]]
        op_name[known] = resolve(src_hash[known], ht.hashes)
        op_type[has_nb] = resolve(lt.op_type_hash[nbr[has_nb]], ht.hashes)
        ge[has_nb] = resolve(lt.ge_type[nbr[has_nb]].astype(np.uint64), L.GE_TASK_TYPES)
        rt_name[known] = hc["rt_name"][row]
        model_id[known] = hc["model"][row]
        conn[known] = hc["launch"][row]
        tt_thread[known] = hc["thread_id"][row]
        tt_ts[known] = hc["ts_ns"][row]
    ge = np.where((src == "aicpu") & (ge == NA), "AI_CPU", ge)
    out = pd.DataFrame({
        "stream_id": t["stream_id"], "task_id": t["task_id"], "batch_id": t["batch_id"],
        "start_local": t["start_ns"] + off, "end_local": t["end_ns"] + off,
        "dur_ns": t["end_ns"] - t["start_ns"], "source": src, "host_known": known,
        "op_name": op_name, "op_type": op_type, "task_type": ge, "rt_type": rt_name,
        "model_id": model_id, "connection_id": conn, "tt_thread": tt_thread,
        "tt_local": tt_ts + np.int64(host.rd.offset_ns if host.rd else 0)})
    rt = out["rt_type"].to_numpy(object)
    out["comm_step"] = (ge == "HCCL") & (rt != NA) & ~np.isin(rt, list(KERNEL_RT_TYPES)) \
        & ~np.char.startswith(rt.astype(str), "KERNEL_")
    if not out["start_local"].is_monotonic_increasing:
        out = out.sort_values("start_local", kind="stable", ignore_index=True)
    _pmu(out, dev.pmu)
    d = DeviceData(rd=rd, tasks=out, iterations=device_iterations(rd, dev.steps),
                   has_host_ops=has_host, has_node_info=has_host and len(ht.node_basic) > 0,
                   pmu_events=rd.pmu_events if dev.pmu is not None else [])
    if out["comm_step"].any():
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
        at = match((*key, occurrences(group_codes(*key))),
                   (pmu["stream_id"].to_numpy(np.int64), pmu["task_id"].to_numpy(np.int64),
                    pmu["occ"].to_numpy(np.int64)))
        rows, at = cand[at >= 0], at[at >= 0]
        for name in PMU_COLS:
            v = np.zeros(n, np.int64)
            v[rows] = pmu[name].to_numpy(np.int64)[at]
            out[name] = v
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
    shapes = tensor_index(host_rd.data_dir, tables.apis, log)
    log.merge(post)
    host = HostData(rd=host_rd, tables=tables, apis=pd.DataFrame())
    has_host = len(tables.task_track) > 0 and bool(tables.types)
    lt = launches(tables) if has_host else None
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
    """len(export.summaries.op_rows(dev)) without building the rows: the tasks but WRITE_BACK
    / INVALID, copies and collective steps, plus one row per collective."""
    t = dev.tasks
    keep = ~t["task_type"].isin(list(DROPPED_GE_TYPES)).to_numpy() & not_memcpy(t) \
        & ~t["comm_step"].to_numpy(bool)
    return int(keep.sum()) + (len(dev.comm_ops) if dev.comm_ops is not None else 0)
