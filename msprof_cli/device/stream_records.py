"""The records of one device's scheduled streams (docs/device-model.md 6, 7).

`emit` turns what task_schedule.py scheduled on one device into its raw records: the task
log (hwts.data: AI Core kernels and the collectives' steps), AI Core PMU (aicore.data) and
L2 cache events, ts_track (step-trace markers, task-id flips, the AI CPU tasks' task-type
reports), the AI CPU timings (DATA_PREPROCESS.AICPU), and on the host side each task's
task_track record, its runtime launch API (runtime_api on) and, with several ranks and hccl
on, the HCCL step APIs and hccl_info.  `emit_memcpy` does the same for the input / output
copies (MEMCPY_ASYNC task_track, rtMemcpyAsync, ts_track rptType 11).

Host records are appended to the chunk's host dict (host_pass.py writes them, sorted);
device records go straight to the device's slice files.  The only `Device` state changed is
`uncollected` (tasks the options left out) and the hash_dic texts (`HostPass.hash_lines`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from msprof_cli.device import memcpy as MC
from msprof_cli.device import op_map
from msprof_cli.device import scheduler as S
from msprof_cli.device.chunk import ChunkCtx, DeviceDir, kind_lut
from msprof_cli.device.device_records import (aicore_records, aicpu_records, flip_records,
                                              hwts_records, l2_cache_records, memcpy_records,
                                              step_trace_records, task_type_records)
from msprof_cli.device.host_records import (RT_CPU_KERNEL_LAUNCH, RT_KERNEL_LAUNCH, RT_MEMCPY_ASYNC,
                                            api_records, hccl_info_records, runtime_api_spans,
                                            task_track_records)
from msprof_cli.device.pmu import event_counters, l2_counters
from msprof_cli.device.stars_records import (acsq_records, block_pmu_records,
                                              context_pmu_records, ffts_log_records,
                                              merge_logs)
from msprof_cli.device.task_schedule import hccl_steps, hccl_steps_on
from msprof_cli.options import L2_CACHE_EVENTS
from msprof_cli.raw import enums as EN
from msprof_cli.raw import layouts as L
from msprof_cli.raw import stars_layouts as SL
from msprof_cli.raw.hashing import name_hash

if TYPE_CHECKING:  # annotations only: device.py imports this module
    from msprof_cli.device.device import Device

# runtime task types of the host task_track records
_RT_TYPE_LUT = kind_lut({op_map.KIND_AI_CORE: EN.RUNTIME_TASK_TYPE_IDS["KERNEL_AICORE"],
                         op_map.KIND_AI_CPU: EN.RUNTIME_TASK_TYPE_IDS["KERNEL_AICPU"]})
FLIP_TYPE = EN.RUNTIME_TASK_TYPE_IDS["FLIP_TASK"]
MEMCPY_TYPE = EN.RUNTIME_TASK_TYPE_IDS["MEMCPY_ASYNC"]
REDUCE_TYPE = EN.RUNTIME_TASK_TYPE_IDS["REDUCE_ASYNC"]
AIV_TYPE = EN.RUNTIME_TASK_TYPE_IDS["KERNEL_AIVEC"]
MIX_AIC_TYPE = EN.RUNTIME_TASK_TYPE_IDS["KERNEL_MIX_AIC"]

# a task's device records: (task ids, stream ids, start ticks, end ticks, STARS SQE types)
TaskLog = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def runtime_types(ctx: ChunkCtx, rows: np.ndarray) -> np.ndarray:
    """The runtime task type of launched op rows: KERNEL_AICORE / KERNEL_AICPU, and on a
    chip with AI Vector cores KERNEL_AIVEC for kernels that run there and KERNEL_MIX_AIC for
    MIX kernels (cost_model._mix_matmul)."""
    sig = ctx.ops.sig[rows]
    return np.select([ctx.cost.vector_core[sig], ctx.cost.mix_ratio[sig] > 0],
                     [AIV_TYPE, MIX_AIC_TYPE], _RT_TYPE_LUT[ctx.kind[rows]])


def emit(device: Device, ctx: ChunkCtx, dd: DeviceDir,
         scheduled: dict[int, S.ScheduledStream], host: dict[str, list[np.ndarray]],
         extra: tuple[list[tuple[np.ndarray, np.ndarray]], list[TaskLog]] | None = None
         ) -> None:
    """Write the records of one device's scheduled streams of the chunk (module doc);
    `extra`: the ts_track parts already made (the copies', `emit_memcpy`), with their
    times, and the task-log entries of the copies (the STARS chips' SDMA tasks)."""
    cfg = device.config
    stars = device.chip.raw_layout == "stars"
    extra_ts, extra_log = extra if extra is not None else ([], [])
    ops, iters, win, cost = ctx.ops, ctx.iters, ctx.win, ctx.cost
    clk = dd.state.clock
    task_on = cfg.task_time != "off"
    files = dd.data
    dev = dd.device_id
    ts_parts: list[np.ndarray] = [p for p, _ in extra_ts or ()]
    ts_time: list[np.ndarray] = [t for _, t in extra_ts or ()]
    name_hash_of = np.array([name_hash(n) for n in device.names.items], np.uint64)
    hw_parts: list[TaskLog] = list(extra_log)
    mix_parts: list[tuple[np.ndarray, ...]] = []  # MIX kernels' FFTS+ subtasks (A2)
    for sid, sch in scheduled.items():
        is_op = sch.op_row >= 0
        op_rows = sch.op_row[is_op]
        # host task_track of the launched kernels (AI Core / AI CPU; HCCL has none)
        kinds = ctx.kind[op_rows] if len(op_rows) else np.zeros(0, np.int64)
        tracked = np.isin(kinds, [op_map.KIND_AI_CORE, op_map.KIND_AI_CPU])
        if task_on and tracked.any():
            r = op_rows[tracked]
            host["task_track"].append(task_track_records(
                win.thread[r], win.track_ts[r], dev, np.full(len(r), sid),
                sch.task_id[is_op][tracked], np.zeros(len(r), np.int64),
                runtime_types(ctx, r), name_hash_of[ops.name_idx[r]],
                cost.block_dim[ops.sig[r]], cost.mix_ratio[ops.sig[r]]))
        if cfg.runtime_api and tracked.any():
            # the runtime launch API around each task_track (level 5000, runtime_api on)
            r = op_rows[tracked]
            rb, re_ = runtime_api_spans(win.begin[r], win.track_ts[r], win.end[r])
            rt = np.where(ctx.kind[r] == op_map.KIND_AI_CORE, RT_KERNEL_LAUNCH,
                          RT_CPU_KERNEL_LAUNCH)
            host["api_event"].append(api_records(L.LEVEL_RUNTIME, rt, win.thread[r], rb,
                                                 re_, np.zeros(len(r), np.uint64)))
        steps_on = sid == S.HCCL_STREAM and hccl_steps_on(device)
        step_track = _hccl_step_records(device, ctx, dd, sch, host) if steps_on else None
        left_out = ("aicpu" if sid == S.AICPU_STREAM and not cfg.aicpu else
                    "hccl" if sid == S.HCCL_STREAM and not cfg.hccl
                    and device.hccl_ranks() > 1 else None)
        if left_out is not None and len(op_rows):
            sigs, counts = np.unique(ops.sig[op_rows], return_counts=True)
            for sg, c in zip(sigs.tolist(), counts.tolist()):
                device.uncollected[left_out][device.sigs.tf_type[sg]] += c
        # flips: host FLIP_TASK + device ts_track rptType 14
        fl = np.flatnonzero(sch.flip_start)
        if len(fl):
            row = sch.op_row[fl]
            it = np.maximum(sch.iter_row[fl], 0)
            # host flip strictly between the launches of the tasks around it: before an
            # op task's task_track, or beside the marker's anchor launch
            op_track = win.track_ts[np.maximum(row, 0)] if step_track is None \
                else step_track[fl]
            h_ts = np.where(row >= 0, op_track - 1,
                            sch.order_ns[fl] + np.where(sch.sub[fl] > 0, 1, -1))
            h_thr = np.where(row >= 0, win.thread[np.maximum(row, 0)],
                             iters.thread[it] if len(iters) else 0)
            if task_on:
                host["task_track"].append(task_track_records(
                    h_thr.astype(np.uint32), h_ts, dev, np.full(len(fl), sid),
                    sch.task_id[fl], sch.flip[fl], np.full(len(fl), FLIP_TYPE),
                    np.zeros(len(fl), np.uint64), np.zeros(len(fl), np.uint16)))
            f_ts = clk.syscnt(sch.start[fl] - 1)
            ts_parts.append(flip_records(f_ts, np.full(len(fl), sid), sch.flip[fl],
                                         sch.task_id[fl]))
            ts_time.append(f_ts)
        # step-trace markers
        mk = np.flatnonzero(~is_op)
        if len(mk) and cfg.training_trace:
            it = sch.iter_row[mk]
            m_ts = clk.syscnt(sch.start[mk])
            ts_parts.append(step_trace_records(m_ts, iters.index[it], iters.model_id[it],
                                               np.full(len(mk), sid), sch.task_id[mk],
                                               sch.tag[mk]))
            ts_time.append(m_ts)
        if not task_on or not len(op_rows):
            continue
        n_op = int(is_op.sum())
        if sid == S.COMPUTE_STREAM or steps_on:
            # the task log: AI Core kernels and the collectives' steps (the analysis
            # takes the 910's device tasks from hwts.data and, for AI CPU, ts_track; a
            # STARS chip's from the ACSQ log, the steps as SDMA tasks)
            # (an A2's MIX kernel: the FFTS+ task's SQE here, its context's subtask log
            # below)
            hw_parts.append((sch.task_id[is_op], np.full(n_op, sid), sch.start[is_op],
                             sch.end[is_op], np.full(n_op, SL.SQE_AI_CORE
                                                     if sid == S.COMPUTE_STREAM
                                                     else SL.SQE_SDMA)))
        if sid == S.COMPUTE_STREAM:
            tid = sch.task_id[is_op]
            st, en = sch.start[is_op], sch.end[is_op]
            by_end = np.argsort(en, kind="stable")
            tsig = ops.sig[op_rows][by_end]
            mix = cost.mix_ratio[ops.sig[op_rows]] > 0
            if stars and mix.any():
                mix_parts.append((tid[mix], np.full(int(mix.sum()), sid), st[mix], en[mix]))
            if cfg.pmu_on and stars:
                _context_pmu(device, dd, tid[by_end], sid, tsig, ctx, st[by_end], en[by_end])
            elif cfg.pmu_on:
                pmu = event_counters(cost, tsig, ctx.sig, cfg.aic_events)
                ac = aicore_records(tid[by_end], np.full(len(tid), sid),
                                    cost.total_cycles[tsig], pmu, dd.state.aicore_count)
                dd.state.aicore_count += len(ac)
                files.file("aicore", lambda i: L.device_file_name("aicore", dev, i)
                           ).write_records(ac)
            # the A2's L2 task events are not emulated (docs/formats/ascend910b.md 7)
            if cfg.l2 and not stars:
                ev = l2_counters(cost, tsig, ctx.sig, device.chip.l2_line_bytes,
                                 L2_CACHE_EVENTS)
                files.file("l2_cache", lambda i: L.device_file_name("l2_cache", dev, i)
                           ).write_records(l2_cache_records(
                               np.full(len(tid), sid), tid[by_end], ev))
        elif sid == S.AICPU_STREAM:
            # the TS's task-type reports (ts_track rptType 12): on the 910 the only
            # device record of an AI CPU task's start and end (the task log hwts.data
            # holds AI Core tasks only), written with task trace like hwts.data;
            # aicpu.data (the AI CPU scheduler's timings, --aicpu on) adds the details
            # (a STARS chip logs them in the ACSQ log, SQE type AI_CPU)
            tid = sch.task_id[is_op]
            st, en = sch.start[is_op], sch.end[is_op]
            rd = np.minimum(clk.ticks(win.track_ts[op_rows] + S.LAUNCH_LATENCY_NS), st)
            strm = np.full(len(tid), sid)
            if stars:
                hw_parts.append((tid, strm, st, en, np.full(len(tid), SL.SQE_AI_CPU)))
            else:
                for state, tk in ((L.TS_STATE_RECEIVE, rd), (L.TS_STATE_START, st),
                                  (L.TS_STATE_END, en)):
                    t_ = clk.syscnt(tk)
                    ts_parts.append(task_type_records(t_, strm, tid, L.TS_TASK_TYPE_AI_CPU,
                                                      state))
                    ts_time.append(t_)
            if not cfg.aicpu:
                continue
            thr = (4 + np.arange(len(tid)) % device.chip.ai_cpu_core_num).astype(np.uint32)
            files.file("aicpu", lambda i: L.device_file_name("aicpu", dev, i)
                       ).write_records(aicpu_records(
                           dev, np.full(len(tid), sid), tid, clk.syscnt(rd),
                           clk.syscnt(st), clk.syscnt(en), clk.ns(st), clk.ns(en), thr))
    if hw_parts:
        tid, strm, st, en, sqe = (np.concatenate(c) for c in zip(*hw_parts))
        if stars:
            log = acsq_records(tid, strm, clk.syscnt(st), clk.syscnt(en), sqe,
                               dd.state.hwts_count)
            if mix_parts:
                m_tid, m_strm, m_st, m_en = (np.concatenate(c) for c in zip(*mix_parts))
                log = merge_logs(log, ffts_log_records(m_tid, m_strm, clk.syscnt(m_st),
                                                       clk.syscnt(m_en), SL.SUBTASK_MIX_AIC),
                                 dd.state.hwts_count)
            kind = "stars_soc"
        else:
            log = hwts_records(tid, strm, clk.syscnt(st), clk.syscnt(en), dd.state.hwts_count)
            kind = "hwts"
        dd.state.hwts_count += len(log)
        files.file(kind, lambda i: L.device_file_name(kind, dev, i)).write_records(log)
    if ts_parts:
        arr = np.concatenate([p.view(np.uint8).reshape(-1, L.TS_TRACK_SIZE)
                              for p in ts_parts])
        order = np.argsort(np.concatenate(ts_time), kind="stable")
        files.file("ts_track", lambda i: L.device_file_name("ts_track", dev, i)
                   ).write_records(arr[order].reshape(-1).view(L.TS_TRACK_STEP))


def emit_memcpy(device: Device, ctx: ChunkCtx, dd: DeviceDir,
                scheduled: list[S.ScheduledStream], copies: dict[str, np.ndarray] | None,
                host: dict[str, list[np.ndarray]]
                ) -> tuple[list[tuple[np.ndarray, np.ndarray]], list[TaskLog]]:
    """Host task_track (MEMCPY_ASYNC) + rtMemcpyAsync API, flips, and the device records
    of the copies: on the 910 the ts_track rptType 11 start/end records, on a STARS chip
    SDMA tasks of the ACSQ log; returns (ts_track parts, task-log entries)."""
    if not scheduled or copies is None:
        return [], []
    clk = dd.state.clock
    dev = dd.device_id
    iters = ctx.iters
    out: list[tuple[np.ndarray, np.ndarray]] = []
    log: list[TaskLog] = []
    stars = device.chip.raw_layout == "stars"
    host["_hash_lines"].extend(device.host_pass.hash_lines([MC.H2D_NAME, MC.D2H_NAME]))
    for sch in scheduled:
        key = "h2d" if sch.stream_id == MC.H2D_STREAM else "d2h"
        name = MC.H2D_NAME if key == "h2d" else MC.D2H_NAME
        n = len(sch)
        # schedule() keeps launch order = the order of copies[...] (one per iteration,
        # increasing times); map back by iteration row to be safe
        pos = np.searchsorted(copies[f"{key}_it"], sch.iter_row)
        ts = copies[f"{key}_ts"][pos]
        thr = iters.thread[sch.iter_row].astype(np.uint32)
        stream = np.full(n, sch.stream_id)
        host["task_track"].append(task_track_records(
            thr, ts, dev, stream, sch.task_id, np.zeros(n, np.int64),
            np.full(n, MEMCPY_TYPE), np.full(n, name_hash(name), np.uint64),
            np.zeros(n, np.uint16)))
        if device.config.runtime_api:
            b = ts - np.minimum(1_000, (ts - ctx.copies[0 if key == "h2d" else 3][
                sch.iter_row]) // 2)
            e = ts + np.minimum(2_000, (ctx.copies[1 if key == "h2d" else 4][
                sch.iter_row] - ts) // 2)
            ok = e > b
            host["api_event"].append(api_records(
                L.LEVEL_RUNTIME, RT_MEMCPY_ASYNC, thr[ok], b[ok], e[ok],
                np.zeros(int(ok.sum()), np.uint64)))
        fl = np.flatnonzero(sch.flip_start)
        if len(fl):
            host["task_track"].append(task_track_records(
                thr[fl], ts[fl] - 1, dev, stream[fl], sch.task_id[fl], sch.flip[fl],
                np.full(len(fl), FLIP_TYPE), np.zeros(len(fl), np.uint64),
                np.zeros(len(fl), np.uint16)))
            f_ts = clk.syscnt(sch.start[fl] - 1)
            out.append((flip_records(f_ts, stream[fl], sch.flip[fl], sch.task_id[fl]), f_ts))
        if stars:
            log.append((sch.task_id, stream, sch.start, sch.end, np.full(n, SL.SQE_SDMA)))
            continue
        # received by the TS when the launch reaches it (never after the start), started,
        # ended: the three states the analysis needs (layouts.TS_TRACK_MEMCPY)
        r_ts = clk.syscnt(np.minimum(clk.ticks(ts + S.LAUNCH_LATENCY_NS), sch.start))
        s_ts, e_ts = clk.syscnt(sch.start), clk.syscnt(sch.end)
        for state, t_ in ((L.TS_STATE_RECEIVE, r_ts), (L.TS_STATE_START, s_ts),
                          (L.TS_STATE_END, e_ts)):
            out.append((memcpy_records(t_, stream, sch.task_id, state), t_))
    return out, log


def _context_pmu(device: Device, dd: DeviceDir, task_id: np.ndarray, sid: int,
                 tsig: np.ndarray, ctx: ChunkCtx, start: np.ndarray, end: np.ndarray) -> None:
    """ffts_profile.data of a STARS chip: a context PMU per kernel, its counters those of
    the event list of the core kind it ran on (sample.json ai_core / aiv_profiling_events)."""
    cfg, cost = device.config, ctx.cost
    aic_events, aiv_events = device.chip.pmu_events(cfg.aic_metrics, cfg.aic_events)
    units = device.chip.metric_units.get(cfg.aic_metrics)
    vec = cost.vector_core[tsig]
    mix = cost.mix_ratio[tsig] > 0
    pmu = np.empty((len(tsig), 8), np.uint64)
    for mask, events in ((~vec, aic_events), (vec, aiv_events)):
        if mask.any():
            pmu[mask] = event_counters(cost, tsig[mask], ctx.sig, events, units)
    clk = dd.state.clock
    s_tick, e_tick = clk.syscnt(start), clk.syscnt(end)
    rec = context_pmu_records(task_id, np.full(len(task_id), sid),
                              np.select([vec, mix], [SL.FFTS_AIV_ONLY, SL.FFTS_PLUS],
                                        SL.FFTS_AIC_ONLY),
                              cost.total_cycles[tsig], pmu, s_tick, e_tick,
                              dd.state.aicore_count)
    parts = [rec.view(np.uint8).reshape(-1, rec.dtype.itemsize)]
    if mix.any():
        # the MIX kernels' AI Vector blocks (ratio per cube block), busy as long as the
        # kernel: their cycles, and the kernel's counters read with the vector event list
        m = np.flatnonzero(mix)
        ratio = cost.mix_ratio[tsig[m]].astype(np.int64)
        blocks = cost.block_dim[tsig[m]].astype(np.int64) * ratio
        aiv_pmu = event_counters(cost, tsig[m], ctx.sig, aiv_events, units) \
            * ratio[:, None].astype(np.uint64)
        bp = block_pmu_records(task_id[m], np.full(len(m), sid), blocks,
                               cost.total_cycles[tsig[m]] * ratio.astype(np.uint64), aiv_pmu,
                               s_tick[m], e_tick[m], SL.SUBTASK_MIX_AIC)
        parts.append(bp.view(np.uint8).reshape(-1, bp.dtype.itemsize))
    dd.state.aicore_count += sum(len(p) for p in parts)
    dev = dd.device_id
    dd.data.file("ffts_profile", lambda i: L.device_file_name("ffts_profile", dev, i)
                 ).write_records(np.concatenate(parts).reshape(-1))


def _hccl_step_records(device: Device, ctx: ChunkCtx, dd: DeviceDir, sch: S.ScheduledStream,
                       host: dict[str, list[np.ndarray]]) -> np.ndarray:
    """Host records of the collectives' steps on this rank (several ranks, hccl on), as
    the analysis links them (Ascend/msprof mscalculate/cann/cann_analysis_gear.py
    TaskGear.add_hccl_task / add_hccl_op): per step (= one task of the HCCL stream) an
    HCCL-level API (level 5500, master) inside the op's node launch API, enclosing the
    step's hccl_info and its runtime task_track (MEMCPY_ASYNC for a copy, REDUCE_ASYNC for
    an inline reduce).  The op's steps share its launch window from its task_track
    point on, one slot each.  Returns the task_track time of every stream entry (-1 for
    markers), for the flips."""
    win = ctx.win
    is_op = sch.op_row >= 0
    rows = sch.op_row[is_op]
    track = np.full(len(sch), -1, np.int64)
    if not len(rows):
        return track
    # the stream holds each op's steps consecutively, in step order
    first = np.r_[True, rows[1:] != rows[:-1]]
    op_rows = rows[first]
    steps, info = hccl_steps(device, ctx, op_rows, dd.device_id)
    if int(steps.sum()) != len(rows):
        raise RuntimeError("HCCL steps do not match the HCCL stream's tasks")
    task = np.repeat(np.arange(len(op_rows)), steps)
    k = np.arange(len(task)) - np.repeat(np.cumsum(steps) - steps, steps)
    reduce_step = info[:, 0].astype(bool)
    # one slot [b, e] per step in [track_ts, window end) of the op's launch
    t0 = win.track_ts[rows]
    slot = np.maximum((win.end[rows] - t0) // steps[task], 1)
    b = t0 + k * slot
    e = b + np.maximum(slot - 1, 0)
    info_ts = np.minimum(b + 1, e)
    track_ts = np.minimum(b + 2, e)
    thread = win.thread[rows]
    name_hash_of = np.array([name_hash(n_) for n_ in device.names.items], np.uint64)
    op_h = name_hash_of[ctx.ops.name_idx[rows]]
    host["api_event"].append(api_records(L.LEVEL_HCCL, L.HCCL_MASTER, thread, b, e, op_h))
    clk = dd.state.clock
    start, end = clk.ns(sch.start[is_op]), clk.ns(sch.end[is_op])
    names = {True: "Reduce_Inline", False: "Memcpy"}
    host["_hash_lines"].extend(device.host_pass.hash_lines(list(names.values()) +
                                                           ["hccl_world_group"]))
    name_h = np.where(reduce_step, name_hash(names[True]), name_hash(names[False]))
    host["hccl_info"].append(hccl_info_records(
        thread, info_ts, end - start, name_h.astype(np.uint64), op_h,
        name_hash("hccl_world_group"), device.hccl_rank(dd.device_id), device.hccl_ranks(), k,
        info[:, 3].astype(np.uint64), np.zeros(len(rows), np.uint32),
        remote_rank=info[:, 2].astype(np.uint32), role=info[:, 1].astype(np.uint32)))
    rt = np.where(reduce_step, REDUCE_TYPE, MEMCPY_TYPE)
    host["task_track"].append(task_track_records(
        thread, track_ts, dd.device_id, np.full(len(rows), sch.stream_id),
        sch.task_id[is_op], np.zeros(len(rows), np.int64), rt, op_h,
        np.zeros(len(rows), np.uint16)))
    track[is_op] = track_ts
    return track
