"""Export the PROF dirs of a job dir in parallel on Dask (docs/cluster.md).

One Dask task per PROF dir (a rank): it runs the ordinary export of that PROF dir
(`export.api.run_export(prof, quiet=True)`) in a Dask worker process and returns what the
console needs (files, model choices, advice, warnings), so the files are the serial export's,
byte for byte.  A rank that fails is reported by name and the others still finish; a worker
killed midway is retried by Dask on another worker (its export starts again: every output is
written under a temporary name and renamed when complete, so no partial file ever carries a
final name).

Where it runs:
* `--scheduler ADDRESS` (or `DASK_SCHEDULER_ADDRESS`): an existing cluster.  Its workers must
  read the PROF dirs at the same path (a shared file system) and have msprof_cli installed.
* else, with `auto` (the default): an embedded LocalCluster of one single-threaded worker
  process per usable core (at most one per PROF dir) when the job is worth it -- at least two
  PROF dirs holding at least `DASK_MIN_BYTES` of raw data in all on a machine with at least
  `DASK_MIN_CORES` usable cores.  Otherwise the PROF dirs are exported one after the other,
  each with the fork job pool (parallel.py): starting a LocalCluster costs 2-3 s, more than a
  small job.  (16 ranks x 100k tasks on 2 cores, two runs under other sessions' load: Dask
  67 s / 49 s, job pool 56 s / 89 s, serial 140 s; docs/performance.md.)
* `local` forces the LocalCluster, `off` the serial export.

In a LocalCluster every worker exports with one core (`MSPROF_EXPORT_WORKERS=1`): the
parallelism is across ranks, so the fork pool inside would only oversubscribe the cores.
Dask is imported only here, only when it is used: `msprof --help` never loads it.
"""
from __future__ import annotations

import os
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

DASK_MIN_BYTES = 256 * 1024 * 1024
DASK_MIN_CORES = 2  # ranks in parallel keep every core busy; one export alone has serial phases
MODES = ("auto", "local", "off")
KILL_ENV = "MSPROF_TEST_KILL_EXPORT"  # tests: "<PROF name>[:always]" kills that rank's worker


@dataclass
class RankOutcome:
    """What the export of one PROF dir gave back to the client."""

    prof: str
    files: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    advice: list[Any] = field(default_factory=list)
    models: list[Any] = field(default_factory=list)
    error: str = ""  # the message of a failed export ("" when it succeeded)
    error_type: str = ""


def raw_bytes(prof: Path) -> int:
    total = 0
    for data in Path(prof).glob("*/data"):
        if data.is_dir() and not data.is_symlink():
            total += sum(p.stat().st_size for p in data.iterdir()
                         if p.is_file() and not p.is_symlink())
    return total


def scheduler_address(cli: str | None) -> str | None:
    return cli or os.environ.get("DASK_SCHEDULER_ADDRESS") or None


def wanted(profs: list[Path], mode: str, scheduler: str | None, cores: int) -> str | None:
    """'remote', 'local' or None (serial) for this job."""
    if scheduler:
        return "remote"
    if mode == "off" or len(profs) < 2:
        return None
    if mode == "local":
        return "local"
    if cores < DASK_MIN_CORES or sum(raw_bytes(p) for p in profs) < DASK_MIN_BYTES:
        return None
    return "local"


def _maybe_die(prof: Path) -> None:
    """Fault injection for the tests: kill this worker process (SIGKILL, as the OOM killer
    would) midway through the export of `prof`, when it renames its first output file into
    place -- on the first attempt only (a marker in $MSPROF_TEST_KILL_MARKS remembers it), or
    on every attempt with ":always".  An audit hook on the rename makes the moment exact: a
    watcher thread polling for the file lost the race to a fast export under load."""
    spec = os.environ.get(KILL_ENV, "")
    name, _, how = spec.partition(":")
    if not spec or name != prof.name:
        return
    marker = Path(os.environ.get("MSPROF_TEST_KILL_MARKS", "/tmp")) / f".killed_{prof.name}"
    if how != "always" and marker.exists():
        return
    marker.touch()
    import signal
    import sys

    root = os.path.realpath(prof) + os.sep

    def hook(event: str, args: tuple) -> None:
        if event != "os.rename" or len(args) < 2:  # os.replace raises os.rename too
            return
        try:
            dst = os.path.realpath(os.fsdecode(args[1]))
        except TypeError:  # a descriptor-relative name
            return
        if dst.startswith(root) and not os.path.basename(dst).startswith("."):
            os.kill(os.getpid(), signal.SIGKILL)

    sys.addaudithook(hook)


def export_rank(run_export: Callable[..., Any], prof: str, options: dict[str, Any],
                serial_inside: bool) -> RankOutcome:
    """The Dask task: export one PROF dir as `msprof export` would, quietly.  `run_export`
    is export.api's (passed in, pickled by name: this module does not import the exporter
    that imports it)."""
    from msprof_cli.errors import MsprofError

    if serial_inside:
        os.environ["MSPROF_EXPORT_WORKERS"] = "1"
    out = RankOutcome(prof=prof)
    try:
        _maybe_die(Path(prof))
        res = run_export(Path(prof), quiet=True, scheduler=None, distributed="off", **options)
    except MsprofError as exc:
        out.error, out.error_type = str(exc), type(exc).__name__
        return out
    except Exception as exc:  # a bug: the traceback travels back, the other ranks go on
        out.error = f"{exc!r}\n{traceback.format_exc(limit=8)}"
        out.error_type = type(exc).__name__
        return out
    out.files = [str(f) for f in res.files]
    out.warnings, out.advice, out.models = res.warnings, res.advice, res.models
    return out


def run_ranks(run_export: Callable[..., Any], profs: list[Path], options: dict[str, Any],
              where: str, scheduler: str | None, cores: int) -> list[RankOutcome]:
    """Export every PROF dir on Dask; one outcome per PROF dir, in their order."""
    got = map_ranks(export_rank, [(run_export, str(p), options, where == "local")
                                  for p in profs], [f"msprof-export-{p.name}" for p in profs],
                    where, scheduler, cores)
    return [r if isinstance(r, RankOutcome) else
            RankOutcome(prof=str(p), error=_why(r), error_type=type(r).__name__)
            for p, r in zip(profs, got)]


def map_ranks(fn: Callable[..., Any], args: list[tuple], keys: list[str], where: str,
              scheduler: str | None, cores: int) -> list[Any]:
    """`fn(*a)` for each `a` of `args` on Dask (a local cluster or the one at `scheduler`),
    in order; a task that failed gives its exception instead of its result."""
    from distributed import Client, LocalCluster

    cluster = None
    if where == "local":
        n = max(1, min(cores, len(args)))
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                               host="127.0.0.1", dashboard_address=None, silence_logs=40)
        client = Client(cluster)
    else:
        client = Client(scheduler, timeout="30s")
    try:
        futures = [client.submit(fn, *a, key=k, pure=False) for a, k in zip(args, keys)]
        out: list[Any] = []
        for fut in futures:
            try:
                out.append(fut.result())
            except Exception as exc:  # KilledWorker, a lost worker, the task's own error
                out.append(exc)
        return out
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _why(exc: BaseException) -> str:
    name = type(exc).__name__
    if name == "KilledWorker":
        return ("its Dask worker died during the export every time it was tried (out of "
                "memory? see the worker logs); the other ranks are not affected")
    return f"{name}: {exc}"
