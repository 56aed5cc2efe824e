"""Assemble the decoded host and device tables of one PROF dir into per-device datasets.

Host-to-device join (docs/formats/raw-format.md 4.12): per thread, a node-level API (launch)
encloses by
timestamp the op's node_basic_info, tensor_info and task_track records; a ModelExecute API
encloses the launches and gives the Model ID (outside any: 4294967295).  Device tasks meet
their task_track on (stream, task, batch, occurrence).  All joins are pandas merges or
per-thread searchsorted (enclose.py), never a loop per record.  Times become local ns (int64)
here.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from msprof_cli.errors import ProfDirError
from msprof_cli.raw import enums as EN
from msprof_cli.raw import layouts as L
from msprof_cli.raw.profdir import result_dirs

from ..fmt import obj_full
from ..runtime.memory import release
from ..runtime.parallel import JobPool, parallel_available
from .comm_ops import comm_ops
from .control_info import NO_MODEL, ResultDirInfo, read_result_dir
from .data import (COPY_SOURCE, HARDWARE_OP_TYPES, KERNEL_RT_TYPES, TENSOR_COLS, DeviceData,
                   HostData, ProfData)
from .device import DeviceTables, decode_device
from .enclose import enclose  # noqa: F401 (read from here by the tests)
from .host import (NA, HostTables, decode_apis, decode_host, decode_tensors, pack_frame, resolve,
                   resolve_codes, type_names)
from .join import occurrence_match
# host_batches: read from here by summary.decode and the tests
from .launch import host_batches, host_task_info, launch_info, tensors_by_launch  # noqa: F401
from .stars import pmu_aiv
from .rawread import DecodeLog, device_records, host_regex
from .steptrace import iterations


def named_apis(host: HostTables, rd: ResultDirInfo) -> pd.DataFrame:
    a = host.apis.copy()
    a["type_name"] = type_names(a["level"].to_numpy(), a["type"].to_numpy(), host.types)
    item = a["item_id"].to_numpy(np.uint64)
    lvl = a["level"].to_numpy()
    item_str = obj_full(len(a), "0")
    named = np.isin(lvl, [L.LEVEL_NODE, L.LEVEL_HCCL, L.LEVEL_ACL])
    item_str[named] = resolve(item[named], host.hashes)
    model = lvl == L.LEVEL_MODEL  # the model id printed (str of only these: 0.3 s at 1M)
    item_str[model] = item[model].astype(str).astype(object)
    a["item_name"] = item_str
    a["begin_local"] = a["begin_ns"] + rd.offset_ns
    a["end_local"] = a["end_ns"] + rd.offset_ns
    a["dur_ns"] = a["end_ns"] - a["begin_ns"]
    return a


def attach_packed_tensors(devices: list[DeviceData], packed: dict) -> None:
    """The tensor columns of every device's tasks by their launch (connection id), from the
    worker's `pack_frame` of `tensors_by_launch` as it is sent: a column's values are its
    distinct strings taken by code, N/A for NaN tested on the distinct strings (an unpacked
    frame and a NaN test per task were ~15 ms at 50k tasks)."""
    cid = packed["launch_cid"]
    launches = cid[1] if cid[0] == "array" else np.asarray(cid[2], dtype=object)[cid[1]]
    if len(launches) == 0:
        return
    index = pd.Index(np.asarray(launches).astype(np.int64))
    tables: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for c in TENSOR_COLS:
        kind, *item = packed[c]
        if kind == "codes":
            table, codes = np.asarray(item[1], dtype=object), item[0]
        else:
            table, codes = np.asarray(item[0], dtype=object), np.arange(len(item[0]))
        table = table.copy()
        table[pd.isna(table)] = NA
        tables[c] = (table, codes)
    for d in devices:
        conn = d.tasks["connection_id"].to_numpy(np.int64)
        at = index.get_indexer(conn)
        ok = (at >= 0) & (conn >= 0)
        rows = at[ok]
        for c, (table, codes) in tables.items():
            col = obj_full(len(conn), NA)
            col[ok] = table[codes[rows]]
            d.tasks[c] = col


def device_iterations(rd: ResultDirInfo, steps: pd.DataFrame) -> pd.DataFrame:
    """The step-trace iterations of a device in local ns, those that start after the
    collection began."""
    its = iterations(steps)
    reduce_cols = [c for c in its.columns if c.startswith("reduce_")]  # AllReduce pairs
    for c in ["step_start_ns", "step_end_ns", "fp_ns", "bp_ns"] + reduce_cols:
        v = its[c].to_numpy(np.int64)
        its[c] = np.where(v >= 0, v + rd.offset_ns, -1) if c not in ("step_start_ns",
                                                                       "step_end_ns") \
            else v + rd.offset_ns
    return its[its["step_start_ns"] >= rd.begin_local_ns].reset_index(drop=True)


def _merged_int(col: np.ndarray, at: np.ndarray, known: np.ndarray, fill: int) -> np.ndarray:
    """`col[at]` where `known`, `fill` elsewhere and where the value is NaN, as int64 -- via
    float64 when the left merge this replaces made the column float64 (an int column with
    rows of no match, or a float one): the values it gave, rounding of values past 2**53
    included."""
    v = col[np.where(known, at, 0)] if len(col) else np.zeros(len(at), np.int64)
    if v.dtype.kind == "f" or not known.all():
        v = v.astype(np.float64)
        v[~known | np.isnan(v)] = fill
    return v.astype(np.int64)


def _u64(col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(values, is NA) of a u64 column (nullable UInt64 or plain), exact; NA values 0."""
    return col.to_numpy(np.uint64, na_value=0), col.isna().to_numpy()


