"""The export byte-identity corpus: raw PROF dirs frozen as files, and the sha256
of every file each export variant writes from them.

    .venv/bin/python -m tests.corpus.build raw        # regenerate raw.tar.xz (device writer)
    .venv/bin/python -m tests.corpus.build manifest   # re-record manifest.json (current export)

`raw` is run once, when the corpus is created: the raw dirs are then *data*, so a later
change of the device model does not move the corpus.  `manifest` records what the export
writes today; `tests/test_export_corpus.py` checks that every later export writes exactly the
same bytes.  Re-record the manifest only for an intended change of an output, and say which
in the commit message.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any, Iterator

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RAW_TAR = HERE / "raw.tar.xz"
MANIFEST = HERE / "manifest.json"
WINDOW_ENV = "MSPROF_EXPORT_WINDOW_TASKS"  # forces windows of this many tasks (0: whole)
WORKERS_ENV = "MSPROF_EXPORT_WORKERS"
REPORTS = "reports_cann_overlap_off.json"

# variant name -> (run_export keyword arguments, window size or None for the default plan)
VARIANTS: dict[str, tuple[dict[str, Any], int | None]] = {
    "legacy": ({"layout": "legacy"}, None),
    "legacy-json": ({"layout": "legacy", "summary_format": "json"}, None),
    "legacy-select": ({"layout": "legacy", "model_id": 1, "iteration_id": 2}, None),
    "legacy-w700": ({"layout": "legacy"}, 700),
    "mindstudio": ({"layout": "mindstudio"}, None),
    "mindstudio-json": ({"layout": "mindstudio", "summary_format": "json"}, None),
    "mindstudio-w700": ({"layout": "mindstudio"}, 700),
    "db": ({"layout": "mindstudio", "type_": "db"}, None),
    "db-w700": ({"layout": "mindstudio", "type_": "db"}, 700),
    # (--advice full prints the same report the legacy variant records: no variant of its own)
    # --reports with the CANN, Overlap Analysis and msproftx layers off (flows go with CANN)
    "mindstudio-reports": ({"layout": "mindstudio", "reports": HERE / REPORTS}, None),
    "legacy-reports-w700": ({"layout": "legacy", "reports": HERE / REPORTS}, 700),
}
# cases that not every variant applies to (a selection needs model 1 with an iteration 2)
SKIP: dict[str, set[str]] = {
    "dynamic_shape": {"legacy-select"},
}
_STAMP = re.compile(r"_\d{14}")


def _cases(work: Path) -> Iterator[tuple[str, Path]]:
    """Build every raw case with the device writer under `work` (only for `raw`)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    sys.path.insert(0, str(ROOT / "tests"))
    import gen_prof
    from test_device_records import make_chunk, run
    from test_export_files import cfg

    from tests.rich_prof import build_prof

    yield "one_device", gen_prof.generate(6000, work / "one_device", batch_tasks=1500,
                                          quiet=True)
    yield "two_devices_hccl", gen_prof.generate(6000, work / "two_devices_hccl", devices=2,
                                                batch_tasks=1500, quiet=True)
    yield "two_devices_l2", gen_prof.generate(6000, work / "two_devices_l2", devices=2,
                                              l2=True, batch_tasks=1500, quiet=True)
    yield "msproftx_aicpu_pmu", build_prof(work / "msproftx_aicpu_pmu", n_iter=12,
                                           aicpu=True, aic_metrics="PipeUtilization")
    yield "rich_two_devices", build_prof(work / "rich_two_devices", device_ids=(0, 1))
    prof = run(work / "dynamic_shape", [make_chunk(6)], cfg(work / "dynamic_shape"))
    for p in (prof / "host" / "data").iterdir():
        if p.name.startswith("unaging."):
            p.rename(p.with_name("aging." + p.name[len("unaging."):]))
    yield "dynamic_shape", prof
    damaged = work / "damaged" / "PROF_000001_20250101120000123_DAMAGEDHWTSTAILS"
    damaged.parent.mkdir(parents=True)
    shutil.copytree(work / "one_device" / gen_prof.PROF_NAME, damaged)
    hwts = sorted((damaged / "device_0" / "data").glob("hwts.data*"))[0]
    with open(hwts, "ab") as fh:
        fh.write(b"\0" * 5)  # a truncated record at the tail
    yield "damaged", damaged
    # raw dirs of real collections (the golden and oracle cases, located by shared_paths.py),
    # frozen in the corpus too
    from tests.shared_paths import shared_dir
    for case in ("ascend910-small", "oracle-eager", "oracle-keras_bn", "oracle-mirrored_hccl",
                 "oracle-tf1_aicpu"):
        src = next((shared_dir() / "golden" / case / "raw").glob("PROF_*"))
        dest = work / case.replace("-", "_") / src.name
        shutil.copytree(src, dest, ignore=shutil.ignore_patterns(
            "summary", "timeline", "mindstudio_profiler_output", "sqlite"))
        yield case.replace("-", "_"), dest


