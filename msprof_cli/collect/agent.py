"""The in-process agent: one collection (one PROF dir) at a time, fed in chunks.

Lifecycle (docs/formats/tensorflow-capture.md 10.3, 13):
* `activate(config)` creates a `Collection` (collection.py: the PROF dir, the emulated
  device, the tracer's chunks) and starts the host tracer as soon as TensorFlow is
  importable (`on_tensorflow_imported`);
* the step hooks (steps.py) call `step_begin` / `step_end` around every top-level graph
  execution; `step_end` is the only place a chunk is flushed during the run (between steps,
  on the training thread, nothing in flight);
* a flush collects the tracer (XSpace), starts the next one when needed, converts the chunk
  (convert.py) and hands it to `Device.consume`;
* `deactivate` (atexit, SIGTERM, the Profiler's `__exit__`) does the final flush and closes
  the device.
Any failure inside the agent is caught: one `[msprof] WARNING` line (diagnostics.py) says
what was not captured and why, and the user's script continues.  The agent also owns the
exit path: atexit, SIGTERM / SIGINT (acted on at a step boundary), excepthook and fork.
"""
from __future__ import annotations

import _thread
import atexit
import os
import signal
import sys
import threading
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any

from msprof_cli.collect.collection import Collection
from msprof_cli.collect.converter_state import GraphRegistry
from msprof_cli.collect.diagnostics import fault, info, warn
# the launcher's result file: the PROF dirs written, and hint lines (NOTE_PREFIX)
from msprof_cli.collect.launcher import NOTE_PREFIX, RESULT_FILE_VAR, WARNING_PREFIX
from msprof_cli.collect.records import ExecRecord
from msprof_cli.collect.routes import CHILDREN_VAR
from msprof_cli.options import ProfilingConfig

DUMP_VAR = "MSPROF_CLI_DUMP_CAPTURE"  # tests: also write every CaptureChunk as JSON here


def _mono() -> int:
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)


