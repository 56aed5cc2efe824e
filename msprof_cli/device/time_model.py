"""The time of a TensorFlow-on-Ascend *system* (docs/device-model.md 5.2).

The collector measures the host CPU running every op of the script.  On an Ascend 910 the TF
adapter hands the graph to GE, which runs the device ops on the NPU; the host keeps only its
own work: the Python loop and callbacks between steps, the input pipeline (a step waits in
GetNext for its batch), host-executed ops (PyFunc, Save/Restore), and the launches.  So the
CPU's execution time of a device op is *not* host time and must not stretch the timeline.

This module rewrites the host times of one chunk (`OpTable.host_start/host_end`,
`IterTable.start/end`) onto the emulated system's clock:

* **Measured and kept**: the gap between consecutive host events (Python between steps and
  between eager ops), the input wait of a step (`Iteration.input_wait_ns`: TF's
  `IteratorGetNextOp::DoCompute` span inside the step) and host-executed ops inside a step.
* **Modelled**: a graph step (`ModelExecute`) = entry cost, the measured host work, GE's
  InputCopy, one short launch record per device task, then the host waits until the device
  has run the step's tasks (dependency order on its streams, the scheduler's gaps) and the
  OutputCopy: step end = max(host launches, device end) + return cost.  An eager op = one
  host launch of `EAGER_LAUNCH_NS`; the device runs it when launched (asynchronously).

The device's end of each step comes from the real scheduler (device.py): it schedules the
chunk once with every step laid out on its own, far from the others (each starts on an idle
device, as a synchronous step does), which gives every step's device span; then the steps are
placed one after the other with the measured gaps between them (`place`).

Every other host time of the chunk (msproftx markers, the end of the collection) goes
through `TimeWarp`: a monotone map from the real clock to the emulated one (gaps keep their
length, each step / eager op is stretched or squeezed onto its emulated span).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# Host-side costs of the emulated system (docs/device-model.md 5.2: all assumptions, no
# published figure; chosen so the host never throttles a compute-bound graph).
MODEL_EXECUTE_ENTRY_NS = 20_000  # GE ModelExecute call until its first launch
COPY_API_NS = 2_000  # host side of GE's InputCopy / OutputCopy (the copy itself is a task)
GRAPH_LAUNCH_NS = 1_000  # host record spacing per task of a graph (tasks are preloaded)
GRAPH_WINDOW_NS = 800  # node launch API length inside that slot
MODEL_RETURN_NS = 5_000  # ModelExecute return after the device's last task
EAGER_LAUNCH_NS = 20_000  # single-op mode: one op's host launch (compile cache hit)
EAGER_WINDOW_NS = 18_000


def launch_keys(model_id: np.ndarray, iter_row: np.ndarray, name_idx: np.ndarray,
                host_start: np.ndarray, orders: dict[int, dict[str, int]],
                names: list[str]) -> np.ndarray:
    """Per op row: its topological op id in its model's graph (`ModelInfo.op_order`, GE's
    task order); an op the graph walk does not name (a lowered loop body's runtime name)
    takes the id of the op the CPU started just before it in the same step (+0.5), so it
    keeps its place.  Without any op order: the real start times."""
    rows = np.flatnonzero(iter_row >= 0)
    if not len(rows) or not any(orders.get(int(m)) for m in np.unique(model_id[rows]).tolist()):
        return host_start.astype(np.float64)
    key = np.full(len(iter_row), -1.0)
    # distinct (model, op name) pairs as one int64 key each (np.unique with axis=1 sorts
    # void records, ~10x slower); same order as the pairs' lexicographic one
    mids, idxs = model_id[rows].astype(np.int64), name_idx[rows].astype(np.int64)
    if mids.min() >= 0 and idxs.min() >= 0:
        span = int(idxs.max()) + 1
        combo, inverse = np.unique(mids * span + idxs, return_inverse=True)
        distinct = zip((combo // span).tolist(), (combo % span).tolist())
    else:
        combo, inverse = np.unique(np.stack([mids, idxs]), axis=1, return_inverse=True)
        distinct = combo.T.tolist()
    # one dict lookup per distinct (model, op name), not per row
    value = np.array([float(orders.get(mid, {}).get(names[idx], -1)) for mid, idx in distinct])
    got = value[inverse.reshape(-1)]
    by_start = np.lexsort((host_start[rows], iter_row[rows]))
    g = got[by_start]
    it = iter_row[rows][by_start]
    last = np.maximum.accumulate(np.where(g >= 0, np.arange(len(g)), -1))
    same = (last >= 0) & (it[np.maximum(last, 0)] == it)
    key[rows[by_start]] = np.where(g >= 0, g, np.where(same, g[np.maximum(last, 0)] + 0.5, -0.5))
    return key


@dataclass
class Layout:
    """Host layout of a chunk's steps, relative to each step's start (ns)."""

    op_rel_start: np.ndarray  # per op row (single ops: 0)
    op_rel_end: np.ndarray
    host_end_rel: np.ndarray  # per iteration: end of the host's own part
    in_copy: tuple[np.ndarray, np.ndarray]  # per iteration, relative
    out_copy: tuple[np.ndarray, np.ndarray]
    upper_bound: np.ndarray  # per iteration: a span no step of it can exceed


def layout(iter_row: np.ndarray, launch: np.ndarray, eager: np.ndarray, host_work: np.ndarray,
           host_start: np.ndarray, host_end: np.ndarray, n_iters: int,
           input_wait: np.ndarray, dev_ns: np.ndarray,
           launch_key: np.ndarray | None = None) -> Layout:
    """Relative host layout of every step (see the module doc).

    `launch_key`: the order GE launches a step's tasks in (the graph's topological op id);
    None = the order the CPU started them.
    `launch`: the op launches a device task; `host_work`: measured host-executed op;
    `dev_ns`: the op's modelled device time (for the upper bound only)."""
    n = len(iter_row)
    rel_s = np.zeros(n, np.int64)
    rel_e = np.zeros(n, np.int64)
    inn = np.flatnonzero(iter_row >= 0)
    # measured host work of each step: its input wait plus host-executed ops (serialised
    # before the step's device work: the device needs their results)
    work = np.asarray(input_wait, np.int64).copy()
    hw = inn[host_work[inn]]
    np.add.at(work, iter_row[hw], np.maximum(host_end[hw] - host_start[hw], 0))
    # InputCopy opens the step and spans the entry and the wait for the batch; the H2D copy is
    # issued at its end (GE reports InputCopy, ModelExecute and OutputCopy one after another:
    # host_pass.copy_apis)
    in_b = np.zeros(n_iters, np.int64)
    in_e = MODEL_EXECUTE_ENTRY_NS + work + COPY_API_NS
    # launches in the graph's topological order (GE's task order: the same every step), else
    # in the step's real start order (also a dependency order: TF's executor starts an op
    # after its inputs are done, but the order of independent ops varies between runs)
    lr = inn[launch[inn]]
    key = host_start if launch_key is None else launch_key
    order = np.lexsort((lr, host_start[lr], key[lr], iter_row[lr]))
    lr = lr[order]
    it = iter_row[lr]
    first = np.r_[0, np.flatnonzero(np.diff(it)) + 1] if len(lr) else np.zeros(0, np.int64)
    grp_start = np.repeat(first, np.diff(np.r_[first, len(lr)])) if len(lr) else first
    j = np.arange(len(lr)) - grp_start  # launch number within the step
    ea = eager[lr]
    # eager ops inside a step (Keras run_eagerly): the measured Python gap before each op
    # is kept, the op itself is one launch
    gap = np.zeros(len(lr), np.int64)
    if ea.any():
        prev_end = np.r_[0, host_end[lr][:-1]]
        g = np.maximum(host_start[lr] - prev_end, 0)
        g[j == 0] = 0
        gap = np.where(ea, g, 0)
    slot = np.where(ea, EAGER_LAUNCH_NS, GRAPH_LAUNCH_NS) + gap
    cum = np.cumsum(slot)
    before = cum - slot
    base = np.r_[0, cum][grp_start]
    start = in_e[it] + (before - base) + gap if len(lr) else np.zeros(0, np.int64)
    rel_s[lr] = start
    rel_e[lr] = start + np.where(ea, EAGER_WINDOW_NS, GRAPH_WINDOW_NS)
    host_end_rel = in_e.copy()
    if len(lr):
        np.maximum.at(host_end_rel, it, rel_e[lr])
    # ops without a launch sit at the place of the step's launches (no records of theirs)
    rest = inn[~launch[inn]]
    rel_s[rest] = rel_e[rest] = in_e[iter_row[rest]]
    out_b = host_end_rel + 1  # provisional: `finish` puts it after the device's work
    out_e = out_b + COPY_API_NS
    dev_total = np.zeros(n_iters, np.int64)
    if len(lr):
        # + the largest in-stream gap (the kernel dispatch, `dev_ns` includes it) + 2 us
        np.add.at(dev_total, it, dev_ns[lr] + 2_000)
    ub = out_e + dev_total + 100_000 + 2 * MODEL_RETURN_NS
    return Layout(rel_s, rel_e, host_end_rel, (in_b, in_e), (out_b, out_e), ub)


