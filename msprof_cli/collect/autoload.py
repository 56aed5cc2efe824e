"""Start-up entry of the agent, cheap when profiling is off.

Called from the launcher's `sitecustomize` (msprof collect) and from the
`msprof_cli-autoload.pth` file an installed msprof_cli places in site-packages (routes that
need no launcher: PROFILING_MODE set by hand, the session config, the npu_bridge shim).  It
decides the route, puts the npu_bridge shim at the END of `sys.path` (a real npu_bridge
earlier on the path wins), and installs post-import hooks for TensorFlow and the Keras 3
trainer.  With no route on, only the tiny import hook is loaded; the agent itself is
imported when (and if) TensorFlow is.
"""
from __future__ import annotations

import os
import sys

_DONE = False
SHIMS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "shims")


def _on_tensorflow(module: object) -> None:
    from msprof_cli.collect.agent import AGENT

    AGENT.on_tensorflow_imported(module)


def _on_keras(module: object) -> None:
    from msprof_cli.collect.agent import AGENT

    AGENT.on_keras_trainer_imported(module)


def install(dormant: bool = True) -> None:
    """`dormant`: also watch session configs / the Profiler when no route is on at start."""
    global _DONE
    if _DONE:
        return
    _DONE = True
    try:
        env = os.environ
        if "MSPROF_CLI_OWNER" in env and "MSPROF_CLI_AGENT" not in env:
            return  # a child of a profiled process: profiling children is not a route
        config = None
        if "MSPROF_CLI_AGENT" in env or env.get("PROFILING_MODE", "").strip():
            from msprof_cli.collect import routes

            config, _ = routes.config_at_startup()
        if config is None and not dormant:
            return
        if SHIMS_DIR not in sys.path:
            sys.path.append(SHIMS_DIR)
        from msprof_cli.collect.import_hook import when_imported

        if config is not None:
            from msprof_cli.collect.agent import AGENT

            AGENT.request(config, scope="process")
        when_imported("keras.src.backend.tensorflow.trainer", _on_keras)
        when_imported("tensorflow", _on_tensorflow)
    except Exception as exc:  # never break the interpreter start-up
        sys.stderr.write(f"[msprof] WARNING the profiling agent could not load ({exc!r}): "
                         "this run is not profiled.\n")