def _launch_rows(tk: dict[str, np.ndarray], tt: pd.DataFrame, device_id: int) -> np.ndarray:
    """Per task, its launch: the `host_task_info` row of its device with the same (stream,
    task, batch) and the same occurrence (tasks in their order, launches in time order), or
    -1 (the analysis's join, docs/formats/raw-format.md 4.12)."""
    rows = np.flatnonzero(tt["device_id"].to_numpy(np.int64) == device_id)
    rows = rows[np.argsort(tt["ts_ns"].to_numpy(np.int64)[rows], kind="stable")]
    right = [tt[c].to_numpy(np.int64)[rows] for c in ("stream_id", "task_id", "batch_id")]
    at = occurrence_match([tk["stream_id"], tk["task_id"], tk["batch_id"]], right)
    return np.where(at >= 0, rows[np.maximum(at, 0)] if len(rows) else -1, -1)


def build_device(rd: ResultDirInfo, dev: DeviceTables, host: HostData, log: DecodeLog,
                 host_info: pd.DataFrame | None = None, tensors_later: bool = False
                 ) -> DeviceData:
    """`host_info`: `host_task_info` of the host tables when the caller already has it
    (computed once per PROF dir, not once per device)."""
    # the task columns as arrays: a copy, a filtered copy and a merged copy of the whole
    # task frame were a third of this function's time
    start = dev.tasks["start_ns"].to_numpy(np.int64)
    # rows starting before the collection began are dropped (the analysis does the same)
    keep = np.flatnonzero(start + rd.offset_ns >= rd.begin_local_ns)
    tk = {c: dev.tasks[c].to_numpy()[keep] for c in ("stream_id", "task_id", "batch_id",
                                                      "start_ns", "end_ns", "recv_ns",
                                                      "source")}
    for c in ("stream_id", "task_id", "batch_id", "start_ns", "end_ns", "recv_ns"):
        tk[c] = tk[c].astype(np.int64, copy=False)
    n = len(keep)
    ht = host.tables
    has_host = ht is not None and len(ht.task_track) > 0 and bool(ht.types)
    has_node = has_host and len(ht.node_basic) > 0
    if has_host:
        tt = host_task_info(ht) if host_info is None else host_info
        at = _launch_rows(tk, tt, rd.device_id or 0)
        known = at >= 0
    else:
        known = np.zeros(n, bool)
    # the task type as codes into ge_names (N/A, AI_CPU, then the resolved ones): the tests
    # on it below are one per distinct type, not a string compare per task
    ge_names = np.array([NA, "AI_CPU"], dtype=object)
    ge_code = np.zeros(n, np.intp)
    if has_host:
        ak = at[known]

        def got(name: str) -> np.ndarray:  # the launch column of the tasks with a launch
            return tt[name].to_numpy()[ak]

        # the nullable UInt64 hashes are read with a fill value: to_numpy() of a column
        # with NA would be float64 (inexact)
        op_hash = _u64(tt["op_name_hash"])
        has_op = np.zeros(n, bool)
        has_op[known] = ~op_hash[1][ak]
        hash_src = np.zeros(n, np.uint64)
        hash_src[known] = tt["kernel_name"].to_numpy(np.uint64)[ak]
        hash_src[has_op] = op_hash[0][at[has_op]]
        op_name = obj_full(n, NA)
        op_name[known] = resolve(hash_src[known], ht.hashes)
        ge_k = got("ge_type")
        nb_k = ~pd.isna(ge_k)  # tasks of a launch with node_basic_info
        has_nb = np.zeros(n, bool)
        has_nb[known] = nb_k
        nb_rows = ak[nb_k]
        op_type = obj_full(n, NA)
        op_type[has_nb] = resolve(_u64(tt["op_type_hash"])[0][nb_rows], ht.hashes)
        ge_inv, ge_res = resolve_codes(ge_k[nb_k].astype(np.uint64),
                                       {k: v for k, v in EN.GE_TASK_TYPES.items()})
        ge_names = np.concatenate([ge_names, ge_res])
        ge_code[has_nb] = 2 + ge_inv
        state = obj_full(n, NA)
        state[has_nb] = np.where(tt["aging"].to_numpy()[nb_rows].astype(bool), "dynamic",
                                 "static")
        block = np.zeros(n, np.int64)
        block[has_nb] = tt["block_dim"].to_numpy()[nb_rows].astype(np.int64)
        mix_block = np.zeros(n, np.int64)
        if "mix_block_dim" in tt:
            mix_block[has_nb] = tt["mix_block_dim"].to_numpy()[nb_rows].astype(np.int64)
        hf32 = obj_full(n, NA)
        hf32[has_nb] = np.where(tt["hf32"].to_numpy()[nb_rows].astype(bool), "YES", "NO")
        rt_name = obj_full(n, NA)
        rt_name[known] = got("rt_name")
        model_id = _merged_int(tt["model_id"].to_numpy(), at, known, NO_MODEL)
        conn = _merged_int(tt["launch_cid"].to_numpy(), at, known, -1)
        tt_thread = _merged_int(tt["thread_id"].to_numpy(), at, known, 0)
        tt_local = _merged_int(tt["ts_ns"].to_numpy(), at, known, 0) \
            + np.int64(host.rd.offset_ns if host.rd else 0)
        # tensors_later: `host_info` is launch_info without the tensor columns (they are
        # attached by attach_tensors, once the worker that joins them is done)
        tensors = {c: obj_full(n, NA) for c in TENSOR_COLS}
        if not tensors_later:
            for c in TENSOR_COLS:
                v = np.asarray(got(c), dtype=object)
                v[pd.isna(v)] = NA
                tensors[c][known] = v
    else:
        op_name = obj_full(n, NA)
        op_type = obj_full(n, NA)
        state = obj_full(n, NA)
        block = np.zeros(n, dtype=np.int64)
        mix_block = np.zeros(n, dtype=np.int64)
        hf32 = obj_full(n, NA)
        rt_name = obj_full(n, NA)
        model_id = np.full(n, NO_MODEL, dtype=np.int64)
        conn = np.full(n, -1, dtype=np.int64)
        tt_thread = np.zeros(n, dtype=np.int64)
        tt_local = np.zeros(n, dtype=np.int64)
        tensors = {c: obj_full(n, NA) for c in TENSOR_COLS}
    # AI CPU tasks from aicpu.data are AI_CPU even without node info
    src = tk["source"]
    if rd.stars:  # the Atlas A2's copies (data.COPY_SOURCE)
        src = np.where((src == "hwts") & (rt_name == "MEMCPY_ASYNC")
                       & (ge_names == NA)[ge_code], COPY_SOURCE, src).astype(object)
    is_aicpu = src == "aicpu"
    ge_code[is_aicpu & (ge_names == NA)[ge_code]] = 1
    cols = {
        "stream_id": tk["stream_id"],
        "task_id": tk["task_id"],
        "batch_id": tk["batch_id"],
        "start_local": tk["start_ns"] + rd.offset_ns,
        "end_local": tk["end_ns"] + rd.offset_ns,
        "dur_ns": tk["end_ns"] - tk["start_ns"],
        # when the TS received the task (ts memcpy tasks; the others: their start)
        "recv_local": tk["recv_ns"] + np.int64(rd.offset_ns),
        "source": src,
        "host_known": known,
        "op_name": op_name, "op_type": op_type, "op_state": state,
        "task_type": ge_names[ge_code],
        "rt_type": rt_name, "block_dim": block, "mix_block_dim": mix_block, "hf32": hf32,
        "model_id": model_id,
        "connection_id": conn, "tt_thread": tt_thread, "tt_local": tt_local,
        **tensors,
    }
    # the steps of a collective (HCCL-level tasks: a non-kernel runtime task of an HCCL op,
    # raw-format: an hccl_info step): task_time / hardware rows named by their runtime type,
    # not op_summary rows -- the analysis's TaskGear makes op_summary rows of kernel tasks
    # only and one COMMUNICATION row per collective (communication.comm_ops)
    step = np.zeros(n, bool)
    hccl = np.flatnonzero((ge_names == "HCCL")[ge_code])
    rt_h = rt_name[hccl]
    step[hccl] = (rt_h != NA) & ~np.isin(rt_h, list(KERNEL_RT_TYPES))
    if step.any():  # not KERNEL_*: tested per distinct type (code -1, missing: False)
        codes, types = pd.factorize(rt_name[at := np.flatnonzero(step)])
        step[at] = ~np.array([str(t).startswith("KERNEL_") for t in types] + [False])[codes]
    # the durations as the analysis holds them: exact ns, but its AI CPU tasks' REAL ns from
    # float ms (summaries.op_statistic)
    dur_f = cols["dur_ns"].astype(np.float64)
    if is_aicpu.any() and not rd.stars:  # an A2's AI CPU tasks: ACSQ times, exact
        from .device import analysis_time
        s0 = cols["start_local"][is_aicpu] - np.int64(rd.offset_ns)
        e0 = cols["end_local"][is_aicpu] - np.int64(rd.offset_ns)
        dur_f[is_aicpu] = (analysis_time(e0, rd, 1e9) / 1e6
                           - analysis_time(s0, rd, 1e9) / 1e6) * 1e6
    # rows that may own an aicore PMU record (_pmu_candidates)
    pmu_cand = (src == "hwts") & ~np.isin(ge_names, list(HARDWARE_OP_TYPES))[ge_code]
    if not pd.Index(cols["start_local"]).is_monotonic_increasing:  # decode sorted them
        order = np.argsort(cols["start_local"], kind="stable")
        cols = {k: v[order] for k, v in cols.items()}
        step, dur_f, pmu_cand = step[order], dur_f[order], pmu_cand[order]
    out = pd.DataFrame(cols)
    # the frame holds copies: the arrays it was built from go now, before the PMU join
    # (the memory peak at 1M tasks)
    del cols, tk, src, op_name, op_type, state, block, mix_block, hf32, rt_name, model_id, \
        conn, tt_thread, tt_local, tensors, known
    if has_host:
        del at
    out["comm_step"] = step
    out["dur_f"] = dur_f
    # PMU: matched by (stream, task) in occurrence order (the aicore records': theirs in
    # record order); AI CPU/DSA/DVPP rows get none
    if dev.pmu is not None and len(out):
        cand_rows = np.flatnonzero(pmu_cand)
        at = occurrence_match([out["stream_id"].to_numpy(np.int64)[cand_rows],
                               out["task_id"].to_numpy(np.int64)[cand_rows]],
                              [dev.pmu["stream_id"].to_numpy(np.int64),
                               dev.pmu["task_id"].to_numpy(np.int64)])
        hit = at >= 0
        _put_pmu(out, cand_rows[hit], dev.pmu, at[hit])
    else:
        out["pmu_ok"] = np.zeros(len(out), dtype=bool)
    its = device_iterations(rd, dev.steps)
    d = DeviceData(rd=rd, tasks=out, iterations=its, has_host_ops=has_host,
                   has_node_info=has_node, pmu_events=rd.pmu_events if dev.pmu is not None
                   else [], aicpu=dev.aicpu, l2=dev.l2)
    if out["comm_step"].any():
        d.comm_ops = comm_ops(d, host)
    return d


