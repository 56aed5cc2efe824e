"""``--type db``: the one db output, written from an export plan (plan.py) -- window by
window for a big PROF dir, as one window for every other -- with the tables of db.py.

What crosses windows, and how:

* STRING_IDS are numbered in first-seen order over whole columns (db.StringIds), device by
  device, column by column.  A window cannot know the final numbers, so each column has a
  *slot* of its own (`Slots`: its distinct texts in first-seen order, the windows coming
  in row order), the window's rows carry slot-local codes, and the final numbering is made
  at the end -- the slots in the order the rows intern them (CANN_API names by their first
  record, the API table's order) -- and applied while the rows go into the db.
* Two strategies behind one interface (the rows of the windows, then `finish`):
  several windows -- each window's rows go to a side SQLite file written by a forked worker
  while this process decodes the next window, and at the end SQLite copies them into the db
  (device-major, windows in order, OVERLAP_ANALYSIS kind-major, CANN_API by connection id),
  adding the per-device task / op numbering bases and mapping the codes; one window -- its
  rows are held and inserted with the same order and mapping by numpy, the big
  TASK_PMU_INFO table bound into side files by forked workers meanwhile.
* OVERLAP_ANALYSIS: no task crosses a cut, so each window's Computing / Communication /
  Not Overlapped intervals are its own; the Free gap across a cut (last computing end
  before it, first start after it; the scan keeps HCCL executions out of such gaps) is the
  first Free row of the later window.
"""
from __future__ import annotations

import os
import secrets
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd

from msprof_cli.errors import ExportError

from ..decode.data import ProfData
from ..decode.host import NA
from ..derive import memory as MEM
from ..derive.selection import ALL
from ..outputs import db_tables as DB
from ..outputs.carry import slim_first, window_comm
from ..outputs.overlap_layer import merge_intervals, overlap_intervals
from ..pipeline import Export, Output, Window, drive
from ..plan import Plan
from ..runtime.memory import release
from ..runtime.parallel import JobPool
from ..sinks.files import FILE_MODE, output_dir, write_error
from .db_sides import SIDE_ROWS, SIDE_SCHEMA, Slots, map_name, side_file


def export_db(plan: Plan, on_window=None) -> list[Path]:
    """``PROF_X/msprof_{ts}.db`` of every device of `plan`, window by window (a one-window
    plan: the whole decode), through the one pipeline (pipeline.drive): the layout is one
    output, the db file."""
    run = DbExport(plan)
    try:
        return drive(run, on_window)
    except BaseException as exc:
        if isinstance(exc, sqlite3.OperationalError):
            raise ExportError(f"cannot write {run.db.path}: SQLite said: {exc}. No partial "
                              f"database was left under that name; the raw data is "
                              f"unchanged.") from None
        if isinstance(exc, OSError):
            raise write_error(run.db.path, exc) from None
        raise


class DbExport(Export):
    """The db layout: its table is one output, the database file."""

    def __init__(self, plan: Plan) -> None:
        super().__init__(plan)
        self.db = DbFile(plan)
        self.outputs = [self.db]

    def window(self, k: int, data: ProfData) -> Window:
        return Window(k, data, [], data.host.apis)


