"""Work around TensorFlow's heap corruption when a trace with cross-thread split activities is
collected (TF 2.21 / XLA TSL `TraceMeRecorder::Consume`; docs/collect.md "Stopping the tracer").

The bug.  `TraceMeRecorder::Consume` (run by every profiler stop, ours and the user's) gathers
each thread's events into `std::vector<ThreadEvents> result` (one entry per thread, pushed
one by one) and pairs the two halves of split activities (`TraceMe::ActivityStart` on one
thread, `ActivityEnd` on another, e.g. `CollectiveExecutor::CompleteParams` when a collective's
parameters are resolved on a gRPC thread) through a tracker that keeps raw `Event*` pointers
into those `ThreadEvents`' deques.  When the vector grows, libstdc++ *copies* the elements
(`ThreadEvents`' move constructor is not noexcept, because `std::deque`'s is not), destroys
the originals and frees their deque nodes; an end event whose start lives on a thread consumed
later is then merged through a dangling pointer: a write of 40 bytes into freed memory, later
"double free or corruption" / "munmap_chunk(): invalid pointer" (seen in the slow worker of a
MultiWorkerMirroredStrategy job, whose collectives complete on gRPC threads), or a silently
lost event.  Each collection of such a trace is a roll of the dice; sampled tracing collects
often, so it crashed often.

The workaround.  `Consume` calls the vector's `_M_realloc_insert<ThreadEvents>` through the
library's PLT (it is a weak template instance), so this module points that PLT slot of
libtensorflow_framework.so.2 at a replacement that *moves* the elements (TF's own compiled move
constructor and destructor of `ThreadEvents`): the deque nodes, and every pointer into them,
stay valid.  Nothing else changes.  It is installed only when every piece checks out (the
slot, the symbols, the element size 120 in the original's code); otherwise nothing is patched
and the collector says so.  `restore()` puts the original back (at exit, after the last
collection).
"""
from __future__ import annotations

import ctypes
import os
import re
import threading
from typing import Any

LIB = "libtensorflow_framework.so.2"
REALLOC = ("_ZNSt6vectorIN3tsl8profiler15TraceMeRecorder12ThreadEventsESaIS3_EE17_M_realloc_"
           "insertIJS3_EEEvN9__gnu_cxx17__normal_iteratorIPS3_S5_EEDpOT_")
CONSTRUCT = ("_ZN9__gnu_cxx13new_allocatorIN3tsl8profiler15TraceMeRecorder12ThreadEventsEE9"
             "constructIS4_JS4_EEEvPT_DpOT0_")
DESTROY = "_ZN3tsl8profiler15TraceMeRecorder12ThreadEventsD2Ev"
NEW, DELETE = "_Znwm", "_ZdlPv"
ELEM = 120  # sizeof(TraceMeRecorder::ThreadEvents): ThreadInfo (40) + std::deque<Event> (80)

DISABLE_VAR = "MSPROF_CLI_TRACE_FIX"  # "0": leave TensorFlow as it is (tests, diagnosis)
_R_JUMP_SLOT, _R_GLOB_DAT = 7, 6
_lock = threading.Lock()
_state: dict[str, Any] = {}  # slot, original, callback, functions (while installed)
_retired: list[Any] = []  # callbacks of restored patches: never freed (a call may be inside)
status = "not installed"  # for tests and the debug log


def _elf_slots(path: str, names: list[str]) -> dict[str, tuple[int, int, int]]:
    """name -> (GOT slot offset, relocation type, symbol value) from the dynamic relocations."""
    import numpy as np

    with open(path, "rb") as fh:
        head = fh.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
            raise OSError("not a little-endian ELF64 file")
        shoff = int.from_bytes(head[0x28:0x30], "little")
        shentsize = int.from_bytes(head[0x3A:0x3C], "little")
        shnum = int.from_bytes(head[0x3C:0x3E], "little")
        fh.seek(shoff)
        sh = np.frombuffer(fh.read(shentsize * shnum), dtype=np.dtype([
            ("name", "<u4"), ("type", "<u4"), ("flags", "<u8"), ("addr", "<u8"),
            ("offset", "<u8"), ("size", "<u8"), ("link", "<u4"), ("info", "<u4"),
            ("align", "<u8"), ("entsize", "<u8")]))

        def read(i: int) -> bytes:
            fh.seek(int(sh["offset"][i]))
            return fh.read(int(sh["size"][i]))

        dynsym_i = int(np.flatnonzero(sh["type"] == 11)[0])  # SHT_DYNSYM
        strtab = read(int(sh["link"][dynsym_i]))
        syms = np.frombuffer(read(dynsym_i), dtype=np.dtype([
            ("name", "<u4"), ("info", "u1"), ("other", "u1"), ("shndx", "<u2"),
            ("value", "<u8"), ("size", "<u8")]))
        rela_dt = np.dtype([("offset", "<u8"), ("info", "<u8"), ("addend", "<i8")])
        relas = [np.frombuffer(read(i), dtype=rela_dt)
                 for i in np.flatnonzero((sh["type"] == 4) & (sh["link"] == dynsym_i))]
    rela = np.concatenate(relas) if relas else np.zeros(0, rela_dt)
    out = {}
    for name in names:
        for m in re.finditer(re.escape(b"\0" + name.encode() + b"\0"), strtab):
            idx = np.flatnonzero(syms["name"] == m.start() + 1)
            if not len(idx):
                continue
            hits = np.flatnonzero((rela["info"] >> np.uint64(32)) == np.uint64(idx[0]))
            for h in hits:  # a JUMP_SLOT (PLT) wins over a GLOB_DAT
                typ = int(rela["info"][h] & np.uint64(0xFFFFFFFF))
                if typ in (_R_JUMP_SLOT, _R_GLOB_DAT) and (
                        name not in out or typ == _R_JUMP_SLOT):
                    out[name] = (int(rela["offset"][h]), typ, int(syms["value"][idx[0]]))
            break
    return out


