"""One collection (one PROF dir) of the in-process agent: its emulated device, the tracer's
chunks and the converter state (docs/formats/tensorflow-capture.md 10.3, 13).

`Collection` starts and restarts the host tracer, decides when a chunk is due
(`FLUSH_SECONDS` / `FLUSH_EVENTS` / `FLUSH_RECORDS`), collects it, converts it (convert.py)
and hands it to `Device.consume`; it keeps the user's msproftx annotations until the next
flush.  `close` does the final flush, closes the device and turns what the options left out
into end-of-run hints (`uncollected_notes`).  The `Agent` (agent.py) creates one per
activation and calls it from the step hooks; every failure goes to `Agent.fail`.
"""
from __future__ import annotations

import dataclasses
import gc
import json
import os
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from msprof_cli.capture import CaptureChunk
from msprof_cli.collect.convert import convert
from msprof_cli.collect.converter_state import ConverterState
from msprof_cli.collect.diagnostics import fault, warn
from msprof_cli.collect.launcher import WARNING_PREFIX
from msprof_cli.collect.eager_shapes import EagerShapes
from msprof_cli.collect.records import ExecRecord
from msprof_cli.collect.routes import rank_info
from msprof_cli.collect.sampling import SamplingPolicy
from msprof_cli.options import ProfilingConfig
from msprof_cli.raw import sampling as raw_sampling
from msprof_cli.raw.control import ClockPair
from msprof_cli.summary import memory as device_memory

if TYPE_CHECKING:  # annotations only: agent.py imports this module
    from msprof_cli.collect.agent import Agent

MAX_MARKERS_PER_CHUNK = 1_000_000  # annotations kept between two flushes (memory bound)


def _env_number(name: str, default: float) -> float:
    """A positive number from the environment (tests and tuning), else `default`."""
    try:
        value = float(os.environ.get(name, ""))
    except ValueError:
        return default
    return value if value > 0 else default


# a chunk is flushed when it is this old or holds about this many trace events
FLUSH_SECONDS = _env_number("MSPROF_CLI_FLUSH_SECONDS", 10.0)
FLUSH_EVENTS = int(_env_number("MSPROF_CLI_FLUSH_EVENTS", 100_000))
FLUSH_RECORDS = 20_000  # unsampled steps pending without any trace
# ~3x a small Keras CNN step (docs/formats/tensorflow-capture.md 9.5)
FIRST_CHUNK_EVENTS_PER_STEP = 1_000.0


@contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic GC off while a chunk is converted and written.

    A flush allocates ~10^5 short-lived objects (trace events and their stat dicts, the
    traced steps' OpRuns), and every few hundred allocations start a collection that walks
    the young objects -- and now and then all of the script's (a TensorFlow process holds
    ~350k): in the Bidirectional-LSTM benchmark 240 collections took 1.1 s of a 5 s exit
    flush.  Nothing the flush builds needs collecting before it ends; the GC is switched
    back on (if it was on) afterwards and collects as usual."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _load_device() -> Any:
    try:
        from msprof_cli.device import Device  # written by the device side
    except ImportError:
        return None
    return Device


