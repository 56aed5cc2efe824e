"""Ranks that wait for each other (docs/device-model.md 6.3): the job-level pass over the PROF
dirs of one job, one process per rank.

A collective (all-reduce, all-gather, ...) cannot finish on any rank before every rank has
arrived at it: on hardware a fast rank waits inside the collective (HCCL's notify wait) for
the slowest.  Each rank's process emulates its own device, so while it collects, a rank
cannot know when the others arrive.  Each device therefore records where its collectives
ran (`record`: a project file beside the raw data, `msprof_cli_collectives_{device}.bin`,
pairs of emulated host ns), and when every rank of a job has ended (`msprof collect
--children`), `couple` aligns them:

* the k-th collective of every rank is one collective (the ranks of a data-parallel job run
  the same graph, so their collectives come in the same order);
* it begins its data phase when the last rank arrives: B(k) = max over ranks of the arrival
  on that rank's coupled clock.  Between two collectives a rank's own work is unchanged, so
  B(k) = B(k-1) + max over ranks of (a_r(k) - a_r(k-1)), B(1) = max_r a_r(1), and the rank
  is shifted by W_r(k) = B(k) - a_r(k) >= W_r(k-1) from the end of its k-th collective on;
* every timestamp of the rank's raw records moves by the shift of the collectives that ended
  at or before it (`shift_ns`): a monotone map, so every order within the rank (launch before
  run, producer before consumer, step after step) is kept; the collective that absorbs a
  wait keeps its start and ends later -- the wait shows as communication time, as on
  hardware.

The raw files stay the real CANN layout: each is rewritten to a temporary name and the names
are swapped once every file of every rank is ready; `msprof_cli_coupling.json` at each PROF
root says it was done (a second run does nothing).
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from msprof_cli.device import scheduler as S
from msprof_cli.raw import layouts as L

SIDECAR = "msprof_cli_collectives_{device}.bin"
SIDECAR_RE = re.compile(r"^msprof_cli_collectives_(\d+)\.bin$")
MARKER = "msprof_cli_coupling.json"
TMP_SUFFIX = ".coupling_tmp"

# per record kind: its time fields and their unit ("ns": host CLOCK_MONOTONIC_RAW ns,
# "syscnt": device ticks, "us": CLOCK_MONOTONIC_RAW µs; device/device_records.py)
_HEADER_NS = (("timestamp", "ns"),)
HOST_TIME_FIELDS: dict[str, tuple[tuple[str, str], ...]] = {
    "api_event": (("begin_time", "ns"), ("end_time", "ns")),
    "task_track": _HEADER_NS, "node_basic_info": _HEADER_NS, "tensor_info": _HEADER_NS,
    "graph_id_map": _HEADER_NS, "fusion_op_info": _HEADER_NS, "hccl_info": _HEADER_NS,
    "msproftx": _HEADER_NS + (("start_time", "ns"), ("end_time", "ns")),
}
DEVICE_TIME_FIELDS: dict[str, tuple[tuple[str, str], ...]] = {
    "hwts": (("syscnt", "syscnt"),),
    "ts_track": (("timestamp", "syscnt"),),
    "aicpu": tuple((f, "syscnt") for f in ("run_start_tick", "run_end_tick", "submit_tick",
                                           "schedule_tick", "tick_before_run",
                                           "tick_after_run"))
    + tuple((f, "us") for f in ("run_start_time", "compute_start_time", "memcpy_start_time",
                                "memcpy_end_time", "run_end_time")),
}


def record(prof_dir: Path, device_id: int, start_ns: np.ndarray, end_ns: np.ndarray) -> None:
    """Append the device's collectives of a chunk (emulated host ns, in order)."""
    if not len(start_ns):
        return
    pairs = np.column_stack([np.asarray(start_ns, np.int64), np.asarray(end_ns, np.int64)])
    path = Path(prof_dir) / SIDECAR.format(device=device_id)
    with open(path, "ab") as fh:
        fh.write(pairs.tobytes())
        fh.flush()
        os.fsync(fh.fileno())


def record_stream(prof_dir: Path, device_id: int, hccl: S.ScheduledStream,
                  clock: S.DeviceClock) -> None:
    """`record` the collectives of a scheduled HCCL stream: per op, its first task's start
    and its last task's end (a collective runs as several step tasks when HCCL data is
    written)."""
    op = hccl.op_row >= 0
    rows, first = np.unique(hccl.op_row[op], return_index=True)
    last = np.full(len(rows), S.NEVER, np.int64)
    np.maximum.at(last, np.searchsorted(rows, hccl.op_row[op]), hccl.end[op])
    order = np.argsort(hccl.start[op][first], kind="stable")
    record(prof_dir, device_id, clock.ns(hccl.start[op][first][order]), clock.ns(last[order]))