def _base_of(path: str) -> int:
    real = os.path.realpath(path)
    with open("/proc/self/maps") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) >= 6 and os.path.realpath(parts[5]) == real and int(parts[2], 16) == 0:
                return int(parts[0].split("-")[0], 16)
    raise OSError(f"{path} is not mapped")


def _writable(addr: int) -> bool:
    with open("/proc/self/maps") as fh:
        for line in fh:
            parts = line.split()
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            if lo <= addr < hi:
                return parts[1][1] == "w"
    return False


def _write_slot(slot: int, value: int) -> None:
    if not _writable(slot):  # full RELRO: the GOT is read-only after relocation
        libc = ctypes.CDLL(None, use_errno=True)
        page = slot & ~(os.sysconf("SC_PAGE_SIZE") - 1)
        if libc.mprotect(ctypes.c_void_p(page), ctypes.c_size_t(os.sysconf("SC_PAGE_SIZE")),
                         3) != 0:  # PROT_READ | PROT_WRITE
            raise OSError(ctypes.get_errno(), "mprotect of the GOT page failed")
    ctypes.c_uint64.from_address(slot).value = value


def _library_path() -> str:
    import tensorflow as tf  # noqa: F401  (already imported when we get here)

    path = os.path.join(os.path.dirname(tf.__file__), LIB)
    if not os.path.exists(path):
        raise OSError(f"{LIB} not found next to tensorflow")
    return path


def install() -> bool:
    """Patch the PLT slot (idempotent).  False (and `status` says why) when not applicable."""
    global status
    with _lock:
        if _state:
            return True
        if os.environ.get(DISABLE_VAR) == "0":
            status = f"disabled ({DISABLE_VAR}=0)"
            return False
        try:
            path = _library_path()
            slots = _elf_slots(path, [REALLOC, NEW, DELETE])
            if REALLOC not in slots or slots[REALLOC][1] != _R_JUMP_SLOT:
                status = "not needed: this TensorFlow has no PLT slot for the vector growth"
                return False
            if NEW not in slots or DELETE not in slots:
                raise OSError("operator new/delete relocations not found")
            base = _base_of(path)
            lib = ctypes.CDLL(path)
            construct = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p,
                                         ctypes.c_void_p)((CONSTRUCT, lib))
            destroy = ctypes.CFUNCTYPE(None, ctypes.c_void_p)((DESTROY, lib))
            # the original's code must scale by sizeof(ThreadEvents) == 120 (imul $0x78 and
            # the /120 magic): another layout means another TF, which we do not touch
            code = ctypes.string_at(base + slots[REALLOC][2], 0xC0)
            if not (re.search(rb"\x6b.\x78", code, re.S)
                    and b"\xef\xee\xee\xee\xee\xee\xee\xee" in code):
                status = "not installed: unexpected code in TensorFlow's vector growth"
                return False
            slot = base + slots[REALLOC][0]
            new_fn = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t)(
                ctypes.c_uint64.from_address(base + slots[NEW][0]).value)
            delete_fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(
                ctypes.c_uint64.from_address(base + slots[DELETE][0]).value)
            original = ctypes.c_uint64.from_address(slot).value
            original_fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p,
                                           ctypes.c_void_p)(original)

            def realloc_insert(vec: int, pos: int, value: int) -> None:
                try:
                    words = (ctypes.c_uint64 * 3).from_address(vec)
                    begin, end = words[0], words[1]
                    n = (end - begin) // ELEM
                    at = (pos - begin) // ELEM
                    if not 0 <= at <= n:
                        raise ValueError("insert position outside the vector")
                    cap = 2 * n if n else 1
                    new = new_fn(cap * ELEM)
                    if not new:
                        raise MemoryError
                except Exception:  # nothing changed yet: TF's own code does the growth
                    original_fn(vec, pos, value)
                    return
                # move (not copy) every element: the deque nodes keep their addresses
                construct(vec, new + at * ELEM, value)
                for i in range(n):
                    construct(vec, new + (i + (i >= at)) * ELEM, begin + i * ELEM)
                for i in range(n):
                    destroy(begin + i * ELEM)
                if begin:
                    delete_fn(begin)
                words[0], words[1], words[2] = new, new + (n + 1) * ELEM, new + cap * ELEM

            callback = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p,
                                        ctypes.c_void_p)(realloc_insert)
            _write_slot(slot, ctypes.cast(callback, ctypes.c_void_p).value or 0)
            _state.update(slot=slot, original=original, callback=callback, lib=lib,
                          keep=(construct, destroy, new_fn, delete_fn, original_fn))
            status = "installed"
            return True
        except Exception as exc:
            status = f"not installed: {exc!r}"
            return False


def restore() -> None:
    """Put TensorFlow's own function back (after the last collection; idempotent)."""
    global status
    with _lock:
        if not _state:
            return
        try:
            _write_slot(_state["slot"], _state["original"])
        except Exception:
            return  # keep the callback alive: the slot still points at it
        status = "restored"
        _retired.append(dict(_state))
        _state.clear()


def installed() -> bool:
    return bool(_state)
