"""Sharing TensorFlow's one profiler slot with the script's own profiler.

TF allows one profiler session per process.  While msprof's tracer holds it, a script that
calls `tf.profiler.experimental.start()` (or uses `tf.profiler.experimental.Profile`) would get
`AlreadyExistsError: Another profiler is running.` and crash -- the agent must never break the
user's program.  So msprof yields: the user's start first collects msprof's current chunk and
stops its tracer; the user's stop restarts it.  Steps run meanwhile keep their step markers and
are replayed from the sampled schedule (or have no ops if none was sampled yet), and a note says
so.  (docs/formats/tensorflow-capture.md 11, "Only one profiler per process".)
"""
from __future__ import annotations

import sys
from typing import Any, Callable

YIELD_NOTE = ("the script started its own TensorFlow profiler: msprof paused its tracer until "
              "tf.profiler.experimental.stop() (steps meanwhile are replayed or have no ops)")


def install(agent: Any) -> None:
    from tensorflow.python.profiler import profiler_v2

    if getattr(profiler_v2.start, "_msprof_wrapped", False):
        return
    orig_start: Callable[..., Any] = profiler_v2.start
    orig_stop: Callable[..., Any] = profiler_v2.stop

    def start(logdir: str, options: Any = None) -> Any:
        coll = agent.collection
        if coll is not None and coll.tracer is not None:
            coll.user_profiler = True
            coll.flush(restart=False)  # hand the slot over; this chunk is kept
            agent.warn_once(YIELD_NOTE)
        elif coll is not None:
            coll.user_profiler = True
        return orig_start(logdir, options)

    def stop(save: bool = True) -> Any:
        try:
            return orig_stop(save)
        finally:
            coll = agent.collection
            if coll is not None and getattr(coll, "user_profiler", False):
                coll.user_profiler = False
                coll.start_tracer()

    start._msprof_wrapped = True  # type: ignore[attr-defined]
    stop._msprof_wrapped = True  # type: ignore[attr-defined]
    # the public API modules hold their own references to the original functions
    for module in list(sys.modules.values()):
        for name, orig, new in (("start", orig_start, start), ("stop", orig_stop, stop)):
            try:
                if getattr(module, name, None) is orig:
                    setattr(module, name, new)
            except Exception:  # lazy-loading or read-only modules: skip them
                continue
