"""Windowed decode of big PROF dirs (docs/performance.md "Windowed export").

A PROF dir with more than ``window_tasks()`` device tasks is decoded one time window at a
time, so memory is bounded by the window, not by the collection.  Windows are cut only at
*quiet points*: local times that no host API span, no device task and no host launch ->
device task flow crosses.  Then every join of the decode (`enclose`, the task_track join on
(stream, task, batch, occurrence), the AI CPU join) is local to a window, and a window's
tables are exactly the rows of the whole decode that start inside it.  What crosses windows
is carried explicitly:

* batch ids: the FLIP records (host task_track and device ts_track) are read by every window;
* step trace: every window reads all step-trace records (iterations are global);
* the aicore PMU match (per (stream, task) in occurrence order, no time of its own): the scan
  indexes the PMU records by (stream, task, occurrence) and a window looks its candidate
  tasks up with occurrence numbers carried from the windows before (`PmuIndex`).

A PROF dir with several devices is planned one device at a time (`plan_windows(device=…)`,
the legacy layout); HCCL op executions (hccl_info) then never cross a cut nor lie in the
computing gap around one.

Window mode is used only on data whose whole-file checks (magic numbers, rolling counters,
log types, truncated tails) found nothing to report, so no record dropped by a check can
shift a window's joins; otherwise, and for what it does not cover yet (api begin/end event
records, legacy dynamic-shape data), the PROF dir is one window, decoded whole (`plan_windows`
returns `Whole`).  l2_cache records carry no time: a window decodes none, the export reads them
in chunks at the end (`l2_rows`).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from msprof_cli.raw import layouts as L
from msprof_cli.raw import stars_layouts as SL
from msprof_cli.raw.profdir import result_dirs

from ..runtime.memory import release
from .control_info import ResultDirInfo, read_result_dir, to_mono_ns
from .device import (STREAM_MASK, aicpu_task_rows, assign_batches, decode_device, memcpy_states,
                     reviewed)
from .quiet import (by_occurrence, count_before, cuts_at, cuts_by, host_models_of, launch_flows,
                    quiet_points, task_groups)
from .rawread import (DecodeLog, data_files, device_records, device_regex, host_records, host_regex,
                      read_files, type_info_dict)
from .stars import context_pmu
from .time_index import PmuIndex, TimeIndex

WINDOW_TASKS_ENV = "MSPROF_EXPORT_WINDOW_TASKS"
WINDOW_TASKS = 500_000  # device tasks per window (~1.2 GB of decode and rendering at most)
WHOLE_UP_TO = 2_000_000  # below this the whole export (parallel jobs, ~1.3 GB per 1M) is used


def window_tasks() -> tuple[int, int]:
    """(tasks per window, tasks above which windows are used): MSPROF_EXPORT_WINDOW_TASKS=N
    sets both to N (tests set it small; 0 turns windows off), else WINDOW_TASKS and
    WHOLE_UP_TO."""
    raw = os.environ.get(WINDOW_TASKS_ENV, "").strip()
    try:
        n = int(raw) if raw else None
    except ValueError:
        n = None
    return (WINDOW_TASKS, WHOLE_UP_TO) if n is None else (n, n)


class NotWindowable(Exception):
    """A window's decode found something the whole-file scan did not: export whole."""


@dataclass
class WindowPlan:
    """How to decode one PROF dir window by window (see the module doc)."""

    prof: Path
    infos: list[ResultDirInfo]
    host_rd: ResultDirInfo
    dev_rd: ResultDirInfo
    cuts: list[int]  # window k = [cuts[k], cuts[k + 1]) in local ns
    host_index: dict[str, TimeIndex]
    dev_index: dict[str, TimeIndex]
    pmu: PmuIndex | None
    log: DecodeLog  # the control-file warnings (the scan found nothing else)
    tasks: int = 0
    window_tasks: list[int] = field(default_factory=list)
    ts_flips: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # ts_track
    iterations: pd.DataFrame | None = None  # the device's iterations, once decoded
    has_apis: bool = False  # the decode keeps at least one host API row
    host_models: set[int] | None = None  # legacy.host_models of the whole (`models=True`)
    host_ops: bool = False  # DeviceData.has_host_ops of the whole decode
    node_info: bool = False  # DeviceData.has_node_info of the whole decode
    rank_ids: list[int] = field(default_factory=list)  # every device id of the PROF dir
    l2_records: int = 0  # l2_cache records of the device (read by the export at the end)
    aging: bool = False  # dynamic-shape host data (HostTables.aging of the whole decode)
    quiet: np.ndarray | None = None  # plan_all_devices: the device's quiet points ...
    starts: np.ndarray | None = None  # ... and its task starts, until the common cuts

    def __len__(self) -> int:
        return len(self.cuts) - 1

    def bounds(self, k: int) -> tuple[int, int]:
        return self.cuts[k], self.cuts[k + 1]