def finish(lay: Layout, dev_rel: np.ndarray, d2h_ns: np.ndarray) -> np.ndarray:
    """Each step's emulated length, given its device end (relative, without the output
    copy) and the output copy's device time; sets the OutputCopy span.

    GE runs a step synchronously: after the launches the host waits for the stream, then
    OutputCopy copies the fetched outputs back (the D2H task sits in its middle: issued
    half-way, LAUNCH_LATENCY later on the device) and ModelExecute returns with it (both end
    together, as the real analysis' nesting expects)."""
    from msprof_cli.device.scheduler import LAUNCH_LATENCY_NS
    out_b = np.maximum(lay.host_end_rel, dev_rel) + 1
    out_len = COPY_API_NS + 2 * (LAUNCH_LATENCY_NS + d2h_ns + 1_000)
    out_len = np.where(d2h_ns > 0, out_len, COPY_API_NS) + MODEL_RETURN_NS
    lay.out_copy = (out_b, out_b + out_len)
    return out_b + out_len


@dataclass
class PipelineState:
    """The last step of each (model, thread) of the chunks placed so far: its real end and
    its emulated length without its input wait (ns)."""

    last: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)


def pipeline_waits(model_id: np.ndarray, thread: np.ndarray, start: np.ndarray,
                   end: np.ndarray, agent: np.ndarray, emul_dur: np.ndarray, wait: np.ndarray,
                   production: np.ndarray, warmup: np.ndarray, state: PipelineState
                   ) -> np.ndarray:
    """Extra input wait (ns) per step of a chunk on the emulated system
    (docs/device-model.md 5.2, "input pipeline").

    A prefetched pipeline makes the next element while the consumer works; when the producer
    is the slower side it is never idle, so an element is ready `production` after the
    previous one was taken, and the consumer asks for it `busy + gap` after taking the previous
    one: its emulated step without the wait (`emul_dur - wait`) plus the measured host gap to
    this step.  A warm-up step (tracing, GE's compile on the real system) is host work of
    its real length: the producer had all of it.  The step waits `production - (busy + gap)`
    if that is positive; steps of other models or threads in between count with their
    emulated length.  The CPU run
    measured a smaller wait when its own slow steps gave the pipeline time; the emulated wait
    is never below the measured one (`wait`), so the result is what is added to it.  Steps of
    one model on one thread follow each other; the first of a chunk continues the chunk
    before (`state`).  An element made while the consumer was busier than the producer (a
    full buffer) makes the rule overstate the wait of the fast step after it by at most that
    slack; bursts deeper than one element are not simulated."""
    n = len(model_id)
    extra = np.zeros(n, np.int64)
    if not n:
        return extra
    start = np.asarray(start, np.int64)
    busy = np.maximum(np.asarray(emul_dur, np.int64) - wait, 0)
    if len(warmup) == n:
        busy = np.where(warmup, np.maximum(np.asarray(end, np.int64) - start, busy), busy)
    order = np.lexsort((start, thread, model_id))
    m, t = model_id[order].astype(np.int64), thread[order].astype(np.int64)
    s_ = start[order] - np.clip(agent[order], 0, None)
    first = np.r_[True, (m[1:] != m[:-1]) | (t[1:] != t[:-1])]
    prev_end = np.r_[0, end[order][:-1]].astype(np.int64)
    prev_busy = np.r_[0, busy[order][:-1]]
    # steps of other models / threads in between take their emulated length, not the CPU's
    by_time = np.argsort(start, kind="stable")
    pos = np.empty(n, np.int64)
    pos[by_time] = np.arange(n)
    shrink = np.cumsum(((np.asarray(end, np.int64) - start) - emul_dur)[by_time])
    p_sorted = pos[order]
    prev_pos = np.r_[0, p_sorted[:-1]]
    between = np.where(p_sorted - 1 > prev_pos,
                       shrink[np.maximum(p_sorted - 1, 0)] - shrink[prev_pos], 0)
    cycle = np.full(n, np.iinfo(np.int64).max // 4, np.int64)  # no previous step: no wait
    inner = ~first
    cycle[inner] = prev_busy[inner] + np.maximum(s_[inner] - prev_end[inner] - between[inner],
                                                 0)
    for i in np.flatnonzero(first).tolist():  # one per (model, thread) of the chunk
        got = state.last.get((int(m[i]), int(t[i])))
        if got is not None:
            cycle[i] = got[1] + max(int(s_[i]) - got[0], 0)
    modelled = np.maximum(production[order] - cycle, 0)
    extra[order] = np.maximum(modelled - wait[order], 0)
    last = np.r_[np.flatnonzero(first)[1:] - 1, n - 1]
    for i in last.tolist():
        j = int(order[i])
        state.last[(int(m[i]), int(t[i]))] = (int(end[j]), int(busy[j]))
    return extra


def shift_steps(lay: Layout, iter_row: np.ndarray, extra: np.ndarray) -> None:
    """Lengthen each step's input wait by `extra` (ns): everything after the wait (the
    launches, the device's work, the output copy) moves later by as much."""
    r = np.flatnonzero(iter_row >= 0)
    lay.op_rel_start[r] += extra[iter_row[r]]
    lay.op_rel_end[r] += extra[iter_row[r]]
    lay.host_end_rel += extra
    lay.in_copy = (lay.in_copy[0], lay.in_copy[1] + extra)
    lay.out_copy = (lay.out_copy[0] + extra, lay.out_copy[1] + extra)
    lay.upper_bound += extra


def outside(spans: list[tuple[int, int]], ev_start: np.ndarray, ev_end: np.ndarray,
            after: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The (begin, end) spans that begin at or after `after` and overlap none of the events
    [ev_start, ev_end] (the agent's work inside a step is already inside the step's replaced
    span; before `after` the time warp has placed its events already)."""
    if not spans:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    arr = np.asarray(spans, np.int64).reshape(-1, 2)
    arr = arr[arr[:, 0] >= after]
    b, e = arr[:, 0], np.maximum(arr[:, 1], arr[:, 0])
    if not len(ev_start):
        return b, e
    order = np.argsort(ev_start, kind="stable")
    starts = np.asarray(ev_start, np.int64)[order]
    reach = np.maximum.accumulate(np.asarray(ev_end, np.int64)[order])
    k = np.searchsorted(starts, e, side="right") - 1
    free = (k < 0) | (reach[np.maximum(k, 0)] < b)
    return b[free], e[free]


@dataclass
class TimeWarp:
    """Monotone map real host ns -> emulated host ns, state kept across chunks.

    Events (steps, eager ops) are real spans with an emulated span each; between events the
    emulated clock runs at the real rate, offset by `delta` (emulated - real)."""

    delta: int = 0  # offset after the last placed event
    _rs: list[np.ndarray] = field(default_factory=list)  # placed events of this chunk
    _re: list[np.ndarray] = field(default_factory=list)
    _es: list[np.ndarray] = field(default_factory=list)
    _ee: list[np.ndarray] = field(default_factory=list)
    _delta_before: int = 0

    def place(self, real_start: np.ndarray, real_end: np.ndarray, emul_dur: np.ndarray
              ) -> np.ndarray:
        """Emulated starts of events given in real-start order (each keeps the real gap to
        the previous one; an event overlapping the previous one keeps its real offset)."""
        real_start = np.asarray(real_start, np.int64)
        real_end = np.maximum(np.asarray(real_end, np.int64), real_start)
        emul_dur = np.asarray(emul_dur, np.int64)
        change = emul_dur - (real_end - real_start)
        delta = self.delta + np.r_[0, np.cumsum(change)[:-1]] if len(change) else \
            np.zeros(0, np.int64)
        es = real_start + delta
        self._delta_before = self.delta
        if len(change):
            self.delta = int(delta[-1] + change[-1])
        self._rs, self._re = [real_start], [real_end]
        self._es, self._ee = [es], [es + emul_dur]
        return es

    def __call__(self, t: np.ndarray) -> np.ndarray:
        """Emulated time of real times of the chunk last placed (and after it)."""
        t = np.asarray(t, np.int64)
        if not self._rs or not len(self._rs[0]):
            return t + self.delta
        rs, re_, es, ee = self._rs[0], self._re[0], self._es[0], self._ee[0]
        order = np.argsort(rs, kind="stable")
        rs, re_, es, ee = rs[order], re_[order], es[order], ee[order]
        idx = np.searchsorted(rs, t, side="right") - 1
        out = t + self._delta_before
        has = idx >= 0
        k = idx[has]
        tt = t[has]
        inside = tt <= re_[k]
        span = np.maximum(re_[k] - rs[k], 1)
        lin = es[k] + (tt - rs[k]) * (ee[k] - es[k]) // span
        after = tt + (ee[k] - re_[k])  # the offset after event k
        out[has] = np.where(inside, lin, after)
        return out
