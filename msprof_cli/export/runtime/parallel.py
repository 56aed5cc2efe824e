"""Run independent export jobs in forked worker processes when more than one core is free.

The export of one PROF dir splits into jobs that share the decoded tables read-only (each
summary, the timelines, the tensor_info decode, the slices of a windowed trace).  Every job is
*forked* from the calling process at the moment it starts, so it inherits the decoded data
copy-on-write instead of receiving it pickled, and it sees everything the caller prepared up
to then: the caller may keep preparing (e.g. building the timeline layers) while the first
jobs already run, and submit the jobs that need that preparation afterwards.  Only each
job's small result (paths written, advice) travels back, pickled through a pipe.

A pool whose caller has nothing else to do (a one-window plan: `caller_runs`) holds its
jobs until `results` and then runs them in *lanes*: the calling process and one forked lane
per other core take the next job from a pipe whenever they are free.  The caller's jobs need
no fork, make no copy-on-write copies of its pages and send back no pickle; the forked lane
is forked once, when everything is prepared.


With one usable core (or ``MSPROF_EXPORT_WORKERS=1``), or where fork does not exist, each
job runs in the calling process when it is submitted: the files are the same bytes either
way (tests/test_export_chunked.py).  So does every job of a *small* export
(`in_process`): below `IN_PROCESS_TASKS` tasks, forking a worker, its
copy-on-write faults and pickling its outputs back cost more than the second core saves.
An explicit ``MSPROF_EXPORT_WORKERS=N`` (N > 1) forks whatever the size.
"""
from __future__ import annotations

import gc
import os
import pickle
import select
import signal
import struct
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from msprof_cli.errors import ExportError

from .memory import release

Job = Callable[[], Any]


# a one-window plan of at most this many device tasks runs its jobs in the export process
# (docs/performance.md "Small exports"; round 4: since its jobs run in two lanes -- one fork,
# not one per job -- forking wins from a few thousand tasks on: 4k tasks 0.65 s against
# 0.74 s in-process, 10k 0.87 against 0.92 s, medians of 8 alternated runs)
IN_PROCESS_TASKS = 2_000
_in_process = False  # set by `in_process` for the jobs of a small export


def forced_workers() -> bool:
    """MSPROF_EXPORT_WORKERS names a number of workers (obeyed whatever the size)."""
    env = os.environ.get("MSPROF_EXPORT_WORKERS", "").strip()
    return env.isdigit() and int(env) > 0


@contextmanager
def in_process(tasks: int) -> Iterator[bool]:
    """Meanwhile, the jobs of every pool run in this process when the export has at most
    `IN_PROCESS_TASKS` tasks (and no worker count is forced); yields whether they do."""
    global _in_process
    small = tasks <= IN_PROCESS_TASKS and not forced_workers()
    old, _in_process = _in_process, _in_process or small
    try:
        yield _in_process
    finally:
        _in_process = old


