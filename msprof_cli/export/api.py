"""`msprof export` entry point used by the CLI: validate, decode, write, report.

``run_export`` exports every PROF dir found at `path` in the chosen layout.  Raw files are
only read (memory maps opened read-only); outputs are written atomically.  Console: the real
tool's ``[INFO] Start export data in {PROF}.`` / ``[INFO] Export all data in {PROF} done.``
lines on stdout, decode warnings as ``[WARNING]`` on stderr, a summary of the files written
(rich table on a terminal, plain lines otherwise) and a progress bar only when stderr is a TTY.
"""
from __future__ import annotations

import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from msprof_cli.errors import ExportError, ProfDirError
from msprof_cli.raw.ageing import aged_message, read_marker
from msprof_cli.raw.profdir import (check_has_result_dirs, check_no_links, incomplete_result_dirs,
                                    locate, result_dirs)
from msprof_cli.raw.sampling import drift_notes, fallback_notes, replay_notes
from msprof_cli.textsafety import escape_controls

from .decode.control_info import read_once
from .decode.data import ProfData
from .decode.dataset import load_prof
from .decode.windows import NotWindowable, check_selection, device_ids
from .derive.selection import ModelChoice, check_args
from .outputs import timeline_index
from .outputs.tables import Advice
from .plan import Plan, plan_devices, plan_export
from .runtime.memory import release, tune_allocator
from .runtime.parallel import usable_cores
from .sinks.files import clean_stale_temps
from .sinks.streams import SLICE_INDEX
from .sinks.writers import CSV_SLICE_ROWS, JSON_SLICE_EVENTS

LAYOUTS = ("legacy", "mindstudio")


@dataclass
class ExportResult:
    """What one `run_export` call wrote."""

    prof_dirs: list[Path] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    advice: list[Advice] = field(default_factory=list)  # legacy: tuning advice per device
    models: list[ModelChoice] = field(default_factory=list)  # legacy: what each device kept


def _data_files(prof: Path) -> list[Path]:
    return [p for rd in result_dirs(prof) if (rd / "data").is_dir()
            for p in (rd / "data").iterdir() if p.is_file() and not p.is_symlink()]


def _check_has_data(prof: Path) -> None:
    """Refuse a PROF dir with no data files, or with only empty ones (a run that recorded
    nothing must not end in "done" and one advice file)."""
    check_no_links(prof)
    check_has_result_dirs(prof)
    files = _data_files(prof)
    if not files:
        raise ProfDirError(f"{prof} contains no profiling data (no host/ or device_N/ "
                           f"data files). Re-run `msprof collect`; the collection may "
                           f"have failed before any data was written.")
    if not any(p.stat().st_size for p in files):
        raise ProfDirError(f"{prof} holds only empty data files ({len(files)} files of 0 "
                           f"bytes): the collection recorded nothing. Check that the script "
                           f"ran its model under `msprof collect`, then collect again.")


def load(prof: Path) -> ProfData:
    """Decoded per-device tables of one PROF dir (reusable by `msprof query` and tests)."""
    return load_prof(prof)


def _print_summary(result: ExportResult) -> None:
    if not result.files:
        return
    if sys.stdout.isatty():
        from rich.console import Console
        from rich.table import Table

        table = Table(title="Files written", show_lines=False)
        table.add_column("PROF dir")
        table.add_column("File")
        for f in result.files:
            prof = next((p for p in result.prof_dirs if p in f.parents), None)
            table.add_row(prof.name if prof else "", str(f.relative_to(prof)) if prof else str(f))
        Console().print(table)
    else:
        print(f"[INFO] {len(result.files)} files written:")
        for f in result.files:
            print(f"  {f}")


