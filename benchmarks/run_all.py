"""`make bench`: every benchmark, one line per case, CSVs in benchmarks/results/.

Arguments are passed to export_bench (e.g. ``--big`` adds the 10M-task case:
``make bench BENCH_ARGS=--big``)."""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

BENCHES = ["startup_bench", "query_bench", "summary_bench", "export_bench", "collect_overhead"]


def oracle_side_by_side() -> None:
    """oracle_bench (tiny and 50k against the real analysis) when the real analysis is laid
    out on this machine (../shared/oracle/README.md); a line saying so otherwise."""
    import os

    import oracle_bench

    path = os.environ.get("MSPROF_ORACLE") or str(oracle_bench.DEFAULT_ORACLE)
    if not Path(path).is_file():
        print(f"oracle   skipped: the real analysis is not at {path} (oracle_bench.py's doc)")
        return
    oracle_bench.main(["--sizes", "tiny,50k", "--repeat", "3"])


def main() -> None:
    for name in BENCHES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            print(f"{name}: not available ({exc})")
            continue
        if name == "export_bench":
            module.main(sys.argv[1:])
            oracle_side_by_side()
        elif name == "summary_bench":
            module.main([])
        else:  # the other benchmarks parse sys.argv themselves: not export_bench's options
            argv, sys.argv = sys.argv, sys.argv[:1]
            try:
                module.main()
            finally:
                sys.argv = argv


if __name__ == "__main__":
    main()
