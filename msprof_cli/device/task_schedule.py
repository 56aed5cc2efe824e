"""One device's share of a chunk scheduled on its streams (docs/device-model.md 5, 6, 7).

`schedule_device` turns the chunk's launched ops of one emulated device into scheduled
streams (scheduler.py): AI Core kernels and the step-trace markers on the compute stream,
AI CPU tasks, the collectives on the HCCL stream (one task per step of a collective when
HCCL data is written: `hccl_steps`), and the input / output copies on the memcpy streams.
It owns GE's cross-stream order (an AI CPU / HCCL task waits for the compute-stream task
launched before it; the iteration-end markers wait for every stream) and the placement of
the step-trace tags (model start / end, FP, BP, iteration end, the Reduce pairs around each
all-reduce).

The functions read the `Device`'s public state (options, devices, models, signatures, HCCL
ranks) and change only the device's stream state (`DeviceDir.state`); the records of what
they scheduled are written by stream_records.py.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from msprof_cli.device import dependencies as DEP
from msprof_cli.device import memcpy as MC
from msprof_cli.device import op_map
from msprof_cli.device import scheduler as S
from msprof_cli.device.chunk import ChunkCtx, DeviceDir, kind_lut
from msprof_cli.device.host_records import hccl_step_plan

if TYPE_CHECKING:  # annotations only: device.py imports this module
    from msprof_cli.device.device import Device

# step-trace tag ids of ts_track rptType 10 (docs/device-model.md 7)
TAG_MODEL_START, TAG_MODEL_END, TAG_FP, TAG_BP, TAG_ITER_END = 0, 1, 2, 3, 4
TAG_REDUCE_BASE = 10000
# the stream each launched kind of op runs on
_STREAM_LUT = kind_lut({op_map.KIND_AI_CORE: S.COMPUTE_STREAM,
                        op_map.KIND_AI_CPU: S.AICPU_STREAM,
                        op_map.KIND_HCCL: S.HCCL_STREAM})
# the consumer's stream's skew of the event wait (scheduler.EVENT_WAIT_SKEW)
_WAIT_SKEW_LUT = kind_lut({op_map.KIND_AI_CORE: S.EVENT_WAIT_SKEW[S.COMPUTE_STREAM],
                           op_map.KIND_AI_CPU: S.EVENT_WAIT_SKEW[S.AICPU_STREAM],
                           op_map.KIND_HCCL: S.EVENT_WAIT_SKEW[S.HCCL_STREAM]})


def schedule_device(device: Device, ctx: ChunkCtx, dd: DeviceDir
                    ) -> tuple[dict[int, S.ScheduledStream], list[S.ScheduledStream],
                               dict[str, np.ndarray] | None] | None:
    """Schedule this device's tasks of the chunk on its streams (state updated)."""
    ops, iters, win, kind = ctx.ops, ctx.iters, ctx.win, ctx.kind
    cfg = device.config
    clk = dd.state.clock
    trace = cfg.training_trace
    rows = np.flatnonzero((ops.device_id == dd.device_id) & (kind != op_map.KIND_NONE))
    # iterations that this device takes part in (markers); empty iterations -> first device
    it_rows = np.unique(ops.iter_row[(ops.device_id == dd.device_id) & (ops.iter_row >= 0)])
    if len(iters) and dd.device_id == min(device.devices):
        have_ops = np.zeros(len(iters), bool)
        have_ops[ops.iter_row[ops.iter_row >= 0]] = True
        it_rows = np.union1d(it_rows, np.flatnonzero(~have_ops))
    if len(rows) == 0 and (len(it_rows) == 0 or not trace):
        return None
    tt = win.track_ts[rows]
    ready = clk.ticks(tt + S.LAUNCH_LATENCY_NS)
    dur = ctx.cost.dur_ticks[ops.sig[rows]]
    stream = _STREAM_LUT[kind[rows]]
    op_iter = ops.iter_row[rows]
    n_it = len(iters)
    copies = _memcpy_tasks(device, ctx, dd, it_rows)
    h2d = None
    if copies is not None and len(copies["h2d_it"]):
        # input copy first: every task of the iteration waits for its batch (GE: the
        # model's first task waits on the copy's event)
        plan = S.StreamPlan()
        plan.add(op_row=-1, order_ns=copies["h2d_ts"], sub=0,
                 ready=clk.ticks(copies["h2d_ts"] + S.LAUNCH_LATENCY_NS),
                 dur=copies["h2d_dur"], gap=S.TASK_GAP_TICKS, tag=-1,
                 iter_row=copies["h2d_it"])
        h2d = S.schedule(plan, dd.state, MC.H2D_STREAM)
        h2d_end = np.full(n_it, S.NEVER, np.int64)
        h2d_end[h2d.iter_row] = h2d.end
        inn = op_iter >= 0
        ready = ready.copy()
        ready[inn] = np.maximum(ready[inn], h2d_end[op_iter[inn]])

    # The streams wait for each other where data crosses them (dependencies.py: GE's event
    # record / wait on every cross-stream data edge), the iteration-end markers for the side
    # streams, the BP marker for its anchor: run together to a fixed point (run_coupled).
    plans: dict[int, S.StreamPlan] = {}
    for sid in (S.AICPU_STREAM, S.HCCL_STREAM):
        plan = _side_plan(device, ctx, dd, sid, rows, tt, ready, dur, stream, op_iter, trace)
        if plan.op_row:
            plans[sid] = plan
    comp_plan, end_order, bp_rows, bp_iter = _compute_plan(device, ctx, clk, it_rows, rows, tt,
                                                           ready, dur, stream, op_iter,
                                                           dd.device_id)
    if comp_plan.op_row:
        plans[S.COMPUTE_STREAM] = comp_plan
    cons, prod = _data_edges(device, ctx, rows, tt, stream)
    skew = _WAIT_SKEW_LUT[kind[cons]] if len(cons) else np.zeros(0, np.int64)
    coupling = S.Coupling(len(ops), n_it, cons, prod,
                          side_streams=frozenset((S.AICPU_STREAM, S.HCCL_STREAM)),
                          end_order=end_order, bp_rows=bp_rows, bp_iter=bp_iter,
                          wait_ticks=S.EVENT_WAIT_TICKS + skew)
    scheduled, _ = S.run_coupled([S.order(p, sid) for sid, p in plans.items()], dd.state,
                                 coupling)
    other_end = np.full(n_it, S.NEVER, np.int64)
    for sid in (S.AICPU_STREAM, S.HCCL_STREAM):
        sch = scheduled.get(sid)
        if sch is not None and n_it:
            sel = sch.iter_row >= 0
            np.maximum.at(other_end, sch.iter_row[sel], sch.end[sel])
    memcpy: list[S.ScheduledStream] = [h2d] if h2d is not None else []
    if copies is not None and len(copies["d2h_it"]):
        # output copy after the iteration's last task on every stream
        last = other_end.copy()
        comp = scheduled.get(S.COMPUTE_STREAM)
        if comp is not None:
            sel = comp.iter_row >= 0
            np.maximum.at(last, comp.iter_row[sel], comp.end[sel])
        it = copies["d2h_it"]
        plan = S.StreamPlan()
        plan.add(op_row=-1, order_ns=copies["d2h_ts"], sub=0,
                 ready=np.maximum(clk.ticks(copies["d2h_ts"] + S.LAUNCH_LATENCY_NS),
                                  last[it]),
                 dur=copies["d2h_dur"], gap=S.TASK_GAP_TICKS, tag=-1, iter_row=it)
        memcpy.append(S.schedule(plan, dd.state, MC.D2H_STREAM))
    return scheduled, memcpy, copies


