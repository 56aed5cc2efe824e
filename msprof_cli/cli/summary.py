"""`msprof summary`, `msprof diff`, `msprof check`: profiles in CI (docs/summary.md)."""
from __future__ import annotations

import sys
from pathlib import Path

import click

FORMATS = click.Choice(["text", "md", "json"])
CTX = {"help_option_names": ["-h", "--help"]}


def _emit(text: str, output: Path | None) -> None:
    if output is None:
        sys.stdout.write(text)
        return
    from msprof_cli.raw.control import write_text_atomic

    write_text_atomic(output, text)
    click.echo(f"[INFO] Written {output}", err=True)


@click.command(context_settings=CTX)
@click.argument("path", type=click.Path(path_type=Path), metavar="PROF_OR_JOB_DIR_OR_JSON")
@click.option("--format", "fmt", type=FORMATS, default="text", show_default=True,
              help="text (aligned, for logs), md (GitHub job summary / PR comment), json "
                   "(scripts; a baseline for diff and check).")
@click.option("-o", "--out", "out", type=click.Path(path_type=Path), default=None,
              help="Write to this file instead of standard output.")
def summary(path: Path, fmt: str, out: Path | None) -> None:
    """Summarise a collection from its raw data: step times, busy share, top op types and
    ops, AI Core pipes, communication, memcpy and the advice's top findings.  Also reads a
    folder of an exported PROF dir, and renders a saved summary JSON again."""
    from msprof_cli.summary.inputs import load
    from msprof_cli.summary.render import render

    _emit(render(load(path), fmt), out)


@click.command(context_settings=CTX)
@click.argument("base", type=click.Path(path_type=Path))
@click.argument("new", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=FORMATS, default="text", show_default=True)
@click.option("-o", "--out", "out", type=click.Path(path_type=Path), default=None,
              help="Write to this file instead of standard output.")
def diff(base: Path, new: Path, fmt: str, out: Path | None) -> None:
    """What changed from BASE to NEW and why.  Each is a PROF dir, a job dir, an exported
    PROF dir or a summary JSON (msprof summary --format json)."""
    from msprof_cli.summary.diff import diff as make_diff
    from msprof_cli.summary.inputs import load
    from msprof_cli.summary.render import render

    _emit(render(make_diff(load(base, "BASE"), load(new, "NEW")), fmt), out)


def _limit_options(fn):
    from msprof_cli.summary.limits import DEFAULTS

    for key in reversed(list(DEFAULTS)):
        fn = click.option(f"--max-{key}", key.replace("-", "_"), default=None,
                          metavar="LIMIT", help=f"default {DEFAULTS[key]}")(fn)
    return fn


@click.command(context_settings=CTX)
@click.argument("new", type=click.Path(path_type=Path))
@click.option("--baseline", "base", required=True, type=click.Path(path_type=Path),
              help="PROF dir, job dir, exported dir or summary JSON to compare against.")
@click.option("--config", type=click.Path(path_type=Path), default=None,
              help="TOML or JSON file with a [thresholds] table (metric = \"+5%\").")
@click.option("--format", "fmt", type=FORMATS, default="text", show_default=True)
@click.option("-o", "--out", "out", type=click.Path(path_type=Path), default=None,
              help="Write the report to this file instead of standard output.")
@_limit_options
def check(new: Path, base: Path, config: Path | None, fmt: str, out: Path | None,
          **limits: str | None) -> int:
    """Regression gate: exit 0 within the limits, 1 on a regression, 2 on bad input.

    \b
    A LIMIT is +5% (relative), +20us / +1ms (absolute), both (+5%,+1ms: a regression only
    when the change exceeds both) or off.  Device-side metrics are emulated and
    deterministic (tight defaults); host-side ones are measured (tolerant defaults)."""
    from msprof_cli.summary import check as C
    from msprof_cli.summary.diff import diff as make_diff
    from msprof_cli.summary.inputs import load
    from msprof_cli.summary.render import render

    lim = C.thresholds(config, {k.replace("_", "-"): v for k, v in limits.items()})
    result = C.check(make_diff(load(base, "baseline"), load(new, "NEW")), lim)
    _emit(render(result, fmt), out)
    return 0 if result.passed else 1
