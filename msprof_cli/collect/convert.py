"""Turn one chunk of trace events + Python step records into a `CaptureChunk`.

Join rules (tensorflow-capture.md 6.1, 8):
* a step marker (`msprof_step{seq}`) encloses, on its own thread, the eager function call
  (`EagerLocalExecute: __inference_<fn>_<uid>` = the graph key) and its `FunctionRun{id}`;
  every op event of that execution sits inside an `ExecutorState::Process{id}` with the
  same id, on whatever thread ran it;
* TF1 `Session.run` has no run id: the Process ids that start inside the marker interval
  (on executor threads) are the run's ids (runs are synchronous);
* `Process{id=-1}` is constant folding while a graph is built: dropped;
* ops on `tf_data*` threads are the input pipeline (host side): dropped, counted in notes;
* eager ops (`EagerLocalExecute: <Op>`, timed by their `EagerKernelExecute`) belong to the
  step whose marker encloses them, else they are single ops;
* unsampled executions (no marker in the trace) replay the op schedule of the last sampled
  execution of the same graph, anchored at their own start and end (section 13).
"""
from __future__ import annotations

import bisect
import os
import re
from dataclasses import dataclass, field

from msprof_cli.capture import (DTYPE_BYTES, CaptureChunk, Iteration, ModelInfo, OpRun,
                                        TensorSpec)
from msprof_cli.collect import eager_shapes
from msprof_cli.collect.records import ExecRecord
from msprof_cli.collect.tf_graphs import (CALL_OPS, CONTROL_FLOW_OPS, DATA_SOURCES, OpShape,
                                          StaticGraph, StaticOp, data_edges, lowered_name,
                                          replica_of_name, resolve)
from msprof_cli.collect.xspace import Event, Trace

# eager ops that only create handles, constants or input-pipeline objects on the host
HOST_EAGER_OPS = frozenset({"_EagerConst", "VarHandleOp", "DestroyResourceOp", "VarIsInitializedOp",
                            "AnonymousIteratorV3", "AnonymousIteratorV2", "DeleteIterator",
                            "MakeIterator", "IteratorGetNext", "OptionsDataset",
                            "AnonymousMultiDeviceIteratorV3", "MultiDeviceIteratorInit",
                            "ReadVariableOp", "Identity", "NoOp"})
DATA_LINE_PREFIX = "tf_data"


def is_host_eager(op_type: str) -> bool:
    return op_type in HOST_EAGER_OPS or op_type.endswith(("Dataset", "DatasetV2", "DatasetV3"))


@dataclass
class Schedule:
    """Op schedule of one sampled execution, times relative to its start (plain tuples in
    OpRun field order: replay builds thousands of OpRuns per second, so it must be cheap)."""

    duration: int
    ops: list[tuple]
    version: int = 0  # static graph version the shapes came from
    input_wait: int = 0  # measured input wait of the sampled step (ns)


@dataclass
class ConverterState:
    """What survives from chunk to chunk within one collection (one PROF dir)."""

    pid: int = field(default_factory=os.getpid)
    main_thread_id: int = 0
    model_ids: dict[str, int] = field(default_factory=dict)
    models: dict[int, ModelInfo] = field(default_factory=dict)
    iteration_counts: dict[int, int] = field(default_factory=dict)
    thread_ids: dict[str, int] = field(default_factory=dict)
    schedules: dict[str, Schedule] = field(default_factory=dict)
    shape_caches: dict[str, dict[tuple[str, str], OpShape]] = field(default_factory=dict)
    fp_bp_done: set[int] = field(default_factory=set)
    # steps_per_execution > 1: per graph key, the schedule of each step of a sampled call
    sub_schedules: dict[str, list[Schedule]] = field(default_factory=dict)
    # the batch each graph's steps received (unknown dims resolved, _step_batch) and the
    # specs rewritten with it
    batches: dict[str, int] = field(default_factory=dict)
    batch_shapes: dict[tuple, tuple] = field(default_factory=dict)
    # this process is one rank of a multi-process job (MultiWorkerMirroredStrategy, ...):
    # every collective of a step's graph ran (`_restore_collectives`)
    multi_rank: bool = False

    def model_id(self, key: str, name: str) -> int:
        mid = self.model_ids.get(key)
        if mid is None:
            mid = len(self.model_ids) + 1
            self.model_ids[key] = mid
            self.models[mid] = ModelInfo(model_id=mid, name=name, graph_key=key)
        return mid

    def next_index(self, model_id: int) -> int:
        n = self.iteration_counts.get(model_id, 0) + 1
        self.iteration_counts[model_id] = n
        return n

    def thread_id(self, line_name: str) -> int:
        """A stable, OS-like id per TF thread (TF ids are 64-bit hashes, not tids)."""
        tid = self.thread_ids.get(line_name)
        if tid is None:
            tid = (self.pid + 1 + len(self.thread_ids)) & 0x7FFFFFFF
            self.thread_ids[line_name] = tid
        return tid


