"""The `npu_bridge` `profiler.Profiler` contract (docs/formats/options.md 6), as the shim exposes
it.

Scoped profiling: only usable as `with Profiler(...)`; each block writes its own PROF dir and
profiles only what runs inside it.  Argument errors raise `ValueError`, usage errors
`RuntimeError` (project convention; the real adapter documents no texts).
"""
from __future__ import annotations

import os
import sys
import threading
from dataclasses import replace
from typing import Any

from msprof_cli.errors import OptionsError
from msprof_cli.options import (FORBIDDEN_PATH_CHARS, parse_aic_metrics, validate_options)

LEVELS = ("L0", "L1", "L2")
_ACTIVE: "Profiler | None" = None
_LOCK = threading.Lock()


class Profiler:
    """`with Profiler(level="L1", aic_metrics="PipeUtilization", output_path="prof"): ...`"""

    def __init__(self, *, level: str = "L0", aic_metrics: str = "", output_path: str = ""
                 ) -> None:
        for arg, value in (("level", level), ("aic_metrics", aic_metrics),
                           ("output_path", output_path)):
            if not isinstance(value, str):
                raise ValueError(f"Profiler: {arg} must be a str, got {type(value).__name__} "
                                 f"({value!r}).")
        if level not in LEVELS:
            raise ValueError(f'Profiler: level={level!r} is invalid. Accepted values: "L0" '
                             '(default), "L1", "L2".')
        for ch, shown in FORBIDDEN_PATH_CHARS.items():
            if ch in output_path:
                raise ValueError(f"Profiler: output_path={output_path!r} contains the forbidden "
                                 f'character "{shown}". Paths must not contain \\n \\f \\r \\b '
                                 "\\t \\v or \\u007F.")
        self.level = level
        self.aic_metrics = aic_metrics
        self.metrics_ignored = False
        if level == "L0":
            self.metrics_ignored = aic_metrics != ""
        else:
            try:
                parse_aic_metrics(aic_metrics)
            except OptionsError as exc:
                raise ValueError(f"Profiler: {exc}") from None
        # "" = the current directory; relative paths are relative to it (now, not at enter)
        self.output = os.path.abspath(output_path or os.curdir)
        self.prof_dir: str | None = None
        self._owner: int | None = None
        self._bypass = False

    def config(self) -> Any:
        """Level -> switches (docs/formats/options.md 6, project mapping in docs/collect.md)."""
        opts: dict[str, Any] = {"output": self.output, "task_time": "on",
                                "training_trace": "off"}
        if self.level in ("L1", "L2"):
            opts["hccl"] = "on"
            opts["aic_metrics"] = self.aic_metrics
        if self.level == "L2":
            opts.update(runtime_api="on", aicpu="on")
        config = validate_options(opts, source="profiler")
        if self.level == "L0":
            config = replace(config, aic_metrics="", aic_events=())
        return config

    def __enter__(self) -> "Profiler":
        global _ACTIVE
        from msprof_cli.collect.agent import AGENT
        from msprof_cli.collect.diagnostics import warn

        with _LOCK:
            if _ACTIVE is not None:
                if _ACTIVE._owner != threading.get_ident():
                    raise RuntimeError("Profiler is not thread-safe: a Profiler block is already "
                                       "active in another thread. Use it from one thread only.")
                raise RuntimeError("Profiler blocks cannot be nested: end the outer `with "
                                   "Profiler(...)` block before starting another.")
            self._check_exclusive(AGENT)
            _ACTIVE = self
            self._owner = threading.get_ident()
        try:
            if AGENT.collection is not None:
                # msprof collect (or another route) already profiles the whole process
                warn("Profiler: this process is already profiled (msprof collect / "
                     "PROFILING_MODE); the Profiler block adds nothing.")
                self._bypass = True
                return self
            if self.metrics_ignored:
                warn(f"Profiler: aic_metrics={self.aic_metrics!r} is ignored with level=L0 "
                     "(AI Core metrics are collected only for L1 and L2).")
            config = self.config()
            _ensure_hooks(AGENT)
            AGENT.scope = "profiler"
            coll = AGENT.activate(config)
            self.prof_dir = str(coll.prof_dir) if coll is not None else None
        except BaseException:
            with _LOCK:
                _ACTIVE = None
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        global _ACTIVE
        from msprof_cli.collect.agent import AGENT

        try:
            if not self._bypass:
                AGENT.deactivate()
        finally:
            with _LOCK:
                _ACTIVE = None

    @staticmethod
    def _check_exclusive(agent: Any) -> None:
        if agent.collection is not None and agent.collection.config.source == "cli":
            return  # msprof collect: script-level settings are ignored with a warning
        for var in ("PROFILING_MODE", "PROFILING_OPTIONS"):
            value = os.environ.get(var, "")
            if value and not (var == "PROFILING_MODE" and value.lower() == "false"):
                raise RuntimeError(f"Profiler cannot be combined with the environment variable "
                                   f"{var} (docs/formats/options.md 6): unset it or drop the Profiler block.")
        if agent.session_profiling_seen:
            raise RuntimeError("Profiler cannot be combined with profiling_mode / "
                               "profiling_options in the session config: remove them or drop "
                               "the Profiler block.")
        if "tensorflow" in sys.modules:
            tf = sys.modules["tensorflow"]
            if tf.executing_eagerly():
                raise RuntimeError("Profiler supports session mode only (tf.compat.v1.Session "
                                   "runs); eager, Keras and Estimator code are not supported. "
                                   "Call tf.compat.v1.disable_eager_execution() or build the "
                                   "graph under `with tf.Graph().as_default():`.")


def _ensure_hooks(agent: Any) -> None:
    """The shim may be imported without the launcher or autoload: hook TF directly."""
    tf = sys.modules.get("tensorflow")
    if tf is None:
        import tensorflow as tf  # noqa: F811
    if not agent.tf_ready:
        agent.on_tensorflow_imported(tf)
    agent.install_exit_hooks()