def _pmu_candidates(out: pd.DataFrame) -> np.ndarray:
    """Rows that may own an aicore PMU record: hwts tasks other than AI CPU/DSA/DVPP."""
    cand = (out["source"].to_numpy(object) == "hwts") \
        & ~out["task_type"].isin(list(HARDWARE_OP_TYPES)).to_numpy()
    return np.flatnonzero(cand)


def _put_pmu(out: pd.DataFrame, rows: np.ndarray, pmu: pd.DataFrame,
             at: np.ndarray | None = None) -> None:
    """PMU columns of the task table: `pmu` row i (`at[i]`) belongs to task row
    `rows[i]`."""
    for name in ["total_cycles"] + [f"pmu_{k}" for k in range(8)]:
        v = np.zeros(len(out), dtype=np.int64)
        col = pmu[name].to_numpy(np.int64)
        v[rows] = col if at is None else col[at]
        out[name] = v
    if "pmu_aiv" in pmu:  # the Atlas A2: which core kind the counters are of
        aiv = np.zeros(len(out), dtype=bool)
        col = pmu["pmu_aiv"].to_numpy(bool)
        aiv[rows] = col if at is None else col[at]
        out["pmu_aiv"] = aiv
    ok = np.zeros(len(out), dtype=bool)
    ok[rows] = True
    out["pmu_ok"] = ok