class Collection:
    """One PROF dir: its device, tracer chunks and converter state."""

    def __init__(self, agent: "Agent", config: ProfilingConfig) -> None:
        self.agent = agent
        self.config = config
        self.pid = os.getpid()
        from msprof_cli.options import check_output_dir
        from msprof_cli.raw.profdir import create_prof_dir

        # the env / session-config / Profiler routes have no launcher that checked it already
        check_output_dir(config.output)
        # one PROF dir per rank when a launcher (or TF_CONFIG) tells the rank
        # (PROF_{rank+1:06d}_...); the job's rank size sizes the HCCL collectives
        ranks = rank_info()
        if ranks.warning:
            warn(f"{ranks.warning}: this process gets rank id -1")
        self.rank_id, self.rank_size = ranks.rank, ranks.size
        self.prof_dir = create_prof_dir(config.output, max(self.rank_id, 0))
        try:  # which msprof_cli / TensorFlow / Python collected it (msprof summary reads it)
            from msprof_cli.raw import runinfo

            runinfo.write(self.prof_dir, {"precision_mode": config.precision_mode,
                                          "dropout": config.dropout,
                                          "soc_version": config.soc_version})
        except OSError as exc:
            warn(f"{self.prof_dir}: the collection's versions are not recorded ({exc})")
        self.clock = ClockPair.now()
        self.device: Any = None
        device_cls = _load_device()
        if device_cls is not None:
            try:
                extra = {"rank_id": self.rank_id} if self.rank_id >= 0 else {}
                if self.rank_id >= 0 and self.rank_size > 1:
                    extra["rank_size"] = self.rank_size
                self.device = device_cls(self.prof_dir, config, clock=self.clock, pid=self.pid,
                                         app=list(sys.argv), chip=config.soc_version, **extra)
            except Exception as exc:
                agent.fail(f"the emulated device could not start ({exc!r}): no raw data is "
                           f"written to {self.prof_dir}", exc)
        elif not agent.dump_dir:
            warn("msprof_cli.device is not available: captured ops are not written to "
                 f"{self.prof_dir}")
        self.user_profiler = False  # the script's own tf.profiler holds the slot
        self.markers: list[Any] = []  # msproftx annotations since the last flush (mstx.py)
        self.dropped_markers = 0
        self.markers_lock = threading.Lock()
        self.state = ConverterState(pid=self.pid,
                                    main_thread_id=threading.main_thread().native_id or 0,
                                    multi_rank=self.rank_id >= 0 and self.rank_size > 1,
                                    dropout=config.dropout)
        self.policy = SamplingPolicy(config.full_trace)
        self.records: list[ExecRecord] = []
        self.traced_keys: set[str] = set()
        self.deferred: list[tuple[bytes | None, list[ExecRecord], int, list, list]] = []
        self.eager = EagerShapes()  # shapes of the eager ops run while the tracer runs
        self.tracer: Any = None
        self.tracer_failed = False
        self.chunk_no = 0
        self.chunk_started = time.monotonic()
        self.converted_at = time.monotonic()  # last time a chunk went to the device
        self.pending_steps = 0  # steps recorded since then
        self.agent_pending_ns = 0  # agent work since the last step's end (see step_begin)
        self.steps_in_chunk = 0
        self.events_per_step = 0.0
        self.notes: list[str] = []
        agent.announce(self.prof_dir)

    # -- tracer ---------------------------------------------------------------------------
    def start_tracer(self) -> bool:
        if self.tracer is not None:
            return True
        if self.tracer_failed:
            return False
        try:
            from msprof_cli.collect.tf_trace import Tracer

            fault("tracer")
            self.agent.fix_trace_collection()
            tracer = Tracer()
            if not tracer.start():
                self.notes.append("another profiler (e.g. tf.profiler.experimental.start or "
                                  "the Keras TensorBoard callback) held the tracer: a sample "
                                  "was skipped")
                return False
        except Exception as exc:
            self.tracer_failed = True
            self.agent.fail(f"TensorFlow's host tracer could not start ({exc!r}): ops are "
                            "not captured", exc)
            return False
        self.tracer = tracer
        self.eager.install()
        self.chunk_started = time.monotonic()
        self.steps_in_chunk = 0
        return True

    def offset_ns(self) -> int:
        """epoch ns -> CLOCK_MONOTONIC_RAW ns, used when the trace lacks its anchor."""
        pair = ClockPair.now()
        return pair.mono_ns - pair.wall_us * 1000

    # -- flushing -------------------------------------------------------------------------
    def due(self) -> bool:
        # Age and step count are measured from the last *conversion*, not from the last
        # tracer start: sampled tracing restarts the tracer (and parks the collected samples
        # in `deferred`) every few steps, so an age counted from the tracer start never
        # reached FLUSH_SECONDS and nothing was converted (nor written) until exit.
        age = time.monotonic() - self.converted_at
        if self.pending_steps >= FLUSH_RECORDS or (
                age >= FLUSH_SECONDS and (self.records or self.deferred or self.tracer)):
            return True
        if self.tracer is None:
            return False
        # before the first chunk is parsed the event rate is unknown: assume a generous
        # FIRST_CHUNK_EVENTS_PER_STEP so a fast full-trace first chunk stays bounded too
        per_step = self.events_per_step or FIRST_CHUNK_EVENTS_PER_STEP
        return self.steps_in_chunk * per_step >= FLUSH_EVENTS

    def flush(self, restart: bool, defer: bool = False) -> None:
        """Collect the current chunk, restart the tracer if asked, convert and consume.

        `defer`: only collect; the conversion waits for the next flush (the TF1 shape run
        pauses the tracer and its runtime shapes should reach the chunk before it)."""
        if os.getpid() != self.pid:
            return
        tracer, self.tracer = self.tracer, None
        records, self.records = self.records, []
        if not restart:
            self.eager.remove()
        eager = self.eager.take()
        spans = self.eager.take_spans()  # the callbacks' own time, with the chunk they are in
        steps = self.steps_in_chunk
        data = None
        if tracer is not None:
            try:
                data = tracer.collect()
            except Exception as exc:
                self.agent.fail(f"a trace chunk could not be collected ({exc!r}): the ops of "
                                f"{len(records)} steps are lost", exc)
        if restart:
            self.start_tracer()
        else:
            self.chunk_started = time.monotonic()
        if data is not None or records:
            self.deferred.append((data, records, steps, eager, spans))
        if defer:
            return
        pending, self.deferred = self.deferred, []
        self.converted_at = time.monotonic()
        self.pending_steps = 0
        with gc_paused():
            for data, records, steps, eager, spans in pending:
                self._convert(data, records, steps, eager, spans)
        with self.markers_lock:
            markers, self.markers = self.markers, []
        if markers:  # user annotations go out with the chunk boundary they fall in
            self.consume(CaptureChunk(markers=markers))

    def add_marker(self, marker: Any) -> None:
        """An msproftx annotation (msprof_cli.mstx); bounded like the trace chunks."""
        with self.markers_lock:
            if len(self.markers) < MAX_MARKERS_PER_CHUNK:
                self.markers.append(marker)
            else:
                self.dropped_markers += 1

    def _convert(self, data: bytes | None, records: list[ExecRecord], steps: int,
                 eager: list | None = None,
                 spans: list[tuple[int, int]] | None = None) -> None:
        try:
            trace = None
            if data is not None:
                from msprof_cli.collect.xspace import parse_xspace

                trace = parse_xspace(data)
                if steps:
                    self.events_per_step = trace.raw_events / steps
            fault("convert")
            chunk = convert(trace, records, self.state, self.agent.registry,
                            fallback_offset_ns=self.offset_ns(), fp_point=self.config.fp_point,
                            bp_point=self.config.bp_point, eager_specs=eager or [])
        except Exception as exc:
            self.agent.fail(f"a trace chunk could not be converted ({exc!r}): the ops of "
                            f"{len(records)} steps are lost", exc)
            return
        chunk.notes.extend(self.notes)
        self.notes = []
        chunk.agent_spans = spans or []
        self.chunk_no += 1
        self.consume(chunk)

    def consume(self, chunk: CaptureChunk) -> None:
        if self.agent.dump_dir:
            try:
                path = Path(self.agent.dump_dir) / f"chunk_{self.pid}_{self.prof_dir.name}_" \
                    f"{self.chunk_no:04d}.json"
                path.parent.mkdir(parents=True, exist_ok=True)
                # replayed steps dumped with their ops, as objects (Iteration.op_runs)
                payload = dataclasses.asdict(dataclasses.replace(chunk, iterations=[
                    dataclasses.replace(it, ops=it.op_runs(), schedule=None)
                    if it.schedule is not None else it for it in chunk.iterations]))
                for it in payload["iterations"]:
                    del it["schedule"]
                payload["prof_dir"] = str(self.prof_dir)
                path.write_text(json.dumps(payload))
            except Exception as exc:
                warn(f"could not dump a capture chunk to {self.agent.dump_dir}: {exc!r}")
        if self.device is not None:
            try:
                fault("device")
                self.device.consume(chunk)
            except Exception as exc:
                self.agent.fail(f"the emulated device failed on a chunk ({exc!r}): "
                                f"{len(chunk.iterations)} steps are missing from "
                                f"{self.prof_dir}", exc)

    def close(self) -> None:
        self.flush(restart=False)
        if self.device is not None:
            try:
                fault("close")
                self.device.close(ClockPair.now())
            except Exception as exc:
                self.agent.fail(f"the emulated device could not finish {self.prof_dir} "
                                f"({exc!r})", exc)
            for text in uncollected_notes(getattr(self.device, "uncollected", None)):
                self.agent.note(text)
            for text in raw_sampling.fallback_notes(self.prof_dir):
                self.agent.note(text)
            line = device_memory.one_line(self.prof_dir)
            if line:
                self.agent.note(line if "does not fit" not in line else
                                f"{WARNING_PREFIX}{line}")


# what each left-out kind of task is called, what of it was left out, and the flag that
# collects it.  AI CPU tasks are in op_summary / task_time without --aicpu (the TS reports
# their start and end, docs/device-model.md 6.2): only their AI CPU timings are left out.
_LEFT_OUT = {"aicpu": ("AI CPU", "whose AI CPU timings (the aicpu summary) were",
                       "--aicpu on"),
             "hccl": ("collective (HCCL)", "that were", "--hccl on")}


def uncollected_notes(uncollected: dict | None) -> list[str]:
    """One line per kind of task the run had but the options left out (the device's
    `uncollected`: kind -> op type -> tasks), with the flag that collects it."""
    out = []
    for kind, counts in (uncollected or {}).items():
        if not counts or kind not in _LEFT_OUT:
            continue
        what, which, flag = _LEFT_OUT[kind]
        top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        types = ", ".join(t for t, _ in top[:5]) + (", ..." if len(top) > 5 else "")
        out.append(f"The run had {sum(counts.values()):,} {what} tasks ({types}) {which} "
                   f"not collected: add {flag} to collect them.")
    return out
