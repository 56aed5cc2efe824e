"""`msprof export` of a tiny PROF dir and at 50k / 1M (/ 10M with --big) device tasks, both
layouts.

    python benchmarks/export_bench.py [--sizes tiny,50k,1m] [--big] [--layouts legacy,mindstudio,db]
                                      [--work DIR] [--keep] [--devices N] [--repeat N]

`tiny` (target <= 0.4 s): the corpus' ascend910_small PROF dir (the golden
raw dir: 3 iterations, 21 tasks), the median of --repeat whole-process runs after one warm-up
run; its children (and those of every other case) cache their bytecode under --work
(PYTHONPYCACHEPREFIX), as an installed package has it (without .pyc files, e.g.
PYTHONDONTWRITEBYTECODE on an editable install, the imports compile ~0.08 s more).

Per case: wall seconds of the whole `msprof export` process (interpreter start-up included),
tasks/s, peak RSS of that process (``os.wait4`` rusage ``ru_maxrss``), bytes read and written
(/proc/self/io ``rchar`` / ``wchar`` of the export process), bytes of output files, the
number of output files and the size of the largest timeline file.  The 50k case also prints
the start-up split: interpreter start, imports (CLI + exporter, pandas included) and the work
after imports.  PROF dirs come from gen_prof.py (cached in --work between runs with --keep).
One line per case on stdout; all rows in benchmarks/results/export.csv.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, env, median, write_results

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gen_prof  # noqa: E402

SIZES = {"tiny": 21, "50k": 50_000, "1m": 1_000_000, "10m": 10_000_000}
TINY_CASE = "ascend910_small"  # tests/corpus: the golden raw dir
CHILD = [sys.executable, str(Path(__file__).resolve().parent / "_export_child.py")]


def _prof_size(prof: Path) -> int:
    return sum(f.stat().st_size for f in prof.rglob("*") if f.is_file() and "/data/" in str(f))


def _outputs(prof: Path, layout: str) -> list[Path]:
    if layout == "db":
        return sorted(prof.glob("msprof_*.db"))
    if layout == "mindstudio":
        d = prof / "mindstudio_profiler_output"
        return sorted(p for p in d.iterdir() if p.is_file()) if d.is_dir() else []
    out = []
    for dev in sorted(prof.glob("device_*")):
        for sub in ("summary", "timeline"):
            if (dev / sub).is_dir():
                out += sorted(p for p in (dev / sub).iterdir() if p.is_file())
    return out


def _clean_outputs(prof: Path) -> None:
    for db in prof.glob("msprof_*.db"):
        db.unlink()
    shutil.rmtree(prof / "mindstudio_profiler_output", ignore_errors=True)
    for dev in prof.glob("device_*"):
        for sub in ("summary", "timeline"):
            shutil.rmtree(dev / sub, ignore_errors=True)


def tiny_prof(work: Path) -> Path:
    """The corpus' tiny PROF dir, unpacked under `work` (once)."""
    dest = work / "tiny"
    if not dest.is_dir():
        sys.path.insert(0, str(ROOT))
        from tests.corpus.build import unpack

        tmp = work / "tiny.unpack"
        shutil.rmtree(tmp, ignore_errors=True)
        src = unpack(tmp)[TINY_CASE]
        shutil.copytree(src.parent, dest)
        shutil.rmtree(tmp, ignore_errors=True)
    return next(dest.glob("PROF_*"))


def run_tiny(prof: Path, layout: str, workers: str, repeat: int, pycache: Path) -> dict:
    """The median of `repeat` whole-process exports of the tiny dir (after a warm-up that
    fills the bytecode cache)."""
    extra = {"PYTHONPYCACHEPREFIX": str(pycache), "PYTHONDONTWRITEBYTECODE": ""}
    runs = [run_case(prof, layout, SIZES["tiny"], workers, extra) for _ in range(repeat + 1)][1:]
    walls = sorted(r["wall_s"] for r in runs)
    row = min(runs, key=lambda r: abs(r["wall_s"] - median(walls)))
    row.update(wall_s=round(median(walls), 3), min_s=walls[0], repeat=repeat,
               load=round(os.getloadavg()[0], 2))
    return row


def run_case(prof: Path, layout: str, tasks: int, workers: str = "",
             extra_env: dict | None = None) -> dict:
    """One `msprof export` child: wall, peak RSS (wait4), I/O and its own timing split."""
    _clean_outputs(prof)
    # the previous case's outputs (2 GB at 1M tasks) are written back by the kernel ~30 s
    # after they were dirtied, i.e. during this case: flushed first, so that each case
    # is charged with its own work only
    os.sync()
    child_env = env()
    for k, v in (extra_env or {}).items():
        if v:
            child_env[k] = v
        else:
            child_env.pop(k, None)
    if workers:
        child_env["MSPROF_EXPORT_WORKERS"] = workers
    args = ["--output", str(prof)] + {"mindstudio": ["--layout", "mindstudio"],
                                      "db": ["--type", "db"]}.get(layout, [])
    t0 = time.perf_counter()
    proc = subprocess.Popen(CHILD + args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=child_env, cwd=ROOT)
    err = proc.stderr.read().decode("utf-8", "replace")
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    rec = {}
    for line in err.splitlines():
        if line.startswith("@@bench "):
            rec = json.loads(line[8:])
    if proc.returncode != 0:
        raise RuntimeError(f"export {layout} of {prof} failed ({proc.returncode}):\n{err[-3000:]}")
    outs = _outputs(prof, layout)
    timelines = [p for p in outs if p.suffix == ".json" and "prof_rule" not in p.name]
    return {
        "case": f"export {layout}", "tasks": tasks, "wall_s": round(wall, 3),
        "tasks_per_s": int(tasks / wall), "peak_rss_mb": round(ru.ru_maxrss / 1024, 1),
        "tree_pss_mb": round(rec.get("tree_pss_kb", 0) / 1024, 1),
        "cpu_s": round(ru.ru_utime + ru.ru_stime, 2),
        "read_mb": round(rec.get("rchar", 0) / 2**20, 1),
        "written_mb": round(rec.get("wchar", 0) / 2**20, 1),
        "output_mb": round(sum(p.stat().st_size for p in outs) / 2**20, 1),
        "files": len(outs),
        "max_timeline_mb": round(max((p.stat().st_size for p in timelines), default=0) / 2**20,
                                 1),
        "startup_s": round(wall - rec.get("work_s", 0), 3),
        "import_s": round(rec.get("import_s", 0), 3),
        "work_s": round(rec.get("work_s", 0), 3),
    }


