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

import gc
import os
import pickle
import select
import signal
import struct
import sys
from collections.abc import Callable
from typing import Any

from msprof_cli.errors import ExportError

from .memory import release


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
    ``submit_group(jobs, finish)``: jobs whose results `finish` combines in this process
    once all of them are done (the pieces of one big file); it counts as one result.

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
        self.count = 0  # results (handles) so far
        self.jobs = 0  # jobs so far
        self.groups: list[tuple[list[int], Callable[[list[Any]], Any] | None]] = []
        self.discards: list[tuple[list[int], Callable[[list[Any]], None]]] = []
        self.caller_busy = True
        self.failure: BaseException | None = None  # first failed job: nothing new starts

    # -- public -----------------------------------------------------------------------
    def submit(self, job: Callable[[], Any]) -> int:
        """Start (or queue) `job`; returns the index of its result."""
        self.groups.append(([self._submit(job)], None))
        self.count += 1
        return self.count - 1

    def submit_group(self, jobs: list[Callable[[], Any]], finish: Callable[[list[Any]], Any],
                     discard: Callable[[list[Any]], None] | None = None) -> int:
        """`discard(results of the jobs that succeeded)` runs instead of `finish` when the
        pool fails (removes the pieces those jobs left)."""
        if self.parallel and 1 < len(jobs) <= _MAX_SHARED:
            jobs, finish, discard = _shared(jobs, finish, discard, min(self.workers, len(jobs)))
        idx: list[int] = []
        if discard is not None:
            self.discards.append((idx, discard))
        for job in jobs:
            idx.append(self._submit(job))
        self.groups.append((idx, finish))
        self.count += 1
        return self.count - 1

    def _submit(self, job: Callable[[], Any]) -> int:
        index = self.jobs
        self.jobs += 1
        if not self.parallel:
            self.done[index] = job()
            return index
        self.queue.append((index, job))
        try:
            self._poll(block=False)
            self._check()
            self._start()
        except BaseException:
            self._kill_all()
            self._discard()
            raise
        return index

    def results(self) -> list[Any]:
        """Wait for every job; re-raise the first failure (in submission order)."""
        self.caller_busy = False
        release()  # the caller's preparation temporaries: not inherited by the next workers
        try:
            self._start()
            while self.running or self.queue:
                self._poll(block=True)
                self._check()
                self._start()
        except BaseException:
            self._kill_all()
            self._discard()
            raise
        values = []
        for i in range(self.jobs):
            ok, value = self.done[i] if self.parallel else (True, self.done[i])
            if not ok:
                raise value
            values.append(value)
        gc.unfreeze()
        return [finish([values[i] for i in idx]) if finish is not None else values[idx[0]]
                for idx, finish in self.groups]

    # -- internals --------------------------------------------------------------------
    def _discard(self) -> None:
        for idx, discard in self.discards:
            ok = [self.done[i][1] for i in idx if i in self.done and self.done[i][0]] \
                if self.parallel else [self.done[i] for i in idx if i in self.done]
            try:
                discard(ok)
            except OSError:
                pass
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


_MAX_SHARED = 16_000  # job numbers (4 bytes each) that fit in a pipe's 64 KiB buffer


def _shared(jobs: list[Callable[[], Any]], finish: Callable[[list[Any]], Any],
            discard: Callable[[list[Any]], None] | None, runners: int
            ) -> tuple[list[Callable[[], Any]], Callable[[list[Any]], Any],
                       Callable[[list[Any]], None]]:
    """The jobs of a group (the slices of one file) run by `runners` workers that take them
    one at a time from a pipe: one fork per runner instead of one per job, i.e. the
    copy-on-write copies of the parent's pages a worker makes are paid once per runner
    (at 1M tasks: ~1.3 GB of page copies with a fork per slice)."""
    r, w = os.pipe()
    os.write(w, struct.pack(f"<{len(jobs)}I", *range(len(jobs))))
    os.close(w)  # readers see EOF once every number is taken

    def runner() -> list[tuple[int, Any]]:
        done: list[tuple[int, Any]] = []
        try:
            while len(b := os.read(r, 4)) == 4:  # a 4-byte pipe read is atomic
                i = struct.unpack("<I", b)[0]
                done.append((i, jobs[i]()))
        except BaseException:
            if discard is not None:
                discard([v for _, v in done])
            raise
        return done

    def flat(results: list[list[tuple[int, Any]]]) -> list[Any]:
        return [v for _, v in sorted((p for res in results for p in res), key=lambda p: p[0])]

    def close() -> None:
        try:
            os.close(r)
        except OSError:
            pass

    def finish_all(results: list[list[tuple[int, Any]]]) -> Any:
        close()
        return finish(flat(results))

    def discard_all(results: list[list[tuple[int, Any]]]) -> None:
        close()
        if discard is not None:
            discard(flat(results))

    return [runner] * runners, finish_all, discard_all


def _stop_worker(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def run_jobs(jobs: list[Callable[[], Any]], workers: int | None = None) -> list[Any]:
    """Results of `jobs` in order; up to `workers` (default: usable cores) run at once."""
    pool = JobPool(workers)
    pool.caller_busy = False  # everything is prepared: the caller only waits
    for job in jobs:
        pool.submit(job)
    return pool.results()