def run_export(path: Path, *, layout: str = "legacy", type_: str = "text",
               summary_format: str = "csv", model_id: int | None = None,
               iteration_id: int | None = None, iteration_count: int = 1,
               reports: Path | None = None, clear: bool = False,
               csv_slice_rows: int = CSV_SLICE_ROWS, json_slice_events: int = JSON_SLICE_EVENTS,
               quiet: bool = False, advice: str = "brief",
               all_models: bool = False, scheduler: str | None = None,
               distributed: str = "auto") -> ExportResult:
    """Export every PROF dir at `path`; raise msprof_cli.errors exceptions on failure.
    Several PROF dirs (the ranks of a job) may be exported in parallel on Dask
    (`scheduler`: an existing cluster; `distributed`: auto | local | off, cluster/dask_export.py)."""
    path = Path(path)
    if layout not in LAYOUTS:
        raise ExportError(f"Unknown layout {layout!r}; choose one of {', '.join(LAYOUTS)}.")
    if advice not in ("brief", "full", "off"):
        raise ExportError(f"Unknown advice mode {advice!r}; choose brief, full or off.")
    if summary_format not in ("csv", "json"):
        raise ExportError(f"Unknown summary format {summary_format!r}; choose csv or json.")
    if type_ not in ("text", "db"):
        raise ExportError(f"Unknown export type {type_!r}; choose text or db.")
    profs = locate(path)  # the same messages as query's for the same mistake
    if layout == "legacy" and type_ == "text":  # --type db ignores the selection options
        check_args(model_id, iteration_id, iteration_count)
        if all_models and (model_id is not None or iteration_id is not None):
            raise ExportError("--all-models exports every model with all its iterations; "
                              "drop --model-id/--iteration-id, or drop --all-models to export "
                              "one model's iterations.")
    if reports is not None and not Path(reports).is_file():
        raise ExportError(f"--reports file {reports} does not exist.")
    from msprof_cli.cluster import dask_export as DX

    if distributed not in DX.MODES:
        raise ExportError(f"Unknown --distributed mode {distributed!r}; choose "
                          f"{', '.join(DX.MODES)}.")
    where = DX.wanted(profs, distributed, DX.scheduler_address(scheduler), usable_cores())
    if where is not None:
        options = dict(layout=layout, type_=type_, summary_format=summary_format,
                       model_id=model_id, iteration_id=iteration_id,
                       iteration_count=iteration_count, reports=reports, clear=clear,
                       csv_slice_rows=csv_slice_rows, json_slice_events=json_slice_events,
                       advice=advice, all_models=all_models)
        return _export_ranks(profs, options, where, DX.scheduler_address(scheduler), quiet,
                             advice)
    result = ExportResult(prof_dirs=list(profs))
    tune_allocator()  # large temporaries mmapped: freed memory goes back (memory.py)
    say = (lambda *a, **k: None) if quiet else safe_print
    if layout == "mindstudio":
        if iteration_count > 1:
            msg = (f'Param of "iteration-count" is {iteration_count}, but it is unnecessary in '
                   f'all export mode.')
            result.warnings.append(msg)
            print(f"[WARNING] {msg}", file=sys.stderr)
        if model_id is not None or iteration_id is not None or all_models:
            msg = ("The mindstudio layout exports all models and iterations; --model-id, "
                   "--iteration-id and --all-models are ignored.")
            result.warnings.append(msg)
            print(f"[WARNING] {msg}", file=sys.stderr)
    elif iteration_id is None and iteration_count > 1:
        msg = (f'Param of "iteration-count" is {iteration_count}, but it is unnecessary in all '
               f'export mode.')
        result.warnings.append(msg)
        print(f"[WARNING] {msg}", file=sys.stderr)

    progress = None
    if sys.stderr.isatty() and not quiet:
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        # two stages per PROF dir (decode, write): long single-PROF exports still move
        progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                            TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn(),
                            transient=True)
        progress.start()
        task = progress.add_task("Exporting", total=2 * len(profs))

    def stage(text: str, advance: int = 0) -> None:
        if progress is not None:
            progress.update(task, description=text, advance=advance)
    try:
        for prof in profs:
            SLICE_INDEX.clear()  # a failed earlier export's entries are not this PROF dir's
            _check_prof(prof, result)
            _check_has_data(prof)
            say(f"[INFO] Start export data in {prof}.")
            owner = _foreign_owner(prof)
            if owner is not None:  # never write into another user's collection unsaid
                print(f"[WARNING] {prof} belongs to another user ({owner}): the export "
                      f"writes its files into it.", file=sys.stderr)
            with read_once():
                if type_ == "db":  # only PROF_X/msprof_{ts}.db, as the real tool (db.py)
                    result.files.extend(_export_db(prof, result, stage))
                else:
                    n = len(result.models)
                    result.files.extend(_export_text(
                        prof, result, layout, (model_id, iteration_id, iteration_count),
                        reports, csv_slice_rows, json_slice_events, stage, summary_format,
                        all_models))
                    for choice in result.models[n:]:
                        say(f"[INFO] {choice.describe(all_models)}")
                        if not all_models:
                            for line in _other_models_files(prof, choice):
                                say(f"[INFO] {line}")
            index = timeline_index.write(prof, SLICE_INDEX)
            SLICE_INDEX.clear()
            if index is not None:
                result.files.append(index)
            for line in open_first(result.files, prof):
                say(f"[INFO] {line}")
            _finish(prof, clear, say)
            stage("Exported", advance=1)
    except OSError as exc:  # safety net: a file-system error is reported, never a traceback
        _remove_stale_temps(profs)
        where = exc.filename or path
        raise ExportError(f"{where}: {exc.strerror or exc}. Check the permissions and the free "
                          f"space of the PROF dir; the raw data is unchanged.") from None
    except BaseException:
        _remove_stale_temps(profs)
        raise
    finally:
        if progress is not None:
            progress.stop()
    if not quiet:
        _print_summary(result)
        from .outputs.advice_console import print_advice

        print_advice(result.advice, advice)
        if result.files:
            first = result.prof_dirs[0] if result.prof_dirs else path
            print(f"[INFO] The picture: msprof report {first} -o report.html (plots, opens "
                  f"offline); for CI: msprof summary / msprof check (docs/summary.md).")
    return result


