"""Collective ops a traced step ran but TF's host tracer did not record (docs/collect.md).

`restore_collectives` puts back, from the step's static graph, the collectives missing from
a traced step: beside their observed sibling replicas, or at their place in the model's last
schedule, or next to the ops that consume them; with one process per rank, every collective
outside a conditional or loop body (the other ranks cannot finish without this one).
"""
from __future__ import annotations

import re

from msprof_cli.capture import OpRun
from msprof_cli.collect.converter_state import ConverterState
from msprof_cli.collect.op_shapes import attach_shapes
from msprof_cli.collect.tf_graphs import StaticGraph, StaticOp


COLLECTIVE_TYPES = ("CollectiveReduceV2", "CollectiveReduceV3", "CollectiveAllToAllV2",
                    "CollectiveAllToAllV3", "CollectiveGatherV2", "CollectiveBcastSendV2",
                    "CollectiveBcastRecvV2", "CollectiveReduce", "CollectiveGather",
                    "NcclAllReduce")


def restore_collectives(ops: list[OpRun], static: StaticGraph | None, state: ConverterState,
                        key: str, marker: tuple[int, int] | None = None) -> int:
    """Add the collective ops a traced step must have run but TF's tracer did not record.

    TF 2.21 runs collectives on `collective_ops/*` threads and its host tracer drops some of
    those events (seen: about 1 in 6 with 2 replicas, with and without sampling).  A step
    of a replicated graph cannot finish without every replica's collective, so a collective
    of the static graph that shares its scope with an observed one but is missing is put
    back, timed like the observed siblings (a ring all-reduce ends on all ranks together)."""
    if static is None:
        return 0
    seen = [o for o in ops if o.tf_type in COLLECTIVE_TYPES]
    if not seen:
        added = _restore_unseen_collectives(ops, static, state, key, marker)
    else:
        scopes = {o.name.rsplit("/", 1)[0] for o in seen}
        start = min(o.start_ns for o in seen)
        end = max(o.end_ns for o in seen)
        added = 0
        for name, sop in _missing_collectives(ops, static):
            if name.rsplit("/", 1)[0] in scopes:
                _put_back(ops, name, sop.type, start, end, seen[0].thread_id, static, state,
                          key)
                added += 1
    if state.multi_rank:
        added += _restore_rank_collectives(ops, static, state, key, marker)
    return added


_CONDITIONAL = re.compile(r"/(cond|then|else|body)(_\d+)?/")


def _restore_rank_collectives(ops: list[OpRun], static: StaticGraph, state: ConverterState,
                              key: str, marker: tuple[int, int] | None) -> int:
    """One process per rank (MultiWorkerMirroredStrategy): the other ranks cannot finish a
    step's collective without this rank, so every collective of the step's graph outside a
    conditional or loop body ran here, e.g. the root-level all-reduce of
    `strategy.reduce(...)` whose scope has no observed op.  A missing one is put back at its
    place in the model's last schedule (scaled to this step), else just before the first
    observed op that consumes it, else just after the last observed op."""
    if not ops:
        return 0
    observed = list(ops)
    sched = state.schedules.get(key)
    prior = {op[0]: (op[2], op[3]) for op in sched.ops if op[1] in COLLECTIVE_TYPES} \
        if sched is not None and marker is not None else {}
    added = 0
    for name, sop in _missing_collectives(observed, static):
        if _CONDITIONAL.search(name):
            continue
        if name in prior:
            start, end = _at_prior_place(prior[name], marker, sched.duration)
        else:
            users = [o.start_ns for o in observed
                     if name in getattr(static.ops.get(o.name), "producers", ())]
            if users:
                end = min(users)
                start = max((o.end_ns for o in observed if o.end_ns <= end), default=end)
            else:
                start = end = max(o.end_ns for o in observed)
        _put_back(ops, name, sop.type, start, end, observed[0].thread_id, static, state, key)
        added += 1
    return added


def _at_prior_place(prior: tuple[int, int], marker: tuple[int, int], duration: int
                    ) -> tuple[int, int]:
    """A collective's (start, end) at its place in the model's last schedule, scaled to the
    step marked by `marker`."""
    t0, t1 = marker
    scale = max(t1 - t0, 1) / duration
    s, e = prior
    return t0 + int(s * scale), t0 + int(max(e, s) * scale)


def _missing_collectives(ops: list[OpRun], static: StaticGraph) -> list[tuple[str, StaticOp]]:
    names = {o.name for o in ops}
    return [(name, sop) for name, sop in static.ops.items()
            if sop.type in COLLECTIVE_TYPES and name not in names]


def _put_back(ops: list[OpRun], name: str, tf_type: str, start: int, end: int, thread: int,
              static: StaticGraph, state: ConverterState, key: str) -> None:
    op = OpRun(name=name, tf_type=tf_type, start_ns=start, end_ns=end, thread_id=thread)
    attach_shapes(op, static, state, key)
    ops.append(op)


def _restore_unseen_collectives(ops: list[OpRun], static: StaticGraph, state: ConverterState,
                                key: str, marker: tuple[int, int] | None) -> int:
    """The tracer dropped *every* collective of a traced step (each replica's is lost about
    1 time in 6, so all of them in some steps: a step without its AllReduce in CI).  A
    collective of the static graph whose scope has observed ops is put back: at its place in
    the model's last schedule (scaled to this step), else just before the first observed op
    of its scope (the ops that consume the reduced gradients), after the op ending last
    before that."""
    if not ops:
        return 0
    observed = list(ops)  # anchors: the observed ops only, not the ones put back
    sched = state.schedules.get(key)
    prior = {op[0]: (op[2], op[3]) for op in sched.ops if op[1] in COLLECTIVE_TYPES} \
        if sched is not None and marker is not None else {}
    added = 0
    for name, sop in _missing_collectives(observed, static):
        scope = name.rsplit("/", 1)[0] + "/"
        in_scope = [o for o in observed if o.name.startswith(scope)]
        if not in_scope:
            continue
        if name in prior:
            start, end = _at_prior_place(prior[name], marker, sched.duration)
        else:
            end = min(o.start_ns for o in in_scope)
            start = max((o.end_ns for o in observed if o.end_ns <= end), default=end)
        _put_back(ops, name, sop.type, start, end, in_scope[0].thread_id, static, state, key)
        added += 1
    return added
