"""The device memory files of an export (docs/formats/device-memory.md 2): npu_mem,
npu_module_mem (per device), memory_record, operator_memory (GE's allocations, every device
with all rows), static_op_mem (host) and the msprof json's NPU MEM counters, from the raw
records of raw/memory_layouts.py, as the real analysis prints them (Ascend/msprof
`analysis/viewer/npu_mem/*.py`, `analysis/viewer/static_op_mem_viewer.py`,
`analysis/mscalculate/npu_mem/npu_op_mem_calculator.py`):

* npu_mem time: ``int(us * 1000 + S + (H - S / 1e9) * 1e9 + L * 1000)`` ns in float64 (S: the
  device dir's dev_start.log clock_monotonic_raw, H: its host_start.log one in s, L: the
  local offset in µs as a float), then 3 decimals of µs; KB = Python ``round(b / 1024, 3)``.
* npu_module_mem, memory_record and operator_memory times: ns (the default host frequency)
  plus the dir's local offset (`ResultDirInfo.offset_ns`); module totals of 0 or less as they
  are; operator_memory pairs each free with the latest allocation of the same (owner,
  address, device), unpaired allocations after the pairs with 0 in their release columns.
* static_op_mem: names through hash_dic (an unknown hash as its decimal, 0 = TOTAL), sizes
  in KB unrounded (a whole number printed as an integer, as the analysis's NUMERIC column).
* The rows of npu_mem: per slice, the device's file before the application's (the analysis
  takes them in `os.listdir` order, which the file system decides).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from msprof_cli.raw import control
from msprof_cli.raw import memory_layouts as ML

from ..decode.control_info import ResultDirInfo
from ..decode.rawread import DecodeLog, device_records, hash_dict, host_records
from ..fmt import float_str, int_str, py_round, us_list

Table = tuple[list[str], pd.DataFrame]
NPU_MEM = ["event", "ddr(KB)", "hbm(KB)", "memory(KB)", "timestamp(us)"]
NPU_MODULE_MEM = ["Component", "Timestamp(us)", "Total Reserved(KB)", "Device"]
MEMORY_RECORD = ["Component", "Timestamp(us)", "Total Allocated(KB)", "Total Reserved(KB)",
                 "Device"]
OPERATOR_MEMORY = ["Name", "Size(KB)", "Allocation Time(us)", "Duration(us)",
                   "Allocation Total Allocated(KB)", "Allocation Total Reserved(KB)",
                   "Release Total Allocated(KB)", "Release Total Reserved(KB)", "Device"]
STATIC_OP_MEM = ["Op Name", "Model Name", "Graph ID", "Node Index Start", "Node Index End",
                 "Size(KB)"]
EVENTS = {ML.NPU_MEM_APP: "APP", ML.NPU_MEM_DEVICE: "Device"}


def _kb(b: np.ndarray) -> np.ndarray:
    return float_str(py_round(np.asarray(b, np.float64) / 1024.0, 3))


def _mono(path: Path) -> int:
    try:
        return int(control.read_ini(path)["clock_monotonic_raw"])
    except (OSError, KeyError, ValueError):
        return 0


def npu_mem_samples(rd: ResultDirInfo) -> pd.DataFrame:
    """event, ddr, hbm (bytes) and local ns of a device's npu_mem records, in the order
    the module doc says."""
    log = DecodeLog()
    version = str(rd.info.get("version", "1.0"))
    field = "timestamp" if version == "2.0" else "timestamp_v1"
    parts = []
    for kind in ("npu_mem", "npu_mem_app"):
        c = device_records(rd.data_dir, kind, log, [field, "event", "ddr", "hbm"])
        parts.append(pd.DataFrame({"event": c["event"].astype(np.int64),
                                   "ddr": c["ddr"].astype(np.int64),
                                   "hbm": c["hbm"].astype(np.int64),
                                   "us": c[field].astype(np.int64)}))
    df = pd.concat(parts, ignore_index=True)
    dev = rd.device_id or 0
    s = _mono(rd.path / f"dev_start.log.{dev}")
    h = _mono(rd.path / f"host_start.log.{dev}") / 1e9
    offset_us = float(rd.time_begin_us) - float(rd.mono_begin_ns) / 1000
    t = (df["us"].to_numpy(np.int64) * 1000 + s).astype(np.float64)
    t = t + (h - s / 1e9) * 1e9
    t = t + offset_us * 1000
    df["ns"] = np.trunc(t).astype(np.int64)
    return df


def npu_mem(rd: ResultDirInfo) -> Table | None:
    df = npu_mem_samples(rd)
    if not len(df):
        return None
    return NPU_MEM, pd.DataFrame({
        "event": df["event"].map(lambda e: EVENTS.get(int(e), "None")).to_numpy(object),
        "ddr(KB)": _kb(df["ddr"]), "hbm(KB)": _kb(df["hbm"]),
        "memory(KB)": _kb(df["ddr"].to_numpy() + df["hbm"].to_numpy()),
        "timestamp(us)": us_list(df["ns"].to_numpy(), "\t")})


def npu_module_mem(rd: ResultDirInfo) -> Table | None:
    c = device_records(rd.data_dir, "npu_module_mem", DecodeLog(),
                       ["module_id", "timestamp", "total_size"])
    if not len(c["module_id"]):
        return None
    mod = c["module_id"].astype(np.int64)
    ts = c["timestamp"].astype(np.int64)
    size = c["total_size"].astype(np.uint64)
    size = np.where(size > np.uint64(2**63 - 1), -1, size.astype(np.int64))
    order = np.lexsort((ts, mod))
    mod, ts, size = mod[order], ts[order], size[order]
    total = np.where(size > 0, _kb(np.maximum(size, 0)), int_str(size)).astype(object)
    return NPU_MODULE_MEM, pd.DataFrame({
        "Component": [ML.MODULE_NAMES.get(int(m), "other") for m in mod.tolist()],
        "Timestamp(us)": us_list(ts + np.int64(rd.offset_ns), "\t"),
        "Total Reserved(KB)": total,
        "Device": f"NPU:{rd.device_id or 0}"})


def task_memory(host: ResultDirInfo) -> pd.DataFrame:
    c = host_records(host.data_dir, "task_memory_info", DecodeLog(),
                     ["timestamp", "addr", "size", "node_id", "total_allocate",
                      "total_reserve", "device_id"])
    return pd.DataFrame({k: c[k] for k in ("timestamp", "addr", "size", "node_id",
                                           "total_allocate", "total_reserve", "device_id")})


def memory_record(host: ResultDirInfo, raw: pd.DataFrame) -> Table | None:
    if not len(raw) or not ((raw["size"] > 0).any() and (raw["size"] < 0).any()):
        return None  # the analysis saves both tables or neither
    return MEMORY_RECORD, pd.DataFrame({
        "Component": "GE",
        "Timestamp(us)": us_list(raw["timestamp"].to_numpy(np.int64)
                                 + np.int64(host.offset_ns), "\t"),
        "Total Allocated(KB)": _kb(raw["total_allocate"]),
        "Total Reserved(KB)": _kb(raw["total_reserve"]),
        "Device": [f"NPU:{d}" for d in raw["device_id"].tolist()]})


def operator_memory(host: ResultDirInfo, raw: pd.DataFrame) -> Table | None:
    """Allocations paired with their frees (module doc; the records are few: one per
    allocation GE reports, not per task)."""
    if memory_record(host, raw) is None:
        return None
    names = hash_dict(host.data_dir)
    open_: dict[tuple, tuple] = {}
    pairs: list[tuple] = []
    for ts, addr, size, node, alloc, res, dev in raw.itertuples(index=False, name=None):
        key = (int(node), int(addr), int(dev))
        if size > 0:
            open_[key] = (int(size), int(ts), int(alloc), int(res))
        elif size < 0 and key in open_:
            a = open_.pop(key)
            pairs.append((key, a, (int(ts), int(alloc), int(res))))
    pairs += [(key, a, None) for key, a in open_.items()]
    if not pairs:
        return None
    size = np.array([a[0] for _, a, _ in pairs], np.float64)
    at = np.array([a[1] for _, a, _ in pairs], np.int64)
    dur = np.array([r[0] - a[1] if r else 0 for _, a, r in pairs], np.float64)
    return OPERATOR_MEMORY, pd.DataFrame({
        "Name": [names.get(k[0], "") for k, _, _ in pairs],
        "Size(KB)": _kb(size),
        "Allocation Time(us)": us_list(at + np.int64(host.offset_ns), "\t"),
        "Duration(us)": float_str(py_round(dur / 1000.0, 3)),
        "Allocation Total Allocated(KB)": _kb([a[2] for _, a, _ in pairs]),
        "Allocation Total Reserved(KB)": _kb([a[3] for _, a, _ in pairs]),
        "Release Total Allocated(KB)": _kb([r[1] if r else 0 for _, _, r in pairs]),
        "Release Total Reserved(KB)": _kb([r[2] if r else 0 for _, _, r in pairs]),
        "Device": [f"NPU:{k[2]}" for k, _, _ in pairs]})


def static_op_mem(host: ResultDirInfo) -> Table | None:
    c = host_records(host.data_dir, "static_op_mem", DecodeLog(),
                     ["size", "op_name", "life_start", "life_end", "dyn_op_name", "graph_id"])
    if not len(c["size"]):
        return None
    names = hash_dict(host.data_dir)

    def resolved(hashes: np.ndarray, total: bool) -> np.ndarray:
        """The names of hashes (an unknown one as its decimal; "0" = TOTAL where `total`),
        looked up once per distinct hash."""
        uniq, inv = np.unique(hashes.astype(np.uint64), return_inverse=True)
        text = [names.get(int(h), str(int(h))) for h in uniq.tolist()]
        if total:
            text = ["TOTAL" if t == "0" else t for t in text]
        return np.array(text, dtype=object)[inv]

    end = c["life_end"].astype(np.int64)
    end = np.where(end == 0xFFFFFFFE, ML.LIFE_TO_THE_END, end)
    kb = c["size"].astype(np.float64) / 1024.0
    whole = kb == np.floor(kb)
    size = np.where(whole, int_str(np.where(whole, kb, 0)), float_str(kb)).astype(object)
    return STATIC_OP_MEM, pd.DataFrame({
        "Op Name": resolved(c["op_name"], True),
        "Model Name": resolved(c["dyn_op_name"], False),
        "Graph ID": int_str(c["graph_id"]),
        "Node Index Start": int_str(c["life_start"]),
        "Node Index End": int_str(end),
        "Size(KB)": size})


def npu_mem_events(rd: ResultDirInfo, pid: int, begin_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """The NPU MEM counters of a device (three a sample: DDR, HBM, Memory) and their µs keys,
    the samples before the collection began left out (the analysis's timeline keeps none).
    Built on object columns (the text of each distinct KB value once: fmt.float_str)."""
    df = npu_mem_samples(rd)
    df = df[df["ns"].to_numpy() >= begin_ns]
    if not len(df):
        return np.zeros(0, dtype=object), np.zeros(0, np.float64)
    times = np.array(us_list(df["ns"].to_numpy()), dtype=object)
    names = df["event"].map(lambda e: EVENTS.get(int(e), "None")).to_numpy(object)
    ddr, hbm = df["ddr"].to_numpy(np.int64), df["hbm"].to_numpy(np.int64)
    head = '", "ts": "' + times + '", "pid": ' + str(pid) + ', "tid": 0, "args": {"KB": '
    parts = [('{"name": "' + names + "/" + kind + head + float_str(v / 1024.0)
              + '}, "ph": "C"}') for kind, v in (("DDR", ddr), ("HBM", hbm),
                                                  ("Memory", ddr + hbm))]
    events = np.stack(parts, axis=1).reshape(-1)  # per sample: DDR, HBM, Memory
    keys = np.repeat(times.astype(np.float64), 3)
    return events, keys


# the msprof db's memory tables (Ascend/msprof analysis/csrc/application/database/
# msprof_db.cpp NPU_MEM / NPU_MODULE_MEM / NPU_OP_MEM, db_assembler.cpp Save*MemData)
DB_SCHEMA = {
    "NPU_MEM": [("type", "INTEGER"), ("ddr", "NUMERIC"), ("hbm", "NUMERIC"),
                ("timestampNs", "INTEGER"), ("deviceId", "INTEGER")],
    "NPU_MODULE_MEM": [("moduleId", "INTEGER"), ("timestampNs", "INTEGER"),
                       ("totalReserved", "NUMERIC"), ("deviceId", "INTEGER")],
    "NPU_OP_MEM": [("operatorName", "INTEGER"), ("addr", "INTEGER"), ("type", "INTEGER"),
                   ("size", "INTEGER"), ("timestampNs", "INTEGER"), ("globalTid", "INTEGER"),
                   ("totalAllocate", "NUMERIC"), ("totalReserve", "NUMERIC"),
                   ("component", "INTEGER"), ("deviceId", "INTEGER")],
}


def _exact_offset(rd: ResultDirInfo) -> int:
    """The C++ path's local offset: start_info's begin in ns less its monotonic ns."""
    return int(rd.time_begin_us) * 1000 - int(rd.mono_begin_ns)


def db_rows(devices: list[ResultDirInfo], host: ResultDirInfo | None, string_id,
            pid: int) -> dict[str, list[np.ndarray]]:
    """Columns of the memory tables that have rows (`string_id`: text -> STRING_IDS id).
    As the C++ path: bytes, local ns, none before the collection began (its dir's start)."""
    out: dict[str, list[list[np.ndarray]]] = {"NPU_MEM": [], "NPU_MODULE_MEM": []}
    for rd in devices:
        dev = rd.device_id or 0
        df = npu_mem_samples(rd)
        df = df[df["ns"].to_numpy() >= rd.begin_local_ns]
        if len(df):
            kind = df["event"].to_numpy()
            ids = np.where(kind == ML.NPU_MEM_APP, string_id("app"),
                           np.where(kind == ML.NPU_MEM_DEVICE, string_id("device"), -1))
            out["NPU_MEM"].append([ids, df["ddr"].to_numpy(), df["hbm"].to_numpy(),
                                   df["ns"].to_numpy(), np.full(len(df), dev)])
        c = device_records(rd.data_dir, "npu_module_mem", DecodeLog(),
                           ["module_id", "timestamp", "total_size"])
        ts = c["timestamp"].astype(np.int64) + _exact_offset(rd)
        keep = ts >= rd.begin_local_ns
        if keep.any():
            order = np.lexsort((ts[keep], c["module_id"][keep]))
            out["NPU_MODULE_MEM"].append([c["module_id"][keep][order].astype(np.int64),
                                          ts[keep][order],
                                          c["total_size"][keep][order].astype(np.int64),
                                          np.full(int(keep.sum()), dev)])
    tables = {k: [np.concatenate(p) for p in zip(*v)] for k, v in out.items() if v}
    if host is not None:
        c = host_records(host.data_dir, "task_memory_info", DecodeLog(),
                         ["timestamp", "thread_id", "addr", "size", "node_id",
                          "total_allocate", "total_reserve", "device_id"])
        ts = c["timestamp"].astype(np.int64) + _exact_offset(host)
        keep = ts >= host.begin_local_ns
        if keep.any():
            names = hash_dict(host.data_dir)
            size = c["size"][keep].astype(np.int64)
            node = c["node_id"][keep].astype(np.uint64).tolist()
            tables["NPU_OP_MEM"] = [
                np.array([string_id(names.get(int(h), str(int(h)))) for h in node], np.int64),
                c["addr"][keep].astype(np.int64),
                np.where(size < 0, string_id("release"), string_id("allocate")),
                np.abs(size), ts[keep],
                (np.int64(pid) << np.int64(32)) | c["thread_id"][keep].astype(np.int64),
                c["total_allocate"][keep].astype(np.int64),
                c["total_reserve"][keep].astype(np.int64),
                np.full(int(keep.sum()), string_id("GE")),
                c["device_id"][keep].astype(np.int64)]
    return tables
