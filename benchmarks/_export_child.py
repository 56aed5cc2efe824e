"""Run `msprof export ARGS` in this process and report its own timings and I/O.

Used by export_bench.py as the measured child: prints one JSON line on fd 3-free stderr
marker ``@@bench {...}`` with the seconds spent importing the CLI (`msprof_cli.cli.main` and,
lazily, the exporter) and running the export, and /proc/self/io counters (rchar / wchar =
bytes read / written through system calls, page cache included), the CPU seconds of the
process and its workers, and the peak summed PSS of the process tree (TreeMemory)."""
from __future__ import annotations

import json
import os
import sys
import threading
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


def _pss_kb(pid: int | str) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _children(pid: int) -> list[str]:
    out: list[str] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as fh:
                out += fh.read().split()
    except OSError:
        pass
    return out


class TreeMemory(threading.Thread):
    """Peak of the summed PSS of this process and its worker processes (forked export jobs
    share pages copy-on-write; PSS splits shared pages between them, so the sum is the
    real memory of the process tree -- ru_maxrss only gives the largest single process)."""

    def __init__(self, interval: float = 0.5) -> None:  # reading smaps_rollup of GB-sized
        # processes is not free: sampled more often it slowed the measured export itself
        super().__init__(daemon=True)
        self.interval, self.peak_kb, self.stop = interval, 0, threading.Event()

    def run(self) -> None:
        me = os.getpid()
        while not self.stop.is_set():
            total = _pss_kb(me) + sum(_pss_kb(c) for c in _children(me))
            self.peak_kb = max(self.peak_kb, total)
            self.stop.wait(self.interval)


def main() -> None:
    mem = TreeMemory()
    mem.start()
    from msprof_cli.cli.main import exit_now, main as cli_main
    from msprof_cli.cli.export import exporter

    exporter()  # the import cost belongs to start-up (imported as `msprof export` does)

    t_imported = time.perf_counter()
    rc = 0
    try:
        cli_main(["export", *sys.argv[1:]])
    except SystemExit as exc:
        rc = int(exc.code or 0)
    t_done = time.perf_counter()
    io = _io()
    mem.stop.set()
    rec = {"import_s": t_imported - T_START, "work_s": t_done - t_imported, "rc": rc,
           "rchar": io.get("rchar", 0), "wchar": io.get("wchar", 0),
           "tree_pss_kb": mem.peak_kb, "cpu_s": sum(os.times()[:4])}
    print("@@bench " + json.dumps(rec), file=sys.stderr, flush=True)
    exit_now(rc)  # as the `msprof export` process ends (cli/main.py)
    sys.exit(rc)


if __name__ == "__main__":
    main()