def usable_cores() -> int:
    """Cores this process may run on (affinity mask), overridable by MSPROF_EXPORT_WORKERS."""
    env = os.environ.get("MSPROF_EXPORT_WORKERS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


def parallel_available() -> bool:
    """More than one usable core and os.fork, not a small export: jobs run in forked
    workers."""
    return not _in_process and usable_cores() > 1 and hasattr(os, "fork")


class _Child:
    def __init__(self, index: int, pid: int, fd: int) -> None:
        self.index, self.pid, self.fd = index, pid, fd
        self.data = bytearray()


class JobPool:
    """``submit(job)`` now or when a slot frees; ``results()`` in submission order.

    `workers` processes run at once.  While the caller is still preparing work
    (until ``results()``), it counts as one of them, so the machine is not oversubscribed:
    with 2 cores one job runs beside the preparing caller, then two jobs run while the
    caller only waits."""

    def __init__(self, workers: int | None = None) -> None:
        self.workers = usable_cores() if workers is None else max(1, workers)
        self.forks = self.workers > 1 and hasattr(os, "fork")
        self.queue: list[tuple[int, Job]] = []
        self.running: dict[int, _Child] = {}  # fd -> child
        self.done: dict[int, tuple[bool, Any]] = {}  # job index -> (ok, value)
        self.jobs = 0
        self.caller_busy = True
        # the caller runs queued jobs itself while it waits (`results`, `_lanes`): it is
        # one of the `workers`, and a job it runs needs no fork, no copy-on-write faults of
        # the parent's pages and no pickled result (a one-window plan: the caller has
        # nothing else to do once its jobs are submitted)
        self.caller_runs = False
        self.waiting = False  # in `results`
        self.failure: BaseException | None = None  # first failure: nothing new starts

    @property
    def parallel(self) -> bool:
        """Jobs fork (not in a small export: `in_process`, which may start after the pool
        was made, before its first job)."""
        return self.forks and (not _in_process or bool(self.running or self.queue))

    # -- public -----------------------------------------------------------------------
    def submit(self, job: Job) -> int:
        """Start (or queue) `job`; returns the index of its result."""
        try:
            index = self._submit(job)
            self._check()
        except BaseException:
            self.cancel()
            raise
        return index

    def results(self) -> list[Any]:
        """Wait for every job; re-raise the first failure."""
        self.caller_busy = False
        self.waiting = True
        release()  # the caller's preparation temporaries: not inherited by the next workers
        try:
            if self.caller_runs and self.parallel and 0 < len(self.queue) <= _MAX_SHARED:
                self._lanes()
            self._start()
            self._wait(lambda: bool(self.running or self.queue))
        finally:
            gc.unfreeze()
        return [self.done[i][1] for i in range(self.jobs)]

    def _lanes(self) -> None:
        """The queued jobs taken one at a time from a pipe by this process and by one forked
        lane per free core: whoever is free takes the next (in submission order), so no
        core waits for a fork that only a busy caller could make.  A lane sends its jobs'
        results together when the pipe is empty."""
        queued, self.queue = self.queue, []
        r = _number_pipe(len(queued))

        def lane() -> list[tuple[int, Any]]:
            return [(queued[k][0], queued[k][1]()) for k in _take(r)]

        try:
            for _ in range(min(self._slots(), len(queued) - 1)):
                self._fork(_LANE, lane)
            for k in _take(r):
                self._run_here(*queued[k])
                self._poll(block=False)
                self._check()
        except BaseException:
            self.cancel()
            raise
        finally:
            os.close(r)

    def wait_below(self, pending: int) -> None:
        """Wait until fewer than `pending` jobs run or wait (back-pressure: a caller that
        makes jobs faster than they finish holds their inputs meanwhile)."""
        self._wait(lambda: len(self.running) + len(self.queue) >= pending
                   and bool(self.running))

    def _wait(self, more: Callable[[], bool]) -> None:
        """Take finished jobs and start queued ones while `more()`; on any failure every
        job is stopped and the failure raised."""
        try:
            while more():
                self._poll(block=True)
                self._check()
                self._start()
            self._check()
        except BaseException:
            self.cancel()
            raise

    def cancel(self) -> None:
        """Stop every running or queued job (the caller failed); nothing is published."""
        self._kill_all()

    # -- internals --------------------------------------------------------------------
    def _run_here(self, index: int, job: Job) -> None:
        """Run job `index` in this process (its failure is the pool's)."""
        try:
            self.done[index] = (True, job())
        except BaseException as exc:
            self.done[index] = (False, exc)
            if self.failure is None:
                self.failure = exc
            raise

    def _submit(self, job: Job) -> int:
        index = self.jobs
        self.jobs += 1
        if not self.parallel:
            self._run_here(index, job)
            return index
        self.queue.append((index, job))
        self._poll(block=False)
        self._check()
        self._start()
        return index

    def _check(self) -> None:
        """Fail fast: after a job failed (a full disk...), nothing else is started and the
        running jobs are stopped; files they had not finished are never published."""
        if self.failure is not None:
            raise self.failure

    def _slots(self) -> int:
        caller = self.caller_busy or self.caller_runs  # the caller's own core
        return self.workers - (1 if caller else 0) - len(self.running)

    def _start(self) -> None:
        if self.caller_runs and self.caller_busy is False and not self.waiting:
            return  # every job waits for `results` (`_lanes`)
        while self.queue and self._slots() > 0:
            index, job = self.queue.pop(0)
            self._fork(index, job)

    def _fork(self, index: int, job: Job) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        # the parent's objects move to the permanent generation: a collection in the worker
        # then never writes their GC headers, i.e. never copies their pages (copy-on-write)
        gc.freeze()
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
            ok, value = self._outcome(child, status)
            if ok and child.index == _LANE:  # a lane's jobs (`_lanes`)
                for index, result in value:
                    self.done[index] = (True, result)
            else:
                self.done[child.index] = (ok, value)
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


_MAX_SHARED = 16_000  # job numbers (4 bytes each) that fit in a pipe's 64 KiB buffer


def _number_pipe(n: int) -> int:
    """The read end of a pipe holding the numbers 0..n-1 (at most _MAX_SHARED), closed for
    writing: readers see EOF once every number is taken."""
    r, w = os.pipe()
    os.write(w, struct.pack(f"<{n}I", *range(n)))
    os.close(w)
    return r


def _take(r: int) -> Iterator[int]:
    """The numbers this process takes from a `_number_pipe` (a 4-byte pipe read is atomic:
    each number goes to exactly one reader)."""
    while len(b := os.read(r, 4)) == 4:
        yield struct.unpack("<I", b)[0]
_LANE = -1  # the job index of a forked lane of `JobPool._lanes` (it runs several)


def _stop_worker(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def run_jobs(jobs: list[Job], workers: int | None = None) -> list[Any]:
    """Results of `jobs` in order; up to `workers` (default: usable cores) run at once."""
    pool = JobPool(workers)
    # everything is prepared: the caller runs them too, beside one lane per other core
    pool.caller_busy, pool.caller_runs = False, True
    for job in jobs:
        pool.submit(job)
    return pool.results()
