"""`msprof report`: a self-contained HTML report of a collection (docs/report.md)."""
from __future__ import annotations

from pathlib import Path

import click


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("path", type=click.Path(path_type=Path), metavar="PROF_OR_JOB_DIR")
@click.option("-o", "--out", "out", type=click.Path(path_type=Path),
              default=Path("msprof_report.html"), show_default=True,
              help="The HTML file to write (one file, works offline).")
@click.option("--baseline", "base", type=click.Path(path_type=Path), default=None,
              help="PROF dir, job dir, exported dir or summary JSON: adds the diff view.")
def report(path: Path, out: Path, base: Path | None) -> None:
    """Write an HTML report: step time breakdown, top op types and ops, AI Core pipes, device
    activity, communication vs compute, the advice (and, with --baseline, what changed)."""
    from msprof_cli.report.page import write_report
    from msprof_cli.summary.diff import diff
    from msprof_cli.summary.inputs import load

    summary = load(path)
    d = diff(load(base, "baseline"), summary) if base is not None else None
    written = write_report(summary, out, d)
    size = written.stat().st_size / 1e6
    click.echo(f"[INFO] Report written to {written} ({size:.1f} MB): open it in a browser "
               f"(file://{written.resolve()}).")