def _export_ranks(profs: list[Path], options: dict, where: str, scheduler: str | None,
                  quiet: bool, advice: str) -> ExportResult:
    """The PROF dirs of a job exported on Dask (one task each); the console says per PROF
    dir what the serial export says, in the same order; failed ranks are named at the end."""
    from msprof_cli.cluster import dask_export as DX

    say = (lambda *a, **k: None) if quiet else safe_print
    cores = usable_cores()
    say(f"[INFO] Exporting {len(profs)} PROF dirs in parallel on "
        + (f"the Dask cluster at {scheduler}" if where == "remote" else
           f"a local Dask cluster of {max(1, min(cores, len(profs)))} worker processes") + ".")
    result = ExportResult(prof_dirs=list(profs))
    failed = []
    for prof, out in zip(profs, DX.run_ranks(run_export, profs, options, where, scheduler, cores)):
        if out.error:
            failed.append(prof)
            print(f"[ERROR] {prof.name} ({_rank_text(prof)}): {out.error}", file=sys.stderr)
            continue
        files = [Path(f) for f in out.files]
        result.files.extend(files)
        result.warnings.extend(out.warnings)
        for w in out.warnings:
            safe_print(f"[WARNING] {w}", file=sys.stderr)
        result.advice.extend(out.advice)
        result.models.extend(out.models)
        for choice in out.models:
            say(f"[INFO] {choice.describe(options['all_models'])}")
            if not options["all_models"]:
                for line in _other_models_files(prof, choice):
                    say(f"[INFO] {line}")
        for line in open_first(files, prof):
            say(f"[INFO] {line}")
        for note in replay_notes(prof):
            say(f"[INFO] Sampled collection, {note}.")
        for note in fallback_notes(prof) + drift_notes(prof):
            result.warnings.append(note)
            safe_print(f"[WARNING] {note}", file=sys.stderr)
        say(f"[INFO] Export all data in {prof} done.")
    if not quiet:
        _print_summary(result)
        from .outputs.advice_console import print_advice

        print_advice(result.advice, advice)
    if failed:
        names = ", ".join(f"{p.name} ({_rank_text(p)})" for p in failed)
        raise ExportError(f"{len(failed)} of {len(profs)} PROF dirs could not be exported: "
                          f"{names} (the reasons are above); the other "
                          f"{len(profs) - len(failed)} were exported.")
    return result


def _rank_text(prof: Path) -> str:
    """"rank N" from the PROF dir's device info.json ("rank unknown" without one)."""
    import json

    for info in sorted(prof.glob("device_*/info.json*")):
        try:
            rank = json.loads(info.read_text(encoding="utf-8").splitlines()[0]).get("rank_id")
        except (OSError, ValueError, IndexError, AttributeError):
            continue
        if isinstance(rank, int) and rank >= 0:
            return f"rank {rank}"
    return "rank unknown"


_SLICE = re.compile(r"^msprof_slice_(\d+)_")


def open_first(files: list[Path], prof: Path) -> list[str]:
    """Which timeline to open first: per msprof json of `prof` (per
    device and model in the legacy layout), its file or first slice -- slices are in time
    order, so slice 0 holds the first steps."""
    groups: dict[tuple[Path, str], list[tuple[int, Path]]] = {}
    for f in files:
        if f.suffix != ".json" or prof not in f.parents or not f.name.startswith("msprof_") \
                or f.name.startswith(("msprof_tx", "msprof_cli_")):
            continue
        m = _SLICE.match(f.name)
        key = _SLICE.sub("msprof_", f.name) if m else f.name
        groups.setdefault((f.parent, key), []).append((int(m.group(1)) if m else 0, f))
    out = []
    for (_, _), parts in list(groups.items())[:4]:
        parts.sort()
        first = parts[0][1].relative_to(prof)
        index = prof / timeline_index.INDEX_NAME
        more = (f" (slice 0 of {len(parts)}, with the first steps; {index.name} says which "
                f"slice holds which iterations)" if len(parts) > 1 else "")
        out.append(f"Timeline to open first: {prof.name}/{first}{more} -- in "
                   f"https://ui.perfetto.dev or chrome://tracing.")
    return out


