"""`msprof cluster JOB_DIR`: the ranks of a job analysed together (docs/cluster.md)."""
from __future__ import annotations

import sys
from pathlib import Path

import click


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("job", type=click.Path(path_type=Path), metavar="JOB_DIR")
@click.option("-o", "--out", "out", type=click.Path(path_type=Path), default=None,
              help="Folder of the cluster files (default: JOB_DIR/cluster_analysis_output).")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="Summarise the ranks on this Dask scheduler (default: "
                   "$DASK_SCHEDULER_ADDRESS); its workers must see JOB_DIR at the same path.")
@click.option("--distributed", type=click.Choice(["auto", "local", "off"]), default="auto",
              show_default=True, help="auto: a local Dask cluster when the job is big enough.")
@click.option("--timeline/--no-timeline", default=True, show_default=True,
              help="Merge the ranks' mindstudio msprof JSON into cluster_timeline.json.")
@click.option("--format", "fmt", type=click.Choice(["text", "md", "json"]), default="text",
              show_default=True)
def cluster(job: Path, out: Path | None, scheduler: str | None, distributed: str,
            timeline: bool, fmt: str) -> None:
    """Per-rank step breakdown, communication matrix, slow rank / step / link verdict, the
    files msprof-analyze and MindStudio Insight's cluster view read, one merged timeline."""
    import json

    from msprof_cli.cluster.outputs import console, verdict_json
    from msprof_cli.cluster.run import run_cluster

    run = run_cluster(job, out, distributed, scheduler, timeline)
    if fmt == "json":
        sys.stdout.write(json.dumps(verdict_json(run), indent=1) + "\n")
    else:
        sys.stdout.write(console(run, md=fmt == "md"))
