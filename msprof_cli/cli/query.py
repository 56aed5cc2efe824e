"""`msprof query --output DIR`: list what was collected (reference query.md)."""
from __future__ import annotations

from pathlib import Path

import click


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--output", "-dir", "output", required=True, metavar="DIR",
              type=click.Path(path_type=Path),
              help="A PROF_* directory, or a directory holding several.")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table",
              show_default=True, help="table for people, csv/json for scripts.")
@click.option("--na-text", is_flag=True, default=False,
              help="Print N/A in empty cells, as the real msprof does.")
def query(output: Path, fmt: str, na_text: bool) -> None:
    """List devices, models and iterations of collected PROF_* directories."""
    from msprof_cli.query import print_query

    print_query(output, fmt=fmt, na_text=na_text)
