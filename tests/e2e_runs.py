"""A script of tests/scripts through `msprof collect` and `msprof export`, and the op_summary
it gives: the steps the end-to-end tests of the device model share."""
from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent / "scripts"
MSPROF = [sys.executable, "-m", "msprof_cli"]


def collect_and_export(tmp: Path, script: str, *flags: str
                       ) -> tuple[list[dict[str, str]], str, str]:
    """(device 0's op_summary rows, what collect printed on stdout, what export said)."""
    proc = subprocess.run([*MSPROF, "collect", "--output", str(tmp / "out"), *flags, "--",
                           sys.executable, str(SCRIPTS / script)], capture_output=True,
                          text=True, cwd=tmp, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    [prof] = sorted((tmp / "out").glob("PROF_*"))
    exp = subprocess.run([*MSPROF, "export", str(prof)], capture_output=True, text=True,
                         timeout=300)
    assert exp.returncode == 0, exp.stderr[-3000:]
    [path] = sorted((prof / "device_0" / "summary").glob("op_summary_0*.csv"))
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh)), proc.stdout, exp.stdout + exp.stderr
