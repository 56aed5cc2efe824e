"""`msprof --help` and `msprof query` start-up wall time (targets: help <= 0.3 s)."""
from __future__ import annotations

from _common import MSPROF, median, timed, write_results


def main(repeat: int = 7) -> list[dict]:
    rows = []
    for name, args in (("help", ["--help"]), ("version", ["--version"]),
                       ("collect --help", ["collect", "--help"])):
        walls = [timed([*MSPROF, *args])[0] for _ in range(repeat)]
        rows.append({"case": f"msprof {name}", "median_s": round(median(walls), 4),
                     "min_s": round(min(walls), 4), "repeat": repeat})
        print(f"startup  msprof {name:<16} median {median(walls):.3f} s  min {min(walls):.3f} s")
    write_results("startup", rows)
    return rows


if __name__ == "__main__":
    main()
