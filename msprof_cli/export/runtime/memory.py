"""Keep the export's resident memory close to its live data (glibc malloc tuning).

The decode builds and drops many large temporaries (merge results, sort orders, object
columns).  glibc raises its mmap threshold *dynamically* each time a large mmapped block is
freed (up to 32 MiB), after which arrays of that size come from the heap arenas, whose freed
pages are not returned while anything above them is live: at 1M tasks about 0.6 GB of the
process's RSS was such free-but-held heap (measured: ``malloc_trim`` gave it back).  Fixing
the threshold keeps every array above it in its own mapping (returned to the system when
freed), and `release` trims what the heap still holds at the end of a stage.

No effect (and no error) where glibc is not the allocator.
"""
from __future__ import annotations

import ctypes

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
# blocks above this are mmapped (never fragment the heap).  32 MiB (glibc's own dynamic
# maximum) rather than 4 MiB: the many 8-32 MB column temporaries of a 1M-task export then
# reuse heap pages instead of faulting in fresh zeroed mappings each time (4 MiB: 2.5M page
# faults, 9 s of system time at 1M; 32 MiB: 0.7M, 4 s, +60 MB RSS)
MMAP_THRESHOLD = 32 * 1024 * 1024
TRIM_THRESHOLD = 64 * 1024 * 1024  # free heap top above this is returned at once

_libc = None
_tuned = False


def _glibc():
    global _libc
    if _libc is None:
        try:
            try:  # glibc's soname: no `ldconfig -p` child (ctypes.util) on every export
                lib = ctypes.CDLL("libc.so.6")
            except OSError:
                from ctypes.util import find_library

                lib = ctypes.CDLL(find_library("c") or "libc.so.6")
            lib.mallopt  # noqa: B018 - AttributeError when not glibc
            lib.malloc_trim  # noqa: B018
            _libc = lib
        except (OSError, AttributeError):
            _libc = False
    return _libc or None


def tune_allocator() -> None:
    """Fixed mmap / trim thresholds for this process (and the workers it forks)."""
    global _tuned
    lib = _glibc()
    if lib is None or _tuned:
        return
    lib.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    lib.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    _tuned = True


def release() -> None:
    """Return free heap pages to the system (after a stage dropped its temporaries)."""
    lib = _glibc()
    if lib is not None:
        lib.malloc_trim(0)
