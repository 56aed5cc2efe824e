"""Console output of the tuning advice (step-trace-and-advice.md 5.4): after a legacy export,
every device's "Performance Summary Report" is printed on stdout -- with rich styling on a
terminal, as the plain section-5.4 text otherwise -- under a line naming its prof_rule file."""
from __future__ import annotations

import sys

from .legacy import Advice


def print_advice(items: list[Advice]) -> None:
    if not items:
        return
    if sys.stdout.isatty():
        from rich.console import Console
        from rich.text import Text

        console = Console()
        for item in items:
            console.print(Text(f"Tuning advice ({item.path})", style="bold cyan"))
            for line in item.text.split("\n"):
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
            print(item.text, end="")
