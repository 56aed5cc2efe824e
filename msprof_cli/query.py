"""`msprof query`: what was collected, one row per result dir and model (docs/formats/query.md).

Reads control files and, for the model/iteration columns, only the step-trace records: never
the whole dataset, so listing hundreds of PROF dirs stays fast.
"""
from __future__ import annotations

import bisect
import csv
import errno
import io
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from msprof_cli.errors import ProfDirError
from msprof_cli.raw import ageing, control, profdir, runinfo, sampling
from msprof_cli.textsafety import escape_controls, safe_cell

HEADERS = ("Job Info", "Device ID", "Dir Name", "Collection Time", "Model ID",
           "Iteration Number", "Top Time Iteration", "Rank ID")
NA = "N/A"
TOP_RANK = 5


@dataclass
class QueryRow:
    job_info: str
    device_id: str
    dir_name: str
    collection_time: str
    model_id: str
    iteration_number: str
    top_time_iteration: str
    rank_id: str
    prof_dir: str  # not a printed column: where the row came from
    chip: str = ""  # not a column of the real tool: the chip of the data (json, table notes)

    def cells(self) -> list[str]:
        return [self.job_info, self.device_id, self.dir_name, self.collection_time,
                self.model_id, self.iteration_number, self.top_time_iteration, self.rank_id]


def top_time_iterations(durations: dict[int, int]) -> str:
    """Iteration ids whose rank by duration (1 + number strictly longer) is <= 5,
    ordered by rank then id, joined with ','."""
    values = sorted(durations.values())  # rank by bisection: O(n log n), not O(n^2)
    ranked = []
    for it, dur in durations.items():
        rank = 1 + len(values) - bisect.bisect_right(values, dur)
        if rank <= TOP_RANK:
            ranked.append((rank, it))
    return ",".join(str(it) for _, it in sorted(ranked))


# the chips of info.json platform_version (docs/formats/raw-format.md 1, ascend910b.md)
PLATFORM_CHIPS = {"1": "Ascend910", "5": "Ascend910B (Atlas A2)"}


def chip_name(prof: Path, info: dict) -> str:
    """The chip a result dir's data is of: the emulated soc_version msprof_cli recorded
    (`msprof_cli_run.json`), with its family, else the family of platform_version."""
    family = PLATFORM_CHIPS.get(str(info.get("platform_version", "")),
                                f"platform_version {info.get('platform_version', '?')}")
    soc = runinfo.read(prof).get("emulation", {}).get("soc_version", "")
    if soc and str(info.get("platform_version", "")) == "5":
        return f"{soc} (Atlas A2)"
    return soc or family


def _warn(message: str) -> None:
    print(f"[WARNING] {message}", file=sys.stderr)


def _why(exc: Exception) -> str:
    if isinstance(exc, OSError):
        if exc.errno == errno.ELOOP:
            return "it is a symbolic link (control files are never read through links)"
        return exc.strerror or str(exc)
    return str(exc)


def _check_prof(prof: Path) -> None:
    """Errors for a PROF dir that cannot be listed; warning when data was aged out."""
    for bad in profdir.incomplete_result_dirs(prof):
        raise ProfDirError(f"{bad} has no info.json file (or it cannot be read), so it cannot "
                           "be listed. Restore its control files or re-collect the data.")
    profdir.check_no_links(prof)
    profdir.check_has_result_dirs(prof)
    marker = ageing.read_marker(prof)
    if marker is not None:
        _warn(ageing.aged_message(prof, marker))


def _rows_for_result_dir(prof: Path, rdir: Path) -> list[QueryRow]:
    from msprof_cli.export.decode.control_info import read_result_dir

    # the same control-file checks (and errors) as export: start_info, info.json, sample.json,
    # chip; reads only the small control files
    read_result_dir(rdir)
    device_id = profdir.device_id_of(rdir)
    info_name = "info.json" if device_id is None else f"info.json.{device_id}"
    start_name = "start_info" if device_id is None else f"start_info.{device_id}"
    try:
        info = control.read_json_line(rdir / info_name)
    except (OSError, ValueError) as exc:
        raise ProfDirError(f"cannot read {rdir / info_name}: {_why(exc)}. The control file is "
                           "missing or damaged; this result dir cannot be listed. Restore it "
                           "or re-collect the data.") from None
    try:
        collection_time = str(control.read_json_line(rdir / start_name)
                              .get("collectionDateBegin", "")) or NA
    except (OSError, ValueError):
        collection_time = NA
    devices = str(info.get("devices", ""))
    dev_cell = devices if devices == "" or devices.isdigit() else NA
    base = dict(job_info=str(info.get("jobInfo", "NA")), device_id=dev_cell,
                dir_name=rdir.name, collection_time=collection_time,
                rank_id=str(info.get("rank_id", -1)), prof_dir=str(prof),
                chip=chip_name(prof, info))
    models: dict[int, list[tuple[int, int, int]]] = {}
    if device_id is not None:
        from msprof_cli.export.decode.model_info import models_and_iterations

        try:
            models = models_and_iterations(rdir)
        except (OSError, ValueError) as exc:
            _warn(f"cannot read the step trace of {rdir}: {exc}")
            models = {}
    if not models:
        return [QueryRow(model_id=NA, iteration_number=NA, top_time_iteration=NA, **base)]
    rows = []
    for model_id in sorted(models):
        iters = models[model_id]
        durations = {it: end - start for it, start, end in iters}
        rows.append(QueryRow(model_id=str(model_id),
                             iteration_number=str(max(durations)),
                             top_time_iteration=top_time_iterations(durations), **base))
    return rows