def attach_pmu(dev: DeviceData, index) -> None:
    """Windowed decode (windows.py): the PMU columns of a window's task table, looked up in
    the scan's `PmuIndex` with occurrence numbers carried across windows -- the same match
    as `build_device` makes on the whole table."""
    out = dev.tasks
    dev.pmu_events = dev.rd.pmu_events
    if len(out) == 0:
        return
    cand_rows = _pmu_candidates(out)
    hit, recs = index.records(out["stream_id"].to_numpy(np.int64)[cand_rows],
                              out["task_id"].to_numpy(np.int64)[cand_rows])
    order = np.argsort(recs, kind="stable")
    log = DecodeLog()
    if dev.rd.stars:  # the Atlas A2's per-task PMU (stars.py)
        ai = device_records(dev.rd.data_dir, "ffts_profile", log,
                            ["total_cycle", "pmu", "ffts_type", "subtask_type"],
                            select=recs[order])
        ai["total_cycles"] = ai.pop("total_cycle")
    else:
        ai = device_records(dev.rd.data_dir, "aicore", log, ["total_cycles", "pmu"],
                            select=recs[order])
    pmu = {"total_cycles": np.zeros(len(recs), np.int64)}
    pmu["total_cycles"][order] = ai["total_cycles"].astype(np.int64)
    if dev.rd.stars:
        pmu["pmu_aiv"] = np.zeros(len(recs), bool)
        pmu["pmu_aiv"][order] = pmu_aiv(ai)
    for k in range(8):
        v = np.zeros(len(recs), np.int64)
        v[order] = ai["pmu"][:, k].astype(np.int64)
        pmu[f"pmu_{k}"] = v
    del out["pmu_ok"]  # put back after the counters, the column order of `build_device`
    _put_pmu(out, cand_rows[hit], pd.DataFrame(pmu))


