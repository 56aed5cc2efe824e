"""Console output of the tuning advice: after a legacy export, by default a short summary per
device (one line per finding, advice.brief) under a line naming its prof_rule file;
`--advice full` prints every device's "Performance Summary Report"
(docs/formats/step-trace-and-advice.md
5.4) -- with rich styling on a terminal, as the plain section-5.4 text otherwise."""
from __future__ import annotations

import sys

from msprof_cli.textsafety import escape_controls

from .tables import Advice


def print_advice(items: list[Advice], mode: str = "brief") -> None:
    """`brief`: per device a header naming its prof_rule file, then one line per finding
    (advice.brief); `full`: the real tool's whole report; `off`: nothing."""
    if not items or mode == "off":
        return
    if mode == "brief":
        _print_brief(items)
        return
    if sys.stdout.isatty():
        from rich.console import Console
        from rich.text import Text

        console = Console()
        for item in items:
            console.print(Text(f"Tuning advice ({item.path})", style="bold cyan"))
            for line in escape_controls(item.text).split("\n"):
                text = Text(line.replace("\t", "    "))
                if line == "Performance Summary Report:":
                    text.stylize("bold")
                elif line[:1].isdigit():
                    text.stylize("bold yellow")
                elif line.strip() == "N/A":
                    text.stylize("dim")
                elif line.lstrip("\t").startswith("- "):
                    text.stylize("green")
                console.print(text, highlight=False)
    else:
        for item in items:
            print(f"[INFO] Tuning advice ({item.path}):")
            print(escape_controls(item.text), end="")


def _print_brief(items: list[Advice]) -> None:
    tty = sys.stdout.isatty()
    console = None
    if tty:
        from rich.console import Console

        console = Console()
    for item in items:
        n = len(item.brief)
        head = escape_controls(f"[INFO] Tuning advice: {n} finding{'s' if n != 1 else ''} "
                               f"(full report: {item.path}; msprof export --advice full "
                               f"prints it)")
        body = [f"  - {escape_controls(line)}" for line in item.brief] or \
            ["  - nothing to report"]
        if console is not None:
            from rich.text import Text

            console.print(Text(head, style="bold cyan"), highlight=False)
            for line in body:
                console.print(Text(line), highlight=False, soft_wrap=True)
        else:
            print(head)
            print("\n".join(body))