class Agent:
    """Process-wide singleton (`AGENT`): hooks installed once, collections come and go."""

    def __init__(self) -> None:
        self.collection: Collection | None = None
        self.pending: ProfilingConfig | None = None
        self.registry = GraphRegistry()
        self.lock = threading.RLock()
        self.local = threading.local()
        self.seq = 0
        self.pid = os.getpid()
        self.disabled = False
        self.tf_ready = False
        self.step_hooks = False  # the step hooks are installed (install_step_hooks)
        self.keras_trainer: Any = None  # the Keras 3 trainer module, once imported
        self.exit_hooks = False
        self.main_steps = 0  # open steps on the main thread (a SIGTERM waits for them)
        self.result_file = (os.environ.get(RESULT_FILE_VAR) if os.environ.get(CHILDREN_VAR)
                            else os.environ.pop(RESULT_FILE_VAR, None))
        self.dump_dir = os.environ.get(DUMP_VAR) or None
        self.failures = 0
        self.failed_messages: set[str] = set()
        self.reason = ""
        self.scope = "process"  # "process" | "profiler" | "session"
        self.session_profiling_seen = False
        self.precision_mode = ""  # set by a session config's precision_mode (routes.py)
        # GE's memory pools a session config set, bytes by option name (routes.py)
        self.memory_pools: dict[str, int] = {}
        self.trace_fix: bool | None = None  # traceme_fix installed (None: not tried yet)

    # -- messages -------------------------------------------------------------------------
    def fail(self, message: str, exc: BaseException | None = None) -> None:
        self.failures += 1
        # one line per distinct problem (a failing step hook would otherwise repeat it for
        # every step), at most 5 lines in all
        if message not in self.failed_messages and len(self.failed_messages) < 5:
            self.failed_messages.add(message)
            warn(message)
            if exc is not None and os.environ.get("MSPROF_CLI_DEBUG"):
                traceback.print_exception(type(exc), exc, exc.__traceback__)

    def warn_once(self, message: str) -> None:
        """A limit of the capture (not a failure): printed once, kept in the chunk notes."""
        if message in self.failed_messages:
            return
        self.failed_messages.add(message)
        warn(message)
        coll = self.collection
        if coll is not None:
            coll.notes.append(message)

    def note(self, text: str) -> None:
        """A hint for the end of collect: the launcher prints it after "Profiling
        finished" (result file); without a launcher (env / session routes) it is printed
        now."""
        if self.result_file:
            try:
                with open(self.result_file, "a", encoding="utf-8") as fh:
                    fh.write(f"{NOTE_PREFIX}{text}\n")
                return
            except OSError:
                pass
        print(text if text.startswith(WARNING_PREFIX) else f"[INFO] {text}", file=sys.stderr)

    def announce(self, prof_dir: Path) -> None:
        if self.result_file:
            try:
                with open(self.result_file, "a", encoding="utf-8") as fh:
                    fh.write(f"{prof_dir}\n")
            except OSError:
                pass

    def fix_trace_collection(self) -> None:
        """Once per process, before the first tracer starts: the TF heap-corruption
        workaround of traceme_fix (collecting a trace with cross-thread split activities)."""
        if self.trace_fix is not None:
            return
        from msprof_cli.collect import traceme_fix

        self.trace_fix = traceme_fix.install()
        if self.trace_fix and not self.exit_hooks:
            # no _at_exit of ours to restore it after the last collection (see _at_exit)
            atexit.register(traceme_fix.restore)
        if not self.trace_fix and os.environ.get("MSPROF_CLI_DEBUG"):
            info(f"TensorFlow trace-collection workaround {traceme_fix.status}")

    # -- activation -----------------------------------------------------------------------
    @property
    def active(self) -> bool:
        return self.collection is not None and not self.disabled

    def request(self, config: ProfilingConfig, scope: str = "process") -> None:
        """Profile this process with `config` from the moment TensorFlow is imported."""
        self.scope = scope
        if self.tf_ready:
            self.activate(config)
        else:
            self.pending = config

    def install_step_hooks(self) -> None:
        """The hooks a profiling process needs on TensorFlow (and the Keras 3 trainer once
        imported): installed when profiling starts, never in a process that does not
        profile."""
        if self.step_hooks or not self.tf_ready:
            return
        self.step_hooks = True
        from msprof_cli.collect import steps

        steps.install_tf_hooks(self)
        try:  # tf.profiler.experimental.Trace ranges -> msproftx annotations
            from msprof_cli import mstx

            mstx.install_tf_trace_hook()
        except Exception as exc:
            self.fail(f"tf.profiler Trace ranges are not recorded ({exc!r})", exc)
        try:  # the script's own tf.profiler must not crash on msprof's tracer
            from msprof_cli.collect import user_profiler

            user_profiler.install(self)
        except Exception as exc:
            self.fail(f"the script's own TensorFlow profiler may conflict with msprof "
                      f"({exc!r})", exc)
        if self.keras_trainer is not None:
            self._hook_keras(self.keras_trainer)

    def activate(self, config: ProfilingConfig) -> Collection | None:
        try:
            self.install_step_hooks()
        except Exception as exc:
            self.fail(f"the agent could not hook TensorFlow ({exc!r}): nothing is captured",
                      exc)
        with self.lock:
            if self.collection is not None or self.disabled:
                return self.collection
            if self.precision_mode:  # the script's session config said so (routes.py)
                config = replace(config, precision_mode=self.precision_mode)
            if self.memory_pools:
                config = replace(config, **self.memory_pools)
            try:
                fault("activate")
                self.collection = Collection(self, config)
            except Exception as exc:
                from msprof_cli.errors import MsprofError

                why = str(exc) if isinstance(exc, MsprofError) else repr(exc)
                self.fail(f"profiling could not start: {why} Nothing is captured.", exc)
                return None
            for w in config.warnings:
                warn(w)
            self.collection.start_tracer()
            return self.collection

    def deactivate(self) -> Path | None:
        with self.lock:
            coll, self.collection = self.collection, None
        if coll is None or os.getpid() != coll.pid:
            return None
        coll.close()
        return coll.prof_dir

    def on_tensorflow_imported(self, module: Any) -> None:
        """Post-import callback of `tensorflow` (docs/formats/tensorflow-capture.md 10.3)."""
        try:
            if self.tf_ready:
                return
            self.tf_ready = True
            from msprof_cli.collect import steps

            # a process that does not profile yet only watches for a route turning it on:
            # none of our frames on its calls (the step hooks come with activate)
            steps.install_watch_hooks(self)
            if self.pending is not None:
                # No `context().enable_run_metadata()` here (docs/formats/tensorflow-capture.md 10.3
                # says so):
                # it initialises the eager context at import time, which makes the script's
                # own `tf.config.set_logical_device_configuration` / `set_visible_devices` /
                # `set_memory_growth` fail ("cannot be modified after being initialized"), and
                # its buffer of function graphs grows unread.  Shapes come from the graph walk.
                config, self.pending = self.pending, None
                self.install_exit_hooks()
                self.activate(config)
        except Exception as exc:
            self.fail(f"the agent could not hook TensorFlow ({exc!r}): nothing is captured",
                      exc)

    def was_traced(self, model_key: str) -> bool:
        coll = self.collection
        return coll is not None and model_key in coll.traced_keys

    def on_keras_trainer_imported(self, module: Any) -> None:
        self.keras_trainer = module
        if self.step_hooks:
            self._hook_keras(module)

    def _hook_keras(self, module: Any) -> None:
        try:
            from msprof_cli.collect import steps

            steps.install_keras_hooks(self, module)
        except Exception as exc:
            self.fail(f"the Keras 3 step hook could not be installed ({exc!r}): model.fit "
                      "steps are recorded as plain tf.function calls", exc)

    def install_exit_hooks(self) -> None:
        """atexit after the TF import (runs before TF's own, LIFO), SIGTERM, excepthook, fork."""
        if self.exit_hooks:
            return
        self.exit_hooks = True
        atexit.register(self._at_exit)
        try:
            if threading.current_thread() is threading.main_thread() and \
                    signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
                signal.signal(signal.SIGTERM, _on_exit_signal)
            if threading.current_thread() is threading.main_thread() and \
                    signal.getsignal(signal.SIGINT) is signal.default_int_handler:
                signal.signal(signal.SIGINT, _on_exit_signal)
        except (ValueError, OSError):
            pass
        previous = sys.excepthook

        def excepthook(tp, value, tb):  # type: ignore[no-untyped-def]
            self.reason = f"the script raised {tp.__name__}"
            if issubclass(tp, KeyboardInterrupt) and _exit_requested == signal.SIGINT:
                # our own re-raise of the user's Ctrl-C at a step boundary: one line, not a
                # chained traceback through TensorFlow and the step hooks (the data is saved
                # by the exit flush that follows)
                sys.stderr.write("[msprof] Interrupted (Ctrl-C): the profile up to here is "
                                 "saved.\n")
                return
            previous(tp, value, tb)

        sys.excepthook = excepthook
        try:
            os.register_at_fork(after_in_child=self._after_fork)
        except AttributeError:
            pass

    def _after_fork(self) -> None:
        # a forked worker inherits our state; it must neither trace nor write the PROF dir
        self.disabled = True
        self.collection = None

    def _restore_trace_fix(self) -> None:
        if self.trace_fix:  # after our last collection (atexit runs this before TF's)
            from msprof_cli.collect import traceme_fix

            traceme_fix.restore()

    def _at_exit(self) -> None:
        if self.collection is None or os.getpid() != self.pid:
            self._restore_trace_fix()
            return
        old = None
        try:
            if threading.current_thread() is threading.main_thread():
                # a second Ctrl-C must not cut the final flush short (section 13)
                old = signal.signal(signal.SIGINT, signal.SIG_IGN)
        except (ValueError, OSError):
            old = None
        try:
            self.deactivate()
        except Exception as exc:
            self.fail(f"the final flush failed ({exc!r}): the last chunk is lost", exc)
        finally:
            self._restore_trace_fix()
            if old is not None:
                try:
                    signal.signal(signal.SIGINT, old)
                except (ValueError, OSError):
                    pass

    # -- steps ----------------------------------------------------------------------------
    def step_begin(self, kind: str, name: str, fn_name: str, model_key: str | None,
                   static_key: str | None, untraced: bool = False
                   ) -> tuple[ExecRecord, Any] | None:
        """Record the start of an execution; `untraced` keeps the tracer off for it (a TF1
        FULL_TRACE shape run cannot share the process' one profiler slot)."""
        if _exit_requested is not None and threading.current_thread() is threading.main_thread():
            _raise_exit(_exit_requested)  # a library swallowed the signal's exception earlier
        coll = self.collection
        if coll is None or self.disabled:
            return None
        main = threading.current_thread() is threading.main_thread()
        if main:  # from here a SIGTERM/SIGINT waits for exit_point (see _on_exit_signal)
            self.main_steps += 1
        entered = _mono()
        try:
            with self.lock:
                self.seq += 1
                seq = self.seq
            fault("step")
            trace_it = coll.policy.should_trace(model_key) and not untraced
            if trace_it and coll.tracer is None:
                coll.start_tracer()
            elif not trace_it and coll.tracer is not None:
                # stop tracing: the steps until the next sample replay
                coll.flush(restart=False, defer=True)
            rec = ExecRecord(seq=seq, kind=kind, name=name, fn_name=fn_name,
                             model_key=model_key, static_key=static_key, start_ns=_mono(),
                             thread_id=threading.get_native_id())
            # the agent's own work since the previous step (its flushes, tracer starts and
            # stops): not the script's host time, the time model removes it
            rec.agent_before_ns = coll.agent_pending_ns + (rec.start_ns - entered)
            coll.agent_pending_ns = 0
            marker = None
            if coll.tracer is not None:
                from msprof_cli.collect.tf_trace import traceme

                rec.profiled = True
                marker = traceme("msprof_step", seq=seq, _r=1)
            return rec, (marker, coll.tracer)
        except BaseException as exc:
            if main and self.main_steps:
                self.main_steps -= 1  # no token: step_end will not run
            if not isinstance(exc, Exception):
                raise
            self.fail(f"a step could not be recorded ({exc!r})", exc)
            return None

    def step_end(self, token: tuple[ExecRecord, Any] | None) -> None:
        if token is None:
            return
        rec, (marker, tracer) = token
        try:
            self._step_end(rec, marker, tracer)
        finally:
            # only now: a signal during the bookkeeping (a chunk flush writing raw records)
            # also waits for exit_point
            if self.main_steps and threading.current_thread() is threading.main_thread():
                self.main_steps -= 1

    def trace_now(self, rec: ExecRecord) -> None:
        """Trace the rest of this step (its call is about to run a graph the sampling could
        not know, e.g. a new input signature): start the tracer and the step marker now."""
        coll = self.collection
        if coll is None or rec.profiled or self.disabled:
            return
        try:  # inside the step's span: its time is replaced by the emulated step's
            if coll.tracer is None:
                coll.start_tracer()
            if coll.tracer is not None:
                from msprof_cli.collect.tf_trace import traceme

                rec.profiled = True
                rec.late_marker = traceme("msprof_step", seq=rec.seq, _r=1)
                rec.late_tracer = coll.tracer
        except Exception as exc:
            self.fail(f"a step could not be traced ({exc!r})", exc)

    def _step_end(self, rec: ExecRecord, marker: Any, tracer: Any) -> None:
        if rec.late_marker is not None:
            marker, tracer = rec.late_marker, rec.late_tracer
        try:
            if marker is not None:
                marker.Stop()
            rec.end_ns = _mono()
            coll = self.collection
            if coll is None or os.getpid() != coll.pid:
                return
            if rec.profiled and coll.tracer is not tracer:
                rec.profiled = False  # a flush happened inside (nested); the marker is lost
            coll.records.append(rec)
            if rec.profiled and rec.model_key:
                coll.traced_keys.add(rec.model_key)
            coll.steps_in_chunk += 1
            coll.pending_steps += 1
            key = rec.model_key or rec.static_key
            coll.policy.done(key, rec.profiled, rec.traced_now, rec.end_ns - rec.start_ns)
            if coll.due():
                coll.flush(restart=coll.tracer is not None)
            coll.agent_pending_ns += _mono() - rec.end_ns
        except Exception as exc:
            self.fail(f"a step could not be recorded ({exc!r})", exc)

    def exit_point(self) -> None:
        """Called last by every step wrapper: a SIGTERM that arrived during the step exits here,
        at a step boundary, where no TF/Keras context manager is half entered."""
        if _exit_requested is not None and self.main_steps == 0 and \
                threading.current_thread() is threading.main_thread():
            _raise_exit(_exit_requested)


