"""Turn one chunk of trace events + Python step records into a `CaptureChunk`.

Join rules (docs/formats/tensorflow-capture.md 6.1, 8):
* a step marker (`msprof_step{seq}`) encloses, on its own thread, the eager function call
  (`EagerLocalExecute: __inference_<fn>_<uid>` = the graph key) and its `FunctionRun{id}`;
  every op event of that execution sits inside an `ExecutorState::Process{id}` with the
  same id, on whatever thread ran it;
* TF1 `Session.run` has no run id: the Process ids that start inside the marker interval
  (on executor threads) are the run's ids (runs are synchronous);
* `Process{id=-1}` is constant folding while a graph is built: dropped;
* ops on `tf_data*` threads are the input pipeline (host side): dropped, counted in notes;
* eager ops (`EagerLocalExecute: <Op>`, the whole dispatch: the time model replaces it with
  one single-op launch) belong to the step whose marker encloses them, else they are single
  ops;
* unsampled executions (no marker in the trace) replay the op schedule of the last sampled
  execution of the same graph, anchored at their own start and end (section 13).

The rules above are this module's; the helpers they use live beside it: the state kept
across chunks (converter_state.py), op shapes and the step's real batch (op_shapes.py),
collectives the tracer dropped (collectives.py), what a model learns from its first traced
step, FP/BP and transfers (model_graph.py), and the replay of unsampled steps (replay.py).
"""
from __future__ import annotations

import bisect
import re
from dataclasses import replace

from msprof_cli.capture import CaptureChunk, Iteration, OpRun
from msprof_cli.collect import eager_shapes
from msprof_cli.collect.collectives import restore_collectives
from msprof_cli.collect.converter_state import ConverterState, GraphRegistry, Schedule
from msprof_cli.collect.input_pipeline import PipelineEvents
from msprof_cli.collect.model_graph import learn_model
from msprof_cli.collect.op_shapes import (attach_shapes, model_batch, specs_unknown, step_batch,
                                          with_batch)
from msprof_cli.collect.records import ExecRecord
from msprof_cli.collect.replay import (replay, replay_split, replay_wait, sampled_schedule,
                                       schedule_ops, tracer_dropped)
