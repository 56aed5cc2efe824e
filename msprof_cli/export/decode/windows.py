"""Windowed decode of big PROF dirs (issue 7; docs/performance.md "Windowed export").

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
from msprof_cli.raw.profdir import result_dirs

from .control_info import ResultDirInfo, read_result_dir, to_mono_ns
from .device import (STREAM_MASK, aicpu_task_rows, assign_batches, decode_device,
                     memcpy_states, reviewed)
from ..fmt import ts_sort_key
from .host import decode_host
from ..runtime.memory import release
from .rawread import (DecodeLog, device_regex, host_regex, data_files, device_records,
                      host_records, read_files, type_info_dict)

WINDOW_TASKS_ENV = "MSPROF_EXPORT_WINDOW_TASKS"
WINDOW_TASKS = 500_000  # device tasks per window (~1.2 GB of decode and rendering at most)
WHOLE_UP_TO = 2_000_000  # below this the whole export (parallel jobs, ~1.3 GB per 1M) is used
BLOCK = 4096  # records per block of a TimeIndex
INT64_MIN, INT64_MAX = np.iinfo(np.int64).min, np.iinfo(np.int64).max


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
class TimeIndex:
    """The records of one raw kind located by local time: min and max per block of BLOCK
    records (files are nearly in time order, so a window reads few blocks it does not
    keep) and the records every window takes (`always`: flips, step markers)."""

    kind: str
    device: bool
    field: str
    n: int
    mins: np.ndarray
    maxs: np.ndarray
    always: np.ndarray

    @classmethod
    def build(cls, kind: str, device: bool, field_: str, times: np.ndarray,
              always: np.ndarray | None = None) -> "TimeIndex":
        n = len(times)
        starts = np.arange(0, n, BLOCK)
        mins = np.minimum.reduceat(times, starts) if n else np.zeros(0, np.int64)
        maxs = np.maximum.reduceat(times, starts) if n else np.zeros(0, np.int64)
        return cls(kind, device, field_, n, mins, maxs,
                   np.zeros(0, np.int64) if always is None else always.astype(np.int64))

    def select(self, lo: int, hi: int, rd: ResultDirInfo, always: np.ndarray | None = None
               ) -> np.ndarray:
        """Sorted indices of the records with local time in [lo, hi), plus `always` (by
        default the index's own)."""
        always = self.always if always is None else always
        blocks = np.flatnonzero((self.maxs >= lo) & (self.mins < hi))
        if len(blocks) == 0:
            return always
        cand = (blocks[:, None] * BLOCK + np.arange(BLOCK)).ravel()
        cand = cand[cand < self.n]
        log = DecodeLog()
        if self.device:
            cols = device_records(rd.data_dir, self.kind, log, [self.field], select=cand)
            t = to_mono_ns(cols[self.field], rd) + np.int64(rd.offset_ns)
        else:
            cols = host_records(rd.data_dir, self.kind, log, [self.field], select=cand)
            t = cols[self.field].astype(np.int64) + np.int64(rd.offset_ns)
        keep = cand[(t >= lo) & (t < hi)]
        if not len(always):
            return keep
        # both sorted: a sort of the two and a pass over neighbours (np.union1d hashes:
        # ~2 s per window for a million step-trace records)
        both = np.concatenate([keep, always])
        both.sort()
        return both[np.r_[True, both[1:] != both[:-1]]] if len(both) else both


@dataclass
class PmuIndex:
    """aicore records by (stream, task, occurrence): `comp` sorted composite keys
    ``(stream << 16 | task) << 32 | occurrence``, `rec` their record indices; `base` the
    occurrences of each key (`keys`) taken by the windows so far."""

    comp: np.ndarray
    rec: np.ndarray
    keys: np.ndarray
    base: np.ndarray

    @classmethod
    def build(cls, stream: np.ndarray, task: np.ndarray) -> "PmuIndex":
        key = (stream.astype(np.int64) & STREAM_MASK) << 16 | task.astype(np.int64)
        order = np.argsort(key, kind="stable")
        ks = key[order]
        new = np.r_[True, ks[1:] != ks[:-1]] if len(ks) else np.zeros(0, bool)
        first = np.flatnonzero(new)
        occ = np.arange(len(ks)) - np.repeat(first, np.diff(np.r_[first, len(ks)]))
        return cls(comp=(ks << 32) | occ, rec=order.astype(np.int64), keys=ks[first],
                   base=np.zeros(len(first), np.int64))

    def records(self, stream: np.ndarray, task: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
        """For candidate tasks (in time order) of the next window: (positions among them
        that have a PMU record, those records' indices); advances the occurrence counters."""
        key = (stream.astype(np.int64) << 16) | task.astype(np.int64)
        occ = pd.Series(key).groupby(key, sort=False).cumcount().to_numpy(np.int64)
        pos = np.minimum(np.searchsorted(self.keys, key), max(len(self.keys) - 1, 0))
        known = (self.keys[pos] == key) if len(self.keys) else np.zeros(len(key), bool)
        occ = occ + np.where(known, self.base[pos], 0)
        np.add.at(self.base, pos[known], 1)
        query = (key << 32) | occ
        j = np.minimum(np.searchsorted(self.comp, query), max(len(self.comp) - 1, 0))
        hit = known & (self.comp[j] == query) if len(self.comp) else known & False
        return np.flatnonzero(hit), self.rec[j[hit]]


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


def _count_before(sorted_times: np.ndarray, at: np.ndarray) -> np.ndarray:
    return np.searchsorted(sorted_times, at, side="left")


@dataclass(frozen=True)
class Whole:
    """The scan's answer for a PROF dir that is exported as one window, and why."""

    why: str


def _whole(why: str) -> Whole:
    return Whole(why)


def _groups(stream: np.ndarray, task: np.ndarray, batch: np.ndarray) -> np.ndarray:
    """One int64 per (stream, task, batch): u16 ids, batch < 2**31."""
    return ((stream.astype(np.int64) << 16 | task.astype(np.int64)) << 31) \
        | batch.astype(np.int64)


def _by_occurrence(group: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                             np.ndarray, np.ndarray]:
    """Rows given in time order -> (group, occurrence, time, row order) sorted by (group,
    occurrence): occurrence = the row's rank among the rows of its group
    (groupby.cumcount); row order = the given rows' positions in that order."""
    order = np.argsort(group, kind="stable")
    g = group[order]
    new = np.r_[True, g[1:] != g[:-1]] if len(g) else np.zeros(0, bool)
    first = np.flatnonzero(new)
    occ = np.arange(len(g)) - np.repeat(first, np.diff(np.r_[first, len(g)]))
    return g, occ, t[order], order


def _matched(host: tuple[np.ndarray, ...], dev: tuple[np.ndarray, ...]
             ) -> tuple[np.ndarray, np.ndarray]:
    """The task_track join of dataset.build_device on (stream, task, batch, occurrence),
    both sides given as `_by_occurrence` tuples -- the device rows of a group are its
    occurrences 0, 1, ... in order, so host row i matches device row lo(group) +
    occurrence(i): (host rows with a match, their device rows), positions in those orders."""
    hg, ho = host[0], host[1]
    dg = dev[0]
    lo = np.searchsorted(dg, hg, side="left")
    n = np.searchsorted(dg, hg, side="right") - lo
    ok = ho < n
    return np.flatnonzero(ok), (lo + ho)[ok]


def _launch_flows(host: tuple[np.ndarray, ...], dev: tuple[np.ndarray, ...]
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sorted begins and ends of the launch -> task flows (`_matched` pairs), and the
    matched host rows."""
    hi, di = _matched(host, dev)
    a, b = host[2][hi], dev[2][di]
    return np.sort(np.minimum(a, b)), np.sort(np.maximum(a, b)), hi


def _host_models(thread: np.ndarray, ts: np.ndarray, me: dict[str, np.ndarray]) -> set[int]:
    """legacy.host_models from the scan: the models of the launches matched to a device
    task (`thread`, `ts`: local ns), each the ModelExecute span of its thread enclosing it
    as dataset.enclose finds it (latest begin <= ts, ts <= its end), NO_MODEL where none
    does."""
    from .control_info import NO_MODEL

    models: set[int] = set()
    for th in np.unique(thread):
        t = ts[thread == th]
        on = me["thread"] == th
        order = np.argsort(me["begin"][on], kind="stable")
        b, e, m = me["begin"][on][order], me["end"][on][order], me["model"][on][order]
        i = np.searchsorted(b, t, side="right") - 1
        inside = (i >= 0) & (t <= e[np.maximum(i, 0)]) if len(b) else np.zeros(len(t), bool)
        models.update(int(x) for x in np.unique(m[i[inside]]))
        if not inside.all():
            models.add(NO_MODEL)
    return models


def _quiet_points(ab: np.ndarray, ae: np.ndarray, ds: np.ndarray, de: np.ndarray,
                  flow_lo: np.ndarray, flow_hi: np.ndarray,
                  comm: tuple[np.ndarray, ...] | None = None) -> np.ndarray:
    """Sorted quiet points (all arguments sorted local ns: API begins / ends, task starts /
    ends, launch -> task flow begins / ends): API begins (a step begins with a host API;
    without host APIs, the task starts) where nothing is open, no flow is pending, and the
    float sort key of the last end before is smaller (a window's events all sort first).
    `comm`: (HCCL op execution starts, ends, computing task starts, ends): no execution is
    open either, and none lies in the computing gap around the point (the Overlap Analysis
    Free gap across a cut is then plain, as between two windows without HCCL)."""
    cand = ab if len(ab) else ds
    quiet = np.zeros(len(cand), bool)
    for lo in range(0, len(cand), 1 << 22):
        c = cand[lo:lo + (1 << 22)]
        # no API open first: it keeps about one candidate per step for the other tests
        ended_api = _count_before(ae, c)
        at = np.flatnonzero(_count_before(ab, c) == ended_api)
        c, ended_api = c[at], ended_api[at]
        started, ended = _count_before(ds, c), _count_before(de, c)
        q = started == ended
        q &= _count_before(flow_lo, c) == _count_before(flow_hi, c)
        last = np.maximum(np.where(ended_api > 0, ae[np.maximum(ended_api - 1, 0)], 0),
                          np.where(ended > 0, de[np.maximum(ended - 1, 0)], 0))
        if comm is not None and len(comm[0]):
            q &= _comm_quiet(c, *comm)
            cended = _count_before(comm[1], c)
            last = np.maximum(last, np.where(cended > 0, comm[1][np.maximum(cended - 1, 0)],
                                             0))
        q &= ts_sort_key(last) < ts_sort_key(c)
        quiet[lo + at] = q
    return np.unique(cand[quiet])


def _comm_quiet(c: np.ndarray, ms: np.ndarray, me: np.ndarray, cs: np.ndarray,
                ce: np.ndarray) -> np.ndarray:
    """No HCCL op execution [ms, me] open at c, and none in the computing gap (last
    computing end before c, first computing start from c on)."""
    ok = _count_before(ms, c) == _count_before(me, c)
    n_ce, n_cs = _count_before(ce, c), _count_before(cs, c)
    n_me, n_ms = _count_before(me, c), _count_before(ms, c)
    big = np.iinfo(np.int64).max
    gap_lo = np.where(n_ce > 0, ce[np.maximum(n_ce - 1, 0)], -big)
    gap_hi = np.where(n_cs < len(cs), cs[np.minimum(n_cs, len(cs) - 1)], big)
    comm_before = np.where(n_me > 0, me[np.maximum(n_me - 1, 0)], -big)
    comm_after = np.where(n_ms < len(ms), ms[np.minimum(n_ms, len(ms) - 1)], big)
    # a gap exists only between two computing intervals
    in_gap = (n_ce > 0) & (n_cs < len(cs))
    return ok & (~in_gap | ((comm_before <= gap_lo) & (comm_after >= gap_hi)))


def _cuts(quiet: np.ndarray, ds: np.ndarray, target: int) -> tuple[list[int], list[int]]:
    """Window bounds (INT64_MIN, quiet points ..., INT64_MAX) about `target` task starts
    (`ds`, sorted) apart, and the tasks per window; a small rest joins the last window."""
    return _cuts_by(quiet, _count_before(ds, quiet), len(ds), target)


def _cuts_by(quiet: np.ndarray, before: np.ndarray, total: int, target: int
             ) -> tuple[list[int], list[int]]:
    """`_cuts` given the tasks before each quiet point and the total (several devices)."""
    ds_len = total
    cuts, sizes, last = [INT64_MIN], [], 0
    while True:
        i = int(np.searchsorted(before, last + target))
        if i >= len(quiet) or ds_len - int(before[i]) < target // 4:
            break  # no quiet point further on, or the rest is small: one last window
        cuts.append(int(quiet[i]))
        sizes.append(int(before[i]) - last)
        last = int(before[i])
    return cuts + [INT64_MAX], sizes + [ds_len - last]


def check_selection(prof: Path, model_id: int | None, iteration_id: int | None,
                    iteration_count: int) -> None:
    """Raise the selection error of any device before a device-by-device export writes
    anything (as the whole export does): each device's iterations from its step-trace
    records only.  A device without step trace is checked by its own export."""
    from .dataset import device_iterations
    from ..derive.selection import select

    if model_id is None and iteration_id is None:
        return  # the default selection cannot fail
    none = np.zeros(0, np.int64)
    for rd in map(read_result_dir, result_dirs(prof)):
        if rd.device_id is None:
            continue
        steps = decode_device(rd, DecodeLog(), select={"hwts": none, "aicpu": none,
                                                       "l2_cache": none}).steps
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
    hwts_files = data_files(dd, device_regex("hwts"), DecodeLog())
    size = sum(p.stat().st_size for p in hwts_files)
    if size // L.DEVICE_DTYPES["hwts"].itemsize // 2 <= threshold and not _common:
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
            # one HCCL-level API per step: the steps are device tasks (issue 15 §1), their
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
    device_records(dd, "hwts", log, ["flags"])
    times, starts, ends, streams, task_ids = [], [], [], [], []
    memcpy_at = -1  # the ts memcpy tasks' entry of starts / ends: not computing
    for f in data_files(dd, device_regex("hwts"), DecodeLog()):
        hw = read_files([f], L.DEVICE_DTYPES["hwts"], DecodeLog(),
                        ["flags", "syscnt", "stream_id", "task_id"])
        ht = to_mono_ns(hw["syscnt"], dev_rd) + doff
        lt = hw["flags"] & 0x07
        st = lt == L.HWTS_TASK_START
        times.append(ht)
        starts.append(ht[st])
        ends.append(ht[lt == L.HWTS_TASK_END])
        streams.append(hw["stream_id"][st].astype(np.int64) & STREAM_MASK)
        task_ids.append(hw["task_id"][st].astype(np.int64))
        del hw, ht, lt, st
    ht = np.concatenate(times) if times else np.zeros(0, np.int64)
    del times
    dev_index = {"hwts": TimeIndex.build("hwts", True, "syscnt", ht)}
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
        if not has_ts_aicpu:  # legacy raw data: the AI CPU tasks are aicpu.data's
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
    dev_occ = _by_occurrence(_groups(dstream[kept], dtask[kept], dbatch[kept]), ds[kept])
    del dstream, dtask, dbatch, kept

    pmu = None
    if dev_rd.ai_core_metrics:
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
    host_occ = _by_occurrence(_groups(lstream[order], ltask[order], lbatch[order]), lts[order])
    flow_lo, flow_hi, hi = _launch_flows(host_occ, dev_occ)
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
        me = np.flatnonzero((a["level"] == L.LEVEL_MODEL) & (a["type"] == L.MODEL_EXECUTE)
                            & (ab > hoff) & (ae != ab))
        # thread and model of those records only (a few per step, not per API)
        mc = host_records(hd, "api_event", log, ["thread_id", "item_id"], select=me)
        host_models = _host_models(*known, {
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

    quiet = _quiet_points(ab, ae, ds, de, flow_lo, flow_hi, comm)
    cuts, sizes = _cuts(quiet, ds, target)
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
    # the hwts records (two per task) of all devices, before any scan
    size = sum(p.stat().st_size for d in result_dirs(prof) if d.name.startswith("device_")
               for p in data_files(d / "data", device_regex("hwts"), DecodeLog()))
    if size // L.DEVICE_DTYPES["hwts"].itemsize // 2 <= threshold:
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
    before = sum(_count_before(p.starts, quiet) for p in plans)
    cuts, sizes = _cuts_by(quiet, before, sum(p.tasks for p in plans), target_)
    if len(cuts) < 3:
        return _whole("no quiet point")
    for p in plans:
        p.cuts, p.window_tasks = cuts, sizes
        p.quiet = p.starts = None
    return plans


def load_window(plan: WindowPlan | list[WindowPlan], k: int):
    """ProfData of window k: the rows of the whole decode whose start lies in the window
    (host API rows by begin, device tasks by start), all step-trace iterations.  With the
    plans of several devices (plan_all_devices, same cuts): every device of the window."""
    from .dataset import (HostData, ProfData, host_task_info, named_apis, attach_pmu,
                          build_device)

    plans = plan if isinstance(plan, list) else [plan]
    first = plans[0]
    lo, hi = first.bounds(k)
    log = DecodeLog()
    hsel = {kind: ix.select(lo, hi, first.host_rd) for kind, ix in first.host_index.items()}
    tables = decode_host(first.host_rd.data_dir, log, select=hsel)
    del hsel
    apis = named_apis(tables, first.host_rd)
    apis = apis[apis["begin_local"] >= first.host_rd.begin_local_ns].reset_index(drop=True)
    host = HostData(rd=first.host_rd, tables=tables, apis=apis)
    host_info = None
    if len(plans) > 1 and len(tables.task_track) and tables.types:
        host_info = host_task_info(tables)  # once for every device (as load_prof)
    devices = []
    for p in plans:
        # the step-trace records are read by the first window only: every window has the
        # iterations of the whole collection, decoded once
        known = p.iterations is not None
        dsel = {kind: ix.select(lo, hi, p.dev_rd,
                                p.ts_flips if known and kind == "ts_track" else None)
                for kind, ix in p.dev_index.items()}
        dsel["l2_cache"] = np.zeros(0, np.int64)  # read at the end (l2_records)
        dev = decode_device(p.dev_rd, log, select=dsel)
        del dsel
        d = build_device(p.dev_rd, dev, host, log, host_info)
        del dev
        # a window without host launch or node records still exports as the whole does
        d.has_host_ops, d.has_node_info = p.host_ops, p.node_info
        if known:
            d.iterations = p.iterations
        else:
            p.iterations = d.iterations
        if p.pmu is not None:
            attach_pmu(d, p.pmu)
        devices.append(d)
    if log.warnings or log.bad_records or log.lost_records:
        raise NotWindowable("; ".join(log.warnings) or "damaged records")
    tables.tensors = tables.tensors.iloc[:0]
    tables.apis = tables.apis.iloc[:0]
    return ProfData(prof=first.prof, host=host, devices=devices, log=log,
                    rank_ids=first.rank_ids)


def l2_rows(plan: WindowPlan, chunk: int):
    """The device's l2_cache records as frames (device.l2_frame) of `chunk` records, in
    file order."""
    from .device import l2_frame

    for lo in range(0, plan.l2_records, chunk):
        sel = np.arange(lo, min(lo + chunk, plan.l2_records), dtype=np.int64)
        yield l2_frame(device_records(plan.dev_rd.data_dir, "l2_cache", DecodeLog(),
                                      select=sel))
