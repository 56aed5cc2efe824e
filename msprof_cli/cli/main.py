"""`msprof` entry point.  The only place where project exceptions become messages and exit
codes.  Imports nothing heavy: `msprof --help` must stay fast (no pandas, no TensorFlow)."""
from __future__ import annotations

import atexit
import importlib
import os
import sys
import threading

import click

from msprof_cli import __version__
from msprof_cli.errors import MsprofError, ProfDirError

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

# subcommand -> (its module under msprof_cli.cli, the click command's name there)
COMMANDS = {"collect": ("collect", "collect"), "export": ("export", "export"),
            "query": ("query", "query"), "summary": ("summary", "summary"),
            "diff": ("summary", "diff"), "check": ("summary", "check"),
            "report": ("report", "report"), "cluster": ("cluster", "cluster")}


class LazyGroup(click.Group):
    """A group whose subcommands are imported when used: `msprof export` does not import
    the other commands' modules (their click declarations, the summary limits: a few ms of
    every start); `--help` imports them all, still without pandas."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)  # click's own order for registered commands

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in COMMANDS and name not in self.commands:
            module, attr = COMMANDS[name]
            self.add_command(getattr(importlib.import_module(f"msprof_cli.cli.{module}"),
                                     attr), name)
        return self.commands.get(name)

    def resolve_command(self, ctx: click.Context, args: list[str]
                        ) -> tuple[str | None, click.Command | None, list[str]]:
        if args and args[0] not in COMMANDS:  # a typo: click suggests from self.commands
            for name in COMMANDS:
                self.get_command(ctx, name)
        return super().resolve_command(ctx, args)


@click.group(cls=LazyGroup, context_settings=CONTEXT)
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



def main(argv: list[str] | None = None) -> None:
    """The `msprof` command (`argv` None: the process' own command line)."""
    try:
        _main(argv)
    except SystemExit as exc:
        code = 0 if exc.code is None else exc.code
        if argv is None and sys.argv[1:2] == ["export"] and isinstance(code, int):
            exit_now(code)
        raise


def exit_now(code: int) -> None:
    """End an export process without the interpreter's teardown: freeing every object of
    pandas and numpy module by module costs 0.1 s, a fifth of a tiny export.  The atexit handlers still run (weakref finalizers, Dask's, logging's) and
    stdio is flushed; every output file is closed and renamed before the export returns.
    Returns (the normal exit follows) when stdio cannot be flushed, so that the error is
    reported as usual, and when a thread other than daemons still runs (the normal exit
    waits for it)."""
    if any(t.is_alive() and not t.daemon and t is not threading.main_thread()
           for t in threading.enumerate()):
        return
    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    os._exit(code)


def _main(argv: list[str] | None) -> None:
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
