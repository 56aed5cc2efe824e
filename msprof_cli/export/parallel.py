"""Run independent export jobs in forked worker processes when more than one core is free.

The export of one PROF dir splits into jobs that share the decoded tables read-only (the
timelines and the summaries of mindstudio; the devices of the legacy layout).  Workers are
*forked*, so they inherit the decoded data copy-on-write instead of receiving it pickled;
only each job's small result (paths written, advice) travels back.  The last job runs in
the calling process itself.  With one usable core (or ``MSPROF_EXPORT_WORKERS=1``) the jobs
run one after another in this process: the files are the same bytes either way.
"""
from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

_JOBS: list[Callable[[], Any]] = []  # read by forked workers (inherited, never pickled)


def usable_cores() -> int:
    """Cores this process may run on (affinity mask), overridable by MSPROF_EXPORT_WORKERS."""
    env = os.environ.get("MSPROF_EXPORT_WORKERS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


def _run(i: int) -> Any:
    return _JOBS[i]()


def run_jobs(jobs: list[Callable[[], Any]], workers: int | None = None) -> list[Any]:
    """Results of `jobs` in order; up to `workers` (default: usable cores) run at once."""
    workers = min(len(jobs), usable_cores() if workers is None else workers)
    if workers <= 1 or "fork" not in mp.get_all_start_methods():
        return [job() for job in jobs]
    global _JOBS
    _JOBS = list(jobs)
    try:
        with ProcessPoolExecutor(max_workers=workers - 1,
                                 mp_context=mp.get_context("fork")) as pool:
            futures = [pool.submit(_run, i) for i in range(len(jobs) - 1)]
            last = jobs[-1]()  # the calling process works too
            return [f.result() for f in futures] + [last]
    finally:
        _JOBS = []
