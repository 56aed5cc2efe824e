"""``msprof export --type db``: ``PROF_X/msprof_{YYYYmmddHHMMSS}.db`` (docs/formats/export-files.md
7).

One SQLite file per PROF dir, in the PROF dir itself (never inside
``mindstudio_profiler_output``), with the table set the real tool writes for a 910 run:
STRING_IDS, TASK, COMPUTE_TASK_INFO, CANN_API, TASK_PMU_INFO, STEP_TIME, OVERLAP_ANALYSIS,
SESSION_TIME_INFO, NPU_INFO, HOST_INFO, META_DATA, RANK_DEVICE_MAP, the ENUM_* tables, and
COMMUNICATION_OP / MSTX_EVENTS when HCCL / msproftx data exist.  Every text value is interned
in STRING_IDS; times are local Unix ns.  Column meanings and project choices:
docs/database.md.

The tables are built from the decoded per-device frames of ``dataset.load_prof`` (the same
rows the CSVs print), column-wise with numpy; rows reach SQLite through ``executemany`` over
``zip`` of ``tolist()`` columns -- no Python formatting per row.  The file is written under a
temporary name in the PROF dir (journal and fsync off: the temp file is thrown away on any
error) and renamed into place with ``os.replace``.
"""
from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from msprof_cli.raw import control
from msprof_cli.raw import layouts as L

from ..decode.data import DROPPED_GE_TYPES, MEMCPY_SOURCE, DeviceData, ProfData
from ..decode.host import NA
from ..decode.pmu import GB, tail_columns, tail_header
from ..derive import msproftx
from ..sinks.files import FILE_MODE
from .timeline import CONTEXT_ID_910, task_kind

SCHEMA_VERSION = (1, 2, 0)
NO_CONNECTION = 4294967295  # TASK/COMMUNICATION_OP.connectionId of a task without host launch
MIX_BLOCK_NUM_910 = 0  # no MIX kernels on Ascend910
SESSION_FALLBACK_NS = 30 * 60 * 1_000_000_000  # real tool: start + 30 min without end_info
CHIP_NAMES = {"1": "Ascend910"}  # info.json platform_version -> chip model

# name -> [(column, SQL type)]; the order is the column order of the real tables
SCHEMA: dict[str, list[tuple[str, str]]] = {
    "STRING_IDS": [("id", "INTEGER PRIMARY KEY"), ("value", "TEXT")],
    "TASK": [("startNs", "INTEGER"), ("endNs", "INTEGER"), ("deviceId", "INTEGER"),
             ("connectionId", "INTEGER"), ("globalTaskId", "INTEGER"), ("globalPid", "INTEGER"),
             ("taskType", "INTEGER"), ("contextId", "INTEGER"), ("streamId", "INTEGER"),
             ("taskId", "INTEGER"), ("modelId", "INTEGER")],
    "COMPUTE_TASK_INFO": [(c, "INTEGER") for c in (
        "name", "globalTaskId", "blockNum", "mixBlockNum", "taskType", "opType",
        "inputFormats", "inputDataTypes", "inputShapes", "outputFormats", "outputDataTypes",
        "outputShapes", "attrInfo", "opState", "hf32Eligible")],
    "CANN_API": [("startNs", "INTEGER"), ("endNs", "INTEGER"), ("type", "INTEGER"),
                 ("globalTid", "INTEGER"), ("connectionId", "INTEGER"), ("name", "INTEGER")],
    "TASK_PMU_INFO": [("globalTaskId", "INTEGER"), ("name", "INTEGER"), ("value", "NUMERIC")],
    # deviceId / modelId are project additions: one PROF may hold several models and devices
    "STEP_TIME": [("id", "INTEGER"), ("startNs", "INTEGER"), ("endNs", "INTEGER"),
                  ("deviceId", "INTEGER"), ("modelId", "INTEGER")],
    "OVERLAP_ANALYSIS": [("id", "INTEGER PRIMARY KEY"), ("deviceId", "INTEGER"),
                         ("startNs", "NUMERIC"), ("endNs", "NUMERIC"), ("type", "INTEGER")],
    "SESSION_TIME_INFO": [("startTimeNs", "INTEGER"), ("endTimeNs", "INTEGER")],
    "NPU_INFO": [("id", "INTEGER"), ("name", "TEXT")],
    "HOST_INFO": [("hostUid", "TEXT"), ("hostName", "TEXT")],
    "META_DATA": [("name", "TEXT"), ("value", "TEXT")],
    "RANK_DEVICE_MAP": [("rankId", "INTEGER"), ("deviceId", "INTEGER")],
    "COMMUNICATION_OP": [("opName", "INTEGER"), ("startNs", "INTEGER"), ("endNs", "INTEGER"),
                         ("connectionId", "INTEGER"), ("groupName", "INTEGER"),
                         ("opId", "INTEGER"), ("relay", "INTEGER"), ("retry", "INTEGER"),
                         ("dataType", "INTEGER"), ("algType", "INTEGER"), ("count", "NUMERIC"),
                         ("opType", "INTEGER"), ("deviceId", "INTEGER")],
    "MSTX_EVENTS": [("startNs", "INTEGER"), ("endNs", "INTEGER"), ("eventType", "INTEGER"),
                    ("rangeId", "INTEGER"), ("category", "INTEGER"), ("message", "INTEGER"),
                    ("globalTid", "INTEGER"), ("endGlobalTid", "INTEGER"),
                    ("domainId", "INTEGER"), ("connectionId", "INTEGER")],
}
ENUM_SCHEMA = [("id", "INTEGER PRIMARY KEY"), ("name", "TEXT")]