def build_raw() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        with tarfile.open(RAW_TAR, "w:xz") as tar:
            for case, prof in _cases(work):
                prof = _find_prof(prof)
                tar.add(prof, arcname=f"{case}/{prof.name}")
    print(f"wrote {RAW_TAR} ({RAW_TAR.stat().st_size / 1e6:.1f} MB)")


def _find_prof(p: Path) -> Path:
    return p if p.name.startswith("PROF_") else next(p.glob("PROF_*"))


# cases made from the frozen ones at unpack time (name -> (source case, change)): the
# shapes of a PROF dir that the pipeline's plan must cover, not just the device writer's
DERIVED: dict[str, tuple[str, str]] = {
    # a host dir alone: mindstudio writes the host's files, legacy has no device to write
    "host_only": ("one_device", "drop device_0"),
    # PMU on one device only (the other's sample.json says off): op_summary columns
    # differ between the devices
    "pmu_off_device_1": ("rich_two_devices", "set device_1/sample.json ai_core_profiling=off"),
    "pmu_off_device_0": ("rich_two_devices", "set device_0/sample.json ai_core_profiling=off"),
    # one device's hwts tail is damaged: that device cannot be cut into windows
    "damaged_device_1": ("two_devices_l2", "truncate device_1/data/hwts.data.1.slice_0"),
    # a real 910's device records with no host dir at all: every layout exports what it holds
    "device_only": ("ascend910_small", "drop host"),
}


def _derive(src: Path, dest: Path, change: str) -> Path:
    prof = dest / src.name
    shutil.copytree(src, prof)
    verb, rel = change.split(" ", 1)
    target = prof / rel
    if verb == "drop":
        (shutil.rmtree if target.is_dir() else Path.unlink)(target)
    elif verb == "set":  # a key of a JSON control file
        rel, assign = rel.split(" ")
        key, value = assign.split("=")
        target = prof / rel
        doc = json.loads(target.read_text())
        doc[key] = value
        target.write_text(json.dumps(doc))
    else:  # truncate: a record cut short at the tail
        with open(target, "ab") as fh:
            fh.write(b"\0" * 5)
    return prof


def extract(tar_path: Path, dest: Path) -> None:
    """Unpack one of the test archives under `dest`: only regular files and directories at
    relative paths inside it.  tarfile's `filter="data"` says that, but it came with Python
    3.11.4; Debian 12's python3.11 is 3.11.2, so older 3.11s get the same check by hand."""
    with tarfile.open(tar_path, "r:*") as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
            return
        root = dest.resolve()
        for member in tar.getmembers():
            target = (root / member.name).resolve()
            if not (member.isfile() or member.isdir()) or not target.is_relative_to(root):
                raise ValueError(f"{tar_path}: refusing to unpack {member.name!r} "
                                 f"(not a plain file or directory inside {dest})")
        tar.extractall(dest)


def unpack(dest: Path) -> dict[str, Path]:
    """Case name -> its PROF dir, unpacked under `dest` (the DERIVED cases made too)."""
    extract(RAW_TAR, dest)
    cases = {c.name: next(c.glob("PROF_*")) for c in sorted(dest.iterdir()) if c.is_dir()}
    for name, (src, change) in DERIVED.items():
        cases[name] = _derive(cases[src], dest / name, change)
    return dict(sorted(cases.items()))


