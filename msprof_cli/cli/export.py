"""`msprof export --output DIR`: decode raw data into timelines and summaries."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click


def exporter() -> Callable[..., Any]:
    """`run_export`, imported with the cyclic garbage collector off: pandas and the exporter
    create ~50k long-lived objects, and the collections their allocations trigger (which
    free none of them) cost ~0.04 s of every export's start.  They are
    frozen afterwards: left in the young generations, the first collection of the export
    would traverse them all (~0.025 s); frozen, no collection does (the job pool unfreezes
    them when its jobs are done, runtime/parallel.py).

    numpy is loaded with OpenBLAS limited to one thread: the export multiplies no matrices,
    and OpenBLAS would start a thread per core at import, ~0.05 s of a small export's wall
    time and ~0.12 s of CPU on 2 cores (forked workers drop those threads anyway).  The
    variable is read when the library loads and removed again at once, so nothing the
    export starts (Dask workers) inherits it; a user's own setting is left alone."""
    import gc
    import os
    import sys

    blas = "OPENBLAS_NUM_THREADS" not in os.environ and "numpy" not in sys.modules
    if blas:
        os.environ["OPENBLAS_NUM_THREADS"] = "1"
    enabled = gc.isenabled()
    gc.disable()
    try:
        from msprof_cli.export.api import run_export
    finally:
        if enabled:
            gc.enable()
        if blas:
            os.environ.pop("OPENBLAS_NUM_THREADS", None)
    gc.freeze()
    return run_export


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("prof_dir", required=False, metavar="[PROF_DIR]", type=click.Path(path_type=Path))
@click.option("--output", "-dir", "output", metavar="DIR", type=click.Path(path_type=Path),
              help="A PROF_* directory, or a directory directly holding several (the real "
                   "tool's spelling; PROF_DIR as the first argument does the same).")
@click.option("--layout", type=click.Choice(["legacy", "mindstudio"]), default="legacy",
              show_default=True, help="legacy: the per-device files of the Ascend TensorFlow docs "
              "(device_N/summary, device_N/timeline); mindstudio: the CANN 8 "
              "mindstudio_profiler_output/ folder.")
@click.option("--type", "type_", type=click.Choice(["text", "db"]), default="text",
              show_default=True, help="text: CSV/JSON files; db: the msprof SQLite database.")
@click.option("--summary-format", type=click.Choice(["csv", "json"]), default="csv",
              show_default=True)
@click.option("--model-id", type=int, default=None, help="Model to export (with --iteration-id).")
@click.option("--iteration-id", type=int, default=None, help="First iteration to export.")
@click.option("--iteration-count", type=int, default=1, show_default=True,
              help="Number of iterations from --iteration-id (1-5).")
@click.option("--all-models", is_flag=True, default=False,
              help="Legacy layout: export every model of each device, each in its own "
                   "_{device}_{model}_{iterations} files (default: the model with the most "
                   "iterations, as the real tool).")
@click.option("--reports", type=click.Path(path_type=Path), default=None,
              help="JSON file switching timeline layers on/off.")
@click.option("--clear", is_flag=True, default=False,
              help="Delete intermediate data after export (raw data is never touched).")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="Export the PROF dirs of a job dir on this Dask scheduler (tcp://host:8786; "
                   "default: $DASK_SCHEDULER_ADDRESS). Its workers must see the PROF dirs at "
                   "the same path.")
@click.option("--distributed", type=click.Choice(["auto", "local", "off"]), default="auto",
              show_default=True,
              help="Several PROF dirs: auto runs a local Dask cluster when the job is big "
                   "enough (docs/cluster.md), local always, off one after the other.")
@click.option("--advice", type=click.Choice(["brief", "full", "off"]), default="brief",
              show_default=True,
              help="Tuning advice on the console: the top findings, the real tool's whole "
                   "report, or none (prof_rule_{device}.json is always written).")
def export(prof_dir: Path | None, output: Path | None, layout: str, type_: str,
           summary_format: str, model_id: int | None, iteration_id: int | None,
           iteration_count: int, reports: Path | None, clear: bool, advice: str,
           all_models: bool, scheduler: str | None, distributed: str) -> None:
    """Export timelines (JSON) and summaries (CSV) from collected raw data:
    `msprof export PROF_DIR` or `msprof export --output PROF_DIR`."""
    output = one_dir(prof_dir, output)
    run_export = exporter()
    run_export(output, layout=layout, type_=type_, summary_format=summary_format,
               model_id=model_id, iteration_id=iteration_id, iteration_count=iteration_count,
               reports=reports, clear=clear, advice=advice, all_models=all_models,
               scheduler=scheduler, distributed=distributed)


def one_dir(prof_dir: Path | None, output: Path | None) -> Path:
    """The PROF dir given as the argument or as --output (one of them, not both)."""
    if prof_dir is not None and output is not None and prof_dir != output:
        raise click.UsageError(f"Two directories given ({prof_dir} and --output {output}): "
                               "pass the PROF dir once, as PROF_DIR or as --output.")
    if prof_dir is None and output is None:
        raise click.UsageError("Missing the PROF dir: msprof export PROF_DIR (or --output "
                               "PROF_DIR), e.g. the directory `msprof collect` printed.")
    return output if output is not None else prof_dir  # type: ignore[return-value]
