"""Which iterations were measured and which were replayed (docs/collect.md, sampled tracing).

The collector traces sampled steps fully and replays their op schedule for the other steps.
That changes what the output means, so the PROF dir records it in a project file at its root,
`msprof_cli_sampling.json` (the real msprof analysis ignores files it does not know):

    {"version": 1, "models": {"1": {"measured": [[1, 3], [9, 9]], "replayed": [[4, 8]]}}}

Ranges are inclusive [first, last] iteration indices per model id.  Standard library only.
"""
from __future__ import annotations

import json
from pathlib import Path

FILE_NAME = "msprof_cli_sampling.json"


def to_ranges(indices: list[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for i in sorted(set(indices)):
        if out and i == out[-1][1] + 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    return out


def write(prof_dir: Path, measured: dict[int, list[int]], replayed: dict[int, list[int]]) -> None:
    from msprof_cli.raw.control import write_json_line

    models = {str(m): {"measured": to_ranges(measured.get(m, [])),
                       "replayed": to_ranges(replayed.get(m, []))}
              for m in sorted(set(measured) | set(replayed))}
    write_json_line(prof_dir / FILE_NAME, {"version": 1, "models": models})


def read(prof_dir: Path) -> dict[int, dict[str, list[list[int]]]]:
    """{model id: {"measured": ranges, "replayed": ranges}}; {} when absent or unreadable."""
    path = prof_dir / FILE_NAME
    if not path.is_file() or path.is_symlink() or path.stat().st_size > 16 * 1024 * 1024:
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return {int(m): {k: [[int(a), int(b)] for a, b in v.get(k, [])]
                         for k in ("measured", "replayed")}
                for m, v in data.get("models", {}).items()}
    except (ValueError, TypeError, AttributeError, RecursionError):
        return {}


def describe(ranges: list[list[int]]) -> str:
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in ranges)


def replay_notes(prof_dir: Path) -> list[str]:
    """One readable line per model that has replayed iterations."""
    notes = []
    for model, info in sorted(read(prof_dir).items()):
        if info["replayed"]:
            notes.append(f"model {model}: iterations {describe(info['replayed'])} were replayed "
                         f"from the op schedule of the sampled iterations "
                         f"{describe(info['measured']) or '-'} (use msprof collect --full-trace "
                         "to measure every step)")
    return notes