def _side_plan(device: Device, ctx: ChunkCtx, dd: DeviceDir, sid: int, rows: np.ndarray,
               tt: np.ndarray, ready: np.ndarray, dur: np.ndarray, stream: np.ndarray,
               op_iter: np.ndarray, trace: bool) -> S.StreamPlan:
    """The AI CPU or HCCL stream's tasks (and the Reduce markers around each all-reduce)."""
    m = stream == sid
    plan = S.StreamPlan()
    if sid == S.HCCL_STREAM and hccl_steps_on(device) and m.any():
        # one task per step of the collective (hccl_step_plan), back to back, the op's
        # duration split evenly: HCCL launches each step as its own task
        steps, _ = hccl_steps(device, ctx, rows[m], dd.device_id)
        rep = np.repeat(np.arange(int(m.sum())), steps)
        k = np.arange(len(rep)) - np.repeat(np.cumsum(steps) - steps, steps)
        d, n = dur[m][rep], steps[rep]
        plan.add(op_row=rows[m][rep], order_ns=tt[m][rep], sub=0, ready=ready[m][rep],
                 dur=np.maximum(d * (k + 1) // n - d * k // n, 1),
                 gap=np.where(k == 0, S.TASK_GAP_TICKS, 0), tag=-1,
                 iter_row=op_iter[m][rep])
    else:
        plan.add(op_row=rows[m], order_ns=tt[m], sub=0, ready=ready[m], dur=dur[m],
                 gap=S.TASK_GAP_TICKS, tag=-1, iter_row=op_iter[m])
    if sid == S.HCCL_STREAM and trace:
        _reduce_markers(plan, ctx, rows[m], tt[m], ready[m], op_iter[m])
    return plan


def _data_edges(device: Device, ctx: ChunkCtx, rows: np.ndarray, tt: np.ndarray,
                stream: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The cross-stream waits of this device's launched rows (dependencies.py): (consumer
    rows, producer rows)."""
    ops = ctx.ops
    n = len(ops)
    empty = np.zeros(0, np.int64)
    if len(np.unique(stream)) < 2:
        return empty, empty
    stream_of_row = np.full(n, -1, np.int64)
    stream_of_row[rows] = stream
    launch_rank = np.zeros(n, np.int64)
    launch_rank[rows[np.lexsort((rows, tt))]] = np.arange(len(rows))
    eager = ops.eager[rows] if ops.eager is not None else np.zeros(len(rows), bool)
    graph = (ops.iter_row[rows] >= 0) & ~eager
    model_of_row = np.full(n, -1, np.int64)
    tables: dict[int, DEP.ModelEdges] = {}
    for mid in np.unique(ops.model_id[rows[graph]]).tolist():
        model = device.models.get(int(mid))
        if model is None or not model.producers:
            continue
        mine = rows[graph & (ops.model_id[rows] == mid)]
        tables[int(mid)] = device.deps.model_edges(
            int(mid), model.producers, model.op_order, np.unique(ops.name_idx[mine]),
            device.fuser.chains_of(int(mid)), device.names.items, device.names.get)
        model_of_row[mine] = int(mid)
    cons, prod, known = DEP.row_edges(rows, ops.iter_row, ops.name_idx, launch_rank,
                                      model_of_row, tables, device.fuser.alias)
    cross = stream_of_row[cons] != stream_of_row[prod]
    cons, prod = cons[cross], prod[cross]
    if not known.all():
        c2, p2 = DEP.previous_on_streams(rows, stream_of_row, launch_rank, rows[~known])
        cons, prod = np.r_[cons, c2], np.r_[prod, p2]
    return cons, prod


def _memcpy_tasks(device: Device, ctx: ChunkCtx, dd: DeviceDir, it_rows: np.ndarray
                  ) -> dict[str, np.ndarray] | None:
    """Input / output copies of this device's iterations (device/memcpy.py): iteration
    rows, task_track times (middle of the GE InputCopy / OutputCopy API), durations."""
    if ctx.copies is None or not len(it_rows):
        return None
    ops, iters = ctx.ops, ctx.iters
    n_it = len(iters)
    ib, ie, iok, ob, oe, ook = ctx.copies
    feed, fetch, known = MC.model_bytes(device.models, iters.model_id)
    # devices per iteration: the batch is split over the replicas
    inn = ops.iter_row >= 0
    # distinct (iteration, device) pairs as one int64 key each (np.unique with axis=1
    # sorts void records: ~10x slower, it was 5 % of a loop-heavy model's collect)
    dev = ops.device_id[inn].astype(np.int64)
    if len(dev):
        dev = dev - dev.min()
    span = int(dev.max()) + 1 if len(dev) else 1
    pairs_it = np.unique(ops.iter_row[inn].astype(np.int64) * span + dev) // span
    n_dev = np.maximum(np.bincount(pairs_it, minlength=n_it), 1)
    # fallback: outputs of this device's data-source ops of the step
    src = MC.source_bytes_per_sig(device.sigs, ctx.sig["bytes_out"])[ops.sig]
    mine = inn & (ops.device_id == dd.device_id) & (src > 0)
    seen = np.zeros(n_it, np.int64)
    np.add.at(seen, ops.iter_row[mine], src[mine])
    hb = np.where(known, -(-feed // n_dev), seen)  # bytes per iteration (ceil split)
    db = -(-fetch // n_dev)
    tick = dd.state.clock.tick_ns
    h = it_rows[(hb[it_rows] > 0) & iok[it_rows]]
    d = it_rows[(db[it_rows] > 0) & ook[it_rows]]
    # the input copy is issued at the end of InputCopy (which may span a wait for the
    # batch: time_model.py), the output copy in the middle of OutputCopy
    return {"h2d_it": h, "h2d_ts": ie[h] - np.minimum(1_000, (ie[h] - ib[h]) // 2),
            "h2d_dur": MC.duration_ticks(hb[h], tick), "h2d_bytes": hb[h],
            "d2h_it": d, "d2h_ts": ob[d] + (oe[d] - ob[d]) // 2,
            "d2h_dur": MC.duration_ticks(db[d], tick), "d2h_bytes": db[d]}


def _compute_plan(device: Device, ctx: ChunkCtx, clk: S.DeviceClock, it_rows: np.ndarray,
                  rows: np.ndarray, tt: np.ndarray, ready: np.ndarray, dur: np.ndarray,
                  stream: np.ndarray, op_iter: np.ndarray, dev: int
                  ) -> tuple[S.StreamPlan, np.ndarray, np.ndarray, np.ndarray]:
    """AI Core kernels + step-trace markers of the compute stream; with the markers' waits
    (`S.Coupling`): per iteration the launch order of its end markers, the BP anchor rows
    and their iterations."""
    m = stream == S.COMPUTE_STREAM
    plan = S.StreamPlan()
    plan.add(op_row=rows[m], order_ns=tt[m], sub=0, ready=ready[m], dur=dur[m],
             gap=device.chip.kernel_gap_ticks, tag=-1, iter_row=op_iter[m])
    end_order = np.full(len(ctx.iters), np.iinfo(np.int64).max, np.int64)
    empty = np.zeros(0, np.int64)
    if not (device.config.training_trace and len(it_rows)):
        return plan, end_order, empty, empty
    bp_rows, bp_iter = _step_markers(plan, ctx, clk, it_rows, rows, tt, ready, op_iter,
                                     end_order, dev)
    return plan, end_order, bp_rows, bp_iter


def _reduce_markers(plan: S.StreamPlan, ctx: ChunkCtx, rows: np.ndarray,
                    tt: np.ndarray, ready: np.ndarray, op_iter: np.ndarray) -> None:
    """The Reduce start / end markers around each all-reduce: they wait for what the
    all-reduce waits for, so the pair encloses its run."""
    ar = ctx.sig["allreduce"][ctx.ops.sig[rows]] & (op_iter >= 0)
    if not ar.any():
        return
    r, t, rd, it = rows[ar], tt[ar], ready[ar], op_iter[ar]
    order = np.lexsort((t, it))
    r, t, rd, it = r[order], t[order], rd[order], it[order]
    first = np.r_[0, np.flatnonzero(np.diff(it)) + 1]
    k = np.arange(len(it)) - np.repeat(first, np.diff(np.r_[first, len(it)]))
    plan.add(op_row=-1, order_ns=t, sub=-1, ready=rd, dur=0, gap=S.MARKER_GAP_TICKS,
             tag=TAG_REDUCE_BASE + 2 * k, iter_row=it, dep_row=r)
    plan.add(op_row=-1, order_ns=t, sub=1, ready=rd, dur=0, gap=0,
             tag=TAG_REDUCE_BASE + 2 * k + 1, iter_row=it, dep_row=r)


def _step_markers(plan: S.StreamPlan, ctx: ChunkCtx, clk: S.DeviceClock,
                  it_rows: np.ndarray, rows: np.ndarray, tt: np.ndarray,
                  ready: np.ndarray, op_iter: np.ndarray, end_order: np.ndarray,
                  dev: int) -> tuple[np.ndarray, np.ndarray]:
    """The step-trace markers of the compute stream; fills `end_order` (per iteration: the
    launch time of its end markers) and returns the BP marker's anchor rows and their
    iterations (it waits for their end, on whatever stream they run)."""
    lat = S.LAUNCH_LATENCY_NS
    me_b = ctx.me_begin[it_rows]
    plan.add(op_row=-1, order_ns=me_b, sub=-2, ready=clk.ticks(me_b + lat), dur=0,
             gap=S.MARKER_GAP_TICKS, tag=TAG_MODEL_START, iter_row=it_rows)
    # last launch of each iteration on this device
    last = ctx.me_begin.copy()
    inn = op_iter >= 0
    if inn.any():
        np.maximum.at(last, op_iter[inn], tt[inn])
    last_it = last[it_rows]
    end_ready = clk.ticks(last_it + lat)
    # the end markers are launched before the next iteration's model start: a launch
    # pushed past it (launch windows serialise a thread behind a long collective, whose
    # host span can outlast the step) must not put the next iteration's start marker
    # ahead of this one's end on the stream -- the iterations would overlap and the
    # step trace lose this one's FP/BP/Reduce markers (seen in CI: Reduce N/A)
    starts = np.sort(ctx.me_begin)
    nxt = np.searchsorted(starts, me_b, side="right")
    has_next = nxt < len(starts)
    next_b = np.where(has_next, starts[np.minimum(nxt, len(starts) - 1)], last_it + 1)
    last_it = np.maximum(np.minimum(last_it, next_b - 1), me_b)
    end_order[it_rows] = last_it
    fp_pick, bp_pick, bp_wait = _fp_bp_anchors(ctx, rows, tt, op_iter, dev)
    if len(fp_pick):
        plan.add(op_row=-1, order_ns=tt[fp_pick], sub=-1, ready=ready[fp_pick], dur=0,
                 gap=S.MARKER_GAP_TICKS, tag=TAG_FP, iter_row=op_iter[fp_pick])
    bp_rows = bp_iter = np.zeros(0, np.int64)
    if len(bp_pick):
        # after the end of the anchor (and, for a loop, of all the loop's tasks) even when
        # it runs on another stream: the AI CPU stream can lag behind the compute stream
        w = np.flatnonzero(bp_wait)
        bp_rows, bp_iter = rows[w], op_iter[w]
        plan.add(op_row=-1, order_ns=tt[bp_pick], sub=1, ready=ready[bp_pick], dur=0,
                 gap=S.MARKER_GAP_TICKS, tag=TAG_BP, iter_row=op_iter[bp_pick],
                 dep_row=-1, wait=S.WAIT_BP_ANCHOR)
    plan.add(op_row=-1, order_ns=last_it, sub=2, ready=end_ready, dur=0,
             gap=S.MARKER_GAP_TICKS, tag=TAG_ITER_END, iter_row=it_rows,
             wait=S.WAIT_SIDE_STREAMS)
    plan.add(op_row=-1, order_ns=last_it, sub=3, ready=end_ready, dur=0,
             gap=S.MARKER_GAP_TICKS, tag=TAG_MODEL_END, iter_row=it_rows,
             wait=S.WAIT_SIDE_STREAMS)
    return bp_rows, bp_iter


def _fp_bp_anchors(ctx: ChunkCtx, rows: np.ndarray, tt: np.ndarray, op_iter: np.ndarray,
                   dev: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per iteration that has them (indices into `rows`): the task the FP marker goes just
    before and the task the BP marker goes just after in launch order (docs/device-model.md
    7), and a mask of `rows`: the tasks whose end the BP marker waits for.

    FP: the first execution of the FP op.  BP: the last execution of the BP op; for a BP op
    inside a While loop, the loop's last task, after the end of all its tasks (GE descends
    from the root graph into the loop's outputs: `step_trace.loop_scope`).  On a real 910
    the BP op depends on the FP op (GE takes it from NetOutput's / the last AllReduce's
    inputs), so tag 2 always precedes tag 3.  If the anchor still precedes the FP op in an
    iteration (an op that depends on no forward data, which TF ran ahead), BP moves to the
    iteration's last backward task after the FP op, else (no backward task follows) just
    after the FP op."""
    names = ctx.ops.name_idx[rows]
    it = np.maximum(op_iter, 0)
    inn = op_iter >= 0
    fp_of, bp_of = ctx.fp_name[dev][it], ctx.bp_name[dev][it]
    fp_pick = _per_iteration(inn & (fp_of >= 0) & (names == fp_of), tt, op_iter, last=False)
    row_loop = ctx.name_loop[names]
    bp_loop = np.where(bp_of >= 0, ctx.name_loop[np.maximum(bp_of, 0)], -1)
    bp_hit = inn & (bp_of >= 0) & ((names == bp_of) | ((bp_loop >= 0) & (row_loop == bp_loop)))
    bp_pick = _per_iteration(bp_hit, tt, op_iter, last=True)
    if not (len(fp_pick) and len(bp_pick)):
        return fp_pick, bp_pick, bp_hit
    n_it = len(ctx.iters)
    fp_row = np.full(n_it, -1, np.int64)
    fp_row[op_iter[fp_pick]] = fp_pick
    f = fp_row[op_iter[bp_pick]]
    early = (f >= 0) & (tt[bp_pick] < tt[np.maximum(f, 0)])
    if early.any():
        fp_t = np.full(n_it, np.iinfo(np.int64).max, np.int64)
        fp_t[op_iter[fp_pick]] = tt[fp_pick]
        after = inn & ctx.name_backward[names] & (tt >= fp_t[it]) & (fp_row[it] >= 0)
        last_bwd = np.full(n_it, -1, np.int64)
        pick = _per_iteration(after, tt, op_iter, last=True)
        last_bwd[op_iter[pick]] = pick
        its = op_iter[bp_pick[early]]
        bp_pick = bp_pick.copy()
        bp_pick[early] = np.where(last_bwd[its] >= 0, last_bwd[its], fp_row[its])
        moved = np.zeros(n_it, bool)
        moved[its] = True
        bp_hit = bp_hit & ~moved[it]  # those wait for their new anchor only
        bp_hit[bp_pick[early]] = True
    return fp_pick, bp_pick, bp_hit


def _per_iteration(hit: np.ndarray, tt: np.ndarray, op_iter: np.ndarray, *, last: bool
                   ) -> np.ndarray:
    """Per iteration with a hit: the index of its first (or last) hit in launch order."""
    idx = np.flatnonzero(hit)
    if not len(idx):
        return idx
    idx = idx[np.lexsort((tt[idx], op_iter[idx]))]
    its = op_iter[idx]
    if last:
        return idx[np.r_[np.flatnonzero(np.diff(its)), len(its) - 1]]
    return idx[np.r_[0, np.flatnonzero(np.diff(its)) + 1]]


def hccl_steps_on(device: Device) -> bool:
    """HCCL data is written (hccl on, several ranks): each collective runs as its steps."""
    return bool(device.config.hccl) and device.config.task_time != "off" \
        and device.hccl_ranks() > 1


def hccl_steps(device: Device, ctx: ChunkCtx, rows: np.ndarray, device_id: int
               ) -> tuple[np.ndarray, np.ndarray]:
    """Per op row, its number of steps on this rank (`host_records.hccl_step_plan`), and
    per step (the rows' steps in order) (reduce step, role, remote rank, data bytes)."""
    n = device.hccl_ranks()
    rank = device.hccl_rank(device_id)
    uniq, plan_of = np.unique(ctx.ops.sig[rows], return_inverse=True)
    plans = [hccl_step_plan(device.sigs.ge_type[sg], device.sigs.tf_type[sg],
                            bool(ctx.sig["allreduce"][sg]), rank, n,
                            float(ctx.sig["bytes_in"][sg]), float(ctx.sig["bytes_out"][sg]))
             for sg in uniq.tolist()]
    width = max([len(pl) for pl in plans] + [1])
    table = np.zeros((len(plans), width, 4), np.int64)
    for i, pl in enumerate(plans):
        table[i, :len(pl)] = pl
    steps = np.maximum(np.array([len(pl) for pl in plans], np.int64), 1)[plan_of] \
        if len(plans) else np.zeros(0, np.int64)
    task = np.repeat(np.arange(len(rows)), steps)
    k = np.arange(len(task)) - np.repeat(np.cumsum(steps) - steps, steps)
    return steps, table[plan_of[task], k]
