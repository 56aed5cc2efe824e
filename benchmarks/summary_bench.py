"""`msprof summary` of a generated 1M-task PROF dir (target <= 5 s), and
`msprof check` of it against its own summary JSON (the CI gate's cost).

    python benchmarks/summary_bench.py [--tasks 1000000] [--prof DIR] [--repeat 3]

The PROF dir comes from gen_prof.py (the project's own device, two models, AI Core / AI CPU /
HCCL tasks, PMU) and is reused from the temporary folder when it is already there."""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import MSPROF, ROOT, median, timed, write_results


def generated(tasks: int) -> Path:
    root = Path(tempfile.gettempdir()) / f"msprof_bench_summary_{tasks}"
    found = sorted(root.glob("PROF_*"))
    if found:
        return found[0]
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gen_prof.py"), "--tasks",
                    str(tasks), "--out", str(root)], check=True, capture_output=True)
    return sorted(root.glob("PROF_*"))[0]


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=1_000_000)
    ap.add_argument("--prof", type=Path, default=None)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    prof = args.prof or generated(args.tasks)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base.json"
        for case, cmd in (("summary json", [*MSPROF, "summary", str(prof), "--format", "json",
                                            "-o", str(base)]),
                          ("summary text", [*MSPROF, "summary", str(prof)]),
                          ("check vs its JSON", [*MSPROF, "check", str(prof), "--baseline",
                                                 str(base)])):
            walls, peaks = [], []
            for _ in range(args.repeat):
                wall, peak, _ = timed(cmd)
                walls.append(wall)
                peaks.append(peak)
            row = {"case": f"{case} ({args.tasks} tasks)", "median_s": round(median(walls), 3),
                   "min_s": round(min(walls), 3), "peak_rss_mb": round(max(peaks) / 1024)}
            rows.append(row)
            print(f"summary  {row['case']}: median {row['median_s']:.3f} s, min "
                  f"{row['min_s']:.3f} s, peak RSS {row['peak_rss_mb']} MB")
        size = base.stat().st_size
    print(f"summary  JSON baseline size: {size / 1024:.0f} KiB")
    write_results("summary", rows)
    return rows


if __name__ == "__main__":
    main()