TENSORS_WORKER_BYTES = 8 << 20  # tensor_info data above which a worker decodes it


def tensors_job(data_dir: Path) -> tuple[dict, DecodeLog]:
    """In a forked worker: tensor_info decoded and joined to its launches
    (`tensors_by_launch`), packed for the pipe.  The worker decodes the API records again
    for the join (0.2 s at 1M tasks, beside the 2 s of tensor_info); their warnings are the
    caller's, which decodes them too."""
    log = DecodeLog()
    tens = decode_tensors(data_dir, log)
    apis = decode_apis(data_dir, DecodeLog())
    return pack_frame(tensors_by_launch(tens, apis)), log


def _tensors_in_worker(data_dir: Path) -> bool:
    if not parallel_available():
        return False
    pattern = host_regex("tensor_info")
    size = 0
    for f in data_dir.iterdir():
        if pattern.match(f.name):
            try:
                size += f.stat().st_size
            except OSError:
                pass
    return size > TENSORS_WORKER_BYTES


def load_prof(prof: Path) -> ProfData:
    """Decode one PROF dir: host tables once, then every device dir."""
    log = DecodeLog()
    dirs = result_dirs(prof)
    if not dirs:
        raise ProfDirError(f"{prof} holds no result directory (host/ or device_N/ with an "
                           f"info.json file). Point --output at a PROF_* directory written by "
                           f"`msprof collect`.")
    infos = [read_result_dir(d) for d in dirs]
    for i in infos:
        log.warnings.extend(i.warnings)
    host_rd = next((i for i in infos if i.device_id is None), None)
    dev_infos = [rd for rd in infos if rd.device_id is not None]
    tables = None
    apis = pd.DataFrame()
    pool = None
    host: HostData | None = None
    devices: list[DeviceData] = []
    host_info = None  # host_task_info, the same for every device: joined once
    try:
        if host_rd is not None and host_rd.data_dir.is_dir():
            if _tensors_in_worker(host_rd.data_dir):
                # tensor_info is the slowest host decode: a forked worker decodes it and
                # joins it to the launches while this process decodes everything else, the
                # first device and the rest of the launch info (same tables, same warnings
                # in the same order as the serial decode)
                pool = JobPool()
                pool.submit(lambda: tensors_job(host_rd.data_dir))
            post_log = DecodeLog() if pool is not None else None
            tables = decode_host(host_rd.data_dir, log, post_log, tensors=pool is None)
            apis = named_apis(tables, host_rd)
            apis = apis[apis["begin_local"] >= host_rd.begin_local_ns].reset_index(drop=True)
            has_host = bool(dev_infos) and len(tables.task_track) > 0 and bool(tables.types)
            host = HostData(rd=host_rd, tables=tables, apis=apis)
            if pool is not None:
                # every device is decoded and joined to the launches while the worker
                # finishes; the tensor columns come with its result (attach_tensors)
                launch = launch_info(tables) if has_host else None
                built: list[tuple[DeviceData, DecodeLog]] = []
                for rd in dev_infos:
                    dlog = DecodeLog()
                    dev = decode_device(rd, dlog)
                    built.append((build_device(rd, dev, host, dlog, launch,
                                               tensors_later=launch is not None), dlog))
                    del dev
                    release()
                del launch
                packed, tlog = pool.results()[0]
                pool = None
                if has_host:
                    attach_packed_tensors([d for d, _ in built], packed)
                del packed
                log.merge(tlog)
                log.merge(post_log)
                for d, dlog in built:  # the serial decode's warning order
                    log.merge(dlog)
                    devices.append(d)
                del built
            elif has_host:
                host_info = host_task_info(tables)
    finally:
        if pool is not None:  # this process failed first: stop the worker
            pool.cancel()
    if host is None:
        host = HostData(rd=host_rd, tables=tables, apis=apis)
    release()
    if not devices:
        for rd in dev_infos:
            dev = decode_device(rd, log)
            devices.append(build_device(rd, dev, host, log, host_info))
            del dev
            release()  # the join's temporaries are gone: give their heap pages back
    if tables is not None:
        # tensor_info and the raw API table are joined into the task tables and the named
        # API table now; nothing reads them later (memory)
        tables.tensors = tables.tensors.iloc[:0]
        tables.apis = tables.apis.iloc[:0]
        release()
    return ProfData(prof=prof, host=host, devices=devices, log=log)