@dataclass
class Rank:
    prof: Path
    device_id: int
    start: np.ndarray  # ns of each collective's start, in order
    end: np.ndarray


def _rank(prof: Path) -> Rank | None:
    """The PROF dir's one device with recorded collectives (None: none, or several)."""
    found = [(int(m.group(1)), prof / n) for n in sorted(os.listdir(prof))
             if (m := SIDECAR_RE.match(n))]
    if len(found) != 1 or (prof / MARKER).exists():
        return None
    dev, path = found[0]
    raw = np.fromfile(path, np.int64)
    pairs = raw[: len(raw) // 2 * 2].reshape(-1, 2)
    order = np.argsort(pairs[:, 0], kind="stable")
    return Rank(prof, dev, pairs[order, 0], pairs[order, 1])


def shifts(starts: list[np.ndarray]) -> tuple[np.ndarray, int]:
    """Per rank (rows) and collective (columns, the first K = the fewest any rank ran):
    the shift W_r(k) of the rank from the end of its k-th collective on (module doc)."""
    k = min(len(s) for s in starts)
    a = np.stack([s[:k] for s in starts]).astype(np.int64)
    if k == 0:
        return a, 0
    step = np.max(np.diff(a, axis=1), axis=0) if k > 1 else np.zeros(0, np.int64)
    b = a[:, 0].max() + np.r_[0, np.cumsum(step)]
    return b[None, :] - a, k


def shift_ns(t_ns: np.ndarray, ends: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The shift of each time: W of the last collective that ended at or before it."""
    j = np.searchsorted(ends, t_ns, side="right")
    return np.r_[0, w][j]


def couple(prof_dirs: list[Path]) -> dict | None:
    """Align the collectives of the ranks (module doc); None when there is nothing to do
    (fewer than two ranks with recorded collectives).  Returns what was done."""
    ranks = [r for r in (_rank(Path(p)) for p in prof_dirs) if r is not None]
    if len(ranks) < 2:
        return None
    w, k = shifts([r.start for r in ranks])
    if k == 0:
        return None
    staged: list[tuple[Path, Path]] = []
    try:
        for i, r in enumerate(ranks):
            ends = np.maximum.accumulate(r.end[:k])
            if w[i].any():
                staged += _rewrite(r, ends, w[i])
        for tmp, final in staged:
            os.replace(tmp, final)
    finally:
        for tmp, _ in staged:
            if tmp.exists():
                tmp.unlink()
    done = {"ranks": [str(r.prof.name) for r in ranks], "collectives": int(k),
            "wait_ns": [int(x[-1]) for x in w]}
    for r in ranks:
        (r.prof / MARKER).write_text(json.dumps(done) + "\n", encoding="utf-8")
    return done


def _clock(prof: Path, device_id: int) -> tuple[int, int, int]:
    """(sync ns, device syscnt at sync, ns per tick) of the device (dev_start.log.N)."""
    from msprof_cli.raw.control import read_ini

    ini = read_ini(prof / f"device_{device_id}" / f"dev_start.log.{device_id}")
    tick = 10  # hwts 100 MHz (docs/device-model.md 1)
    return int(ini["clock_monotonic_raw"]), int(ini["cntvct"]), tick


def _rewrite(r: Rank, ends: np.ndarray, w: np.ndarray) -> list[tuple[Path, Path]]:
    """Every raw file of the rank with its times shifted, staged under temporary names."""
    sync_ns, cntvct, tick = _clock(r.prof, r.device_id)
    staged = []
    host = r.prof / "host" / "data"
    for kind, fields in HOST_TIME_FIELDS.items():
        pat = re.compile(rf"^(aging|unaging)\.{re.escape(L.HOST_FILES[kind])}\.slice_\d+$")
        for path in _files(host, pat):
            staged.append(_stage(path, L.HOST_DTYPES[kind], fields, ends, w, sync_ns, cntvct,
                                 tick))
    dev = r.prof / f"device_{r.device_id}" / "data"
    for kind, fields in DEVICE_TIME_FIELDS.items():
        pat = re.compile(L.device_file_regex(kind, r.device_id))
        for path in _files(dev, pat):
            staged.append(_stage(path, L.DEVICE_DTYPES[kind], fields, ends, w, sync_ns, cntvct,
                                 tick))
    for name in ("end_info", f"end_info.{r.device_id}"):
        where = r.prof / ("host" if name == "end_info" else f"device_{r.device_id}") / name
        if where.is_file():
            staged.append(_stage_end_info(where, int(w[-1])))
    return staged


def _files(folder: Path, pattern: re.Pattern) -> list[Path]:
    if not folder.is_dir():
        return []
    return [folder / n for n in sorted(os.listdir(folder)) if pattern.match(n)]


def _stage(path: Path, dtype: np.dtype, fields: tuple[tuple[str, str], ...], ends: np.ndarray,
           w: np.ndarray, sync_ns: int, cntvct: int, tick: int) -> tuple[Path, Path]:
    arr = np.fromfile(path, dtype)
    task = _task_records(arr, dtype)
    base = None  # aicpu.data: a whole task per record, moved by its start's shift
    if dtype == L.AICPU:
        base = shift_ns(sync_ns + (arr["run_start_tick"].astype(np.int64) - cntvct) * tick,
                        ends, w)
    for name, unit in fields:
        v = arr[name].astype(np.int64)
        if unit == "ns":
            keep = (arr[name] == np.uint64(L.EVENT_RESERVE)) | (v <= 0)
            arr[name] = np.where(keep, arr[name], (v + shift_ns(v, ends, w)).astype(np.uint64))
        elif unit == "syscnt":
            ns = sync_ns + (v - cntvct) * tick
            sh = shift_ns(ns, ends, w) if base is None else base
            if task is not None:
                sh = whole_tasks(sh, ns, ends, *task)
            arr[name] = np.where(v > 0, v + sh // tick, v).astype(np.uint64)
        else:  # µs
            sh = shift_ns(v * 1000, ends, w) if base is None else base
            arr[name] = np.where(v > 0, v + sh // 1000, v).astype(np.uint64)
    tmp = path.with_name(path.name + TMP_SUFFIX)
    arr.tofile(tmp)
    return tmp, path


def _task_records(arr: np.ndarray, dtype: np.dtype
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(key, start mask, end mask) of the task start / end records of a device file: hwts
    start/end pairs, ts_track's AI CPU task and memcpy states; None for other files."""
    if dtype == L.HWTS:
        kind = arr["flags"] & 7
        key = arr["stream_id"].astype(np.int64) * 65536 + arr["task_id"]
        return key, kind == L.HWTS_TASK_START, kind == L.HWTS_TASK_END
    if dtype == L.DEVICE_DTYPES["ts_track"]:
        rpt = arr["rpt_type"]
        tt, mc = arr.view(L.TS_TRACK_TASK_TYPE), arr.view(L.TS_TRACK_MEMCPY)
        state = np.where(rpt == L.TS_RPT_TASK_TYPE, tt["task_state"], mc["task_state"])
        task = (rpt == L.TS_RPT_TASK_TYPE) | (rpt == L.TS_RPT_MEMCPY)
        key = tt["stream_id"].astype(np.int64) * 65536 + tt["task_id"]
        return key, task & (state != L.TS_STATE_END), task & (state == L.TS_STATE_END)
    return None


def whole_tasks(sh: np.ndarray, ns: np.ndarray, ends: np.ndarray, key: np.ndarray,
                 start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """A task moves as a whole: its end takes its start's shift (a compute task that ran
    across the end of a collective is not stretched by the wait), except a collective's
    own end, which absorbs the wait."""
    idx = np.flatnonzero(start | end)
    if not len(idx):
        return sh
    idx = idx[np.lexsort((end[idx], ns[idx], key[idx]))]
    e = end[idx]
    prev = np.r_[-1, idx[:-1]]
    paired = e & (prev >= 0)
    paired[paired] &= (key[prev[paired]] == key[idx[paired]]) & start[prev[paired]]
    paired &= ~np.isin(ns[idx], ends)
    out = sh.copy()
    out[idx[paired]] = sh[prev[paired]]
    return out


def _stage_end_info(path: Path, wait_ns: int) -> tuple[Path, Path]:
    from msprof_cli.raw.control import local_date, read_json_line

    info = read_json_line(path)
    wall = int(info["collectionTimeEnd"]) + wait_ns // 1000
    info.update(collectionDateEnd=local_date(wall), collectionTimeEnd=str(wall),
                clockMonotonicRaw=str(int(info["clockMonotonicRaw"]) + wait_ns))
    tmp = path.with_name(path.name + TMP_SUFFIX)
    tmp.write_text(json.dumps(info), encoding="utf-8")
    return tmp, path
