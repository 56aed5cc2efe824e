"""`make bench`: every benchmark, one line per case, CSVs in benchmarks/results/."""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

BENCHES = ["startup_bench", "query_bench", "export_bench", "collect_overhead"]


def main() -> None:
    for name in BENCHES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            print(f"{name}: not available ({exc})")
            continue
        module.main()


if __name__ == "__main__":
    main()
