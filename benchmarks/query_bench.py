"""`msprof query` over a folder of 200 PROF dirs (target <= 2 s).  The PROF dirs are copies of
the golden Ascend910 raw dir (real layout, 3 iterations each)."""
from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from _common import MSPROF, ROOT, median, timed, write_results

sys.path.insert(0, str(ROOT / "tests"))
from shared_paths import GOLDEN_RAW as GOLDEN  # noqa: E402


def make_folder(n: int, dest: Path) -> Path:
    src = next(GOLDEN.glob("PROF_*"))
    for i in range(n):
        name = src.name.replace("_000001_", f"_{i + 1:06d}_")
        shutil.copytree(src, dest / name)
    return dest


def main(n: int = 200, repeat: int = 5) -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = make_folder(n, Path(tmp))
        walls = []
        for _ in range(repeat):
            wall, _, proc = timed([*MSPROF, "query", "--output", str(folder)])
            walls.append(wall)
        rows_out = proc.stdout.count("device_0")
    row = {"case": f"query {n} PROF dirs", "median_s": round(median(walls), 3),
           "min_s": round(min(walls), 3), "rows": rows_out}
    print(f"query    {n} PROF dirs: median {median(walls):.3f} s, min {min(walls):.3f} s, "
          f"{rows_out} device rows")
    write_results("query", [row])
    return [row]


if __name__ == "__main__":
    main()