@dataclass
class GraphRegistry:
    """Static graph maps by key (filled by the step hooks, read by the converter)."""

    graphs: dict[str, StaticGraph] = field(default_factory=dict)


def _interval_events(starts: list[int], events: list[Event], lo: int, hi: int) -> list[Event]:
    i = bisect.bisect_left(starts, lo)
    j = bisect.bisect_right(starts, hi)
    return events[i:j]


def convert(trace: Trace | None, records: list[ExecRecord], state: ConverterState,
            registry: GraphRegistry, *, fallback_offset_ns: int, fp_point: str = "",
            bp_point: str = "", eager_specs: list | None = None) -> CaptureChunk:
    chunk = CaptureChunk()
    by_seq = {r.seq: r for r in records}
    ops_by_seq: dict[int, list[OpRun]] = {}
    waits: list[tuple[int, int]] = []  # input waits (start, end) on tf_data threads
    batches: list[tuple[int, int]] = []  # (time, bytes) of the batches the iterator delivered
    markers: dict[int, Event] = {}
    graph_of_seq: dict[int, str] = {}
    dropped_data = dropped_unknown = expanded_clusters = 0
    restored_collectives = 0
    # steps_per_execution > 1: loop iteration (ExecutorState::Process iter_num) of the ops
    split_seqs = {r.seq for r in records if r.sub_steps > 1}
    iter_of: dict[int, int] = {}  # id(OpRun) -> iter_num, only for ops of split_seqs

    if trace is not None:
        offset = fallback_offset_ns
        for ev in trace.events:
            if ev.kind == "anchor" and ev.stats and ev.stats.get("mono"):
                offset = int(ev.stats["mono"]) - ev.start
                break
        per_line: dict[int, list[Event]] = {}
        for ev in trace.events:
            ev.start += offset
            ev.end += offset
            per_line.setdefault(ev.line, []).append(ev)
        starts_of: dict[int, list[int]] = {}
        for line, evs in per_line.items():
            evs.sort(key=lambda e: e.start)
            starts_of[line] = [e.start for e in evs]

        run_to_seq: dict[int, int] = {}
        line_thread: dict[int, int] = {}
        marker_spans: list[tuple[int, int, int]] = []  # (start, end, seq)
        for line, evs in per_line.items():
            for m in evs:
                if m.kind != "marker" or not m.stats:
                    continue
                try:
                    seq = int(m.stats.get("seq"))
                except (TypeError, ValueError):
                    continue
                rec = by_seq.get(seq)
                if rec is None:
                    continue
                markers[seq] = m
                marker_spans.append((m.start, m.end, seq))
                line_thread[line] = rec.thread_id
                inner = _interval_events(starts_of[line], evs, m.start, m.end)
                for ev in inner:
                    if ev.kind == "fn" and seq not in graph_of_seq:
                        if not rec.fn_name or re.match(rf"__inference_{re.escape(rec.fn_name)}_\d+$",
                                                       ev.name):
                            graph_of_seq[seq] = ev.name
                    elif ev.kind == "run" and ev.stats and ev.stats.get("id") is not None:
                        run_to_seq.setdefault(int(ev.stats["id"]), seq)
                if seq not in graph_of_seq:
                    for ev in inner:
                        if ev.kind == "fn":
                            graph_of_seq[seq] = ev.name
                            break
        marker_spans.sort()
        span_starts = [s for s, _, _ in marker_spans]

        def seq_at(t: int) -> int | None:
            i = bisect.bisect_right(span_starts, t) - 1
            while i >= 0:
                s, e, seq = marker_spans[i]
                if s <= t <= e:
                    return seq
                if e < t and i < len(marker_spans) - 1:
                    break
                i -= 1
            return None

        # TF1: Process ids starting inside a session-run marker belong to that run
        for line, evs in per_line.items():
            if trace.lines[line].startswith(DATA_LINE_PREFIX):
                continue
            for ev in evs:
                if ev.kind != "proc" or not ev.stats:
                    continue
                pid_ = int(ev.stats.get("id", -1))
                if pid_ == -1 or pid_ in run_to_seq:
                    continue
                seq = seq_at(ev.start)
                if seq is not None and by_seq[seq].kind == "tf1":
                    run_to_seq[pid_] = seq

        for line, evs in per_line.items():
            lname = trace.lines[line]
            is_data = lname.startswith(DATA_LINE_PREFIX)
            if lname == "python" or lname.startswith("python"):
                tid = line_thread.get(line) or state.main_thread_id or state.thread_id(lname)
            else:
                tid = state.thread_id(lname)
            procs: list[Event] = []  # enclosing ExecutorState::Process events (a stack)
            kexec_starts = [e.start for e in evs if e.kind == "kexec"]
            kexecs = [e for e in evs if e.kind == "kexec"]
            for ev in evs:
                if ev.kind == "wait":
                    waits.append((ev.start, ev.end))
                    size = (ev.stats or {}).get("element_size")
                    if isinstance(size, int) and size > 0:
                        batches.append((ev.start, size))
                    continue
                if ev.kind == "proc":
                    while procs and procs[-1].end < ev.start:
                        procs.pop()
                    procs.append(ev)
                    continue
                if ev.kind == "op":
                    while procs and procs[-1].end < ev.start:
                        procs.pop()
                    proc = procs[-1] if procs else None
                    if is_data:
                        dropped_data += 1
                        continue
                    seq = None
                    in_proc = proc is not None and proc.start <= ev.start <= proc.end
                    pid_ = int(proc.stats.get("id", -1)) if in_proc and proc.stats else None
                    if pid_ == -1:
                        continue  # constant folding during graph building
                    if pid_ is not None:
                        seq = run_to_seq.get(pid_)
                    if seq is None:
                        seq = seq_at(ev.start)
                    op = OpRun(name=ev.name, tf_type=ev.tf_type, start_ns=ev.start,
                               end_ns=max(ev.end, ev.start), thread_id=tid)
                    if seq is None:
                        _attach_shapes(op, None, state)
                        chunk.single_ops.append(op)
                        dropped_unknown += 1
                    else:
                        ops_by_seq.setdefault(seq, []).append(op)
                        if seq in split_seqs and in_proc and proc.stats:
                            iter_of[id(op)] = int(proc.stats.get("iter_num") or 0)
                elif ev.kind == "eager":
                    if is_host_eager(ev.name):
                        continue
                    start, end = ev.start, ev.end
                    k = bisect.bisect_left(kexec_starts, ev.start)
                    if k < len(kexecs) and kexecs[k].start <= ev.end:
                        start, end = kexecs[k].start, kexecs[k].end
                    op = OpRun(name=ev.name, tf_type=ev.name, start_ns=start, end_ns=end,
                               thread_id=tid, eager=True)
                    seq = seq_at(ev.start)
                    if seq is None:
                        chunk.single_ops.append(op)
                    else:
                        ops_by_seq.setdefault(seq, []).append(op)
        if dropped_data:
            chunk.notes.append(f"{dropped_data} op events of the tf.data input pipeline "
                               "(host threads) were not sent to the device")
        if dropped_unknown:
            chunk.notes.append(f"{dropped_unknown} graph ops ran outside any recorded step "
                               "(e.g. a ConcreteFunction called directly): kept as single ops")

    if eager_specs:  # shapes of the traced eager ops, from TF's op callbacks
        eager_shapes.match(chunk.single_ops + [o for ops_ in ops_by_seq.values() for o in ops_],
                           eager_specs)
    waits.sort()
    batches.sort()
    wait_of = _input_waits(waits, markers)
    used_models: set[int] = set()
    for rec in sorted(records, key=lambda r: r.seq):
        key = graph_of_seq.get(rec.seq) or rec.model_key
        if key is None:
            key = f"{rec.kind}:{rec.fn_name or rec.name}"
        static = registry.graphs.get(rec.static_key or key)
        mid = state.model_id(key, rec.name)
        used_models.add(mid)
        marker = markers.get(rec.seq)
        if marker is not None:
            ops = sorted(ops_by_seq.get(rec.seq, []), key=lambda o: (o.start_ns, o.name))
            ops, compiled = _expand_compiled(ops, static, key)
            expanded_clusters += compiled
            for op in ops:
                _attach_shapes(op, static, state, key)
            restored = _restore_collectives(ops, static, state, key,
                                            (marker.start, marker.end))
            lo = bisect.bisect_left(batches, (marker.start, -1))
            hi = bisect.bisect_right(batches, (marker.end, 1 << 62))
            batch = _step_batch(static, [b for _, b in batches[lo:hi]], state, key)
            if batch:
                for op in ops:
                    _with_batch(op, batch, state)
            if restored:
                restored_collectives += restored
                ops.sort(key=lambda o: (o.start_ns, o.name))
            start, end = marker.start, marker.end
            if rec.sub_steps > 1:
                parts = split_steps(ops, iter_of, start, end)
                for k_, (s_, e_, o_) in enumerate(parts):
                    chunk.iterations.append(Iteration(
                        model_id=mid, index=state.next_index(mid), start_ns=s_, end_ns=e_,
                        thread_id=rec.thread_id, ops=o_,
                        input_wait_ns=_wait_in(waits, s_, e_),
                        agent_before_ns=0 if k_ else rec.agent_before_ns))
                if ops and (not rec.traced_now or key not in state.sub_schedules):
                    state.sub_schedules[key] = [_schedule(o_, s_, e_, static)
                                                for s_, e_, o_ in parts]
                if ops and mid not in state.fp_bp_done:
                    _fp_bp(state.models[mid], ops, static, fp_point, bp_point, chunk)
                    state.fp_bp_done.add(mid)
                if batch:
                    _model_batch(state.models[mid], batch, state)
                continue
            it = Iteration(model_id=mid, index=state.next_index(mid), start_ns=start,
                           end_ns=end, thread_id=rec.thread_id, ops=ops,
                           input_wait_ns=wait_of.get(rec.seq, 0),
                           agent_before_ns=rec.agent_before_ns)
            if ops and (not rec.traced_now or key not in state.schedules):
                state.schedules[key] = Schedule(max(end - start, 1), [
                    (o.name, o.tf_type, o.start_ns - start, o.end_ns - start, o.thread_id,
                     o.inputs, o.outputs, o.fused_ops, o.device_id, o.eager) for o in ops],
                    static.version if static is not None else 0, it.input_wait_ns)
            if ops and mid not in state.fp_bp_done:
                _fp_bp(state.models[mid], ops, static, fp_point, bp_point, chunk)
                state.fp_bp_done.add(mid)
            if batch:
                _model_batch(state.models[mid], batch, state)
        elif rec.sub_steps > 1:
            _replay_split(chunk, state, key, mid, rec, static)
            continue
        else:
            sched = state.schedules.get(key)
            it = Iteration(model_id=mid, index=state.next_index(mid), start_ns=rec.start_ns,
                           end_ns=max(rec.end_ns, rec.start_ns), thread_id=rec.thread_id,
                           replayed=True, ops=_replay(sched, rec),
                           input_wait_ns=_replay_wait(sched, rec),
                           agent_before_ns=rec.agent_before_ns)
            if static is not None and sched is not None and sched.version != static.version:
                for op in it.ops:  # shapes improved since the sample (TF1 shape run)
                    _attach_shapes(op, static, state, key)
        chunk.iterations.append(it)
    for mid in used_models:
        chunk.models[mid] = state.models[mid]
    if expanded_clusters:
        chunk.notes.append(f"{expanded_clusters} executions of XLA-compiled functions were "
                           "replaced by their graph's ops (costed as GE compiles the TF graph; "
                           "their host times inside the cluster are not measured)")
    unknown = sum(1 for it in chunk.iterations for o in it.ops if _has_unknown(o)) + \
        sum(1 for o in chunk.single_ops if _has_unknown(o))
    if unknown:
        chunk.notes.append(f"{unknown} op executions keep unknown (-1) dimensions: each such "
                           "dimension is costed as 32 elements (docs/device-model.md 3)")
    if restored_collectives:
        chunk.notes.append(f"{restored_collectives} collective op events missing from TF's trace "
                           "were restored from the graph (timed like their replica siblings, or "
                           "from the model's last schedule when all were missing)")
    return chunk


