"""`msprof cluster`: what no single rank answers -- which rank, step or link is slow.

Built on the summary model (summary/build.py) of every rank: its main model's per-step series
(compute, communication and the communication not hidden behind compute, per step) and its
hccl_info sends per link.  Plain data out (`ClusterResult`), written by outputs.py.

Rules (docs/cluster.md):
* A rank is a device of a PROF dir: its `rank_id` (info.json), else its device id; a rank's
  main model is the one with the most iterations (the real tool's default model).
* Per rank and step (msprof-analyze's cluster_step_trace_time): Computing = the union of the
  op tasks in the step, Communication = the union of the HCCL executions, Overlapped = their
  intersection, Communication(Not Overlapped) = Communication - Overlapped, Free = Iteration
  Time - Computing - Communication(Not Overlapped).
* Slow rank: its median *working* step time (Iteration Time - Communication(Not Overlapped):
  the time it did not spend waiting for the others) exceeds the median of the other ranks' by
  more than 25 % and 0.5 ms.  The cause named is the component (Data Aug Bound: the input
  pipeline, measured on the host; Computing: device work; Free: host gaps) that grew most.
* Slow step: a step whose slowest rank took more than twice the median of the steps' slowest
  ranks and 1 ms more (a synchronous step lasts as long as its slowest rank).
* Slow link: for one communication op, a link whose bandwidth is below 70 % of the median of
  that op's links (links are compared op by op: their op mixes differ).
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from msprof_cli.summary import model as M

SLOW_RANK_RATIO, SLOW_RANK_US = 1.25, 500.0
SLOW_STEP_RATIO, SLOW_STEP_US = 2.0, 1000.0
SLOW_LINK_RATIO = 0.7


@dataclass
class RankStep:
    rank: int
    step: int
    iteration_time: float
    computing: float
    communication: float
    comm_not_overlapped: float
    overlapped: float
    free: float
    data_aug_bound: float | None


@dataclass
class RankStats:
    rank: int
    prof: str
    device_id: int
    model: str
    steps: int
    iteration_time: float  # medians over the steps, µs
    working: float
    computing: float
    communication: float
    comm_not_overlapped: float
    free: float
    data_aug_bound: float | None


@dataclass
class Link:
    src: int
    dst: int
    transport: str
    link: str
    count: int
    bytes: int
    time_us: float
    bandwidth_gbs: float | None
    ops: list[str] = field(default_factory=list)
    slow: bool = False


@dataclass
class ClusterResult:
    ranks: list[RankStats] = field(default_factory=list)
    steps: list[RankStep] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    per_op_links: list[tuple[str, M.LinkRow]] = field(default_factory=list)
    slow_ranks: list[int] = field(default_factory=list)
    slow_steps: list[tuple[int, int, float]] = field(default_factory=list)  # step, rank, us
    verdict: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _med(vals: list[float | None]) -> float | None:
    v = [x for x in vals if x is not None]
    return round(statistics.median(v), 3) if v else None


def ranks_of(summaries: list[M.Summary]) -> tuple[list[tuple[int, M.DeviceSummary]],
                                                 list[str]]:
    """(rank, device) of every device of every summary, by rank; warnings for guessed ranks."""
    out, warnings, seen = [], [], set()
    for s in summaries:
        for d in s.devices:
            rank = d.rank_id if d.rank_id >= 0 else d.device_id
            if rank in seen:
                new = max(seen) + 1
                warnings.append(f"{d.prof} device {d.device_id}: rank {rank} is already taken "
                                f"(no rank_id in its info.json?); counted as rank {new}")
                rank = new
            seen.add(rank)
            out.append((rank, d))
    return sorted(out, key=lambda x: x[0]), warnings


def main_model(d: M.DeviceSummary) -> M.ModelSummary | None:
    models = [m for m in d.models if m.model_id is not None and m.iterations]
    return max(models, key=lambda m: (m.iterations, -(m.model_id or 0))) if models else None


def _rank_rows(rank: int, d: M.DeviceSummary, m: M.ModelSummary) -> list[RankStep]:
    st = m.steps
    rows = []
    for i, step in enumerate(st.iteration_id):
        it, comp = st.iteration_time[i], st.compute[i]
        comm, exposed = st.communication[i], st.comm_not_overlapped[i]
        rows.append(RankStep(rank, step, it, comp, comm, exposed, round(comm - exposed, 3),
                             round(max(it - comp - exposed, 0.0), 3), st.data_aug_bound[i]))
    return rows


def analyse(summaries: list[M.Summary]) -> ClusterResult:
    res = ClusterResult()
    ranked, res.warnings = ranks_of(summaries)
    for rank, d in ranked:
        m = main_model(d)
        if m is None or m.steps is None:
            res.warnings.append(f"{d.prof} device {d.device_id} (rank {rank}): no iterations "
                                "in its step trace; it has no step breakdown")
            continue
        if m.drifted:
            res.warnings.append(
                f"{d.prof} device {d.device_id} (rank {rank}): iterations {m.drifted} took far "
                "longer on the host than the sampled steps they replay; what the rank waited "
                "for there was not measured, so a slow rank can hide in them: collect the job "
                "with --full-trace to measure every step")
        rows = _rank_rows(rank, d, m)
        res.steps += rows
        res.ranks.append(RankStats(
            rank=rank, prof=d.prof, device_id=d.device_id,
            model=f"{m.model_id}" + (f' "{m.name}"' if m.name else ""), steps=len(rows),
            iteration_time=_med([r.iteration_time for r in rows]),
            working=_med([r.iteration_time - r.comm_not_overlapped for r in rows]),
            computing=_med([r.computing for r in rows]),
            communication=_med([r.communication for r in rows]),
            comm_not_overlapped=_med([r.comm_not_overlapped for r in rows]),
            free=_med([r.free for r in rows]),
            data_aug_bound=_med([r.data_aug_bound for r in rows])))
        res.per_op_links += [(d.prof, ln) for ln in d.links]
    res.links = _links([ln for _, ln in res.per_op_links])
    _slow_ranks(res)
    _slow_steps(res)
    _slow_links(res)
    return res


def _links(rows: list[M.LinkRow]) -> list[Link]:
    by: dict[tuple, Link] = {}
    for r in rows:
        k = (r.src_rank, r.dst_rank, r.transport, r.link)
        ln = by.setdefault(k, Link(r.src_rank, r.dst_rank, r.transport, r.link, 0, 0, 0.0,
                                   None))
        ln.count += r.count
        ln.bytes += r.bytes
        ln.time_us = round(ln.time_us + r.time_us, 3)
        if r.op_name not in ln.ops:
            ln.ops.append(r.op_name)
    for ln in by.values():
        ln.bandwidth_gbs = round(ln.bytes / (ln.time_us * 1000), 4) if ln.time_us else None
    return sorted(by.values(), key=lambda x: (x.src, x.dst, x.transport))


def _slow_ranks(res: ClusterResult) -> None:
    if not res.ranks:
        res.verdict.append("No rank has iterations in its step trace (single-op / eager runs "
                           "have none): there is no step breakdown to compare.")
        return
    if len(res.ranks) < 2:
        if res.ranks:
            res.verdict.append("One rank only: there is no other rank to compare it with.")
        return
    parts = {"data_aug_bound": "its input pipeline (Data Aug Bound, measured on the host): "
                               "its tf.data pipeline does not keep up",
             "computing": "device compute (emulated from its ops' shapes): it runs more or "
                          "bigger ops than the others",
             "free": "host gaps between its device work (Python, callbacks, launches)"}
    for r in res.ranks:
        others = [o for o in res.ranks if o.rank != r.rank]
        ref = statistics.median(o.working for o in others)
        if r.working > ref * SLOW_RANK_RATIO and r.working - ref > SLOW_RANK_US:
            res.slow_ranks.append(r.rank)
            diffs = {k: (getattr(r, k) or 0.0) - statistics.median(
                (getattr(o, k) or 0.0) for o in others) for k in parts}
            # the input wait is inside Free too (Free is whatever is not device work): the
            # input pipeline is named when it explains at least half the difference
            extra = r.working - ref
            cause = "data_aug_bound" if diffs["data_aug_bound"] >= 0.5 * extra else \
                "computing" if diffs["computing"] >= 0.5 * extra else "free"
            res.verdict.append(
                f"Rank {r.rank} ({r.prof}, device {r.device_id}) is the slow rank: it works "
                f"{r.working / 1000:.3f} ms a step (median, Iteration Time minus the "
                f"communication wait) against {ref / 1000:.3f} ms for the other ranks. The "
                f"difference is mostly {parts[cause]} (+{diffs[cause] / 1000:.3f} ms a step).")
    if not res.slow_ranks:
        res.verdict.append(f"No slow rank: the {len(res.ranks)} ranks' working step times are "
                           "within 25 % of each other.")


def _slow_steps(res: ClusterResult) -> None:
    """A synchronous step lasts as long as its slowest rank: the steps whose slowest rank
    took more than twice the median of those maxima (and 1 ms more)."""
    worst: dict[int, RankStep] = {}
    for s in res.steps:
        if s.step not in worst or s.iteration_time > worst[s.step].iteration_time:
            worst[s.step] = s
    if not worst:
        return
    med = statistics.median(s.iteration_time for s in worst.values())
    slow = sorted((s for s in worst.values() if s.iteration_time > med * SLOW_STEP_RATIO
                   and s.iteration_time - med > SLOW_STEP_US), key=lambda s: -s.iteration_time)
    res.slow_steps = [(s.step, s.rank, s.iteration_time) for s in slow]
    if slow:
        listed = ", ".join(f"step {s.step} ({s.iteration_time / 1000:.3f} ms on rank {s.rank})"
                           for s in slow[:5])
        res.verdict.append(f"{len(slow)} slow step(s), over twice the median step of the job "
                           f"({med / 1000:.3f} ms, its slowest rank's): {listed}"
                           + (" ..." if len(slow) > 5 else "") + ".")


def _slow_links(res: ClusterResult) -> None:
    """Links compared op by op (the same collective moves the same sizes on every link; a
    link's overall bandwidth depends on its op mix: small broadcasts are latency bound)."""
    per_op: dict[str, dict[tuple[int, int], list[float]]] = {}
    for _, ln in res.per_op_links:
        got = per_op.setdefault(ln.op_name, {}).setdefault((ln.src_rank, ln.dst_rank), [0, 0.0])
        got[0] += ln.bytes
        got[1] += ln.time_us
    slow: dict[tuple[int, int], list[str]] = {}
    for op, links in per_op.items():
        bw = {k: b / (t * 1000) for k, (b, t) in links.items() if t > 0}
        if len(bw) < 2:
            continue
        med = statistics.median(bw.values())
        for k, v in bw.items():
            if v < med * SLOW_LINK_RATIO:
                slow.setdefault(k, []).append(f"{op}: {v:.3f} GB/s against a median of "
                                              f"{med:.3f} GB/s")
    for ln in res.links:
        why = slow.get((ln.src, ln.dst))
        if why:
            ln.slow = True
            res.verdict.append(f"Link {ln.src} -> {ln.dst} ({ln.transport}/{ln.link}) is slow: "
                               + "; ".join(why[:3]) + ("; ..." if len(why) > 3 else "") + ".")
    if res.links and not any(ln.slow for ln in res.links):
        res.verdict.append(f"No slow link among the {len(res.links)} links (each op's links "
                           "compared with each other).")
