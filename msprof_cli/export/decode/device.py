"""Decode the Ascend910 device records (docs/formats/raw-format.md 5) into tidy pandas tables.

Device times are syscnt ticks; they become host monotonic ns via dev_start.log / host_start.log
(docs/formats/raw-format.md 8) in exact integer arithmetic: ``(syscnt - cntvct) * 1000 / MHz +
H_sync``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from msprof_cli.raw import layouts as L

from .control_info import ResultDirInfo, to_mono_ns
from .rawread import DecodeLog, device_records
from .stars import stars_pmu, stars_tasks

STREAM_MASK = 0x7FF


@dataclass
class DeviceTables:
    """The decoded record tables of one device result dir."""

    tasks: pd.DataFrame  # stream_id, task_id, batch_id, start_ns, end_ns, source, recv_ns
    # ('hwts' | 'aicpu' | 'memcpy': ts_track rptType 11)
    # stream_id, task_id, total_cycles, pmu_0..7; a task meets its (stream, task)'s records
    # in record order (dataset.build_device)
    pmu: pd.DataFrame | None
    steps: pd.DataFrame  # ts_ns, index_id, model_id, stream_id, task_id, tag_id
    flips: pd.DataFrame  # ts_ns, stream_id, flip_num, task_id
    aicpu: pd.DataFrame | None
    l2: pd.DataFrame | None


def pair_hwts(stream: np.ndarray, task: np.ndarray, log_type: np.ndarray, ticks: np.ndarray,
              log: DecodeLog, where: str = "hwts", start: int = L.HWTS_TASK_START,
              end: int = L.HWTS_TASK_END) -> pd.DataFrame:
    """Pair task-start with task-end records per (stream, task), vectorised.

    Records are stably sorted by (stream, task, file order); an end closes the start directly
    before it with the same key.  Unpaired starts/ends (lost records) are dropped and counted.
    `start` / `end`: the record types (hwts log type, ts_track taskState) that open / close
    a task; records of other types (a ts_track "received") are skipped.
    """
    keep = (log_type == start) | (log_type == end)
    stream, task, log_type, ticks = stream[keep], task[keep], log_type[keep], ticks[keep]
    order = np.lexsort((np.arange(len(stream)), task, stream))
    s, t, lt, tk = stream[order], task[order], log_type[order], ticks[order]
    if len(s) < 2:
        return pd.DataFrame({"stream_id": [], "task_id": [], "start_tick": [], "end_tick": []})
    same = (s[1:] == s[:-1]) & (t[1:] == t[:-1])
    is_pair = same & (lt[:-1] == start) & (lt[1:] == end)
    i = np.nonzero(is_pair)[0]
    lost = len(s) - 2 * len(i)
    if lost:
        log.warn(f"{where}: {lost} task start/end records without a partner dropped")
    return pd.DataFrame({
        "stream_id": s[i].astype(np.int64), "task_id": t[i].astype(np.int64),
        "start_tick": tk[i], "end_tick": tk[i + 1],
    })


def assign_batches(tasks: pd.DataFrame, flips: pd.DataFrame, time_col: str) -> np.ndarray:
    """batch_id = flips of the task's stream already passed (docs/formats/raw-format.md 9),
    vectorised.

    A task just before a flip whose id is below the flip's taskId moves to the new batch.
    """
    n = len(tasks)
    if n == 0 or len(flips) == 0:
        return np.zeros(n, dtype=np.int64)
    # combine (stream, time) into one sortable key per side
    f = flips.sort_values(["stream_id", "ts_ns"], kind="stable")
    fs = f["stream_id"].to_numpy(np.int64)
    ft = f["ts_ns"].to_numpy(np.int64)
    ftask = f["task_id"].to_numpy(np.int64)
    ts = tasks["stream_id"].to_numpy(np.int64)
    tt = tasks[time_col].to_numpy(np.int64)
    lo = np.searchsorted(fs, ts, side="left")
    hi = np.searchsorted(fs, ts, side="right")
    # position among this stream's flips: search on one combined (stream, time) int64 key
    tmin = min(int(ft.min()), int(tt.min()))
    key_f = (fs << 47) | (ft - tmin)
    key_t = (ts << 47) | (tt - tmin)
    pos = np.searchsorted(key_f, key_t, side="right")
    batch = pos - lo
    nxt = np.minimum(pos, len(fs) - 1)
    moved = (pos < hi) & (tasks["task_id"].to_numpy(np.int64) < ftask[nxt])
    return (batch + moved).astype(np.int64)


def memcpy_states(state: np.ndarray) -> tuple[int, int]:
    """(start, end) taskState of the ts memcpy (rptType 11) records: received 0 / started 1 /
    ended 2 as the analysis reads them (layouts.TS_TRACK_MEMCPY); records without any
    "ended" state are those of older msprof_cli versions, which wrote started 0 / ended 1."""
    if (state == L.TS_STATE_END).any():
        return L.TS_STATE_START, L.TS_STATE_END
    return L.TS_MEMCPY_LEGACY_START, L.TS_MEMCPY_LEGACY_END


def aicpu_task_rows(ts: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray | None]:
    """The ts_track rows of rptType 12 ("task type") records of AI CPU tasks (taskType 1),
    and those records (layouts.TS_TRACK_TASK_TYPE); (all False, None) when there are none."""
    rpt = ts["rpt_type"] if "rpt_type" in ts else np.zeros(0, np.uint8)
    tt = rpt == L.TS_RPT_TASK_TYPE
    if not tt.any():
        return tt, None
    tv = reviewed(ts, tt, L.TS_TRACK_TASK_TYPE)
    ai = tv["task_type"] == L.TS_TASK_TYPE_AI_CPU
    rows = np.zeros(len(rpt), bool)
    rows[np.flatnonzero(tt)[ai]] = True
    return rows, tv[ai]


def reviewed(ts: dict[str, np.ndarray], rows: np.ndarray, layout: np.dtype) -> np.ndarray:
    """The ts_track `rows` (decoded with the step-trace layout) re-viewed with the layout of
    their own rptType (flip, memcpy): all are 40-byte records."""
    raw = np.zeros(int(rows.sum()), dtype=L.TS_TRACK_STEP)
    for name in L.TS_TRACK_STEP.names:
        raw[name] = ts[name][rows]
    return raw.view(layout)


def l2_frame(cols) -> pd.DataFrame:
    """l2_cache records (device_records columns) as (stream_id, task_id, ev_0..ev_7)."""
    l2 = pd.DataFrame({
        "stream_id": cols["stream_id"].astype(np.int64) & STREAM_MASK,
        "task_id": cols["task_id"].astype(np.int64),
    })
    for k in range(8):
        l2[f"ev_{k}"] = cols["events"][:, k].astype(np.int64)
    return l2


def decode_device(rd: ResultDirInfo, log: DecodeLog, select: dict[str, np.ndarray] | None = None
                  ) -> DeviceTables:
    """`select` (windowed export): per record kind, the records to decode (windows.py); the
    aicore PMU records are then attached by the window (their match crosses windows)."""
    d = rd.data_dir
    sel = select or {}
    if rd.stars:  # the Atlas A2's task log (stars.py)
        tasks = stars_tasks(rd, log, pair_hwts, sel.get("stars_soc"))
    else:
        hw = device_records(d, "hwts", log, ["flags", "task_id", "syscnt", "stream_id"],
                            sel.get("hwts"))
        pairs = pair_hwts(hw["stream_id"].astype(np.int64) & STREAM_MASK, hw["task_id"],
                          hw["flags"] & 0x07, hw["syscnt"], log)
        tasks = pd.DataFrame({
            "stream_id": pairs["stream_id"].to_numpy(np.int64),
            "task_id": pairs["task_id"].to_numpy(np.int64),
            "start_ns": to_mono_ns(pairs["start_tick"].to_numpy(), rd),
            "end_ns": to_mono_ns(pairs["end_tick"].to_numpy(), rd),
            "source": "hwts",
        })

    ts = device_records(d, "ts_track", log, select=sel.get("ts_track"))
    rpt = ts["rpt_type"] if "rpt_type" in ts else np.zeros(0, np.uint8)
    st = rpt == L.TS_RPT_STEP_TRACE
    steps = pd.DataFrame({
        "ts_ns": to_mono_ns(ts["timestamp"][st], rd),
        "index_id": ts["index_id"][st].astype(np.int64),
        "model_id": ts["model_id"][st].astype(np.int64),
        "stream_id": ts["stream_id"][st].astype(np.int64) & STREAM_MASK,
        "task_id": ts["task_id"][st].astype(np.int64),
        "tag_id": ts["tag_id"][st].astype(np.int64),
    })
    fl = rpt == L.TS_RPT_FLIP
    if fl.any():
        fv = reviewed(ts, fl, L.TS_TRACK_FLIP)
        flips = pd.DataFrame({
            "ts_ns": to_mono_ns(fv["timestamp"], rd),
            "stream_id": fv["stream_id"].astype(np.int64) & STREAM_MASK,
            "flip_num": fv["flip_num"].astype(np.int64),
            "task_id": fv["task_id"].astype(np.int64),
        })
    else:
        flips = pd.DataFrame({"ts_ns": np.zeros(0, np.int64), "stream_id": np.zeros(0, np.int64),
                              "flip_num": np.zeros(0, np.int64), "task_id": np.zeros(0, np.int64)})

    # AI CPU tasks: on the 910 their start / end are the TS's "task type" reports (ts_track
    # rptType 12, taskType 1: started 1 / ended 2), as the analysis reads them (Ascend/msprof
    # mscalculate/ts_task/ai_cpu/aicpu_from_ts.py); aicpu.data (below) only adds the AI CPU
    # timings of the aicpu summary.  Raw data without those reports (msprof_cli before
    # older msprof_cli versions) has the tasks in aicpu.data alone: they are taken from there.
    _, av = aicpu_task_rows(ts)
    if av is not None and len(av):
        ap = pair_hwts(av["stream_id"].astype(np.int64) & STREAM_MASK, av["task_id"],
                       av["task_state"], av["timestamp"], log, "ts_track task type",
                       L.TS_STATE_START, L.TS_STATE_END)
        tasks = pd.concat([tasks, pd.DataFrame({
            "stream_id": ap["stream_id"].to_numpy(np.int64),
            "task_id": ap["task_id"].to_numpy(np.int64),
            "start_ns": to_mono_ns(ap["start_tick"].to_numpy(), rd),
            "end_ns": to_mono_ns(ap["end_tick"].to_numpy(), rd),
            "source": "aicpu"})], ignore_index=True)
    aicpu = None
    ac = device_records(d, "aicpu", log, select=sel.get("aicpu"))
    if len(ac["stream_id"]):
        okt = ac["data_tag"] == L.AICPU_DATA_TAG
        aicpu = pd.DataFrame({
            "stream_id": ac["stream_id"][okt].astype(np.int64) & STREAM_MASK,
            "task_id": ac["task_id"][okt].astype(np.int64),
            "start_ns": to_mono_ns(ac["run_start_tick"][okt], rd),
            "end_ns": to_mono_ns(ac["run_end_tick"][okt], rd),
            "compute_us": ac["memcpy_start_time"][okt].astype(np.int64)
            - ac["compute_start_time"][okt].astype(np.int64),
            "memcpy_us": ac["memcpy_end_time"][okt].astype(np.int64)
            - ac["memcpy_start_time"][okt].astype(np.int64),
            "dispatch_us": ac["dispatch_time"][okt].astype(np.int64),
            "total_ns": to_mono_ns(ac["tick_after_run"][okt], rd)
            - to_mono_ns(ac["submit_tick"][okt], rd),
        })
        if av is None and not rd.stars:  # the legacy raw data (see above; an A2 logs
            # its AI CPU tasks in the ACSQ log)
            tasks = pd.concat([tasks, pd.DataFrame({
                "stream_id": aicpu["stream_id"], "task_id": aicpu["task_id"],
                "start_ns": aicpu["start_ns"], "end_ns": aicpu["end_ns"],
                "source": "aicpu"})], ignore_index=True)

    mc = rpt == L.TS_RPT_MEMCPY
    if mc.any():
        # "ts memcpy" (rptType 11): host<->device copies run by the TS on the SDMA engine, not
        # in hwts.data; received / started / ended records per task, paired like hwts
        mv = reviewed(ts, mc, L.TS_TRACK_MEMCPY)
        m_stream = mv["stream_id"].astype(np.int64) & STREAM_MASK
        states = memcpy_states(mv["task_state"])
        mp = pair_hwts(m_stream, mv["task_id"], mv["task_state"], mv["timestamp"], log,
                       "ts_track memcpy", *states)
        mt = pd.DataFrame({
            "stream_id": mp["stream_id"].to_numpy(np.int64),
            "task_id": mp["task_id"].to_numpy(np.int64),
            "start_ns": to_mono_ns(mp["start_tick"].to_numpy(), rd),
            "end_ns": to_mono_ns(mp["end_tick"].to_numpy(), rd),
            "source": "memcpy"})
        mt["recv_ns"] = mt["start_ns"]
        rc = mv["task_state"] == L.TS_STATE_RECEIVE
        if states[0] == L.TS_STATE_START and rc.any() and len(mt):
            # the time the TS received the copy: its last "received" record before the start
            recv = pd.DataFrame({"stream_id": m_stream[rc],
                                 "task_id": mv["task_id"][rc].astype(np.int64),
                                 "recv": to_mono_ns(mv["timestamp"][rc], rd)})
            mt["_row"] = np.arange(len(mt))
            j = pd.merge_asof(mt.sort_values("start_ns", kind="stable"),
                              recv.sort_values("recv", kind="stable"), left_on="start_ns",
                              right_on="recv", by=["stream_id", "task_id"])
            got = j["recv"].notna().to_numpy()
            mt.loc[j["_row"].to_numpy()[got], "recv_ns"] = j["recv"].to_numpy()[got].astype(
                np.int64)
            del mt["_row"]
        tasks = pd.concat([tasks, mt], ignore_index=True)

    if "recv_ns" in tasks:  # the other tasks: received = started (not in their records)
        tasks["recv_ns"] = tasks["recv_ns"].fillna(tasks["start_ns"]).astype(np.int64)
    else:
        tasks["recv_ns"] = tasks["start_ns"]
    tasks = tasks.sort_values(["start_ns"], kind="stable", ignore_index=True)
    tasks["batch_id"] = assign_batches(tasks, flips, "start_ns")

    pmu = None
    if rd.ai_core_metrics and rd.stars and select is None:
        pmu = stars_pmu(rd, log)
    elif rd.ai_core_metrics and select is None and not rd.stars:
        ai = device_records(d, "aicore", log, ["task_id", "total_cycles", "pmu", "stream_id"])
        if len(ai["task_id"]):
            pmu = pd.DataFrame({
                "stream_id": ai["stream_id"].astype(np.int64) & STREAM_MASK,
                "task_id": ai["task_id"].astype(np.int64),
                "total_cycles": ai["total_cycles"].astype(np.int64),
                **{f"pmu_{k}": ai["pmu"][:, k].astype(np.int64) for k in range(8)},
            })

    l2c = device_records(d, "l2_cache", log, select=sel.get("l2_cache"))
    l2 = l2_frame(l2c) if len(l2c["stream_id"]) else None
    return DeviceTables(tasks=tasks, pmu=pmu, steps=steps, flips=flips, aicpu=aicpu, l2=l2)


def analysis_time(ns: np.ndarray, rd: ResultDirInfo, unit: float) -> np.ndarray:
    """`analysis_us` in another unit (1e9 ns, 1e6 µs, 1e3 ms: the analysis's time_fmt)."""
    rel = (np.asarray(ns, np.int64) - np.int64(rd.host_sync_ns))
    mhz = rd.hwts_mhz
    ticks = rel * mhz.numerator // (1000 * mhz.denominator)
    syscnt = (ticks + np.int64(rd.dev_cntvct)).astype(np.float64)
    dev_cnt = float(rd.dev_cntvct) / 1e9
    host_mon = float(rd.host_sync_ns) / 1e9
    freq = float(mhz) * 1e6
    return (syscnt - dev_cnt * 1e9) / freq * unit + host_mon * unit


def analysis_us(ns: np.ndarray, rd: ResultDirInfo) -> np.ndarray:
    """Device times (host monotonic ns from `to_mono_ns`) as the analysis's float µs of
    their syscnt: ``float(syscnt - dev_cnt * 1e9) / hwts_freq * 1e6 + host_mon * 1e6``
    (Ascend/msprof common_func/info_conf_reader.py time_from_syscnt, dev_cnt = cntvct / 1e9,
    host_mon = clock_monotonic_raw / 1e9, hwts_freq = MHz * 1e6), with its float rounding:
    the differences of two such values are what it prints as ts memcpy durations."""
    return analysis_time(ns, rd, 1e6)

