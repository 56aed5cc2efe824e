"""`msprof cluster JOB_DIR`: summarise every rank (on Dask when worth it), analyse them
together, write the cluster files and, when the ranks have been exported in the mindstudio
layout, one merged timeline (docs/cluster.md)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from msprof_cli.errors import ProfDirError
from msprof_cli.raw import profdir
from msprof_cli.summary import model as M

from . import dask_export as DX
from .analysis import ClusterResult, analyse

OUT_DIR = "cluster_analysis_output"
ALL_STEPS = 1_000_000  # the cluster keeps every step of every rank


@dataclass
class ClusterRun:
    job: Path
    out: Path
    result: ClusterResult
    summaries: list[M.Summary] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    where: str = "serial"


def summarise(prof: str) -> M.Summary:
    """Dask task: the summary of one rank's PROF dir, every step kept."""
    from msprof_cli.summary.build import build

    return build(Path(prof), max_steps=ALL_STEPS)


def summaries(profs: list[Path], distributed: str, scheduler: str | None
              ) -> tuple[list[M.Summary], list[str], str]:
    """The ranks' summaries (Dask: one task per PROF dir), the failures named, where run."""
    from msprof_cli.export.runtime.parallel import usable_cores

    cores = usable_cores()
    where = DX.wanted(profs, distributed, DX.scheduler_address(scheduler), cores)
    if where is None:
        got = []
        for p in profs:
            try:
                got.append(summarise(str(p)))
            except Exception as exc:  # noqa: BLE001 -- the rank is named, the others go on
                got.append(exc)
    else:
        got = DX.map_ranks(summarise, [(str(p),) for p in profs],
                           [f"msprof-summary-{p.name}" for p in profs], where,
                           DX.scheduler_address(scheduler), cores)
    ok, failed = [], []
    for p, g in zip(profs, got):
        if isinstance(g, M.Summary):
            ok.append(g)
        else:
            failed.append(f"{p.name}: {g}")
    return ok, failed, where or "serial"


def run_cluster(job: Path, out: Path | None = None, distributed: str = "auto",
                scheduler: str | None = None, timeline: bool = True) -> ClusterRun:
    from .outputs import write_files

    profs = profdir.locate(Path(job))
    if len(profs) < 1:
        raise ProfDirError(f"{job} holds no PROF dir")
    sums, failed, where = summaries(profs, distributed, scheduler)
    if not sums:
        raise ProfDirError("no rank of " + str(job) + " could be read: " + "; ".join(failed))
    result = analyse(sums)
    out_dir = Path(out) if out is not None else Path(job) / OUT_DIR
    run = ClusterRun(job=Path(job), out=out_dir, result=result, summaries=sums, failed=failed,
                     where=where)
    run.files = write_files(run, profs, timeline)
    return run