from msprof_cli.collect.tf_graphs import StaticGraph
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
    # tf.data's prefetch and pipeline work events (its production time per element)
    pipeline = PipelineEvents(state.pipelines)
    graph_of_seq: dict[int, str] = {}
    dropped_data = dropped_unknown = expanded_clusters = tracer_gaps = 0
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
        marker_line: dict[int, int] = {}  # seq -> the trace line of its marker
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
                marker_line[seq] = line
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

        def seq_at(t: int, line: int | None = None) -> int | None:
            """The step whose marker encloses `t`; with `line`, only a step driven from that
            trace line (an eager op belongs to the step of its own thread: another thread's
            eager ops -- a data loader's workers -- are not the step's)."""
            seq = _enclosing(t)
            if seq is not None and line is not None and marker_line.get(seq) != line:
                return None
            return seq

        def _enclosing(t: int) -> int | None:
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
            for ev in evs:
                if ev.kind == "wait":
                    waits.append((ev.start, ev.end))
                    pipeline.consumer_lines.add(line)
                    size = (ev.stats or {}).get("element_size")
                    if isinstance(size, int) and size > 0:
                        batches.append((ev.start, size))
                    continue
                if is_data or ev.kind in ("prefetch", "produce"):
                    pipeline.add(ev, is_data)
                    if ev.kind in ("prefetch", "produce"):
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
                        attach_shapes(op, None, state)
                        chunk.single_ops.append(op)
                        dropped_unknown += 1
                    else:
                        ops_by_seq.setdefault(seq, []).append(op)
                        if seq in split_seqs and in_proc and proc.stats:
                            iter_of[id(op)] = int(proc.stats.get("iter_num") or 0)
                elif ev.kind == "eager":
                    if is_host_eager(ev.name):
                        continue
                    # the whole dispatch (EagerLocalExecute: TF's op setup, the kernel on
                    # the CPU): on the NPU it is one single-op launch, which the time model
                    # puts in its place (device/time_model.py) -- none of it is host time
                    # of the script; the Python around the ops is
                    start, end = ev.start, max(ev.end, ev.start)
                    op = OpRun(name=ev.name, tf_type=ev.name, start_ns=start, end_ns=end,
                               thread_id=tid, eager=True)
                    seq = seq_at(ev.start, line)
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
    made = pipeline.production([(m.start, m.end) for seq, m in markers.items()
                                if by_seq[seq].traced_now])
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
                attach_shapes(op, static, state, key)
            restored = restore_collectives(ops, static, state, key,
                                           (marker.start, marker.end))
            lo = bisect.bisect_left(batches, (marker.start, -1))
            hi = bisect.bisect_right(batches, (marker.end, 1 << 62))
            batch = step_batch(static, [b for _, b in batches[lo:hi]], state, key)
            if batch:
                for op in ops:
                    with_batch(op, batch, state)
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
                        input_production_ns=made.in_span(s_, e_),
                        agent_before_ns=0 if k_ else rec.agent_before_ns,
                        warmup=rec.traced_now and not k_))
                if ops and (not rec.traced_now or key not in state.sub_schedules):
                    state.sub_schedules[key] = [
                        sampled_schedule(o_, s_, e_, static, _wait_in(waits, s_, e_),
                                         made.in_span(s_, e_)) for s_, e_, o_ in parts]
                if ops and mid not in state.fp_bp_done:
                    learn_model(state.models[mid], ops, static, fp_point, bp_point, chunk)
                    state.fp_bp_done.add(mid)
                if batch:
                    model_batch(state.models[mid], batch, state)
                continue
            prev = state.schedules.get(key)
            dropped = not rec.traced_now and tracer_dropped(ops, prev)
            if dropped:  # the tracer lost its cheap loop-body kernels: the complete schedule
                ops = replay(prev, replace(rec, start_ns=start, end_ns=end))
                tracer_gaps += 1
            it = Iteration(model_id=mid, index=state.next_index(mid), start_ns=start,
                           end_ns=end, thread_id=rec.thread_id, ops=ops, replayed=dropped,
                           sampled_duration=prev.duration if dropped and prev else 0,
                           input_wait_ns=wait_of.get(rec.seq, 0),
                           input_production_ns=made.in_span(start, end),
                           agent_before_ns=rec.agent_before_ns, warmup=rec.traced_now)
            if ops and not dropped and (not rec.traced_now or key not in state.schedules):
                state.schedules[key] = Schedule(max(end - start, 1), schedule_ops(ops, start),
                                                static.version if static is not None else 0,
                                                it.input_wait_ns, it.input_production_ns)
            if ops and mid not in state.fp_bp_done:
                learn_model(state.models[mid], ops, static, fp_point, bp_point, chunk)
                state.fp_bp_done.add(mid)
            if batch:
                model_batch(state.models[mid], batch, state)
        elif rec.sub_steps > 1:
            replay_split(chunk, state, key, mid, rec, static)
            continue
        else:
            # the ops stay the shared schedule (Iteration.schedule): the device lays its
            # columns over the step, no OpRun per replayed op is built
            sched = state.schedules.get(key)
            it = Iteration(model_id=mid, index=state.next_index(mid), start_ns=rec.start_ns,
                           end_ns=max(rec.end_ns, rec.start_ns), thread_id=rec.thread_id,
                           replayed=True, schedule=sched,
                           input_wait_ns=replay_wait(sched, rec),
                           input_production_ns=sched.input_production if sched else 0,
                           agent_before_ns=rec.agent_before_ns)
            if static is not None and sched is not None and sched.version != static.version:
                # shapes improved since the sample (TF1 shape run): this step's own objects
                it.ops, it.schedule = replay(sched, rec), None
                for op in it.ops:
                    attach_shapes(op, static, state, key)
        chunk.iterations.append(it)
    for mid in used_models:
        chunk.models[mid] = state.models[mid]
    if tracer_gaps:
        chunk.notes.append(f"{tracer_gaps} traced steps had lost the cheap kernels of their "
                           "loop bodies to TensorFlow's tracer: their ops were replayed from "
                           "the graph's complete traced step (docs/collect.md)")
    if expanded_clusters:
        chunk.notes.append(f"{expanded_clusters} executions of XLA-compiled functions were "
                           "replaced by their graph's ops (costed as GE compiles the TF graph; "
                           "their host times inside the cluster are not measured)")
    unknown = _unknown_ops(chunk)
    if unknown:
        chunk.notes.append(f"{unknown} op executions keep unknown (-1) dimensions: each such "
                           "dimension is costed as 32 elements (docs/device-model.md 3)")
    if restored_collectives:
        chunk.notes.append(f"{restored_collectives} collective op events missing from TF's trace "
                           "were restored from the graph (timed like their replica siblings, or "
                           "from the model's last schedule when all were missing)")
    return chunk


def _unknown_ops(chunk: CaptureChunk) -> int:
    """Op executions of the chunk with unknown dimensions; a replayed step's schedule is
    looked at once (its ops are the schedule's, `Iteration.schedule`)."""
    per_schedule: dict[int, int] = {}
    # ops whose shapes came from one shape cache share their spec tuples: one look per pair
    # (the chunk's ops keep the tuples alive, so their ids are not reused meanwhile)
    per_specs: dict[tuple[int, int], bool] = {}

    def unknown(o: OpRun) -> bool:
        k = (id(o.inputs), id(o.outputs))
        u = per_specs.get(k)
        if u is None:
            u = per_specs[k] = specs_unknown(o.inputs, o.outputs)
        return u

    n = sum(1 for o in chunk.single_ops if unknown(o))
    for it in chunk.iterations:
        sched = it.schedule
        if sched is None:
            n += sum(1 for o in it.ops if unknown(o))
            continue
        k = per_schedule.get(id(sched))
        if k is None:  # schedule tuples: inputs at 5, outputs at 6
            k = per_schedule[id(sched)] = sum(1 for op in sched.ops
                                              if specs_unknown(op[5], op[6]))
        n += k
    return n


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
