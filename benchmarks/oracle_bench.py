"""`msprof export` side by side with the real msprof analysis on the same PROF dirs: the
ratio of their times (the target is >= 25x at 50k tasks, docs/performance.md).

    python benchmarks/oracle_bench.py [--sizes tiny,50k] [--repeat N] [--oracle MSPROF_PY]
                                      [--work DIR] [--keep] [--soc-version Ascend910B3]

The real analysis is Ascend/msprof's `analysis/` (pure Python, the oracle of
../shared/oracle/README.md): ``python msprof.py export summary -dir PROF`` then ``export
timeline -dir PROF``, the two commands that write what `msprof export --layout mindstudio`
writes in one.  Each real run starts from a fresh copy of the raw data (the analysis parses
the raw files into sqlite inside the PROF dir on its first run and reuses them after, which is
not what a user's first export costs).  Ours: the whole `msprof export` process of both
layouts (export_bench.run_case: bytecode cached, as an installed package has it).  The sides
alternate, --repeat rounds; per size the minimum of each (the VM's speed moves within
minutes; the minimum is the steadiest figure of both), and the ratio real / ours.  Each round
also times the floor: an interpreter importing numpy and pandas as the export does (the part
of a tiny export no pipeline change can remove; what is above it is ours).

The oracle's msprof.py: --oracle, else $MSPROF_ORACLE, else
~/.cache/msprof-oracle/analysis/msprof/msprof.py (where ../shared/oracle/setup.sh puts it).
With --soc-version an Atlas A2 chip, the generated PROF dirs are that chip's (gen_prof.py;
the tiny size stays the 910 corpus dir): the real analysis then takes its chip-5 path (its
Python engine: the C++ library is not on this path).  Rows in benchmarks/results/oracle.csv.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import write_results
from export_bench import SIZES, _clean_outputs, run_case, tiny_prof

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gen_prof  # noqa: E402

DEFAULT_ORACLE = Path.home() / ".cache/msprof-oracle/analysis/msprof/msprof.py"


def oracle_path(given: str | None) -> Path:
    path = Path(given or os.environ.get("MSPROF_ORACLE") or DEFAULT_ORACLE)
    if not path.is_file():
        sys.exit(f"oracle_bench: the real analysis is not at {path}. Lay it out as "
                 f"../shared/oracle/README.md says (fetch Ascend/msprof, then setup.sh) and "
                 f"pass its msprof.py with --oracle or MSPROF_ORACLE.")
    return path


def run_real(oracle: Path, src: Path, scratch: Path) -> tuple[float, float]:
    """Seconds of the real `export summary` and `export timeline` on a fresh copy of `src`."""
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    prof = scratch / src.name
    shutil.copytree(src, prof)
    _clean_outputs(prof)
    os.sync()
    times = []
    for what in ("summary", "timeline"):
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, str(oracle), "export", what, "-dir", str(prof)],
                              capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            raise RuntimeError(f"the real analysis failed ({what}, {proc.returncode}):\n"
                               f"{proc.stdout[-1500:]}{proc.stderr[-1500:]}")
    out = prof / "mindstudio_profiler_output"
    if not out.is_dir() or not any(out.glob("op_summary_*.csv")):
        raise RuntimeError(f"the real analysis wrote no op_summary under {out}")
    shutil.rmtree(scratch, ignore_errors=True)
    return times[0], times[1]


# what every pandas program pays before its first line of work, loaded as `msprof export`
# loads it (one OpenBLAS thread, the collector paused) and ended as it ends (no interpreter
# teardown, cli.main.exit_now): the floor of a tiny export
FLOOR = ("import gc, os; gc.disable(); os.environ['OPENBLAS_NUM_THREADS'] = '1'; "
         "import numpy, pandas; os._exit(0)")


def run_floor(env_extra: dict) -> float:
    """Seconds of a bare interpreter importing numpy and pandas (the same bytecode cache)."""
    env = dict(os.environ, **env_extra)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", FLOOR], env=env, check=True)
    return time.perf_counter() - t0


def interpreter() -> str:
    """The interpreter both sides run on (a venv's python resolved to the real one): its
    build moves both sides by ~15 % here -- Debian's python3.11 (built with PGO + LTO, a
    static executable) against pyenv's 3.11.7 (plain -O3, libpython shared), docs/
    performance.md "Small exports", round 6."""
    return f"Python {sys.version.split()[0]} ({os.path.realpath(sys.executable)})"


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="tiny,50k", help="comma list of tiny, 50k, 1m")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each side (minimum kept)")
    ap.add_argument("--oracle", default=None, help="the real analysis' msprof.py")
    ap.add_argument("--work", type=Path, default=None, help="where the PROF dirs live")
    ap.add_argument("--keep", action="store_true", help="keep (and reuse) the PROF dirs")
    ap.add_argument("--soc-version", default="Ascend910A", help="the chip of the generated dirs")
    a = ap.parse_args(argv if argv is not None else [])
    oracle = oracle_path(a.oracle)
    print(f"oracle   both sides on {interpreter()}", flush=True)
    work = a.work or Path(tempfile.mkdtemp(prefix="msprof_oracle_bench_"))
    rows: list[dict] = []
    try:
        for size in [s.strip().lower() for s in a.sizes.split(",") if s.strip()]:
            n = SIZES[size]
            if size == "tiny":
                prof = tiny_prof(work)
            else:
                prof = work / f"{size}_d1_{a.soc_version}" / gen_prof.PROF_NAME
                if not prof.is_dir():
                    gen_prof.generate(n, prof.parent, devices=1, quiet=True, chip=a.soc_version)
            cached = {"PYTHONPYCACHEPREFIX": str(work / "pycache"), "PYTHONDONTWRITEBYTECODE": ""}
            run_case(prof, "mindstudio", n, "", cached)  # fills the bytecode cache
            # the sides alternate: this VM's speed drifts by tens of percent within minutes
            real: list[tuple[float, float]] = []
            ours: dict[str, list[float]] = {"mindstudio": [], "legacy": []}
            floor: list[float] = []
            for _ in range(a.repeat):
                real.append(run_real(oracle, prof, work / "real"))
                for lay, walls in ours.items():
                    walls.append(run_case(prof, lay, n, "", cached)["wall_s"])
                floor.append(run_floor(cached))
            _clean_outputs(prof)
            best = min(real, key=sum)
            row = {"size": size, "chip": a.soc_version, "tasks": n,
                   "real_summary_s": round(best[0], 3),
                   "real_timeline_s": round(best[1], 3), "real_s": round(sum(best), 3),
                   "floor_s": round(min(floor), 3), "interpreter": interpreter()}
            for lay, walls in ours.items():
                row[f"{lay}_s"] = min(walls)
                row[f"{lay}_x"] = round(sum(best) / min(walls), 1)
            rows.append(row)
            print(f"oracle   {size:<5} {n:>9,} tasks  real analysis {row['real_s']:7.2f} s "
                  f"(summary {row['real_summary_s']:.2f} + timeline {row['real_timeline_s']:.2f})"
                  f"  msprof export: mindstudio {row['mindstudio_s']:.3f} s "
                  f"({row['mindstudio_x']}x), legacy {row['legacy_s']:.3f} s "
                  f"({row['legacy_x']}x); python + numpy + pandas alone {row['floor_s']:.3f} s"
                  f"  [min of {a.repeat}]", flush=True)
            if not a.keep and size != "tiny":
                shutil.rmtree(prof.parent, ignore_errors=True)
    finally:
        if not a.keep and a.work is None:
            shutil.rmtree(work, ignore_errors=True)
    if rows:
        write_results("oracle", rows)
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
