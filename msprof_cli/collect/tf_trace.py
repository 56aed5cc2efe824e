"""TF's host tracer (TraceMe) driven through our own `ProfilerSession`
(docs/formats/tensorflow-capture.md 4).

One `Tracer` = one profiler session = one chunk.  Collecting ends the session (XSpace export
into a fresh directory: the export names its run dir to the second, so chunks never share
one), and the agent starts a new session for the next chunk.  Only one profiler may run per
process; if the user's own profiler holds the slot, `start` returns False and the agent
records that the chunk was not traced.
"""
from __future__ import annotations

import glob
import os
import shutil
import tempfile
import time
from typing import Any

# host tracer level 2 (op events; 3 adds nothing useful in TF 2.21), Python and device off.
# TF 2.21 warns "expects an i value" for these and then uses its defaults, which are the
# same values (host 2, python 0); passing no options keeps the child's stderr clean.
TRACER_OPTIONS: dict[str, Any] = {}


class Tracer:
    """A running host-tracer session writing into its own temporary directory."""

    def __init__(self) -> None:
        from tensorflow.python.profiler.internal import _pywrap_profiler, _pywrap_traceme

        self._pywrap_profiler = _pywrap_profiler
        self._traceme = _pywrap_traceme
        self.logdir = tempfile.mkdtemp(prefix="msprof_chunk_")
        self.session: Any = None
        self.started_mono_ns = 0
        self.anchor_mono_ns = 0

    def start(self) -> bool:
        session = self._pywrap_profiler.ProfilerSession()
        try:
            session.start(self.logdir, TRACER_OPTIONS)
        except Exception:  # AlreadyExistsError: the user's profiler holds the slot
            shutil.rmtree(self.logdir, ignore_errors=True)
            return False
        self.session = session
        self.started_mono_ns = time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)
        # zero-length anchor on the trace clock carrying CLOCK_MONOTONIC_RAW (4.4): maps the
        # chunk's epoch timestamps onto the raw monotonic clock of the host records
        self.anchor_mono_ns = time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)
        self._traceme.TraceMe("msprof_clock_anchor", mono=str(self.anchor_mono_ns)).Stop()
        return True

    def collect(self) -> bytes | None:
        """End the session and return the serialized XSpace (None if nothing was written)."""
        session, self.session = self.session, None
        if session is None:
            return None
        try:
            session.export_to_tb()
            files = glob.glob(os.path.join(self.logdir, "plugins", "profile", "*", "*.xplane.pb"))
            if not files:
                return None
            with open(files[0], "rb") as fh:
                return fh.read()
        finally:
            shutil.rmtree(self.logdir, ignore_errors=True)

    def discard(self) -> None:
        """Stop without keeping anything (fork child, fatal errors)."""
        session, self.session = self.session, None
        if session is not None:
            try:
                session.stop()
            except Exception:
                pass
        shutil.rmtree(self.logdir, ignore_errors=True)


def traceme(name: str, **stats: Any) -> Any:
    """Start a TraceMe (`.Stop()` ends it); free when no profiler runs."""
    from tensorflow.python.profiler.internal import _pywrap_traceme

    return _pywrap_traceme.TraceMe(name, **stats)