def safe_print(*parts: object, **kw) -> None:
    """print with control characters escaped: op and model names come from the raw data
    (hash_dic), and an escape sequence in one must not reach the terminal."""
    print(*(escape_controls(str(p)) for p in parts), **kw)


def _other_models_files(prof: Path, choice) -> list[str]:
    """A line when the device's summary/timeline folders still hold another model's files
    (an earlier `--all-models` or `--model-id` export): which export wrote what."""
    if choice.model_id is None:
        return []
    dev = choice.device_id
    pat = re.compile(rf"_{dev}_(\d+)_\d+(?:_\d+)?(?:_slice_\d+)?\.(csv|json)$")
    others: dict[int, int] = {}
    for sub in ("summary", "timeline"):
        folder = prof / f"device_{dev}" / sub
        if not folder.is_dir() or folder.is_symlink():
            continue
        for name in os.listdir(folder):
            m = pat.search(name)
            if m and int(m.group(1)) != choice.model_id:
                others[int(m.group(1))] = others.get(int(m.group(1)), 0) + 1
    if not others:
        return []
    listed = ", ".join(f"model {m} ({n} files)" for m, n in sorted(others.items()))
    return [f"device_{dev}: summary/ and timeline/ also hold files of {listed} from an earlier "
            f"export (--all-models or --model-id); this export wrote model "
            f"{choice.model_id}'s only."]


def _foreign_owner(prof: Path) -> str | None:
    """The owner of `prof` when it is not the user running the export (None: ours)."""
    try:
        uid = prof.stat().st_uid
    except OSError:
        return None
    if not hasattr(os, "geteuid") or uid == os.geteuid():
        return None
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return f"uid {uid}"


def _finish(prof: Path, clear: bool, say) -> None:
    if clear:
        _clear_intermediate(prof)
    for note in replay_notes(prof):
        say(f"[INFO] Sampled collection, {note}.")
    for note in fallback_notes(prof) + drift_notes(prof):
        safe_print(f"[WARNING] {note}", file=sys.stderr)
    say(f"[INFO] Export all data in {prof} done.")


def _export_text(prof: Path, result: ExportResult, layout: str,
                 selection: tuple[int | None, int | None, int], reports: Path | None,
                 csv_slice_rows: int, json_slice_events: int, stage,
                 summary_format: str = "csv", all_models: bool = False) -> list[Path]:
    """The files of a text layout, written from the plans of `prof` (plan.py): mindstudio
    files mix the devices (one plan, every device with the same cuts); the legacy layout
    exports each device on its own (a plan per device, the one-window ones sharing one
    decode).  `all_models` (legacy): after the default model, one more pass per model."""
    from .layouts.legacy import export_legacy
    from .layouts.mindstudio import export_mindstudio

    stage(f"Scanning {prof.name}")
    if layout == "mindstudio":
        units = iter([(None, plan_export(prof))])
        several = False
    else:
        several = len(device_ids(prof)) > 1
        if several:  # a selection error before any device is written
            check_selection(prof, *selection)
        units = plan_devices(prof)  # each device scanned when its turn comes
    model_id, iteration_id, iteration_count = selection

    def write(plan: Plan, what: str, model: int | None = None) -> list[Path]:
        n = len(plan)
        stage(f"Writing {what}: window 1/{n}")
        on_window = lambda k: stage(  # noqa: E731
            f"Writing {what}: window {min(k + 2, n)}/{n}")
        if layout == "mindstudio":
            return export_mindstudio(
                plan, reports=reports, csv_slice_rows=csv_slice_rows,
                json_slice_events=json_slice_events, on_window=on_window,
                summary_format=summary_format)
        if not plan.facts:  # no device dir: the legacy layout has no file to write
            msg = (f"{prof} has no device_N directory: the legacy layout writes per-device "
                   f"files, so nothing was written. --layout mindstudio exports the host's "
                   f"data (api_statistic, the CANN layer of msprof json).")
            result.warnings.append(msg)
            print(f"[WARNING] {msg}", file=sys.stderr)
            return []
        return export_legacy(
            plan, model_id=model_id if model is None else model, iteration_id=iteration_id,
            iteration_count=iteration_count, reports=reports,
            csv_slice_rows=csv_slice_rows, json_slice_events=json_slice_events,
            advice=advice, on_window=on_window, summary_format=summary_format,
            choices=result.models, with_rule=model is None)

    files: list[Path] = []
    advice: list[Advice] = []
    warnings: list[str] = []
    decodes = []  # the whole decodes the plans shared (the legacy devices')
    for i, (dev, plan) in enumerate(units):
        release()  # the scan's sorted times and join keys (~0.8 GB of heap at 10M) go back
        if i == 0:
            stage(f"Writing {layout} files of {prof.name}", advance=1)
        what = f"{layout} files of {prof.name}" + (f" device {dev}" if several else "")
        before = len(result.models)
        try:
            files += write(plan, what)
        except NotWindowable as exc:  # a window found damage the scan did not: one window
            release()
            plan = Plan(prof, None, f"window decode: {exc}", device=dev)
            files += write(plan, what)
        chosen = result.models[-1] if len(result.models) > before else None
        if all_models and chosen is not None and chosen.model_id is not None:
            for m, _, _ in chosen.models:  # each model in its own files (its suffix)
                if m != chosen.model_id:
                    plan.rewind()
                    files += write(plan, f"{what}, model {m}", m)
        warnings = list(dict.fromkeys(warnings + plan.warnings()))
        plan.release()
        if plan.decode is not None:
            decodes.append(plan.decode)
        release()
    for decode in decodes:
        decode.data = None  # the shared whole decode of the legacy devices
    for w in warnings:
        safe_print(f"[WARNING] {w}", file=sys.stderr)
    result.warnings.extend(warnings)
    result.advice.extend(advice)
    return files


