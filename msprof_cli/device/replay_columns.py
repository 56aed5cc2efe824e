"""Columnar replay: the op rows of replayed steps without one Python object per op.

Sampled tracing (docs/collect.md "Sampled tracing") replays most steps from the schedule of a
sampled one: a replayed `Iteration` carries that schedule (`Iteration.schedule`, a shared
`capture.OpSchedule`) instead of `ops`.  A loop-heavy model has thousands of ops per step
(the Bidirectional-LSTM benchmark: ~7000), so building one `OpRun` per replayed op and
walking it again in `build_tables` cost most of the final flush.  Here the schedule is
turned into columns once (names and signatures interned, fused ops listed) and cached by
identity; every replayed step is then those columns tiled, with the host times scaled onto
the step's span in numpy, exactly as `OpSchedule.runs` computes them one by one.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from msprof_cli.capture import OpSchedule

# distinct schedules kept (a schedule is replaced when its graph is sampled again; the old
# one may still be replayed by steps of the same chunk, so a few are kept)
CACHE_LIMIT = 64


@dataclass
class ScheduleColumns:
    """One schedule's op rows as columns (op_table.OpTable's dtypes), host times relative
    to the sampled step's start."""

    device_id: np.ndarray  # i4
    name_idx: np.ndarray  # i8 into the device's Interner
    sig: np.ndarray  # i8 into the SignatureRegistry
    thread: np.ndarray  # u4
    rel_start: np.ndarray  # f8: relative start (ns), as the replay scales it
    rel_end: np.ndarray  # f8: relative end, never before the start
    fused_idx: np.ndarray  # i8 into `fused`, -1 if the op is not a fusion
    fused: list[tuple[str, ...]]
    eager: np.ndarray  # bool

    def __len__(self) -> int:
        return len(self.sig)


class ReplayColumns:
    """The columns of each distinct schedule, by identity (the entry keeps the schedule
    alive, so its id is not reused while cached)."""

    def __init__(self) -> None:
        self._cache: dict[int, tuple[OpSchedule, ScheduleColumns]] = {}

    def of(self, schedule: OpSchedule, intern_sig: Callable[..., int],
           intern_name: Callable[[str], int]) -> ScheduleColumns:
        """The schedule's columns; the first time, its names and signatures are interned in
        op order, as a row-by-row walk of its first replayed step would intern them (so the
        indices, and every record built from them, are the same)."""
        hit = self._cache.get(id(schedule))
        if hit is not None:
            return hit[1]
        ops = schedule.ops
        fused: list[tuple[str, ...]] = []
        fz = np.full(len(ops), -1, np.int64)
        for i, op in enumerate(ops):
            if op[7]:
                fz[i] = len(fused)
                fused.append(tuple(op[7]))
        # the replay's own arithmetic (OpSchedule.runs): int start / end scaled as floats
        rel_s = [op[2] for op in ops]
        cols = ScheduleColumns(
            device_id=np.array([op[8] for op in ops], np.int32),
            name_idx=np.array([intern_name(op[0]) for op in ops], np.int64),
            sig=np.array([intern_sig(op[1], tuple(op[5]), tuple(op[6]), len(op[7]))
                          for op in ops], np.int64),
            thread=np.array([op[4] for op in ops], np.uint32),
            rel_start=np.array(rel_s, np.float64),
            rel_end=np.array([max(op[3], s) for op, s in zip(ops, rel_s)], np.float64),
            fused_idx=fz, fused=fused,
            eager=np.array([op[9] for op in ops], bool))
        if len(self._cache) >= CACHE_LIMIT:
            self._cache.clear()
        self._cache[id(schedule)] = (schedule, cols)
        return cols


def replay_times(schedule: OpSchedule, cols: ScheduleColumns, start: np.ndarray,
                 end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Host start and end (ns) of every op of `len(start)` steps replayed from `schedule`,
    step after step: `OpSchedule.runs` in numpy.  Bit-equal to it: the scale is an int
    ratio of float64-exact values (correctly rounded either way), the products are the same
    float64 multiplications, and `astype(int64)` truncates toward zero as `int()` does."""
    scale = np.maximum(end - start, 1) / schedule.duration
    s = start[:, None] + (cols.rel_start[None, :] * scale[:, None]).astype(np.int64)
    e = start[:, None] + (cols.rel_end[None, :] * scale[:, None]).astype(np.int64)
    return s.reshape(-1), e.reshape(-1)


def replayed_rows(schedule: OpSchedule, cols: ScheduleColumns, model_id: int, rows: np.ndarray,
                  start: np.ndarray, end: np.ndarray, fused_base: int) -> dict[str, np.ndarray]:
    """The op rows (op_table.build_tables' columns) of the steps `rows` (IterTable rows,
    spans [start, end]) replayed from `schedule`: its columns tiled once per step; the
    schedule's fused-op lists are appended to the chunk's at `fused_base`."""
    k = len(rows)
    s, e = replay_times(schedule, cols, start, end)
    return {"dev": np.tile(cols.device_id, k),
            "model": np.full(k * len(cols), model_id, np.uint64),
            "iter": np.repeat(rows, len(cols)),
            "name": np.tile(cols.name_idx, k), "sig": np.tile(cols.sig, k),
            "thr": np.tile(cols.thread, k), "s": s, "e": e,
            "fz": np.tile(np.where(cols.fused_idx >= 0, cols.fused_idx + fused_base, -1), k),
            "eager": np.tile(cols.eager, k)}
