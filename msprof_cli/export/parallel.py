"""Run independent export jobs in forked worker processes when more than one core is free.

The export of one PROF dir splits into jobs that share the decoded tables read-only (each
slice of a big timeline, each big summary, the devices of the legacy layout).  Every job is
*forked* from the calling process at the moment it starts, so it inherits the decoded data
copy-on-write instead of receiving it pickled, and it sees everything the caller prepared up
to then: the caller may keep preparing (e.g. building the timeline layers) while the first
jobs already run, and submit the jobs that need that preparation afterwards.  Only each
job's small result (paths written, advice) travels back, pickled through a pipe.

With one usable core (or ``MSPROF_EXPORT_WORKERS=1``), or where fork does not exist, each
job runs in the calling process when it is submitted: the files are the same bytes either
way (tests/test_export_chunked.py).
"""
from __future__ import annotations

import os
import pickle
import select
import signal
import sys
from collections.abc import Callable
from typing import Any

from msprof_cli.errors import ExportError


def usable_cores() -> int:
    """Cores this process may run on (affinity mask), overridable by MSPROF_EXPORT_WORKERS."""
    env = os.environ.get("MSPROF_EXPORT_WORKERS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


class _Child:
    def __init__(self, index: int, pid: int, fd: int) -> None:
        self.index, self.pid, self.fd = index, pid, fd
        self.data = bytearray()


class JobPool:
    """``submit(job)`` now or when a slot frees; ``results()`` in submission order.

    `workers` processes run at once.  While the caller is still preparing work
    (``busy=True``, the default until ``results()``), it counts as one of them, so the
    machine is not oversubscribed: with 2 cores one job runs beside the preparing caller,
    then two jobs run while the caller only waits."""

    def __init__(self, workers: int | None = None) -> None:
        self.workers = usable_cores() if workers is None else max(1, workers)
        self.parallel = self.workers > 1 and hasattr(os, "fork")
        self.queue: list[tuple[int, Callable[[], Any]]] = []
        self.running: dict[int, _Child] = {}  # fd -> child
        self.done: dict[int, Any] = {}
        self.count = 0
        self.caller_busy = True
        self.failure: BaseException | None = None  # first failed job: nothing new starts

    # -- public -----------------------------------------------------------------------
    def submit(self, job: Callable[[], Any]) -> None:
        index = self.count
        self.count += 1
        if not self.parallel:
            self.done[index] = job()
            return
        self.queue.append((index, job))
        try:
            self._poll(block=False)
            self._check()
            self._start()
        except BaseException:
            self._kill_all()
            raise

    def results(self) -> list[Any]:
        """Wait for every job; re-raise the first failure (in submission order)."""
        self.caller_busy = False
        try:
            self._start()
            while self.running or self.queue:
                self._poll(block=True)
                self._check()
                self._start()
        except BaseException:
            self._kill_all()
            raise
        out = []
        for i in range(self.count):
            ok, value = self.done[i] if self.parallel else (True, self.done[i])
            if not ok:
                raise value
            out.append(value)
        return out

    # -- internals --------------------------------------------------------------------
    def _check(self) -> None:
        """Fail fast: after a job failed (a full disk...), nothing else is started and the
        running jobs are stopped; files they had not finished are never published."""
        if self.failure is not None:
            raise self.failure
    def _slots(self) -> int:
        return self.workers - (1 if self.caller_busy else 0) - len(self.running)

    def _start(self) -> None:
        while self.queue and self._slots() > 0:
            index, job = self.queue.pop(0)
            self._fork(index, job)

    def _fork(self, index: int, job: Callable[[], Any]) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the worker: run, send the pickled outcome, leave without cleanup
            os.close(r)
            code = 0
            try:
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                # stopped by the pool (another job failed): unwind, so that AtomicFile
                # removes the temporary file it was writing
                signal.signal(signal.SIGTERM, _stop_worker)
                try:
                    payload = pickle.dumps((True, job()))
                except BaseException as exc:  # noqa: BLE001 - reported to the caller
                    code = 1
                    try:
                        payload = pickle.dumps((False, exc))
                    except Exception:
                        payload = pickle.dumps((False, ExportError(
                            f"an export worker failed: {type(exc).__name__}: {exc}")))
                view = memoryview(payload)
                while view:
                    view = view[os.write(w, view):]
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
        os.close(w)
        self.running[r] = _Child(index, pid, r)

    def _poll(self, block: bool) -> None:
        if not self.running:
            return
        ready, _, _ = select.select(list(self.running), [], [], None if block else 0)
        for fd in ready:
            child = self.running[fd]
            chunk = os.read(fd, 1 << 20)
            if chunk:
                child.data += chunk
                continue
            os.close(fd)
            del self.running[fd]
            _, status = os.waitpid(child.pid, 0)
            ok, value = self.done[child.index] = self._outcome(child, status)
            if not ok and self.failure is None:
                self.failure = value

    @staticmethod
    def _outcome(child: _Child, status: int) -> tuple[bool, Any]:
        if child.data:
            try:
                return pickle.loads(bytes(child.data))
            except Exception:
                pass
        if os.WIFSIGNALED(status):
            why = f"was killed by signal {os.WTERMSIG(status)}"
        else:
            why = f"exited with status {os.waitstatus_to_exitcode(status)}"
        return False, ExportError(f"an export worker (pid {child.pid}) {why} before it "
                                  f"finished; files it was writing were not published. "
                                  f"Run the export again (MSPROF_EXPORT_WORKERS=1 runs it "
                                  f"in one process).")

    def _kill_all(self) -> None:
        for child in self.running.values():
            try:
                os.kill(child.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for fd, child in list(self.running.items()):
            try:
                os.waitpid(child.pid, 0)
            except ChildProcessError:
                pass
            os.close(fd)
        self.running.clear()
        self.queue.clear()


def _stop_worker(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def run_jobs(jobs: list[Callable[[], Any]], workers: int | None = None) -> list[Any]:
    """Results of `jobs` in order; up to `workers` (default: usable cores) run at once."""
    pool = JobPool(workers)
    pool.caller_busy = False  # everything is prepared: the caller only waits
    for job in jobs:
        pool.submit(job)
    return pool.results()
