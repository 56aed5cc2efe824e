"""Which slice of a sliced timeline holds which iterations.

A msprof json above `json_slice_events` events is written as `msprof_slice_{k}_...json`
files in time order (a Bidirectional-LSTM run: 13 files of 150-210 MB).  After the export of a
PROF dir, `PROF/msprof_cli_timeline_index.json` lists for every sliced timeline each slice's
file, the time span of its events (local µs, from the sorted event stream: within ~0.01 % of the
stream's events of the exact first / last one) and the iterations of each model that overlap it (from the
step_trace file exported beside it):

    {"version": 1, "timelines": [{"slices": [{"file": "device_0/timeline/msprof_slice_0_0_1_1_130.json",
       "first_us": 1700000000001029.5, "last_us": 1700000000913441.0,
       "iterations": {"1": "1-12"}}, ...]}]}

A project file at the PROF root, like msprof_cli_sampling.json: the real tools ignore it, and it
is outside mindstudio_profiler_output/, where msprof-analyze and MindStudio Insight pick trace
files by name.  Standard library only."""
from __future__ import annotations

import csv
import json
import re
from pathlib import Path

INDEX_NAME = "msprof_cli_timeline_index.json"
_SLICE = re.compile(r"^[a-z_]+?_slice_\d+(_.*)\.json$")


def _ranges(ids: list[int]) -> str:
    ids = sorted(set(ids))
    out: list[list[int]] = []
    for i in ids:
        if out and i == out[-1][1] + 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in out)


def _step_trace(first: Path) -> Path | None:
    """The step_trace CSV exported with the timeline whose slice 0 is `first`."""
    m = _SLICE.match(first.name)
    if m is None:
        return None
    if first.parent.name == "timeline":  # legacy: device_N/summary/step_trace{suffix}.csv
        cand = first.parent.parent / "summary" / f"step_trace{m.group(1)}.csv"
        return cand if cand.is_file() else None
    found = sorted(first.parent.glob("step_trace_[0-9]*.csv"))  # mindstudio
    return found[-1] if found else None


def _iterations(path: Path | None) -> list[tuple[str, int, float, float]]:
    """(model, iteration, start µs, end µs) of a step_trace CSV ([] if unreadable)."""
    if path is None:
        return []
    out = []
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
                try:
                    end = float(row["Iteration End(us)"].strip())
                    dur = float(row["Iteration Time(us)"].strip())
                    out.append((row.get("Model ID", "").strip() or "N/A",
                                int(row["Iteration ID"]), end - dur, end))
                except (KeyError, ValueError, AttributeError):
                    continue
    except OSError:
        return []
    return out


def build(prof: Path, traces: list[list[tuple[Path, float | None, float | None]]]) -> dict:
    timelines = []
    for slices in traces:
        its = _iterations(_step_trace(slices[0][0]))
        rows = []
        for path, first, last in slices:
            row: dict = {"file": str(path.relative_to(prof)), "first_us": first,
                         "last_us": last}
            if first is not None and its:
                by_model: dict[str, list[int]] = {}
                for model, it, a, b in its:
                    if a <= last and b >= first:
                        by_model.setdefault(model, []).append(it)
                row["iterations"] = {m: _ranges(v) for m, v in sorted(by_model.items())}
            rows.append(row)
        timelines.append({"slices": rows})
    return {"version": 1, "timelines": timelines}


def write(prof: Path, traces: list[list[tuple[Path, float | None, float | None]]]
          ) -> Path | None:
    """Write the index of the sliced timelines of `prof` (None when there is none)."""
    from msprof_cli.raw.control import write_text_atomic

    mine = [t for t in traces if t and prof in t[0][0].parents]
    if not mine:
        return None
    path = prof / INDEX_NAME
    write_text_atomic(path, json.dumps(build(prof, mine), indent=1) + "\n")
    return path
