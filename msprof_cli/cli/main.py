"""`msprof` entry point.  The only place where project exceptions become messages and exit
codes.  Imports nothing heavy: `msprof --help` must stay fast (no pandas, no TensorFlow)."""
from __future__ import annotations

import sys

import click

from msprof_cli import __version__
from msprof_cli.cli.cluster import cluster
from msprof_cli.cli.collect import collect
from msprof_cli.cli.export import export
from msprof_cli.cli.query import query
from msprof_cli.cli.report import report
from msprof_cli.cli.summary import check, diff, summary
from msprof_cli.errors import MsprofError, ProfDirError

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group(context_settings=CONTEXT)
@click.version_option(__version__, "--version", "-V", prog_name="msprof (msprof_cli)")
def cli() -> None:
    """Ascend msprof profiling for TensorFlow scripts, on an emulated Ascend 910 NPU.

    \b
    msprof collect -- python train.py     profile a training script
    msprof export --output DIR            write timelines and summaries
    msprof query --output DIR             list what was collected
    msprof summary PROF_DIR               step times, top ops, advice (text/md/json)
    msprof check NEW --baseline BASE      CI regression gate (diff: what changed)
    msprof report PROF_DIR -o report.html  an HTML report (plots, works offline)
    msprof cluster JOB_DIR                many ranks: slow rank/step/link, merged timeline
    """


cli.add_command(collect)
cli.add_command(export)
cli.add_command(query)
cli.add_command(summary)
cli.add_command(diff)
cli.add_command(check)
cli.add_command(report)
cli.add_command(cluster)


def main(argv: list[str] | None = None) -> None:
    try:
        rc = cli.main(args=argv, prog_name="msprof", standalone_mode=False)
    except MsprofError as exc:
        click.echo(f"[ERROR] {exc}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
    except OSError as exc:  # safety net: a file-system refusal is a message, not a traceback
        where = exc.filename or "a file"
        hint = (" msprof needs read permission on the PROF dir's files and search (x) "
                "permission on every directory above them: run it as their owner, or copy the "
                "PROF dir to a place you can read.") if isinstance(exc, PermissionError) else \
            " Check the path and the free space; the raw data was not changed."
        click.echo(f"[ERROR] {where}: {exc.strerror or exc}.{hint}", err=True)
        sys.exit(ProfDirError.exit_code)
    sys.exit(rc if isinstance(rc, int) else 0)