COLLECTIVE_TYPES = ("CollectiveReduceV2", "CollectiveReduceV3", "CollectiveAllToAllV2",
                    "CollectiveAllToAllV3", "CollectiveGatherV2", "CollectiveBcastSendV2",
                    "CollectiveBcastRecvV2", "CollectiveReduce", "CollectiveGather",
                    "NcclAllReduce")


def _restore_collectives(ops: list[OpRun], static: StaticGraph | None, state: ConverterState,
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
    _attach_shapes(op, static, state, key)
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


def _attach_shapes(op: OpRun, static: StaticGraph | None, state: ConverterState,
                   key: str = "") -> None:
    version = static.version if static is not None else 0
    shape = resolve(static, op.name, op.tf_type,
                    state.shape_caches.setdefault(f"{key}@{version}", {}))
    if shape is not None:
        op.inputs, op.outputs, op.fused_ops = shape.inputs, shape.outputs, shape.fused_ops
    # replica = the op's placement; else MirroredStrategy's `replica_N/` scope; else device 0
    dev = shape.device if shape is not None else -1
    if dev < 0:
        dev = replica_of_name(op.name)
    op.device_id = max(dev, 0)


def _replay(schedule: Schedule | None, rec: ExecRecord) -> list[OpRun]:
    if schedule is None:
        return []
    t0 = rec.start_ns
    scale = max(rec.end_ns - t0, 1) / schedule.duration
    return [OpRun(name, typ, t0 + int(s * scale), t0 + int(max(e, s) * scale), tid, ins, outs,
                  fused, dev, eager)
            for name, typ, s, e, tid, ins, outs, fused, dev, eager in schedule.ops]


# executor plumbing of a graph walk: no op of its own on the device or the host
_PLUMBING = frozenset({"_Arg", "_Retval", "_DeviceArg", "_DeviceRetval", "NoOp", "_Send",
                       "_Recv", "_HostSend", "_HostRecv"})


def _expand_compiled(ops: list[OpRun], static: StaticGraph | None, key: str
                     ) -> tuple[list[OpRun], int]:
    """A `jit_compile=True` step: TF's tracer reports the XLA cluster as one op named after
    the function (its ops run as compiled thunks).  GE compiles the TF graph itself (it does
    not use XLA), so the cluster is replaced by the function graph's ops in topological
    order, each with its static shapes (attached later by name), sharing the cluster's span
    (host times inside a step do not matter to the time model).  Returns (ops, clusters)."""
    if static is None or not any(o.tf_type == key for o in ops):
        return ops, 0
    body = sorted(((n, sop) for n, sop in static.ops.items() if sop.type not in _PLUMBING),
                  key=lambda kv: static.order.get(kv[0], 0))
    out: list[OpRun] = []
    clusters = 0
    for op in ops:
        if op.tf_type != key or not body:
            out.append(op)
            continue
        clusters += 1
        n, span = len(body), max(op.end_ns - op.start_ns, 0)
        for i, (name, sop) in enumerate(body):
            out.append(OpRun(name, sop.type, op.start_ns + span * i // n,
                             op.start_ns + span * (i + 1) // n, op.thread_id,
                             device_id=op.device_id))
    return out, clusters


def _has_unknown(op: OpRun) -> bool:
    return any(d < 0 for t in op.inputs + op.outputs for d in t.shape)


def _dtype_size(dtype: str) -> int | None:
    """Bytes per element of a dense dtype (strings and handles have no fixed size here)."""
    return None if dtype in ("string", "resource", "variant") else DTYPE_BYTES.get(dtype)


def _step_batch(static: StaticGraph | None, sizes: list[int], state: ConverterState,
                key: str) -> int | None:
    """The batch size a step really received, when its graph left it unknown (Keras traces
    the batch dimension as -1): the bytes of the element TF's iterator delivered
    (`IteratorGetNextOp::DoCompute` element_size) = batch x the bytes of one sample of the
    graph's input tensors (exactly one unknown dimension each).  None if it cannot tell."""
    if static is None or not sizes:
        return None
    feeds = [t for name in static.inputs if (op := static.ops.get(name)) is not None
             and op.type in DATA_SOURCES for t in op.outputs
             if t.dtype not in ("resource", "variant")]
    unknown = [t for t in feeds if any(d < 0 for d in t.shape)]
    if not unknown or any(sum(d < 0 for d in t.shape) != 1 for t in unknown):
        return None
    per_sample = fixed = 0
    for t in feeds:
        size = _dtype_size(t.dtype)
        if size is None:
            return None
        n = size
        for d in t.shape:
            n *= d if d >= 0 else 1
        if t in unknown:
            per_sample += n
        else:
            fixed += n
    for size in sizes:
        batch, rest = divmod(size - fixed, per_sample) if per_sample else (0, 1)
        if rest == 0 and batch > 0:
            state.batches[key] = batch
            return batch
    return None


def _model_batch(model: ModelInfo, batch: int, state: ConverterState) -> None:
    """The model's host<->device copies with the real batch (after `_transfers`)."""
    probe = OpRun("", "", 0, 0, 0, model.feeds, model.fetches)
    _with_batch(probe, batch, state)
    model.feeds, model.fetches = probe.inputs, probe.outputs


def _with_batch(op: OpRun, batch: int, state: ConverterState) -> None:
    """Unknown dimensions of a step's op = the batch its input delivered (documented rule,
    docs/collect.md: Keras / tf.data leave only the batch dimension unknown)."""
    if not _has_unknown(op):
        return
    k = (op.inputs, op.outputs, batch)
    hit = state.batch_shapes.get(k)
    if hit is None:
        def fix(specs: tuple[TensorSpec, ...]) -> tuple[TensorSpec, ...]:
            return tuple(TensorSpec(tuple(batch if d < 0 else d for d in t.shape), t.dtype,
                                    t.format) if any(d < 0 for d in t.shape) else t
                         for t in specs)
        hit = state.batch_shapes[k] = (fix(op.inputs), fix(op.outputs))
    op.inputs, op.outputs = hit


def _replay_wait(schedule: Schedule | None, rec: ExecRecord) -> int:
    """Input wait of a replayed step: the sampled step's, scaled to this step's length like
    its ops (the tracer is off, so the wait itself is not measured)."""
    if schedule is None or not schedule.input_wait:
        return 0
    scale = max(rec.end_ns - rec.start_ns, 1) / schedule.duration
    return min(int(schedule.input_wait * scale), max(rec.end_ns - rec.start_ns, 0))


def _wait_in(waits: list[tuple[int, int]], start: int, end: int) -> int:
    """Input wait inside [start, end]: the union of the GetNext spans (`waits`, sorted by
    start), clipped to it.  A GetNext that began before the step is found by going back
    from the first one starting inside it while spans still reach the step."""
    i = bisect.bisect_left(waits, (start, -1))
    j = bisect.bisect_right(waits, (end, 1 << 62))
    while i > 0 and waits[i - 1][1] > start:
        i -= 1
    spans = [(max(s, start), min(e, end)) for s, e in waits[i:j] if s < end and e > start]
    total, reach = 0, start
    for s, e in spans:
        s = max(s, reach)
        if e > s:
            total += e - s
            reach = e
    return total


def _input_waits(waits: list[tuple[int, int]], markers: dict[int, Event]) -> dict[int, int]:
    """Input wait of each traced step (its marker's span)."""
    if not waits:
        return {}
    return {seq: w for seq, m in markers.items() if (w := _wait_in(waits, m.start, m.end))}


def _fp_bp(model: ModelInfo, ops: list[OpRun], static: StaticGraph | None, fp_point: str,
           bp_point: str, chunk: CaptureChunk) -> None:
    """FP/BP ops of a model (step-trace-and-advice.md 4); project mapping in docs/collect.md."""
    if static is not None:
        model.op_order = dict(static.order)
        model.producers = data_edges(static)
    names = {o.name for o in ops}
    if fp_point:
        if fp_point in names or any(fp_point in o.fused_ops for o in ops):
            model.fp_op = fp_point
        else:
            chunk.notes.append("First forward op name can't be found in graph for training "
                               f"trace. ({fp_point!r}, model {model.name})")
    if bp_point:
        if bp_point in names or any(bp_point in o.fused_ops for o in ops):
            model.bp_op = bp_point
        else:
            chunk.notes.append("Last backward op name can't be found in graph for training "
                               f"trace. ({bp_point!r}, model {model.name})")
    if static is None:
        return
    _transfers(model, static)
    order = static.order
    big = len(order) + 1
    # runtime names of ops in lowered While/If bodies carry `/_<N>/`: static names without
    static_name = {o.name: lowered_name(o.name) for o in ops}
    if not fp_point:
        feeds = _data_consumers(static)
        cands = [o for o in ops if (static_name[o.name] in feeds or
                 any(f in feeds for f in o.fused_ops)) and not _host_only(o.tf_type)]
        if cands:
            model.fp_op = min(cands, key=lambda o: order.get(static_name[o.name], big)).name
    if not bp_point:
        grads = [o for o in ops if ("gradient" in o.name) and static_name[o.name] in order]
        if grads:
            model.bp_op = max(grads, key=lambda o: order[static_name[o.name]]).name


def _transfers(model: ModelInfo, static: StaticGraph) -> None:
    """Host<->device copies of a step (docs/device-model.md 5.1): feeds = outputs of the graph's
    data sources, except a called body's arguments (they repeat their caller's source);
    fetches = the top-level graph's return values."""
    calls = {n + "/" for n, op in static.ops.items()
             if op.type in CALL_OPS or op.type in CONTROL_FLOW_OPS}
    feeds = []
    for name in sorted(static.inputs, key=lambda n: static.order.get(n, 0)):
        op = static.ops.get(name)
        if op is None or (op.type not in DATA_SOURCES
                          and any(name.startswith(c) for c in calls)):
            continue
        feeds.extend(op.outputs)
    model.feeds = tuple(feeds)
    fetches = [t for t in static.outputs if t.dtype != "variant"]
    if any(t.dtype == "variant" for t in static.outputs):
        # Keras 3 returns its logs wrapped in an Optional (a variant handle): what is copied
        # back are the values the top-level OptionalFromValue ops wrap
        for name, op in static.ops.items():
            if op.type == "OptionalFromValue" and not any(name.startswith(c) for c in calls):
                fetches.extend(t for t in op.inputs if t.dtype not in ("resource", "variant"))
    model.fetches = tuple(fetches)


# data-handling ops that read the input but launch no device task (FP must be a compute op)
_HOST_DATA_OPS = frozenset({"Identity", "Shape", "ShapeN", "Size", "Rank", "StridedSlice"})


def _host_only(tf_type: str) -> bool:
    return tf_type in _HOST_DATA_OPS or tf_type.startswith(("Optional", "Iterator"))


def _data_consumers(static: StaticGraph) -> set[str]:
    """Ops reading the graph's input data (directly or through untraced host ops)."""
    sources = set(static.inputs)
    out: set[str] = set()
    passthrough = {"Identity", "Cast", "Reshape", "ExpandDims", "Squeeze", "OptionalGetValue",
                   "OptionalFromValue"}
    for _ in range(3):
        grew = False
        for name, op in static.ops.items():
            if any(p in sources for p in op.producers):
                if op.type in passthrough and name not in sources:
                    sources.add(name)
                    grew = True
                out.add(name)
        if not grew:
            break
    return out


# --- steps_per_execution > 1 (Keras multi-step calls) ----------------------------------------
# Keras 3 runs `steps_per_execution` training steps per train_function call in one tf.while_loop
# (`multi_step_on_iterator`).  Lowered by Grappler, the step's ops are named `while/body/_N/...`
# and each ExecutorState::Process event carries the loop iteration (`iter_num`) of the frame
# that ran it.  Ops with exactly one `while/body/` level are in that loop's frame, so their
# iter_num is the step.  Ops of nested loops (a model's own while loop: iter_num is the inner
# loop's) and the loop setup outside the body are assigned by time to the step whose first
# outer-frame op started last before them.
_LOOP_BODY = re.compile(r"(?:^|/)while(?:_\d+)?/body/")


def split_steps(ops: list[OpRun], iter_of: dict[int, int], start: int, end: int
                ) -> list[tuple[int, int, list[OpRun]]]:
    """Split one multi-step call into (start, end, ops) per step (see above)."""
    firsts: dict[int, int] = {}
    step_of: dict[int, int] = {}
    for op in ops:
        k = iter_of.get(id(op))
        if k is None or len(_LOOP_BODY.findall(op.name)) != 1:
            continue
        step_of[id(op)] = k
        firsts[k] = min(firsts.get(k, op.start_ns), op.start_ns)
    if len(firsts) < 2:
        return [(start, end, ops)]
    ks = sorted(firsts)
    bounds = [start] + [max(firsts[k], start) for k in ks[1:]]
    index = {k: i for i, k in enumerate(ks)}
    parts: list[list[OpRun]] = [[] for _ in ks]
    for op in ops:
        k = step_of.get(id(op))
        i = index[k] if k is not None else max(bisect.bisect_right(bounds, op.start_ns) - 1, 0)
        parts[i].append(op)
    ends = bounds[1:] + [end]
    return [(bounds[i], max(ends[i], bounds[i] + 1), parts[i]) for i in range(len(ks))]


def _schedule(ops: list[OpRun], start: int, end: int, static: StaticGraph | None) -> Schedule:
    return Schedule(max(end - start, 1), [
        (o.name, o.tf_type, o.start_ns - start, o.end_ns - start, o.thread_id, o.inputs,
         o.outputs, o.fused_ops, o.device_id, o.eager) for o in ops],
        static.version if static is not None else 0)


def _replay_split(chunk: CaptureChunk, state: ConverterState, key: str, mid: int,
                  rec: ExecRecord, static: StaticGraph | None) -> None:
    """An unsampled multi-step call: `rec.sub_steps` Iterations of equal length over the
    call's measured time; step i replays step i of the last sampled call (its later steps
    replay that call's second step, which is in steady state; no sampled split yet: the
    whole-call schedule is used for each step)."""
    subs = state.sub_schedules.get(key) or \
        ([state.schedules[key]] if key in state.schedules else [])
    n = rec.sub_steps
    t0, t1 = rec.start_ns, max(rec.end_ns, rec.start_ns + n)
    for i in range(n):
        s_ = t0 + (t1 - t0) * i // n
        e_ = t0 + (t1 - t0) * (i + 1) // n
        sched = subs[i] if i < len(subs) else (subs[min(1, len(subs) - 1)] if subs else None)
        sub_rec = ExecRecord(seq=rec.seq, kind=rec.kind, name=rec.name, fn_name=rec.fn_name,
                             model_key=rec.model_key, static_key=rec.static_key,
                             start_ns=s_, end_ns=e_, thread_id=rec.thread_id)
        chunk.iterations.append(Iteration(
            model_id=mid, index=state.next_index(mid), start_ns=s_, end_ns=e_,
            thread_id=rec.thread_id, replayed=True, ops=_replay(sched, sub_rec),
            agent_before_ns=0 if i else rec.agent_before_ns))