def interpreter_start(repeat: int = 5) -> float:
    walls = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True, env=env())
        walls.append(time.perf_counter() - t0)
    return min(walls)


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="tiny,50k,1m", help="comma list of tiny, 50k, 1m, 10m")
    ap.add_argument("--repeat", type=int, default=7, help="runs of the tiny case (median)")
    ap.add_argument("--big", action="store_true", help="also 10M tasks")
    ap.add_argument("--layouts", default="legacy,mindstudio")
    ap.add_argument("--devices", type=int, default=1)
    ap.add_argument("--workers", default="",
                    help="comma list of MSPROF_EXPORT_WORKERS values to compare (e.g. 1,2); "
                         "default: the export's own choice (all usable cores)")
    ap.add_argument("--work", type=Path, default=None,
                    help="where the generated PROF dirs live (default: a temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep (and reuse) the PROF dirs")
    ap.add_argument("--soc-version", default="Ascend910A",
                    help="the chip of the generated PROF dirs (an Atlas A2: its task log)")
    a = ap.parse_args(argv if argv is not None else [])
    sizes = [s.strip().lower() for s in a.sizes.split(",") if s.strip()]
    if a.big and "10m" not in sizes:
        sizes.append("10m")
    work = a.work or Path(tempfile.mkdtemp(prefix="msprof_bench_"))
    rows: list[dict] = []
    print(f"export   machine: {os.cpu_count()} cores, python {sys.version.split()[0]}; "
          f"interpreter start {interpreter_start():.3f} s")
    try:
        for size in sizes:
            n = SIZES[size]
            if size == "tiny":
                prof = tiny_prof(work)
                for layout in [x.strip() for x in a.layouts.split(",") if x.strip()]:
                    for workers in (a.workers.split(",") if a.workers else [""]):
                        r = run_tiny(prof, layout, workers.strip(), a.repeat, work / "pycache")
                        r["case"] += " tiny" + (f" w{workers}" if workers else "")
                        rows.append(r)
                        print(f"export   {r['case'][7:]:<16} median {r['wall_s']:.3f} s  "
                              f"(min {r['min_s']:.3f} s of {a.repeat}, load {r['load']})  "
                              f"[start-up {r['startup_s']:.2f} s (imports {r['import_s']:.2f} "
                              f"s), work {r['work_s']:.2f} s]", flush=True)
                _clean_outputs(prof)
                continue
            root = work / f"{size}_d{a.devices}_{a.soc_version}"
            prof = root / gen_prof.PROF_NAME
            if not prof.is_dir():
                shutil.rmtree(root, ignore_errors=True)
                t0 = time.perf_counter()
                gen_prof.generate(n, root, devices=a.devices, quiet=True, chip=a.soc_version)
                print(f"export   generated {size} ({n:,} tasks, {_prof_size(prof) / 2**20:.0f} "
                      f"MiB raw) in {time.perf_counter() - t0:.1f} s")
            cases = [(lay.strip(), w.strip()) for lay in a.layouts.split(",") if lay.strip()
                     for w in (a.workers.split(",") if a.workers else [""])]
            # the bytecode cache of the tiny case (filled by a first run if there was none):
            # an installed package imports from .pyc files; compiling costs ~0.1 s a run
            cached = {"PYTHONPYCACHEPREFIX": str(work / "pycache"), "PYTHONDONTWRITEBYTECODE": ""}
            if not (work / "pycache").is_dir():
                run_case(prof, cases[0][0], n, cases[0][1], cached)
            for layout, workers in cases:
                r = run_case(prof, layout, n, workers, cached)
                if a.devices > 1 or workers:
                    r["case"] += f" d{a.devices}" + (f" w{workers}" if workers else "")
                if a.soc_version != "Ascend910A":
                    r["case"] += f" {a.soc_version}"
                r["raw_mb"] = round(_prof_size(prof) / 2**20, 1)
                rows.append(r)
                extra = (f"  [start-up {r['startup_s']:.2f} s (imports {r['import_s']:.2f} s), "
                         f"work {r['work_s']:.2f} s]") if n <= 100_000 else ""
                print(f"export   {r['case'][7:]:<10} {n:>10,} tasks  {r['wall_s']:8.2f} s  "
                      f"(cpu {r['cpu_s']:.1f} s)  {r['tasks_per_s']:>9,} tasks/s  "
                      f"peak RSS {r['peak_rss_mb']:7.0f} MB (tree PSS {r['tree_pss_mb']:.0f} MB)  "
                      f"read {r['read_mb']:7.0f} MB  written {r['written_mb']:7.0f} MB  "
                      f"{r['files']} files, largest timeline {r['max_timeline_mb']:.0f} MB"
                      + extra, flush=True)
            _clean_outputs(prof)
            if not a.keep:
                shutil.rmtree(root, ignore_errors=True)
    finally:
        if not a.keep and a.work is None:
            shutil.rmtree(work, ignore_errors=True)
    if rows:
        write_results("export", rows)
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
