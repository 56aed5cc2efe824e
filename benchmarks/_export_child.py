"""Run `msprof export ARGS` in this process and report its own timings and I/O.

Used by export_bench.py as the measured child: prints one JSON line on fd 3-free stderr
marker ``@@bench {...}`` with the seconds spent importing the CLI (`msprof_cli.cli.main` and,
lazily, the exporter) and running the export, and /proc/self/io counters (rchar / wchar =
bytes read / written through system calls, page cache included)."""
from __future__ import annotations

import json
import sys
import time

T_START = time.perf_counter()


def _io() -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        with open("/proc/self/io", encoding="ascii") as fh:
            for line in fh:
                k, _, v = line.partition(":")
                out[k.strip()] = int(v)
    except OSError:
        pass
    return out


def main() -> None:
    from msprof_cli.cli.main import main as cli_main
    import msprof_cli.export.api  # noqa: F401  (the import cost belongs to start-up)

    t_imported = time.perf_counter()
    rc = 0
    try:
        cli_main(["export", *sys.argv[1:]])
    except SystemExit as exc:
        rc = int(exc.code or 0)
    t_done = time.perf_counter()
    io = _io()
    rec = {"import_s": t_imported - T_START, "work_s": t_done - t_imported, "rc": rc,
           "rchar": io.get("rchar", 0), "wchar": io.get("wchar", 0)}
    print("@@bench " + json.dumps(rec), file=sys.stderr, flush=True)
    sys.exit(rc)


if __name__ == "__main__":
    main()