def _files_exist(data_dir: Path, regex) -> bool:
    return bool(data_files(data_dir, regex, DecodeLog()))


@dataclass(frozen=True)
class Whole:
    """The scan's answer for a PROF dir that is exported as one window, and why."""

    why: str


def _whole(why: str) -> Whole:
    return Whole(why)


def check_selection(prof: Path, model_id: int | None, iteration_id: int | None,
                    iteration_count: int) -> None:
    """Raise the selection error of any device before a device-by-device export writes
    anything (as the whole export does): each device's iterations from its step-trace
    records only.  A device without step trace is checked by its own export."""
    from ..derive.selection import select
    from .dataset import device_iterations

    if model_id is None and iteration_id is None:
        return  # the default selection cannot fail
    none = np.zeros(0, np.int64)
    for rd in map(read_result_dir, result_dirs(prof)):
        if rd.device_id is None:
            continue
        steps = decode_device(rd, DecodeLog(), select={"hwts": none, "stars_soc": none,
                                                       "aicpu": none, "l2_cache": none}).steps
        its = device_iterations(rd, steps)
        if len(its):
            select(its, set(), model_id, iteration_id, iteration_count)


def device_ids(prof: Path) -> list[int]:
    """The device ids of the result dirs of `prof`, sorted."""
    return sorted(int(i.device_id) for i in map(read_result_dir, result_dirs(prof))
                  if i.device_id is not None)