def _digest(p: Path) -> str:
    """sha256 of a file; of an SQLite db, of its content (schema entries in order, every
    table's rows by rowid): the page layout of the same rows depends on how they were
    inserted, which is the writer's business, not the output's."""
    if p.suffix != ".db":
        return hashlib.sha256(p.read_bytes()).hexdigest()
    import sqlite3

    h = hashlib.sha256()
    with sqlite3.connect(f"file:{p}?mode=ro", uri=True) as conn:
        entries = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY rowid")
        for kind, name, sql in entries.fetchall():
            h.update(repr((kind, name, sql)).encode())
            if kind == "table":
                for row in conn.execute(f'SELECT * FROM "{name}" ORDER BY rowid'):
                    h.update(repr(row).encode())
    return "db:" + h.hexdigest()


def _digest_tree(root: Path, skip: set[Path] = frozenset()) -> dict[str, str]:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and p not in skip:
            rel = _STAMP.sub("", str(p.relative_to(root)))
            out[rel] = _digest(p)
    return out


def export_variant(src: Path, dest: Path, variant: str) -> dict[str, str]:
    """Copy `src` to `dest`, export it with `variant`; sha256 of each file written (paths
    with their timestamps removed), plus the console advice.  Raises if raw data changed."""
    from msprof_cli.errors import MsprofError
    from msprof_cli.export.api import run_export

    kwargs, window = VARIANTS[variant]
    prof = dest / src.name
    shutil.copytree(src, prof)
    raw = _digest_tree(prof)
    before = set(prof.rglob("*"))
    old = os.environ.get(WINDOW_ENV)
    os.environ[WINDOW_ENV] = "" if window is None else str(window)
    try:
        res = run_export(prof, quiet=True, **kwargs)
        advice = {f"advice:{a.path.name}": hashlib.sha256(a.text.encode()).hexdigest()
                  for a in res.advice}
    except MsprofError as exc:  # a refusal is an output too: its message must not change
        advice = {"error": f"{type(exc).__name__}: {exc}".replace(str(dest), "<dest>")}
    finally:
        if old is None:
            os.environ.pop(WINDOW_ENV, None)
        else:
            os.environ[WINDOW_ENV] = old
    if _digest_tree(prof, {p for p in set(prof.rglob("*")) - before}) != raw:
        raise AssertionError(f"export {variant} modified the raw data of {src}")
    written = _digest_tree(prof, before)
    for name in written:
        if Path(name).name.startswith("."):
            raise AssertionError(f"export {variant} left a temporary file {name}")
    return {**written, **advice}


# the derived cases pin the shape they were made for, in the variants where it shows
ONLY: dict[str, set[str]] = {
    "host_only": {"legacy", "mindstudio", "mindstudio-json", "mindstudio-w700", "db"},
    "pmu_off_device_0": {"legacy", "mindstudio", "mindstudio-json", "mindstudio-w700", "db"},
    "pmu_off_device_1": {"legacy", "mindstudio", "mindstudio-json", "mindstudio-w700", "db"},
    "damaged_device_1": {"legacy", "legacy-w700", "legacy-reports-w700"},
}


def variants_of(case: str) -> list[str]:
    return [v for v in VARIANTS if v not in SKIP.get(case, set())
            and v in ONLY.get(case, VARIANTS)]


def build_manifest() -> None:
    out: dict[str, dict[str, dict[str, str]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        cases = unpack(Path(tmp) / "raw")
        for case, prof in cases.items():
            out[case] = {}
            for v in variants_of(case):
                out[case][v] = export_variant(prof, Path(tmp) / case / v, v)
                print(f"{case:22s} {v:16s} {len(out[case][v]):4d} files", flush=True)
    MANIFEST.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"wrote {MANIFEST}")


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    if what == "raw":
        build_raw()
    elif what == "manifest":
        build_manifest()
    else:
        raise SystemExit(__doc__)