# Contents of the enum tables: Ascend/msprof docs/en/user_guide/profile_data_file_references_db.md
_UNSET = [(255, "RESERVED"), (65534, "N/A"), (65535, "INVALID_TYPE")]
ENUMS: dict[str, list[tuple[int, str]]] = {
    "ENUM_API_TYPE": [(20000, "acl"), (15000, "model"), (10000, "node"), (5500, "communication"),
                      (5000, "runtime"), (50001, "op"), (50002, "queue"), (50003, "trace"),
                      (50004, "mstx")],
    "ENUM_MODULE": list(enumerate(
        ["SLOG", "IDEDD", "SCC", "HCCL", "FMK", "CCU", "DVPP", "RUNTIME", "CCE", "HDC", "DRV",
         "NET"])) + [
        (22, "DEVMM"), (23, "KERNEL"), (24, "LIBMEDIA"), (25, "CCECPU"), (27, "ROS"),
        (28, "HCCP"), (29, "ROCE"), (30, "TEFUSION"), (31, "PROFILING"), (32, "DP"),
        (33, "APP"), (34, "TS"), (35, "TSDUMP"), (36, "AICPU"), (37, "LP"), (38, "TDT"),
        (39, "FE"), (40, "MD"), (41, "MB"), (42, "ME"), (43, "IMU"), (44, "IMP"), (45, "GE"),
        (47, "CAMERA"), (48, "ASCENDCL"), (49, "TEEOS"), (50, "ISP"), (51, "SIS"), (52, "HSM"),
        (53, "DSS"), (54, "PROCMGR"), (55, "BBOX"), (56, "AIVECTOR"), (57, "TBE"), (58, "FV"),
        (59, "MDCMAP"), (60, "TUNE"), (61, "HSS"), (62, "FFTS"), (63, "OP"), (64, "UDF"),
        (65, "HICAID"), (66, "TSYNC"), (67, "AUDIO"), (68, "TPRT"), (69, "ASCENDCKERNEL"),
        (70, "ASYS"), (71, "ATRACE"), (72, "RTC"), (73, "SYSMONITOR"), (74, "AMP"),
        (75, "ADETECT"), (76, "MBUFF"), (77, "CUSTOM")],
    "ENUM_HCCL_DATA_TYPE": list(enumerate(
        ["INT8", "INT16", "INT32", "FP16", "FP32", "INT64", "UINT64", "UINT8", "UINT16",
         "UINT32", "FP64", "BFP16", "INT128"])) + [
        (14, "HIF8"), (15, "FP8E4M3"), (16, "FP8E5M2"), (17, "FP8E8M0")] + _UNSET,
    "ENUM_HCCL_LINK_TYPE": list(enumerate(
        ["ON_CHIP", "HCCS", "PCIE", "ROCE", "SIO", "HCCS_SW", "STANDARD_ROCE", "UB",
         "UBoE"])) + _UNSET,
    "ENUM_HCCL_TRANSPORT_TYPE": list(enumerate(["SDMA", "RDMA", "LOCAL", "UB", "ROCE"]))
    + _UNSET,
    "ENUM_HCCL_RDMA_TYPE": [(0, "RDMA_SEND_NOTIFY"), (1, "RDMA_SEND_PAYLOAD")] + _UNSET,
    "ENUM_MSTX_EVENT_TYPE": [(0, "marker"), (1, "push/pop"), (2, "start/end"),
                             (3, "marker_ex")],
    "ENUM_MEMCPY_OPERATION": list(enumerate(
        ["host to host", "host to device", "device to host", "device to device",
         "managed memory", "addr device to device", "host to device ex",
         "device to host ex"])) + [(65535, "other")],
    "ENUM_OVERLAP_ANALYSIS_TYPE": [(0, "COMPUTE"), (1, "COMMUNICATION"),
                                   (2, "COMM_NOT_OVERLAP_COMP"), (3, "FREE"),
                                   (65535, "RESERVE")],
}
HCCL_DATA_TYPE_NA = 65534


