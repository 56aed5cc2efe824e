"""Unsampled executions replay the op schedule of the last sampled execution of the same
graph (docs/formats/tensorflow-capture.md 13): `sampled_schedule` records a traced step's ops
relative to
its start, `replay` lays them out again over an unsampled step's measured span (scaled),
`replay_wait` scales its input wait, and `replay_split` cuts an unsampled multi-step call
(Keras `steps_per_execution > 1`) into its steps.
"""
from __future__ import annotations

from msprof_cli.capture import CaptureChunk, Iteration, OpRun
from msprof_cli.collect.converter_state import ConverterState, Schedule
from msprof_cli.collect.records import ExecRecord
from msprof_cli.collect.tf_graphs import StaticGraph


def replay(schedule: Schedule | None, rec: ExecRecord) -> list[OpRun]:
    """The ops of an unsampled step as objects: the sampled schedule's, scaled onto its
    measured span (the converter hands the schedule itself to the device instead:
    `Iteration.schedule`)."""
    if schedule is None:
        return []
    return schedule.runs(rec.start_ns, max(rec.end_ns, rec.start_ns))


# a traced step missing this share of its graph's node names (and holding no new one) lost
# them to the tracer, not to the program (see `tracer_dropped`)
DROPPED_SHARE = 0.1


def tracer_dropped(ops: list[OpRun], schedule: Schedule | None) -> bool:
    """True when a traced step lost ops to TensorFlow's host tracer rather than not running
    them.  TF's executor traces a kernel it has measured as cheap only at host tracer level 3
    (TraceMe kVerbose), and TF 2.21's profiler options cannot set that level ("expects an i
    value"); every kernel starts out as expensive, so a graph's first executions are traced
    whole, but once the executor of a While loop's body has timed its kernels, the cheap ones
    (Sigmoid, Tanh, Less, TensorList ops...) vanish from later traces: a Bidirectional-LSTM
    step traced at step 30 showed 1,315 of its 7,081 ops.  Such a step's node names are a
    strict subset of the last complete schedule's, short of at least `DROPPED_SHARE` of them;
    a step that ran other code (a new branch, a retrace) has names the schedule lacks."""
    if schedule is None or not ops:
        return False
    before = {t[0] for t in schedule.ops}
    now = {o.name for o in ops}
    return now <= before and len(now) <= (1.0 - DROPPED_SHARE) * len(before)


def replay_wait(schedule: Schedule | None, rec: ExecRecord) -> int:
    """Input wait of a replayed step: the sampled step's, scaled to this step's length like
    its ops (the tracer is off, so the wait itself is not measured)."""
    return _scaled_wait(schedule, rec.start_ns, rec.end_ns)


def _scaled_wait(schedule: Schedule | None, start: int, end: int) -> int:
    if schedule is None or not schedule.input_wait:
        return 0
    scale = max(end - start, 1) / schedule.duration
    return min(int(schedule.input_wait * scale), max(end - start, 0))


def sampled_schedule(ops: list[OpRun], start: int, end: int, static: StaticGraph | None,
                     input_wait: int = 0, input_production: int = 0) -> Schedule:
    """The op schedule of a sampled step [start, end] (one step of a multi-step call)."""
    return Schedule(max(end - start, 1), schedule_ops(ops, start),
                    static.version if static is not None else 0, input_wait, input_production)


def schedule_ops(ops: list[OpRun], start: int) -> tuple[tuple, ...]:
    """A traced step's ops as schedule tuples (capture.OpSchedule), times relative to
    `start`."""
    return tuple((o.name, o.tf_type, o.start_ns - start, o.end_ns - start, o.thread_id,
                  o.inputs, o.outputs, o.fused_ops, o.device_id, o.eager) for o in ops)


def replay_split(chunk: CaptureChunk, state: ConverterState, key: str, mid: int,
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
        chunk.iterations.append(Iteration(
            model_id=mid, index=state.next_index(mid), start_ns=s_, end_ns=e_,
            thread_id=rec.thread_id, replayed=True, schedule=sched,
            input_wait_ns=_scaled_wait(sched, s_, e_),
            input_production_ns=sched.input_production if sched is not None else 0,
            agent_before_ns=0 if i else rec.agent_before_ns))