def query_rows(path: Path) -> list[QueryRow]:
    profs = profdir.locate(path)
    rows: list[QueryRow] = []
    for prof in profs:
        _check_prof(prof)
        rdirs = profdir.result_dirs(prof)
        for sub in sorted(p for p in prof.iterdir() if p.is_dir()):
            if sub not in rdirs and sub.name not in ("mindstudio_profiler_output",
                                                     "mindstudio_profiler_log", "analyze"):
                _warn(f'Invalid query dir("{sub}"), if you want to query cluster data, please '
                      "import --cluster first! or -dir must be profiling data, such as "
                      "PROF_XXX_XXX_XXX")
        for rdir in rdirs:
            rows.extend(_rows_for_result_dir(prof, rdir))
    rows.sort(key=lambda r: (r.job_info, r.collection_time))  # stable
    return rows


TOP_SHOWN = 10  # Top Time Iteration ids a table cell shows before it says how many more


def shown_top(cell: str) -> str:
    """A table's Top Time Iteration cell: ties keep every tied id (docs/formats/query.md), and the
    emulated device is deterministic, so the steady iterations of a run tie and the cell
    could list thousands of ids; a table shows the first TOP_SHOWN and the count of the
    others (csv and json keep every id)."""
    ids = cell.split(",")
    if len(ids) <= TOP_SHOWN:
        return cell
    return ",".join(ids[:TOP_SHOWN]) + f",... (+{len(ids) - TOP_SHOWN} tied)"


def _with_prof(rows: list[QueryRow], short: bool = False) -> tuple[tuple[str, ...],
                                                                    list[list[str]]]:
    """Headers and cells (Top Time Iteration shortened: `shown_top`), with a trailing PROF
    column when the rows come from several PROF dirs (every run is PROF_000001_*: only the
    name tells two runs apart).  One PROF dir keeps the real tool's columns exactly.
    `short`: the name's random suffix only."""
    top = HEADERS.index("Top Time Iteration")
    cells = [r.cells() for r in rows]
    for c in cells:
        c[top] = shown_top(c[top])
    if len({r.prof_dir for r in rows}) < 2:
        return HEADERS, cells
    names = [Path(r.prof_dir).name for r in rows]
    if short:
        names = [n.rsplit("_", 1)[-1] for n in names]
    return HEADERS + ("PROF",), [c + [n] for c, n in zip(cells, names)]


def format_plain(rows: list[QueryRow], na_text: bool = False) -> str:
    """The real tool's layout: cells ljust to the column width + TAB, each line followed by
    an empty line.  N/A cells are empty unless na_text (docs/formats/query.md 4).  Rows of several
    PROF
    dirs get a trailing PROF column (docs/query.md)."""
    headers, cells = _with_prof(rows)
    table = [[escape_controls(c) if (na_text or c != NA) else "" for c in row]
             for row in cells]
    widths = [max([len(h)] + [len(row[i]) for row in table]) for i, h in enumerate(headers)]
    lines = ["".join(h.ljust(widths[i]) + "\t" for i, h in enumerate(headers)), ""]
    for row in table:
        lines.append("".join(c.ljust(widths[i]) + "\t" for i, c in enumerate(row)))
        lines.append("")
    return "\n".join(lines) + "\n"


def _replayed(row: QueryRow) -> str:
    """Replayed iteration ranges of the row's model ("" when all were measured)."""
    if not row.model_id.isdigit():
        return ""
    info = sampling.read(Path(row.prof_dir)).get(int(row.model_id))
    return sampling.describe(info["replayed"]) if info else ""


def print_query(path: Path, fmt: str = "table", na_text: bool = False) -> None:
    rows = query_rows(path)
    out = sys.stdout
    if fmt == "json":
        out.write(json.dumps([dict(zip(HEADERS, r.cells()), **{"PROF": r.prof_dir},
                                   **{"Chip": r.chip, "Replayed Iterations": _replayed(r)})
                              for r in rows], indent=2) + "\n")
        return
    if fmt == "table":
        # the chip and which iterations were replayed from sampled steps (not columns of
        # the real tool)
        for prof, chip in dict.fromkeys((r.prof_dir, r.chip) for r in rows):
            if chip:
                print(f"[INFO] {Path(prof).name}: {chip}.", file=sys.stderr)
            for note in sampling.replay_notes(Path(prof)):
                print(f"[INFO] {Path(prof).name}: {note}.", file=sys.stderr)
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(HEADERS + ("PROF",))  # machine readers: always the PROF dir
        writer.writerows([safe_cell(c) for c in r.cells()] + [safe_cell(r.prof_dir)]
                         for r in rows)
        out.write(buf.getvalue())
        return
    if not rows:
        return
    if out.isatty():
        from rich.console import Console
        from rich.table import Table

        console = Console()
        headers, cells = _with_prof(rows, short=console.width < 140)
        table = Table(*headers, title=None)
        for row in cells:
            table.add_row(*[escape_controls(c) if (na_text or c != NA) else "" for c in row])
        console.print(table)
    else:
        out.write(format_plain(rows, na_text))


__all__ = ["HEADERS", "QueryRow", "query_rows", "format_plain", "print_query",
           "top_time_iterations", "shown_top", "asdict"]