_exit_requested: int | None = None  # SIGTERM / SIGINT received, not yet acted on


def _on_exit_signal(signum: int, frame: Any) -> None:
    # SIGTERM -> SystemExit(143) (runs `finally` blocks and atexit, i.e. the final flush;
    # same status as SIG_DFL); SIGINT -> KeyboardInterrupt, as Python's default handler.
    # Raised in the middle of a step, the exception can land inside TF's own bookkeeping:
    # autograph's ag_ctx asserted and turned a SIGTERM into an AssertionError (rc 1, seen in
    # CI), and a KeyboardInterrupt raised inside tf.data/TF internals was swallowed under load
    # so the script kept training.  So during a step the signal is only recorded, and
    # `Agent.exit_point` raises it when the step returns; `step_begin` raises it again should
    # a library swallow it.  A second signal acts at once (Ctrl-C twice); a SIGTERM'd step
    # that does not return within _SIGTERM_GRACE_S ends the process the default way (the
    # data up to the last flush is on disk, as after SIGKILL).
    global _exit_requested, _grace_started
    again = _exit_requested == signum
    _exit_requested = signum
    if AGENT.main_steps == 0:
        if _in_finalizer(frame) or _in_framework(frame):
            # an exception raised in a weakref callback or __del__ is printed and dropped
            # ("Exception ignored in ..."), and one raised inside TensorFlow / Keras (a
            # tf.function being traced, a C++ error being wrapped) can become another error
            # (pybind11's "MISMATCH of original and normalized active exception types": rc 1,
            # seen in CI): the signal is delivered again a moment later, where the main thread
            # runs the script's or our code, as the first one
            _exit_requested = None
            timer = threading.Timer(0.01, _thread.interrupt_main, args=(signum,))
            timer.daemon = True
            timer.start()
            if signum == signal.SIGTERM and not _grace_started:
                _grace_started = True  # a script that never leaves the framework still ends
                grace = threading.Timer(_SIGTERM_GRACE_S, _die_by_default, args=(signum,))
                grace.daemon = True
                grace.start()
            return
        _raise_exit(signum)
    if again:
        if signum == signal.SIGTERM:
            _die_by_default(signum)
        _raise_exit(signum)
    if signum == signal.SIGTERM:
        timer = threading.Timer(_SIGTERM_GRACE_S, _die_by_default, args=(signum,))
        timer.daemon = True
        timer.start()