class DbFile(Output):
    """``msprof_{ts}.db``: fed in the export process (it runs its own side-file jobs)."""

    stem = "msprof_db"

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.path = DB.db_path(plan.prof)
        output_dir(self.path.parent)
        self.tmp = self.path.with_name(f".{self.path.name}.tmp{os.getpid()}."
                                       f"{secrets.token_hex(4)}")
        self.slots = Slots()
        self.cann_first: dict[str, int] = {}  # CANN_API name -> its first connection id
        self.sides: list[Path] = []
        self.pool = JobPool()
        self.pool.caller_busy = True  # this process decodes the next window meanwhile
        self.first: ProfData | None = None
        self.dev_ids: list[int] = []
        self.held: dict[str, list[np.ndarray]] | None = None  # a one-window plan's rows

    def _start(self, data: ProfData) -> None:
        """Per-device state, once the first window tells the devices."""
        self.dev_ids = [d.rd.device_id or 0 for d in data.devices]
        n = len(self.dev_ids)
        self.tasks = [0] * n  # per device: tasks so far (globalTaskId within the device)
        self.ops = [0] * n  # per device: communication ops so far (opId)
        self.computing = [False] * n  # the device has op rows (db: OVERLAP_ANALYSIS)
        self.last_end: list[int | None] = [None] * n  # its last computing end so far
        self.pmu_valid: list[np.ndarray | None] = [None] * n
        self.pmu_header: list[list[str]] = [[] for _ in range(n)]

    def discard(self) -> None:
        self.pool.cancel()
        for p in [self.tmp, *self.sides]:
            try:
                os.unlink(p)
            except OSError:
                pass

    # -- a window ---------------------------------------------------------------------
    def feed(self, run: Export, w: Window) -> None:
        k, data = w.k, w.data
        if self.first is None:
            self._start(data)
        lo, hi = self.plan.bounds(k)
        tables: dict[str, list[list[np.ndarray]]] = {t: [] for t in SIDE_SCHEMA}
        pid = DB.prof_app_pid(data)
        for j, dev in enumerate(data.devices):
            self._device(j, dev, data, lo, hi, pid, tables)
        apis = data.host.apis
        if apis is not None and len(apis):
            names = DB.api_names(apis)
            cids = apis["connection_id"].to_numpy(np.int64)
            first = pd.DataFrame({"n": names, "c": cids}).groupby("n", sort=False)["c"].min()
            for name, cid in first.items():
                if cid < self.cann_first.get(name, cid + 1):
                    self.cann_first[name] = int(cid)
            tables["CANN_API"].append([
                DB.ns_col(apis["begin_local"]), DB.ns_col(apis["end_local"]), DB.ns_col(apis["level"]),
                (np.int64(pid) << np.int64(32)) | DB.ns_col(apis["thread_id"]), cids,
                self.slots.column(("cann",), names)])
        side = self.tmp.with_name(f".{self.path.name}.w{k}.tmp{os.getpid()}."
                                  f"{secrets.token_hex(4)}")
        self.sides.append(side)
        if self.first is None:  # what the end needs of it: control info, iterations, markers
            self.first = slim_first(data)
        del data, apis, w
        self.plan.release()
        if len(self.plan) == 1:  # one window: its rows go straight into the db at the end
            self.sides.pop()
            self.held = {t: parts for t, parts in tables.items() if parts}  # device parts
            return
        cols = {t: [np.concatenate([p[i] for p in parts]) for i in range(len(parts[0]))]
                for t, parts in tables.items() if parts}
        del tables
        # one window's rows wait at most: the worker binds them while this process decodes
        self.pool.wait_below(2)
        self.pool.submit(lambda side=side, cols=cols: side_file(side, cols))
        del cols
        release()

    def _device(self, j: int, dev, data: ProfData, lo: int, hi: int, pid: int,
                tables: dict) -> None:
        t = dev.tasks
        n = len(t)
        gid = self.tasks[j] + np.arange(n, dtype=np.int64)
        self.tasks[j] += n
        text = lambda slot, values: self.slots.column((j, slot), values)  # noqa: E731
        tables["TASK"].append(DB.task_cols(t, dev.device_id, gid, pid, text))
        keep = DB.compute_mask(dev)
        rows = t[keep].reset_index(drop=True)
        cgid = gid[keep]
        m = len(rows)
        comm, _, _ = window_comm(data, dev, ALL, lo, hi)
        if m:
            self.computing[j] = True
            tables["COMPUTE_TASK_INFO"].append(DB.compute_cols(rows, cgid, text, 0)
                                               + [np.full(m, j)])
            pmu = self._pmu(j, dev, rows, cgid)
            if pmu is not None:
                tables["TASK_PMU_INFO"].append(pmu)
        # OVERLAP_ANALYSIS rows of the window (kinds 0..3); the Free gap across the cut first
        parts = overlap_intervals(rows, comm.ops if comm is not None else None) if m or (
            comm is not None and len(comm.ops)) else None
        if parts is not None:
            starts, ends, kinds = [], [], []
            if m and self.last_end[j] is not None:
                first_start = int(merge_intervals(DB.ns_col(rows["start_local"]),
                                                  DB.ns_col(rows["end_local"]))[0][0])
                starts.append(np.array([self.last_end[j]]))
                ends.append(np.array([first_start]))
                kinds.append(np.array([3]))
            for kind, (s, e) in enumerate(parts):
                starts.append(s)
                ends.append(e)
                kinds.append(np.full(len(s), kind))
            order = np.argsort(np.concatenate(kinds), kind="stable")
            k_all = np.concatenate(kinds)[order]
            tables["OVERLAP_ANALYSIS"].append([
                np.full(len(k_all), dev.device_id), np.concatenate(starts)[order],
                np.concatenate(ends)[order], k_all])
            if m:
                self.last_end[j] = int(parts[0][1][-1])
        ops = comm.ops if comm is not None else None  # communication.hccl_rows of the window
        c = len(ops) if ops is not None else 0
        if c:
            tables["COMMUNICATION_OP"].append(DB.comm_cols(ops, self.ops[j], dev.device_id,
                                                           text, 0))
            self.ops[j] += c

    def _pmu(self, j: int, dev, rows: pd.DataFrame, cgid: np.ndarray) -> list | None:
        """db.pmu_parts with the header index as the name (interned at the end)."""
        got = DB.pmu_parts(dev, rows, cgid)
        if got is None:
            return None
        header, valid, (g, idx, values) = got
        if self.pmu_valid[j] is None:
            self.pmu_valid[j] = np.zeros(len(header), dtype=bool)
            self.pmu_header[j] = header
        self.pmu_valid[j] |= valid
        if not len(g):
            return None
        return [g, idx, values, np.full(len(g), j)]

    # -- the end ----------------------------------------------------------------------
    def close(self, run: Export) -> list[Path]:
        self.pool.results()
        first = self.first
        ids = self._string_ids(first)
        conn = DB.connect_new(self.tmp)
        try:
            conn.execute("PRAGMA journal_mode=OFF")
            conn.execute("PRAGMA synchronous=OFF")
            for table in ("TASK", "COMPUTE_TASK_INFO", "CANN_API", "TASK_PMU_INFO",
                          "STEP_TIME", "OVERLAP_ANALYSIS", "SESSION_TIME_INFO", "NPU_INFO",
                          "HOST_INFO", "META_DATA", "RANK_DEVICE_MAP"):
                DB.create_table(conn, table, DB.SCHEMA[table])
            if self.held is not None:
                conn.execute("BEGIN")
                pmu_sides = self._insert_held(conn)
                conn.execute("COMMIT")
                self.pool.results()
                for side in pmu_sides:  # device by device, part by part
                    self._run(conn, side, "TASK_PMU_INFO", "INSERT INTO main.TASK_PMU_INFO "
                              "SELECT * FROM side.TASK_PMU_INFO ORDER BY rowid")
            else:
                self._merge(conn, ids)
            DB.insert_rows(conn, "SESSION_TIME_INFO", DB.session_cols(first))
            for table, rows in DB.info_tables(first).items():
                if rows:
                    conn.executemany(f"INSERT INTO {table} VALUES (?, ?)", rows)
            for table, rows in DB.ENUMS.items():
                DB.create_table(conn, table, DB.ENUM_SCHEMA)
                conn.executemany(f"INSERT INTO {table} VALUES (?, ?)", rows)
            host = run.plan.host_rd()  # the device memory tables (derive/memory.py)
            for table, cols in MEM.db_rows([f.rd for f in run.plan.facts], host, ids.one,
                                           run.plan.app_pid()).items():
                DB.create_table(conn, table, MEM.DB_SCHEMA[table])
                DB.insert_rows(conn, table, cols)
            DB.create_table(conn, "STRING_IDS", DB.SCHEMA["STRING_IDS"])
            conn.executemany("INSERT INTO STRING_IDS VALUES (?, ?)", ids.rows())
            conn.execute("CREATE INDEX TaskIndex ON TASK (startNs, globalTaskId)")
        finally:
            conn.close()
        for side in self.sides:
            os.unlink(side)
        self.sides = []
        os.chmod(self.tmp, FILE_MODE)
        os.replace(self.tmp, self.path)
        return [self.path]

    def _string_ids(self, first: ProfData) -> DB.StringIds:
        """STRING_IDS in the whole export's order (db._device_tables, then CANN_API, mstx);
        `self.maps`: per slot, the final id of each slot-local code."""
        ids = DB.StringIds()
        ids.one(NA)
        self.maps: dict[tuple, np.ndarray] = {}

        def slot(key: tuple, texts: list[str] | None = None) -> None:
            texts = self.slots.texts(key) if texts is None else texts
            self.maps[key] = np.array([ids.one(x) for x in texts], dtype=np.int64)

        for j in range(len(self.dev_ids)):
            slot((j, "taskType"))
            for s, _ in DB.COMPUTE_TEXTS:
                slot((j, s))
            valid = self.pmu_valid[j]
            self.maps[(j, "pmu")] = DB.pmu_names(self.pmu_header[j], valid, ids) \
                if valid is not None else np.zeros(0, dtype=np.int64)
            slot((j, "comm_name"))
            slot((j, "comm_type"))
        # CANN_API names in the API table's order (connection ids), not the windows'
        by_cid = sorted(self.cann_first, key=self.cann_first.__getitem__)
        final = {x: ids.one(x) for x in by_cid}
        self.maps[("cann",)] = np.array([final[x] for x in self.slots.texts(("cann",))],
                                        dtype=np.int64)
        self.mstx = DB.mstx_cols(first, ids)
        return ids

    def _merge(self, conn: sqlite3.Connection, ids: DB.StringIds) -> None:
        """The side files' rows into the db, in the whole export's order."""
        maps = self.maps
        n = len(self.dev_ids)
        for key, lut in maps.items():
            name = map_name(key)
            conn.execute(f"CREATE TEMP TABLE {name} (code INTEGER PRIMARY KEY, id INTEGER)")
            conn.executemany(f"INSERT INTO {name} VALUES (?, ?)",
                             list(enumerate(lut.tolist())))

        def m(key: tuple, col: str) -> str:
            return f"(SELECT id FROM {map_name(key)} WHERE code = {col})"

        bases = np.cumsum([0] + self.tasks[:-1]).tolist()
        op_bases = np.cumsum([0] + self.ops[:-1]).tolist()
        has_comm = sum(self.ops) > 0
        if has_comm:
            DB.create_table(conn, "COMMUNICATION_OP", DB.SCHEMA["COMMUNICATION_OP"])
        if self.mstx:
            DB.create_table(conn, "MSTX_EVENTS", DB.SCHEMA["MSTX_EVENTS"])
            DB.insert_rows(conn, "MSTX_EVENTS", self.mstx)
        overlap_id = 0
        for j in range(n):
            dev_id = self.dev_ids[j]
            base = bases[j]
            bases_j = {"tasks": base, "ops": op_bases[j]}

            def select(table: str) -> str:
                dev_col, mapped, (base_col, base_of) = SIDE_ROWS[table]
                cols = [m((j, mapped[c]), c) if c in mapped else
                        f"{c} + {bases_j[base_of]}" if c == base_col else c
                        for c, _ in DB.SCHEMA[table]]
                return (f"INSERT INTO main.{table} SELECT {', '.join(cols)} FROM side.{table}"
                        f" WHERE {dev_col} = {j if dev_col == 'dev' else dev_id} ORDER BY rowid")
            per_side = {table: select(table) for table in SIDE_ROWS}
            for table, sql in per_side.items():
                if table == "COMMUNICATION_OP" and not has_comm:
                    continue
                for side in self.sides:
                    self._run(conn, side, table, sql)
            if self.computing[j]:  # OVERLAP_ANALYSIS kind by kind, windows in order
                for kind in range(4):
                    for side in self.sides:
                        before = conn.total_changes
                        self._run(conn, side, "OVERLAP_ANALYSIS", (
                            f"INSERT INTO main.OVERLAP_ANALYSIS SELECT {overlap_id} + "
                            f"(ROW_NUMBER() OVER (ORDER BY rowid)) - 1, deviceId, startNs, "
                            f"endNs, type FROM side.OVERLAP_ANALYSIS WHERE deviceId = "
                            f"{dev_id} AND type = {kind} ORDER BY rowid"))
                        overlap_id += conn.total_changes - before
            self._step_time(conn, j, dev_id)
        # CANN_API in connection-id order (the API table's; windows hold APIs by begin)
        conn.execute("CREATE TEMP TABLE cann_all AS SELECT * FROM main.CANN_API WHERE 0")
        for side in self.sides:
            self._run(conn, side, "CANN_API", (
                "INSERT INTO temp.cann_all SELECT startNs, endNs, type, globalTid, "
                "connectionId, " + m(("cann",), "name") + " FROM side.CANN_API ORDER BY rowid"))
        conn.execute("BEGIN")
        conn.execute("INSERT INTO main.CANN_API SELECT * FROM temp.cann_all "
                     "ORDER BY connectionId")
        conn.execute("DROP TABLE temp.cann_all")
        conn.execute("COMMIT")

    def _insert_held(self, conn: sqlite3.Connection) -> list[Path]:
        """The one window's rows into the db with numpy, in `_merge`'s order and with its
        mapping (the same rows, without the side file and its SQL copy); returns the side
        files of TASK_PMU_INFO its workers are binding (copied in after this)."""
        held, maps = self.held, self.maps
        n = len(self.dev_ids)
        bases = np.cumsum([0] + self.tasks[:-1]).tolist()
        op_bases = np.cumsum([0] + self.ops[:-1]).tolist()
        if sum(self.ops) > 0:
            DB.create_table(conn, "COMMUNICATION_OP", DB.SCHEMA["COMMUNICATION_OP"])
        if self.mstx:
            DB.create_table(conn, "MSTX_EVENTS", DB.SCHEMA["MSTX_EVENTS"])
            DB.insert_rows(conn, "MSTX_EVENTS", self.mstx)

        def rows(table: str, dev_col: str, dev: int) -> dict[str, np.ndarray] | None:
            """Device `dev`'s part of `table` (`_device` adds one part per device), as
            views: no copy of the rows."""
            names = [c for c, _ in SIDE_SCHEMA[table]]
            at = names.index(dev_col)
            for part in held.get(table, ()):
                if len(part[at]) and int(np.asarray(part[at])[0]) == dev:
                    return {c: np.asarray(v) for c, v in zip(names, part)}
            return None

        def put(table: str, got: dict[str, np.ndarray] | None, j: int,
                mapped: dict[str, str], plus: dict[str, int]) -> None:
            if got is None or not len(next(iter(got.values()))):
                return
            for col, slot in mapped.items():
                got[col] = maps[(j, slot)][got[col].astype(np.int64, copy=False)]
            for col, base in plus.items():
                if base:
                    got[col] = got[col].astype(np.int64, copy=False) + base
            DB.insert_rows(conn, table, [got[c] for c, _ in DB.SCHEMA[table]])

        overlap_id = 0
        pmu_sides: list[Path] = []
        for j in range(n):  # the big TASK_PMU_INFO first: its workers bind while we insert
            pmu = rows("TASK_PMU_INFO", "dev", j)
            if pmu is not None and self.pool.parallel \
                    and len(pmu["name"]) >= DB.PMU_SIDE_MIN_ROWS:
                pmu_sides += self._pmu_sides(j, pmu, bases[j])
                held["TASK_PMU_INFO"] = [p for p in held["TASK_PMU_INFO"]
                                         if int(np.asarray(p[3])[0]) != j]
        for j in range(n):
            dev_id = self.dev_ids[j]
            for table, (dev_col, mapped, (base_col, base_of)) in SIDE_ROWS.items():
                if table == "COMMUNICATION_OP" and not sum(self.ops):
                    continue
                # (TASK_PMU_INFO: the parts of the devices sent to side files are gone)
                put(table, rows(table, dev_col, j if dev_col == "dev" else dev_id), j, mapped,
                    {base_col: bases[j] if base_of == "tasks" else op_bases[j]})
            got = rows("OVERLAP_ANALYSIS", "deviceId", dev_id) if self.computing[j] else None
            if got is not None and len(got["type"]):
                order = np.argsort(got["type"], kind="stable")  # kind by kind, in row order
                DB.insert_rows(conn, "OVERLAP_ANALYSIS", [
                    overlap_id + np.arange(len(order)), got["deviceId"][order],
                    got["startNs"][order], got["endNs"][order], got["type"][order]])
                overlap_id += len(order)
            self._step_time(conn, j, dev_id)
        if held.get("CANN_API"):
            cann = held["CANN_API"][0]  # one part: the window's
            order = np.argsort(np.asarray(cann[4]), kind="stable")
            DB.insert_rows(conn, "CANN_API", [np.asarray(c)[order] for c in cann[:5]]
                       + [maps[("cann",)][np.asarray(cann[5])[order]]])
        self.held = None
        return pmu_sides

    def _pmu_sides(self, j: int, pmu: dict[str, np.ndarray], base: int) -> list[Path]:
        """Device j's TASK_PMU_INFO rows, mapped, in DB.PMU_SIDES side files (worker jobs)."""
        cols = [pmu["globalTaskId"].astype(np.int64) + base,
                self.maps[(j, "pmu")][pmu["name"].astype(np.int64)], pmu["value"]]
        n = len(cols[0])
        step = -(-n // DB.PMU_SIDES)
        out = []
        for lo in range(0, n, step):
            side = self.tmp.with_name(f".{self.path.name}.pmu{len(self.sides)}.tmp"
                                      f"{os.getpid()}.{secrets.token_hex(4)}")
            self.sides.append(side)
            out.append(side)
            part = [c[lo:lo + step] for c in cols]
            self.pool.submit(lambda side=side, part=part: DB.pmu_side_file(side, part))
        return out

    def _step_time(self, conn: sqlite3.Connection, j: int, dev_id: int) -> None:
        its = self.first.devices[j].iterations
        if len(its):
            its = its.sort_values("step_end_ns", kind="stable")
            DB.insert_rows(conn, "STEP_TIME", [
                DB.ns_col(its["iteration_id"]), DB.ns_col(its["step_start_ns"]),
                DB.ns_col(its["step_end_ns"]), np.full(len(its), dev_id),
                DB.ns_col(its["model_id"])])

    @staticmethod
    def _run(conn: sqlite3.Connection, side: Path, table: str, sql: str) -> None:
        conn.execute("ATTACH DATABASE ? AS side", (str(side),))
        try:
            present = conn.execute("SELECT 1 FROM side.sqlite_master WHERE name = ?",
                                   (table,)).fetchone()
            if present:
                conn.execute("BEGIN")
                conn.execute(sql)
                conn.execute("COMMIT")
        finally:
            conn.execute("DETACH DATABASE side")


