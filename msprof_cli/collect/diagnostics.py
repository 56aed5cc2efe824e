"""How the in-process agent reports: `warn` and `info` write one `[msprof] ...` line to the
user's stderr and never raise (a broken stderr must not reach the script); `fault` is the
test hook that raises inside the agent at a named point (MSPROF_CLI_FAULT), to prove that no
failure of the collector reaches the user's script.
"""
from __future__ import annotations

import os
import sys

FAULT_VAR = "MSPROF_CLI_FAULT"  # tests: make the agent fail at one point (see `fault`)


def fault(point: str) -> None:
    """Test hook: raise inside the agent at `point` when MSPROF_CLI_FAULT names it
    ("activate", "tracer", "step", "convert", "device", "close").  Proves that a failure
    inside the collector never reaches the user's script."""
    if os.environ.get(FAULT_VAR) == point:
        raise RuntimeError(f"injected fault at {point} ({FAULT_VAR})")


def warn(message: str) -> None:
    try:
        sys.stderr.write(f"[msprof] WARNING {message}\n")
        sys.stderr.flush()
    except Exception:
        pass


def info(message: str) -> None:
    try:
        sys.stderr.write(f"[msprof] {message}\n")
        sys.stderr.flush()
    except Exception:
        pass
