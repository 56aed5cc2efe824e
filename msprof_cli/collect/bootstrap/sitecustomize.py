"""msprof collect's agent bootstrap, first on PYTHONPATH of the profiled command.

`site` imports this module at interpreter start-up.  It (1) runs the `sitecustomize` it
shadows (the next one on sys.path, e.g. Debian's), and (2) only when msprof collect's
activation variable is present, loads the agent's post-import hooks.  Child interpreters
inherit PYTHONPATH but not the (popped) variable, so they only pay for the chaining.
"""
import os
import sys


def _chain() -> None:
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["_msprof_chained_sitecustomize"] = module
    spec.loader.exec_module(module)


def _activate() -> None:
    if "MSPROF_CLI_AGENT" not in os.environ:
        return
    try:
        import msprof_cli  # noqa: F401
    except ImportError:  # a python without msprof_cli installed: use this checkout
        sys.path.append(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__))))))
    from msprof_cli.collect import autoload

    autoload.install(dormant=False)


try:
    _chain()
except Exception as _exc:  # the shadowed sitecustomize failed: report like site would
    sys.stderr.write(f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n{_exc!r}\n")
try:
    _activate()
except Exception as _exc:
    sys.stderr.write(f"[msprof] WARNING the profiling agent could not load ({_exc!r}): "
                     "this run is not profiled.\n")