def plan_windows(prof: Path, target: int | None = None, models: bool = False,
                 device: int | None = None, _common: bool = False) -> WindowPlan | Whole:
    """Scan `prof` and cut it into windows of about `target` device tasks at quiet points,
    or `Whole` (why) when it is small or not covered by window mode: it is then one
    window, decoded whole.  `models`: also find the models of the host-known tasks
    (`WindowPlan.host_models`, the legacy layout's default model).  `device`: plan the
    windows of that device of a several-device PROF dir, HCCL data included (the legacy
    layout exports each device on its own); None: the PROF dir must hold one device, and
    HCCL data make it export whole."""
    target, threshold = window_tasks() if target is None else (target, target)
    if target <= 0:
        return _whole("windows off")
    dirs = result_dirs(prof)
    infos = [read_result_dir(d) for d in dirs]
    host_rd = next((i for i in infos if i.device_id is None), None)
    devs = [i for i in infos if i.device_id is not None]
    if device is None:
        dev_rd = devs[0] if len(devs) == 1 else None
    else:
        dev_rd = next((i for i in devs if i.device_id == device), None)
    if host_rd is None or dev_rd is None or not host_rd.data_dir.is_dir():
        return _whole("not one host and one device directory")
    hd, dd = host_rd.data_dir, dev_rd.data_dir
    stars = dev_rd.stars  # an Atlas A2: the STARS task log in place of hwts (stars.py)
    task_log = "stars_soc" if stars else "hwts"
    size = sum(p.stat().st_size for p in data_files(dd, device_regex(task_log), DecodeLog()))
    if size // L.DEVICE_DTYPES[task_log].itemsize // 2 <= threshold and not _common:
        return _whole("small")
    log = DecodeLog()
    # l2_cache records carry no time: the export reads them in chunks at the end (their
    # file checks run now, so damaged data still go to the whole export)
    l2_records = len(device_records(dd, "l2_cache", log, ["task_id"])["task_id"])
    hoff, doff = np.int64(host_rd.offset_ns), np.int64(dev_rd.offset_ns)
    ranks = sorted(int(i.device_id) for i in devs)
    comm_spans = None  # (starts, ends) of the device's HCCL op executions (hccl_info)
    if _files_exist(hd, host_regex("hccl_info")):
        if device is None:
            return _whole("hccl_info data")
        from ..derive.hccl import rank_steps
        from .host import decode_hccl

        hccl = decode_hccl(hd, log)
        levels = host_records(hd, "api_event", log, ["level"])["level"]
        if len(hccl) and int((levels == L.LEVEL_HCCL).sum()) >= len(hccl):
            # one HCCL-level API per step: the steps are device tasks (hccl steps on), their
            # collectives are known only after the host join (dataset.comm_ops): whole
            return _whole("HCCL steps as device tasks")
        steps = rank_steps(hccl, ranks.index(dev_rd.device_id), int(hoff))
        if len(steps):
            g = steps.groupby("op", sort=False)
            comm_spans = (np.sort(g["start_local"].min().to_numpy(np.int64)),
                          np.sort(g["end_local"].max().to_numpy(np.int64)))
        del steps

    # device: task starts and ends (hwts, AI CPU, ts memcpy) and, for the launch join, each
    # task's (stream, task) -- clean data has one start record per task, its end follows
    # the checks on the flags of all records, then the other columns one file at a time
    # (the whole columns and their concatenation were the scan's peak)
    device_records(dd, task_log, log, ["head" if stars else "flags"])
    times, starts, ends, streams, task_ids = [], [], [], [], []
    memcpy_at = -1  # the ts memcpy tasks' entry of starts / ends: not computing
    for f in data_files(dd, device_regex(task_log), DecodeLog()):
        ht, st, en, stream, task = _task_log(f, task_log, dev_rd)
        times.append(ht)
        starts.append(ht[st])
        ends.append(ht[en])
        streams.append(stream[st])
        task_ids.append(task[st])
        del ht, st, en, stream, task
    ht = np.concatenate(times) if times else np.zeros(0, np.int64)
    del times
    dev_index = {task_log: TimeIndex.build(task_log, True, "syscnt", ht)}
    del ht
    release()  # the scan frees big temporaries step by step: give their heap back each time
    ts = device_records(dd, "ts_track", log)
    has_ts_aicpu = False
    ts_flips = np.zeros(0, np.int64)
    dev_flips = pd.DataFrame({"ts_ns": np.zeros(0, np.int64),
                              "stream_id": np.zeros(0, np.int64),
                              "task_id": np.zeros(0, np.int64)})
    if "rpt_type" in ts and len(ts["rpt_type"]):
        t = to_mono_ns(ts["timestamp"], dev_rd) + doff
        fl = ts["rpt_type"] == L.TS_RPT_FLIP
        ts_flips = np.flatnonzero(fl).astype(np.int64)
        if fl.any():
            fv = reviewed(ts, fl, L.TS_TRACK_FLIP)
            dev_flips = pd.DataFrame({"ts_ns": t[fl],
                                      "stream_id": fv["stream_id"].astype(np.int64)
                                      & STREAM_MASK,
                                      "task_id": fv["task_id"].astype(np.int64)})
        mc = ts["rpt_type"] == L.TS_RPT_MEMCPY
        if mc.any():
            mv = reviewed(ts, mc, L.TS_TRACK_MEMCPY)
            state = mv["task_state"]
            s0, s1 = memcpy_states(state)
            memcpy_at = len(starts)
            starts.append(t[mc][state == s0])
            ends.append(t[mc][state == s1])
            streams.append(mv["stream_id"][state == s0].astype(np.int64) & STREAM_MASK)
            task_ids.append(mv["task_id"][state == s0].astype(np.int64))
        # the AI CPU tasks' "task type" reports (decode_device): computing
        ai_rows, av = aicpu_task_rows(ts)
        has_ts_aicpu = av is not None
        if av is not None:
            state = av["task_state"]
            starts.append(t[ai_rows][state == L.TS_STATE_START])
            ends.append(t[ai_rows][state == L.TS_STATE_END])
            streams.append(av["stream_id"][state == L.TS_STATE_START].astype(np.int64)
                           & STREAM_MASK)
            task_ids.append(av["task_id"][state == L.TS_STATE_START].astype(np.int64))
        # task records are read by the windows of their time, the rest (step trace, flips)
        # by every window
        dev_index["ts_track"] = TimeIndex.build(
            "ts_track", True, "timestamp", t,
            np.flatnonzero(~mc & (ts["rpt_type"] != L.TS_RPT_TASK_TYPE)))
    del ts
    ac = device_records(dd, "aicpu", log, ["run_start_tick", "run_end_tick", "data_tag",
                                           "stream_id", "task_id"])
    if len(ac["run_start_tick"]):
        t0 = to_mono_ns(ac["run_start_tick"], dev_rd) + doff
        ok = ac["data_tag"] == L.AICPU_DATA_TAG
        if not has_ts_aicpu and not stars:  # legacy raw data: the AI CPU tasks are
            # aicpu.data's (an A2 logs them in its task log)
            starts.append(t0[ok])
            ends.append(to_mono_ns(ac["run_end_tick"][ok], dev_rd) + doff)
            streams.append(ac["stream_id"][ok].astype(np.int64) & STREAM_MASK)
            task_ids.append(ac["task_id"][ok].astype(np.int64))
        dev_index["aicpu"] = TimeIndex.build("aicpu", True, "run_start_tick", t0)
    del ac
    comm = None
    if comm_spans is not None:  # computing = op_summary tasks: all but the ts memcpy ones
        comm = (*comm_spans,
                np.sort(np.concatenate([a for k, a in enumerate(starts) if k != memcpy_at])),
                np.sort(np.concatenate([a for k, a in enumerate(ends) if k != memcpy_at])))
    de = np.sort(np.concatenate(ends))
    del ends
    ds = np.concatenate(starts)
    del starts
    # as decode_device: tasks by start (stable), batch = flips passed
    order = np.argsort(ds, kind="stable")
    ds = ds[order]
    dstream = np.concatenate(streams)[order]
    dtask = np.concatenate(task_ids)[order]
    del streams, task_ids, order
    dbatch = assign_batches(pd.DataFrame({"stream_id": dstream, "task_id": dtask,
                                          "start": ds}), dev_flips, "start") \
        if len(dev_flips) else np.zeros(len(ds), np.int64)
    kept = ds >= dev_rd.begin_local_ns  # build_device drops the earlier tasks first
    dev_occ = by_occurrence(task_groups(dstream[kept], dtask[kept], dbatch[kept]), ds[kept])
    del dstream, dtask, dbatch, kept

    pmu = None
    if dev_rd.ai_core_metrics and stars:
        ai = device_records(dd, "ffts_profile", log, ["head", "subtask_type", "ffts_type",
                                                      "stream_id", "task_id"])
        ok = context_pmu(ai)
        if ok.any():
            pmu = PmuIndex.build(ai["stream_id"][ok], ai["task_id"][ok], np.flatnonzero(ok))
        del ai
    elif dev_rd.ai_core_metrics:
        ai = device_records(dd, "aicore", log, ["stream_id", "task_id"])
        if len(ai["task_id"]):
            pmu = PmuIndex.build(ai["stream_id"], ai["task_id"])
        del ai

    # host launches (task_track): FLIP records are read by every window
    tt = host_records(hd, "task_track", log,
                      ["timestamp", "device_id", "task_type", "stream_id", "task_id"]
                      + (["thread_id"] if models else []))
    del tt["_aging"], tt["_file"]
    types = type_info_dict(hd)
    host_ops = len(tt["stream_id"]) > 0 and bool(types)  # as dataset.build_device

    def codes(name: str) -> list[int]:
        return [t for (lvl, t), n in types.items() if lvl == L.LEVEL_RUNTIME and n == name]
    flips = np.isin(tt["task_type"], codes("FLIP_TASK"))
    launches = ~flips & ~np.isin(tt["task_type"], codes("MAINTENANCE"))
    del tt["task_type"]
    tts = tt.pop("timestamp").astype(np.int64)
    tts += hoff
    host_index = {"task_track": TimeIndex.build("task_track", False, "timestamp", tts,
                                                np.flatnonzero(flips))}
    on_dev = (tt.pop("device_id") & 0x0FFF) == (dev_rd.device_id or 0)
    flips &= on_dev  # as dataset.host_batches: this device's launches and flips only
    host_flips = pd.DataFrame({"ts_ns": tts[flips],
                               "stream_id": tt["stream_id"][flips].astype(np.int64),
                               "task_id": tt["task_id"][flips].astype(np.int64)})
    mine = launches & on_dev
    lts = tts[mine]
    del tts, on_dev
    lstream, ltask = tt["stream_id"][mine], tt["task_id"][mine]  # u16: narrow
    lthread = tt["thread_id"][mine] if models else None
    del tt, flips, launches, mine
    lbatch = np.zeros(len(lts), np.int64)
    if len(lts) and len(host_flips):  # the launches in time order (stable)
        order = np.argsort(lts, kind="stable")
        lbatch[order] = assign_batches(pd.DataFrame({"stream_id": lstream[order],
                                                     "task_id": ltask[order],
                                                     "ts": lts[order]}), host_flips, "ts")
        del order
    order = np.argsort(lts, kind="stable")
    host_occ = by_occurrence(task_groups(lstream[order], ltask[order], lbatch[order]), lts[order])
    flow_lo, flow_hi, hi = launch_flows(host_occ, dev_occ)
    known: tuple[np.ndarray, np.ndarray] | None = None  # (thread, ts) of the matched launches
    if models:
        rows = order[host_occ[3][hi]]
        known = (lthread[rows].astype(np.int64), lts[rows])
        del rows, lthread
    del lts, lstream, ltask, lbatch, order, host_occ, dev_occ, hi
    release()

    # host: API spans, node / tensor records
    a = host_records(hd, "api_event", log, ["begin_time", "end_time"]
                     + (["level", "type"] if models else []))
    if (a["end_time"] == np.uint64(L.EVENT_RESERVE)).any():
        return _whole("api begin/end event records")
    ab = a["begin_time"].astype(np.int64) + hoff
    ae = a["end_time"].astype(np.int64) + hoff
    # HostTables.aging of the whole decode: a kept API row (decode_apis) or a node_basic
    # record from an aging file -- the legacy thread_group json exists
    aging = bool((a["_aging"] & (ab > hoff) & (ae != ab)).any())
    host_models = None
    if known is not None:  # the ModelExecute spans the decode keeps (host.decode_apis)
        me = np.flatnonzero((a["level"] == L.LEVEL_MODEL)
                            & np.isin(a["type"], L.MODEL_STEP_TYPES) & (ab > hoff) & (ae != ab))
        # thread and model of those records only (a few per step, not per API)
        mc = host_records(hd, "api_event", log, ["thread_id", "item_id"], select=me)
        host_models = host_models_of(*known, {
            "thread": mc["thread_id"].astype(np.int64), "begin": ab[me], "end": ae[me],
            "model": mc["item_id"].astype(np.uint64).astype(np.int64)})
        del me, mc, known
    del a
    host_index["api_event"] = TimeIndex.build("api_event", False, "begin_time", ab)
    # an API row the decode keeps (decode_apis and load_prof filters): the CANN layer and the
    # flows of msprof json exist
    has_apis = bool(((ab > hoff) & (ae != ab) & (ab >= host_rd.begin_local_ns)).any())
    ab.sort()
    ae.sort()
    for kind in ("node_basic_info", "tensor_info"):
        c = host_records(hd, kind, log, ["timestamp"])
        if kind == "node_basic_info":
            aging |= bool(c["_aging"].any())
        host_index[kind] = TimeIndex.build(kind, False, "timestamp",
                                           c["timestamp"].astype(np.int64) + hoff)
        del c
    if log.warnings or log.bad_records or log.lost_records:
        return _whole("decode warnings")  # the whole decode reports them, exact joins
    release()
    tasks = len(ds)
    if tasks <= threshold and not _common:
        return _whole("small")

    quiet = quiet_points(ab, ae, ds, de, flow_lo, flow_hi, comm)
    cuts, sizes = cuts_at(quiet, ds, target)
    if len(cuts) < 3 and not _common:  # one window: no quiet point where a cut would help
        return _whole("no quiet point")
    plan_log = DecodeLog()
    for i in infos:
        plan_log.warnings.extend(i.warnings)
    plan = WindowPlan(prof=prof, infos=infos, host_rd=host_rd, dev_rd=dev_rd, cuts=cuts,
                      host_index=host_index, dev_index=dev_index, pmu=pmu, log=plan_log,
                      tasks=tasks, window_tasks=sizes, ts_flips=ts_flips,
                      has_apis=has_apis, host_models=host_models, host_ops=host_ops,
                      rank_ids=ranks, l2_records=l2_records, aging=aging,
                      node_info=host_ops and host_index["node_basic_info"].n > 0)
    if _common:  # plan_all_devices cuts all devices at once
        plan.quiet, plan.starts = quiet, ds
    return plan


