"""Which iterations were measured and which were replayed (docs/collect.md, sampled tracing).

The collector traces sampled steps fully and replays their op schedule for the other steps.
That changes what the output means, so the PROF dir records it in a project file at its root,
`msprof_cli_sampling.json` (the real msprof analysis ignores files it does not know):

    {"version": 1, "models": {"1": {"measured": [[1, 3], [9, 9]], "replayed": [[4, 8]],
                                    "training": true}}}

Ranges are inclusive [first, last] iteration indices per model id; `fallback_types` (when any):
the TF op types found in no op table, with their tasks (docs/device-model.md 2: they run as
AI Core vector kernels).  `training`: the model's
steps run a backward pass or an optimizer update (the legacy export's default model is a
training model when there is one, docs/export.md).  `warmup`: the iterations that traced
their graph, and each model's first: summaries leave them out of their statistics
(docs/summary.md).  `drifted`: replayed iterations whose real time exceeded the sampled
step's by `DRIFT_RATIO` (export and query warn).  Standard library only.
"""
from __future__ import annotations

import json
from pathlib import Path

FILE_NAME = "msprof_cli_sampling.json"
# a replayed step this many times longer (real time) than its sampled step is listed as
# drifted (collect/sampling.py forces a new sample at the same ratio)
DRIFT_RATIO = 2.5


def to_ranges(indices: list[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for i in sorted(set(indices)):
        if out and i == out[-1][1] + 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    return out


def write(prof_dir: Path, measured: dict[int, list[int]], replayed: dict[int, list[int]],
          training: set[int] | None = None, fallback: dict[str, int] | None = None,
          warmup: dict[int, list[int]] | None = None,
          drifted: dict[int, list[int]] | None = None) -> None:
    from msprof_cli.raw.control import write_json_line

    models = {str(m): {"measured": to_ranges(measured.get(m, [])),
                       "replayed": to_ranges(replayed.get(m, [])),
                       "training": m in (training or ()),
                       "warmup": to_ranges((warmup or {}).get(m, [])),
                       "drifted": to_ranges((drifted or {}).get(m, []))}
              for m in sorted(set(measured) | set(replayed))}
    doc: dict = {"version": 1, "models": models}
    if fallback:
        doc["fallback_types"] = dict(sorted(fallback.items()))
    write_json_line(prof_dir / FILE_NAME, doc)


def read(prof_dir: Path) -> dict[int, dict[str, list[list[int]]]]:
    """{model id: {"measured": ranges, "replayed": ranges}}; {} when absent or unreadable."""
    path = prof_dir / FILE_NAME
    if not path.is_file() or path.is_symlink() or path.stat().st_size > 16 * 1024 * 1024:
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return {int(m): {k: [[int(a), int(b)] for a, b in v.get(k, [])]
                         for k in ("measured", "replayed", "warmup", "drifted")}
                for m, v in data.get("models", {}).items()}
    except (ValueError, TypeError, AttributeError, RecursionError):
        return {}


def training_models(prof_dir: Path) -> set[int] | None:
    """The models the collector saw train (see the module doc); None when the PROF dir does
    not say (no project file, an older one, or data a real device collected)."""
    path = prof_dir / FILE_NAME
    if not path.is_file() or path.is_symlink() or path.stat().st_size > 16 * 1024 * 1024:
        return None
    try:
        models = json.loads(path.read_text(encoding="utf-8")).get("models", {})
        if not any("training" in v for v in models.values()):
            return None
        return {int(m) for m, v in models.items() if v.get("training")}
    except (ValueError, TypeError, AttributeError, RecursionError):
        return None


def fallback_notes(prof_dir: Path) -> list[str]:
    """One warning when op types took the unknown-type placement rule, [] otherwise."""
    path = prof_dir / FILE_NAME
    if not path.is_file() or path.is_symlink() or path.stat().st_size > 16 * 1024 * 1024:
        return []
    try:
        types = json.loads(path.read_text(encoding="utf-8")).get("fallback_types") or {}
        counts = sorted(((str(t), int(n)) for t, n in types.items()), key=lambda x: (-x[1], x[0]))
    except (ValueError, TypeError, AttributeError, RecursionError):
        return []
    if not counts:
        return []
    shown = ", ".join(f"{t} ({n} task{'s' * (n != 1)})" for t, n in counts[:8])
    more = f" and {len(counts) - 8} more" if len(counts) > 8 else ""
    return [f"{len(counts)} op type{'s' * (len(counts) != 1)} in no op table ran as AI Core "
            f"vector kernels by the unknown-type rule: {shown}{more} (their placement and cost "
            f"are a guess: docs/device-model.md section 2)"]


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


def drift_notes(prof_dir: Path) -> list[str]:
    """One warning per model whose replayed iterations ran much longer on the host than the
    sampled step they replay: their host time (an input wait, a wait for another rank) was
    not measured, so their step trace is an estimate there."""
    notes = []
    for model, info in sorted(read(prof_dir).items()):
        if info.get("drifted"):
            its = describe(info["drifted"])
            one = its.isdigit()
            notes.append(f"model {model}: iteration{'' if one else 's'} {its} took over "
                         f"{DRIFT_RATIO:g}x the time of the sampled step "
                         f"{'it replays' if one else 'they replay'}; what the host waited for "
                         f"there was not measured, so the step trace is an estimate there "
                         f"(msprof collect --full-trace measures every step)")
    return notes
