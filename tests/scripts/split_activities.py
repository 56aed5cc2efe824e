"""Cross-thread split TraceMe activities (tests/test_traceme_fix.py).

TF records `TraceMe::ActivityStart` on one thread and `ActivityEnd` on another (e.g.
`CollectiveExecutor::CompleteParams` when a collective's parameters are resolved on a gRPC
thread); collecting such a trace corrupts the heap in TF 2.21 (msprof_cli/collect/traceme_fix.py).
This script records such pairs itself, through `TraceMeRecorder::Record` (ctypes), from many
threads, so that the bug shows without a multi-worker job.

Modes (argv[1]):
  session  ROUNDS  -- its own ProfilerSession per round (started, pairs recorded, exported);
                      prints "merged M of N" (pairs whose two halves TF joined into one event)
                      and "lost L"; MSPROF_TEST_FIX=1 installs the workaround first
  steps    STEPS   -- a tf.function called STEPS times, each call recording pairs from other
                      threads while it runs (profile it with `msprof collect`)
Env: THREADS (24), PAIRS (8) per round / step.
"""
from __future__ import annotations

import ctypes
import glob
import os
import sys
import tempfile
import threading
import time

import tensorflow as tf

THREADS = int(os.environ.get("THREADS", "24"))
PAIRS = int(os.environ.get("PAIRS", "8"))
_lib = ctypes.CDLL(os.path.join(os.path.dirname(tf.__file__), "libtensorflow_framework.so.2"))
_record = _lib._ZN3tsl8profiler15TraceMeRecorder6RecordEONS1_5EventE
_record.argtypes = [ctypes.c_void_p]
_record.restype = None


class _Event(ctypes.Structure):
    """TraceMeRecorder::Event: std::string (libstdc++, short-string buffer) + start + end."""
    _fields_ = [("p", ctypes.c_void_p), ("n", ctypes.c_size_t), ("buf", ctypes.c_char * 16),
                ("start", ctypes.c_int64), ("end", ctypes.c_int64)]


def record(name: bytes, start: int, end: int) -> None:
    assert len(name) < 16  # stays in the short-string buffer: nothing for TF to free
    ev = _Event()
    ev.buf, ev.n = name, len(name)
    ev.p = ctypes.addressof(ev) + _Event.buf.offset
    ev.start, ev.end = start, end
    _record(ctypes.byref(ev))


def record_pairs(base_id: int) -> tuple[threading.Event, list[threading.Thread]]:
    """THREADS threads each record a complete event; threads 0..PAIRS-1 record the start of
    activity i, threads PAIRS..2*PAIRS-1 its end.  Returns when all have recorded; the
    threads live until `finish_pairs`."""
    recorded = threading.Barrier(THREADS + 1)
    release = threading.Event()

    def work(i: int) -> None:
        now = time.time_ns()
        record(b"filler%d" % i, now, now + 1000)
        if i < PAIRS:
            record(b"xact%d" % i, now, -(base_id + i))  # ActivityStart
        elif i < 2 * PAIRS:
            record(b"", -(base_id + i - PAIRS), now + 5000)  # ActivityEnd
        recorded.wait()
        release.wait()  # alive until the collection: its recorder stays registered

    threads = [threading.Thread(target=work, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    recorded.wait()
    return release, threads


def finish_pairs(pending: tuple[threading.Event, list[threading.Thread]]) -> None:
    pending[0].set()
    for t in pending[1]:
        t.join()


def session_rounds(rounds: int) -> int:
    from tensorflow.python.profiler.internal import _pywrap_profiler
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    lost = 0
    for k in range(1, rounds + 1):
        logdir = tempfile.mkdtemp()
        session = _pywrap_profiler.ProfilerSession()
        session.start(logdir, {})
        pending = record_pairs(k << 20)
        session.export_to_tb()
        finish_pairs(pending)
        space = xplane_pb2.XSpace()
        with open(glob.glob(os.path.join(logdir, "plugins/profile/*/*.xplane.pb"))[0],
                  "rb") as fh:
            space.ParseFromString(fh.read())
        merged = sum(1 for plane in space.planes for ln in plane.lines for ev in ln.events
                     if plane.event_metadata[ev.metadata_id].name.startswith("xact"))
        lost += PAIRS - merged
        print(f"round {k}: merged {merged} of {PAIRS}", flush=True)
    print(f"lost {lost}", flush=True)
    return 0


def steps(n: int) -> int:
    @tf.function
    def step(x):
        return tf.reduce_sum(tf.matmul(x, x))

    x = tf.ones((16, 16))
    for k in range(1, n + 1):
        pending = record_pairs(k << 20)
        step(x)
        finish_pairs(pending)
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    if os.environ.get("MSPROF_TEST_FIX"):
        from msprof_cli.collect import traceme_fix

        print(f"fix: {traceme_fix.install()} ({traceme_fix.status})", flush=True)
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    sys.exit(session_rounds(count) if sys.argv[1] == "session" else steps(count))
