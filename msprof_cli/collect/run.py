"""`python -m msprof_cli.collect.run train.py [args]`: run a script with the agent loaded.

For the routes that switch profiling on from inside the script's environment or code
(`PROFILING_MODE=true`, the session config, `npu_bridge` `Profiler`) when the agent is not
auto-loaded at interpreter start-up (no `.pth` installed).  Equivalent to `python train.py`
otherwise: same `sys.argv`, `__main__`, exit code.
"""
from __future__ import annotations

import runpy
import sys


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print("usage: python -m msprof_cli.collect.run SCRIPT.py [ARGS...]\n"
              "       python -m msprof_cli.collect.run -m MODULE [ARGS...]\n"
              "Runs the script with the msprof agent loaded, so PROFILING_MODE=true, the "
              "session config and npu_bridge Profiler switch profiling on.")
        raise SystemExit(0 if args else 2)
    from msprof_cli.collect import autoload

    autoload.install(dormant=True)
    if args[0] == "-m" and len(args) > 1:
        sys.argv = args[1:]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = args
        sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(args[0])))
        runpy.run_path(args[0], run_name="__main__")


if __name__ == "__main__":
    main()