def _export_db(prof: Path, result: ExportResult, stage) -> list[Path]:
    """``--type db``: the database written from the plan of `prof` (plan.py), window by
    window or as one window."""
    from .layouts import db as db_output  # sqlite3 and the db tables: only for --type db

    stage(f"Scanning {prof.name}")
    plan = plan_export(prof)
    release()
    n = len(plan)
    stage(f"Writing the database of {prof.name}: window 1/{n}", advance=1)
    try:
        files = db_output.export_db(plan, on_window=lambda k: stage(
            f"Writing the database of {prof.name}: window {min(k + 2, n)}/{n}"))
    except NotWindowable as exc:  # a window found damage the scan did not: one window
        release()
        plan = Plan(prof, None, f"window decode: {exc}")
        files = db_output.export_db(plan)
    _report(plan, result)
    release()
    return files


def _report(plan: Plan, result: ExportResult) -> None:
    """The plan's decode warnings, on stderr and in the result."""
    warnings = plan.warnings()
    for w in warnings:
        safe_print(f"[WARNING] {w}", file=sys.stderr)
    result.warnings.extend(warnings)


def _remove_stale_temps(profs: list[Path]) -> None:
    """After a failed export: the temporary files of workers the pool stopped midway (a
    SIGTERM can land between a worker's close and its rename) are removed now, not at the
    next export (their writers are dead; live writers' files are left alone)."""
    for prof in profs:
        for d in [prof, prof / "mindstudio_profiler_output", *prof.glob("*/summary"),
                  *prof.glob("*/timeline")]:
            if d.is_dir() and not d.is_symlink():
                clean_stale_temps(d)


def _check_prof(prof: Path, result: ExportResult) -> None:
    """Refuse result dirs without control files (their data would be skipped silently) and
    report storage_limit ageing (raw/ageing.py)."""
    for bad in incomplete_result_dirs(prof):
        name = "info.json" if bad.name == "host" else f"info.json.{bad.name.split('_')[-1]}"
        raise ProfDirError(f"{bad} has no {name} file (or it cannot be read), so its data "
                           f"cannot be decoded. Restore the control files of that directory "
                           f"(they are written when the collection starts) or re-collect; "
                           f"move the directory out of {prof.name} to export the rest.")
    marker = read_marker(prof)
    if marker is not None:
        msg = aged_message(prof, marker)
        result.warnings.append(msg)
        print(f"[WARNING] {msg}", file=sys.stderr)


def _clear_intermediate(prof: Path) -> None:
    """--clear: remove intermediate data of the real tool (sqlite/, mindstudio_profiler_log/).

    msprof_cli keeps no intermediate data of its own; raw `data/` dirs are never touched."""
    for rd in [prof, *result_dirs(prof)]:
        for name in ("sqlite", "mindstudio_profiler_log"):
            p = rd / name
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