class StringIds:
    """STRING_IDS interning: one id per distinct text, assigned in first-seen order."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def one(self, text: str) -> int:
        return self.ids.setdefault(text, len(self.ids))

    def column(self, values: Sequence | np.ndarray) -> np.ndarray:
        """Ids of a whole column (Python work only per distinct value)."""
        s = pd.Series(np.asarray(values, dtype=object)).fillna(NA)
        if len(s) == 0:
            return np.zeros(0, dtype=np.int64)
        codes, uniq = pd.factorize(s)
        lut = np.array([self.one(str(u)) for u in uniq], dtype=np.int64)
        return lut[codes]

    def rows(self) -> list[tuple[int, str]]:
        return [(i, v) for v, i in self.ids.items()]


Columns = list[np.ndarray]


INSERT_ROWS = 100_000  # rows bound at a time: Python values of one chunk only (memory)
PMU_ROWS = 100_000  # op rows whose PMU metrics are formatted at a time
PMU_SIDES = 8  # side files (worker jobs) of a device's TASK_PMU_INFO rows
PMU_SIDE_MIN_ROWS = 200_000  # fewer rows are inserted by this process (no fork, no merge)


def insert_rows(conn: sqlite3.Connection, table: str, cols: Columns) -> None:
    """executemany over zipped Python-native columns (tolist() converts numpy scalars),
    INSERT_ROWS rows at a time: at 1M tasks TASK_PMU_INFO has ~15M rows, whose Python
    lists at once took 1.5 GB."""
    if not cols or len(cols[0]) == 0:
        return
    marks = ", ".join("?" * len(cols))
    sql = f"INSERT INTO {table} VALUES ({marks})"
    cols = [np.asarray(c) for c in cols]
    for lo in range(0, len(cols[0]), INSERT_ROWS):
        conn.executemany(sql, zip(*[c[lo:lo + INSERT_ROWS].tolist() for c in cols]))


def create_table(conn: sqlite3.Connection, table: str, schema: list[tuple[str, str]]) -> None:
    conn.execute(f"CREATE TABLE {table} ({', '.join(f'{c} {t}' for c, t in schema)})")


def ns_col(values) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


# --- table builders ------------------------------------------------------------------------

def compute_mask(dev: DeviceData) -> np.ndarray:
    """Device tasks that are op_summary rows (same rule as summaries.op_rows)."""
    if not dev.has_host_ops:
        return np.zeros(len(dev.tasks), dtype=bool)
    mask = ~dev.tasks["task_type"].isin(list(DROPPED_GE_TYPES)).to_numpy() \
        & (dev.tasks["source"].to_numpy(object) != MEMCPY_SOURCE)
    if "comm_step" in dev.tasks:  # a collective's steps (COMMUNICATION_OP, not compute)
        mask &= ~dev.tasks["comm_step"].to_numpy(bool)
    return mask


def _task_type_names(tasks: pd.DataFrame) -> np.ndarray:
    """TASK.taskType: the runtime task type (KERNEL_AICORE, ...) of the launch, else the GE /
    hardware type, else ``Other`` (consumers test ``KERNEL_AICORE`` here)."""
    rt = tasks["rt_type"].to_numpy(object)
    known = tasks["host_known"].to_numpy(bool)
    return np.where(known & (rt != NA), rt, task_kind(tasks))


def _pmu_name(header: str) -> tuple[str, float]:
    """op_summary PMU header -> (TASK_PMU_INFO metric name, factor to db units).

    Stars-chip db naming (``aic_`` prefix, no unit suffix); µs -> ns, GB/s -> bytes/s with the
    2^33 divisor the 910 analysis uses for its "GB/s"."""
    if header == "aicore_time(us)":
        return "aic_total_time", 1000.0
    if header.endswith("(us)"):
        return "aic_" + header[:-4], 1000.0
    if header.endswith("(GB/s)"):
        return "aic_" + header[:-6], GB
    if header.endswith("(%)"):
        return "aic_" + header[:-3], 1.0
    return "aic_" + header, 1.0


def _numbers(text: np.ndarray) -> np.ndarray:
    """float of each printed value (N/A -> NaN), parsed once per distinct text (PMU metrics
    are rounded to 3 decimals: they repeat)."""
    codes, uniq = pd.factorize(np.asarray(text, dtype=object))
    parsed = pd.to_numeric(pd.Series(uniq, dtype=object), errors="coerce").to_numpy(
        np.float64)
    out = np.full(len(codes), np.nan)
    ok = codes >= 0
    out[ok] = parsed[codes[ok]]
    return out


# the text columns of COMPUTE_TASK_INFO in the order they are interned: (slot, rows column)
COMPUTE_TEXTS = [("op_name", "op_name"), ("task_type", "task_type"), ("op_type", "op_type"),
                 ("in_formats", "in_formats"), ("in_types", "in_types"),
                 ("in_shapes", "in_shapes"), ("out_formats", "out_formats"),
                 ("out_types", "out_types"), ("out_shapes", "out_shapes"),
                 ("op_state", "op_state"), ("hf32", "hf32")]
Text = Callable[[str, object], np.ndarray]  # (slot, values) -> ids (or slot codes)


def task_cols(t: pd.DataFrame, device_id: int, gid: np.ndarray, pid: int, text: Text
              ) -> Columns:
    """TASK columns of device tasks `t` (whole export: STRING_IDS ids; window mode: codes
    of the slot ``taskType``)."""
    n = len(t)
    conn = t["connection_id"].to_numpy(np.int64)
    return [ns_col(t["start_local"]), ns_col(t["end_local"]), np.full(n, device_id),
            np.where(conn >= 0, conn, NO_CONNECTION), gid, np.full(n, pid),
            text("taskType", _task_type_names(t)), np.full(n, CONTEXT_ID_910),
            ns_col(t["stream_id"]), ns_col(t["task_id"]), ns_col(t["model_id"])]


def compute_cols(rows: pd.DataFrame, cgid: np.ndarray, text: Text, na_id: int) -> Columns:
    """COMPUTE_TASK_INFO columns of op rows, texts interned in COMPUTE_TEXTS order."""
    m = len(rows)
    c = {slot: text(slot, rows[col]) for slot, col in COMPUTE_TEXTS[:9]}
    attr = np.full(m, na_id)  # interned after the shapes, as the real table's order has it
    c.update({slot: text(slot, rows[col]) for slot, col in COMPUTE_TEXTS[9:]})
    return [c["op_name"], cgid, ns_col(rows["block_dim"]), np.full(m, MIX_BLOCK_NUM_910),
            c["task_type"], c["op_type"], c["in_formats"], c["in_types"], c["in_shapes"],
            c["out_formats"], c["out_types"], c["out_shapes"], attr, c["op_state"], c["hf32"]]


def comm_cols(ops: pd.DataFrame, op_base: int, device_id: int, text: Text, na_id: int
              ) -> Columns:
    """COMMUNICATION_OP columns of op executions (communication.hccl_rows)."""
    c = len(ops)
    cconn = ops["connection_id"].to_numpy(np.int64)
    name = text("comm_name", ops["op_name"])
    return [name, ns_col(ops["start_local"]), ns_col(ops["end_local"]),
            np.where(cconn >= 0, cconn, NO_CONNECTION), np.full(c, na_id),
            op_base + np.arange(c), np.zeros(c, np.int64), np.zeros(c, np.int64),
            np.full(c, HCCL_DATA_TYPE_NA), np.full(c, na_id), np.zeros(c, np.int64),
            text("comm_type", ops["op_type"]), np.full(c, device_id)]


def pmu_parts(dev: DeviceData, rows: pd.DataFrame, gid: np.ndarray
              ) -> tuple[list[str], np.ndarray, Columns] | None:
    """TASK_PMU_INFO of the op rows with the metric as its index in the op_summary header:
    (header, which metrics have a value, [globalTaskId, index, value]); None without
    metrics.  The values are the ones op_summary prints (its text parsed back), PMU_ROWS
    rows at a time, grouped per task (the layout of the real table), metrics in header
    order."""
    metrics = dev.rd.ai_core_metrics if dev.pmu_events else None
    header = tail_header(metrics, dev.pmu_events)
    if not header:
        return None
    factors = [_pmu_name(h)[1] for h in header]
    valid = np.zeros(len(header), dtype=bool)
    out_gid, out_idx, out_val = [], [], []
    for lo in range(0, len(rows), PMU_ROWS):
        cols = tail_columns(rows.iloc[lo:lo + PMU_ROWS], metrics, dev.pmu_events,
                            float(dev.rd.aic_mhz), dev.rd.ai_core_num)
        g = gid[lo:lo + PMU_ROWS]
        ids, idx, values = [], [], []
        for k, text in enumerate(cols.values()):  # header order
            v = _numbers(text)
            ok = ~np.isnan(v)
            if not ok.any():
                continue
            valid[k] = True
            ids.append(g[ok])
            idx.append(np.full(int(ok.sum()), k, dtype=np.int16))
            values.append(v[ok] * factors[k])
        if ids:
            gid_c, idx_c, val_c = np.concatenate(ids), np.concatenate(idx), \
                np.concatenate(values)
            order = np.argsort(gid_c, kind="stable")  # gids rise with the rows: chunk by chunk
            out_gid.append(gid_c[order])
            out_idx.append(idx_c[order])
            out_val.append(val_c[order])
    cols = [np.concatenate(c) if c else np.zeros(0, dt) for c, dt in
            ((out_gid, np.int64), (out_idx, np.int16), (out_val, np.float64))]
    return header, valid, cols


def pmu_names(header: list[str], valid: np.ndarray, strings: StringIds) -> np.ndarray:
    """The STRING_IDS id of each header metric with a value (interned in header order, as
    one pass over all rows interns them); 0 for the others."""
    names = np.zeros(len(header), dtype=np.int64)
    for k in np.flatnonzero(valid):
        names[k] = strings.one(_pmu_name(header[k])[0])
    return names


def _pmu_rows(dev: DeviceData, rows: pd.DataFrame, gid: np.ndarray, strings: StringIds
              ) -> Columns:
    """TASK_PMU_INFO rows of the op rows (`pmu_parts` with the names interned)."""
    got = pmu_parts(dev, rows, gid) if len(rows) else None
    if got is None or not len(got[2][0]):
        return []
    header, valid, (g, idx, values) = got
    return [g, pmu_names(header, valid, strings)[idx], values]


def prof_app_pid(data: ProfData) -> int:
    if data.devices:
        return data.devices[0].rd.app_pid
    return data.host.rd.app_pid if data.host.rd else 0


def api_names(apis: pd.DataFrame) -> np.ndarray:
    """API name as api_statistic prints it: the item (op) name for communication, else the
    type name (ModelExecute, launch, ...)."""
    lvl = apis["level"].to_numpy()
    return np.where(lvl == L.LEVEL_HCCL, apis["item_name"].to_numpy(object),
                    apis["type_name"].to_numpy(object))


def mstx_cols(data: ProfData, strings: StringIds) -> Columns:
    tx = msproftx.markers(data)
    if len(tx) == 0:
        return []
    gtid = (tx["process_id"].to_numpy(np.int64) << np.int64(32)) \
        | tx["tx_thread_id"].to_numpy(np.int64)
    n = len(tx)
    return [ns_col(tx["start_local"]), ns_col(tx["end_local"]), ns_col(tx["event_type"]),
            tx["mark_id"].to_numpy(np.uint64).astype(np.int64), ns_col(tx["category"]),
            strings.column(tx["message"]), gtid, gtid, strings.column(tx["domain_name"]),
            np.full(n, NO_CONNECTION)]


def _end_ns(rd_path: Path, device_id: int | None) -> int | None:
    name = "end_info" if device_id is None else f"end_info.{device_id}"
    p = rd_path / name
    if not p.is_file():
        return None
    try:
        return int(str(control.read_json_line(p)["collectionTimeEnd"])) * 1000
    except (KeyError, ValueError, OSError):
        return None


def session_cols(data: ProfData) -> Columns:
    rds = [d.rd for d in data.devices] + ([data.host.rd] if data.host.rd else [])
    start = min(rd.begin_local_ns for rd in rds)
    ends = [e for rd in rds if (e := _end_ns(rd.path, rd.device_id)) is not None]
    end = max(ends) if ends else start + SESSION_FALLBACK_NS
    return [np.array([start]), np.array([end])]


def info_tables(data: ProfData) -> dict[str, list[tuple]]:
    host_info = data.host.rd.info if data.host.rd else (
        data.devices[0].rd.info if data.devices else {})
    npu, ranks = [], []
    for d in data.devices:
        chip = CHIP_NAMES.get(str(d.rd.info.get("platform_version", "")),
                              str(d.rd.info.get("platform_version", NA)))
        npu.append((d.device_id, chip))
        try:
            rank = int(d.rd.info.get("rank_id", -1))
        except (TypeError, ValueError):
            rank = -1
        ranks.append((rank, d.device_id))
    major, minor, micro = SCHEMA_VERSION
    return {
        "NPU_INFO": npu,
        "HOST_INFO": [(str(host_info.get("hostUid", NA)), str(host_info.get("hostname", NA)))],
        "META_DATA": [("SCHEMA_VERSION", f"{major}.{minor}.{micro}"),
                      ("SCHEMA_VERSION_MAJOR", str(major)), ("SCHEMA_VERSION_MINOR", str(minor)),
                      ("SCHEMA_VERSION_MICRO", str(micro))],
        "RANK_DEVICE_MAP": ranks,
    }


def connect_new(path: Path) -> sqlite3.Connection:
    """A new SQLite file, created exclusively with the export's file mode (0640) before
    SQLite opens it: the rows are never readable by others, not even while being written."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0),
                 FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)
    return sqlite3.connect(path, isolation_level=None)


def pmu_side_file(side: Path, cols: Columns) -> Path:
    """TASK_PMU_INFO rows alone in a new SQLite file (a forked worker's job; SQLite copies
    them into the db)."""
    table = "TASK_PMU_INFO"
    conn = connect_new(side)
    try:
        conn.execute("PRAGMA journal_mode=OFF")
        conn.execute("PRAGMA synchronous=OFF")
        conn.execute("BEGIN")
        create_table(conn, table, SCHEMA[table])
        insert_rows(conn, table, cols)
        conn.execute("COMMIT")
    finally:
        conn.close()
    return side


def db_path(prof: Path) -> Path:
    return prof / f"msprof_{time.strftime('%Y%m%d%H%M%S', time.localtime())}.db"
