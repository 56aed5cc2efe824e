"""`msprof query --output DIR`: list what was collected (docs/formats/query.md)."""
from __future__ import annotations

from pathlib import Path

import click


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("prof_dir", required=False, metavar="[PROF_DIR]", type=click.Path(path_type=Path))
@click.option("--output", "-dir", "output", metavar="DIR", type=click.Path(path_type=Path),
              help="A PROF_* directory, or a directory directly holding several (PROF_DIR as "
                   "the first argument does the same).")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table",
              show_default=True, help="table for people, csv/json for scripts.")
@click.option("--na-text", is_flag=True, default=False,
              help="Print N/A in empty cells, as the real msprof does.")
def query(prof_dir: Path | None, output: Path | None, fmt: str, na_text: bool) -> None:
    """List devices, models and iterations of collected PROF_* directories."""
    from msprof_cli.cli.export import one_dir
    from msprof_cli.query import print_query

    print_query(one_dir(prof_dir, output), fmt=fmt, na_text=na_text)