_SIGTERM_GRACE_S = 60.0
_grace_started = False  # the grace timer of a deferred SIGTERM is running
# the packages whose code an exit signal is not raised in (their directories, once imported)
_FRAMEWORKS = ("tensorflow", "keras", "tf_keras")


def _in_framework(frame: Any, dirs: tuple[str, ...] | None = None) -> bool:
    """The interrupted code is TensorFlow's or Keras' own (the innermost frame's file lies in
    one of their package directories, `dirs` for a test)."""
    if frame is None:
        return False
    if dirs is None:
        dirs = tuple(os.path.dirname(m.__file__) + os.sep for m in
                     (sys.modules.get(n) for n in _FRAMEWORKS)
                     if m is not None and getattr(m, "__file__", None))
    return bool(dirs) and frame.f_code.co_filename.startswith(dirs)


def _in_finalizer(frame: Any) -> bool:
    """The interrupted code is a finalizer (a weakref callback, a __del__), where Python
    ignores an exception instead of propagating it."""
    while frame is not None:
        code = frame.f_code
        if code.co_name == "__del__" or code.co_filename.endswith("weakref.py"):
            return True
        frame = frame.f_back
    return False


def _raise_exit(signum: int) -> None:
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise SystemExit(128 + signum)


def _die_by_default(signum: int) -> None:
    try:
        signal.signal(signum, signal.SIG_DFL)  # main thread only
    except (ValueError, OSError):
        os._exit(128 + signum)  # the grace timer's thread: same status as death by signal
    os.kill(os.getpid(), signum)


AGENT = Agent()
