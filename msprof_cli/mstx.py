"""msproftx-style user annotations: marks and ranges that appear in the msprof timeline
(`msprof_tx_*.json`, the application layer of `msprof_*.json`) and in `msprof_tx_*.csv`.

    from msprof_cli import mstx

    mstx.mark("epoch 3 starts")
    with mstx.range("data loading"):
        batch = next(it)
    rid = mstx.range_start("eval")            # start/end ranges may cross threads
    ...
    mstx.range_end(rid)
    mstx.range_push("step"); ...; mstx.range_pop()   # per-thread stack

Annotations are recorded only while the process is profiled with msproftx on
(`msprof collect --msproftx on`, or `"msproftx": "on"` in PROFILING_OPTIONS); otherwise every
call returns at once and costs about a microsecond.  `tf.profiler.experimental.Trace(...)`
ranges of the script are recorded the same way (see `install_tf_trace_hook`).

Standard library only: this module runs inside the profiled process.
"""
from __future__ import annotations

import contextlib
import itertools
import sys
import threading
import time
from typing import Any, Iterator

from msprof_cli.capture import TxMarker

MARK, PUSH_POP, START_END = 0, 1, 2  # TxMarker.event_type
_local = threading.local()
_ids = itertools.count(1)
_open: dict[int, tuple[str, int, int, str, int]] = {}
_open_lock = threading.Lock()


def _now() -> int:
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)


def _sink() -> Any:
    """The active collection when msproftx is on, else None (never imports the agent)."""
    agent_mod = sys.modules.get("msprof_cli.collect.agent")
    if agent_mod is None:
        return None
    coll = agent_mod.AGENT.collection
    if coll is None or not coll.config.msproftx:
        return None
    return coll


def _record(marker: TxMarker) -> None:
    coll = _sink()
    if coll is not None:
        coll.add_marker(marker)


def enabled() -> bool:
    """True while annotations are being recorded."""
    return _sink() is not None


def mark(message: str, domain: str = "default", category: int = 0) -> None:
    """A zero-length marker at this instant."""
    if _sink() is None:
        return
    t = _now()
    _record(TxMarker(str(message), t, t, threading.get_native_id(), category, MARK, domain))


def range_push(message: str, domain: str = "default", category: int = 0) -> None:
    """Open a range on this thread's stack (closed by `range_pop`)."""
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    stack.append((str(message), _now(), domain, category))


def range_pop() -> None:
    """Close the innermost range opened by `range_push` on this thread."""
    stack = getattr(_local, "stack", None)
    if not stack:
        raise RuntimeError("mstx.range_pop() without a matching range_push() on this thread")
    message, start, domain, category = stack.pop()
    _record(TxMarker(message, start, _now(), threading.get_native_id(), category, PUSH_POP,
                     domain))


def range_start(message: str, domain: str = "default", category: int = 0) -> int:
    """Open a range that `range_end(id)` closes, possibly from another thread."""
    rid = next(_ids)
    with _open_lock:
        _open[rid] = (str(message), _now(), threading.get_native_id(), domain, category)
    return rid


def range_end(range_id: int) -> None:
    with _open_lock:
        item = _open.pop(range_id, None)
    if item is None:
        raise ValueError(f"mstx.range_end({range_id}): no open range with that id")
    message, start, tid, domain, category = item
    _record(TxMarker(message, start, _now(), tid, category, START_END, domain))


@contextlib.contextmanager
def range(message: str, domain: str = "default", category: int = 0) -> Iterator[None]:  # noqa: A001
    """`with mstx.range("name"):` -- a push/pop range around the block."""
    range_push(message, domain, category)
    try:
        yield
    finally:
        range_pop()


# names TF / tf_keras use for their own Trace step markers: not user annotations
_TF_INTERNAL = frozenset({"train", "test", "predict", "TrainStep", "msprof_session_run"})


def install_tf_trace_hook() -> None:
    """Record `tf.profiler.experimental.Trace(name, ...)` blocks as push/pop ranges."""
    from tensorflow.python.profiler import trace as tf_trace

    cls = tf_trace.Trace
    if getattr(cls, "_msprof_wrapped", False):
        return
    orig_init, orig_enter, orig_exit = cls.__init__, cls.__enter__, cls.__exit__

    def __init__(self: Any, name: str, **kwargs: Any) -> None:
        orig_init(self, name, **kwargs)
        internal = name in _TF_INTERNAL or "_r" in kwargs
        self._msprof_name = None if internal else str(name)

    def __enter__(self: Any) -> Any:
        if getattr(self, "_msprof_name", None) is not None and _sink() is not None:
            self._msprof_start = _now()
        return orig_enter(self)

    def __exit__(self: Any, *exc: Any) -> Any:
        result = orig_exit(self, *exc)
        start = getattr(self, "_msprof_start", None)
        if start is not None:
            _record(TxMarker(self._msprof_name, start, _now(), threading.get_native_id(), 0,
                             PUSH_POP, "default"))
        return result

    cls.__init__, cls.__enter__, cls.__exit__ = __init__, __enter__, __exit__
    cls._msprof_wrapped = True