def _task_log(f: Path, kind: str, rd: ResultDirInfo) -> tuple[np.ndarray, ...]:
    """One task-log file's records: (local ns of every record, start and end masks, stream
    and task id of every record), for hwts.data or an Atlas A2's stars_soc.data."""
    if kind == "stars_soc":
        c = read_files([f], L.DEVICE_DTYPES[kind], DecodeLog(),
                       ["head", "syscnt", "stream_id", "task_id"])
        func = SL.func_type(c["head"])
        st, en = func == SL.FUNC_ACSQ_START, func == SL.FUNC_ACSQ_END
    else:
        c = read_files([f], L.DEVICE_DTYPES[kind], DecodeLog(),
                       ["flags", "syscnt", "stream_id", "task_id"])
        lt = c["flags"] & 0x07
        st, en = lt == L.HWTS_TASK_START, lt == L.HWTS_TASK_END
    return (to_mono_ns(c["syscnt"], rd) + np.int64(rd.offset_ns), st, en,
            c["stream_id"].astype(np.int64) & STREAM_MASK, c["task_id"].astype(np.int64))


def plan_all_devices(prof: Path, target: int | None = None) -> list[WindowPlan] | Whole:
    """The plans of every device of a several-device PROF dir with the same cuts (the
    mindstudio layout mixes the devices in each file): the quiet points of all devices
    (the same candidates: the host API begins), about `target` tasks of all devices
    apart; `Whole` when one device is not covered or the whole is small."""
    target_, threshold = window_tasks() if target is None else (target, target)
    if target_ <= 0:
        return _whole("windows off")
    ids = device_ids(prof)
    if len(ids) < 2:
        return _whole("not several devices")
    # the task-log records (two per task) of all devices, before any scan
    size = sum(p.stat().st_size // L.DEVICE_DTYPES[kind].itemsize
               for d in result_dirs(prof) if d.name.startswith("device_")
               for kind in ("hwts", "stars_soc")
               for p in data_files(d / "data", device_regex(kind), DecodeLog()))
    if size // 2 <= threshold:
        return _whole("small")
    plans: list[WindowPlan] = []
    for dev in ids:
        plan = plan_windows(prof, target_, device=dev, _common=True)
        if isinstance(plan, Whole):
            return plan
        plans.append(plan)
        release()
    if sum(p.tasks for p in plans) <= threshold:
        return _whole("small")
    quiet = plans[0].quiet
    for p in plans[1:]:
        quiet = np.intersect1d(quiet, p.quiet, assume_unique=True)
    before = sum(count_before(p.starts, quiet) for p in plans)
    cuts, sizes = cuts_by(quiet, before, sum(p.tasks for p in plans), target_)
    if len(cuts) < 3:
        return _whole("no quiet point")
    for p in plans:
        p.cuts, p.window_tasks = cuts, sizes
        p.quiet = p.starts = None
    return plans


