"""Read a TF XSpace (host plane) into flat events the converter can join.

Only the event kinds the converter needs keep their stats (building stat dicts for every
event would cost more than the parse itself); about 40% of all events (thread-pool
listener regions, `convert_to_tensor`, `TFE_*`) are dropped here (docs/formats/tensorflow-capture.md
8).
Times become absolute epoch nanoseconds: `profile_start_time` (Task Environment plane) +
`XLine.timestamp_ns` + `XEvent.offset_ps` (4.3).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

HOST_PLANE = "/host:CPU"
ENV_PLANE = "Task Environment"

STEP_MARKER = "msprof_step"
CLOCK_ANCHOR = "msprof_clock_anchor"
# events whose stats the converter reads
WITH_STATS = frozenset({"ExecutorState::Process", "FunctionRun", STEP_MARKER, CLOCK_ANCHOR})
KEEP_PLAIN = frozenset({"EagerKernelExecute", "SessionRun"})
# a step blocked on its input batch: the iterator's GetNext kernel (an async op whose span is
# the wait for the tf.data pipeline; it runs on a tf_data_iterator_get_next thread)
INPUT_WAIT = frozenset({"IteratorGetNextOp::DoCompute", "IteratorGetNextAsOptionalOp::DoCompute"})
# tf.data's iterator events (`Iterator::Root::Prefetch::Map...`, one per GetNext of each
# iterator of the pipeline): only a prefetch's consumer side ("...::Prefetch": inside a step's
# GetNext it is the take of an element) and its producer's calls into its input
# ("...::Prefetch::<input>", on the prefetch's thread) are kept, with their stats, for the
# input pipeline's production time (collect/input_pipeline.py)
PREFETCH = "Prefetch"
NOT_OPS = ("_Send", "_Recv", "_HostSend", "_HostRecv", "_Arg", "_Retval", "NoOp")


@dataclass(slots=True)
class Event:
    line: int  # index into Trace.lines
    kind: str  # "op", "proc", "run", "marker", "anchor", "eager", "fn", "kexec", "session",
    # "wait" (input wait), "prefetch" / "produce" (tf.data prefetch: consumer / producer side)
    name: str  # op: node name; eager: op type; fn: __inference_ name; others: event name
    tf_type: str
    start: int  # epoch ns
    end: int
    stats: dict[str, Any] | None = None


@dataclass
class Trace:
    lines: list[str] = field(default_factory=list)  # thread (line) name per line index
    line_ids: list[int] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    start_epoch_ns: int = 0
    raw_events: int = 0  # all events of the host plane, kept or not (sizes the next chunk)


def _stat_value(stat: Any, names: dict[int, str]) -> Any:
    kind = stat.WhichOneof("value")
    if kind is None:
        return None
    value = getattr(stat, kind)
    if kind == "ref_value":
        return names.get(value)
    if kind == "bytes_value":
        return bytes(value)
    return value


def _classify(name: str, display: str) -> tuple[str, str, str] | None:
    """(kind, name, type) of an event name, or None to drop it."""
    if name in WITH_STATS:
        return ({"ExecutorState::Process": "proc", "FunctionRun": "run", STEP_MARKER: "marker",
                 CLOCK_ANCHOR: "anchor"}[name], name, "")
    if name.startswith("EagerLocalExecute: "):
        op = name[len("EagerLocalExecute: "):]
        if op.startswith("__inference_") or op.startswith("__forward_"):
            return ("fn", op, "")
        return ("eager", op, op)
    if name == "EagerKernelExecute":
        return ("kexec", name, "")
    if name == "SessionRun":
        return ("session", name, "")
    if name in INPUT_WAIT:
        return ("wait", name, "")
    if name.startswith("Iterator::"):
        parts = name.split("::")
        if parts[-1] == PREFETCH:
            return ("prefetch", name, "")
        if len(parts) > 2 and parts[-2] == PREFETCH:
            return ("produce", name, "")
        return None
    node, sep, typ = name.rpartition(":")
    if not sep or not node or node.endswith(":") or " " in typ or not typ:
        return None
    typ = display or typ
    if typ in NOT_OPS or typ.startswith("Iterator::"):
        return None
    if not (typ[0].isalpha() or typ[0] == "_"):
        # not an op type: TraceMe "<name>:<n>" of TF internals, e.g. the collective
        # broadcast's `ForwardValue:0` / `ReceiveValue:1` (MultiWorkerMirroredStrategy)
        return None
    return ("op", node, typ)


def parse_xspace(data: bytes) -> Trace:
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    space.ParseFromString(data)
    trace = Trace()
    for plane in space.planes:
        if plane.name == ENV_PLANE:
            names = {k: v.name for k, v in plane.stat_metadata.items()}
            for st in plane.stats:
                if names.get(st.metadata_id) == "profile_start_time":
                    trace.start_epoch_ns = int(_stat_value(st, names))
    for plane in space.planes:
        if plane.name != HOST_PLANE:
            continue
        stat_names = {k: v.name for k, v in plane.stat_metadata.items()}
        kinds: dict[int, tuple[str, str, str] | None] = {}
        for mid, md in plane.event_metadata.items():
            kinds[mid] = _classify(md.name, md.display_name)
        for line in plane.lines:
            idx = len(trace.lines)
            trace.lines.append(line.display_name or line.name)
            trace.line_ids.append(line.id)
            base = trace.start_epoch_ns + line.timestamp_ns
            trace.raw_events += len(line.events)
            for ev in line.events:
                k = kinds.get(ev.metadata_id)
                if k is None:
                    continue
                kind, name, typ = k
                start = base + ev.offset_ps // 1000
                stats = None
                if kind in ("proc", "run", "marker", "anchor", "wait", "prefetch", "produce"):
                    stats = {stat_names.get(s.metadata_id, ""): _stat_value(s, stat_names)
                             for s in ev.stats}
                trace.events.append(Event(idx, kind, name, typ, start,
                                          start + ev.duration_ps // 1000, stats))
    return trace
