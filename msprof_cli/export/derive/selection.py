"""Model / iteration selection of the legacy layout (docs/formats/export-files.md 1.4, 8).

Project decision: without ``--iteration-id`` all iterations of the default model are exported
(files ``_{dev}_{model}_{first}_{last}``, or ``_{iter}`` for a one-iteration model).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from msprof_cli.errors import ExportError

from ..decode.control_info import NO_MODEL

MAX_ITERATION_COUNT = 5


@dataclass(frozen=True)
class Selection:
    """What one device exports: a model and an iteration range, or everything."""

    model_id: int | None
    first: int | None
    last: int | None
    start_ns: int | None  # window [start, end) in local ns; None = no window
    end_ns: int | None

    def suffix(self, device_id: int) -> str:
        if self.model_id is None:
            return f"_{device_id}"
        it = f"_{self.first}" if self.first == self.last else f"_{self.first}_{self.last}"
        return f"_{device_id}_{self.model_id}{it}"


ALL = Selection(None, None, None, None, None)


def check_args(model_id: int | None, iteration_id: int | None, iteration_count: int) -> None:
    """Argument rules that do not depend on the data."""
    if model_id is not None and iteration_id is None:
        raise ExportError("--model-id must be given together with --iteration-id "
                          "(e.g. --model-id 1 --iteration-id 1).")
    if iteration_id is not None and iteration_id < 1:
        raise ExportError(f"The iteration id {iteration_id} is invalid. It must be a positive "
                          f"integer.")
    if not 1 <= iteration_count <= MAX_ITERATION_COUNT and iteration_id is not None:
        raise ExportError(f"The iteration count {iteration_count} is invalid for model id "
                          f"{model_id if model_id is not None else '(default)'}. Must be greater "
                          f"than 0 and less than or equal to 5. Please enter a valid iteration "
                          f"count.")


def default_model(its: pd.DataFrame, host_models: set[int],
                  training: set[int] | None = None) -> int | None:
    """Largest iteration count among models in both host op data and step trace; ties -> the
    larger id; none in both -> the smallest model id known.  `training` (the models the
    collector saw train, raw/sampling.py): when one of them qualifies, the choice is among
    them (a predict loop has more iterations than the training it follows, docs/export.md)."""
    if len(its) == 0:
        return None
    models, top = last_iterations(its)
    both = np.isin(models, list(host_models)) if host_models else np.zeros(len(models), bool)
    if training and (both & np.isin(models, list(training))).any():
        both &= np.isin(models, list(training))
    if both.any():
        best = top[both].max()
        return int(models[both][top[both] == best].max())
    known = set(models.tolist()) | set(host_models)
    return min(known) if known else None


def iteration_counts(its: pd.DataFrame) -> dict[int, int]:
    """Per model of `its`, its number of distinct iterations."""
    if len(its) == 0:
        return {}
    pairs = np.unique(np.stack([its["model_id"].to_numpy(np.int64),
                                its["iteration_id"].to_numpy(np.int64)], axis=1), axis=0)
    models, n = np.unique(pairs[:, 0], return_counts=True)
    return dict(zip(models.tolist(), n.tolist()))


def last_iterations(its: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The models of `its` (sorted) and the largest iteration id of each."""
    model = its["model_id"].to_numpy(np.int64)
    models, inv = np.unique(model, return_inverse=True)
    top = np.full(len(models), np.iinfo(np.int64).min)
    np.maximum.at(top, inv, its["iteration_id"].to_numpy(np.int64))
    return models, top


def select(its: pd.DataFrame, host_models: set[int], model_id: int | None,
           iteration_id: int | None, iteration_count: int,
           training: set[int] | None = None) -> Selection:
    """Resolve the selection for one device (raise ExportError with the real tool's texts)."""
    models = sorted(int(m) for m in its["model_id"].unique()) if len(its) else []
    if not models:
        if model_id is not None or iteration_id is not None:
            if NO_MODEL in host_models or not host_models:
                raise ExportError("Please do not set 'model-id' and 'iteration-id' in single op "
                                  "mode.")
        return ALL
    if model_id is None:
        model_id = default_model(its, host_models, training)
    if models == [NO_MODEL] and iteration_id is not None:
        raise ExportError("Please do not set 'model-id' and 'iteration-id' in single op mode.")
    if model_id not in models:
        valid = "{" + ", ".join(str(m) for m in models) + "}"
        raise ExportError(f"The model id {model_id} is invalid. Must select from {valid}. "
                          f"Please enter a valid model id.")
    mine = np.flatnonzero(its["model_id"].to_numpy(np.int64) == model_id)
    ids = its["iteration_id"].to_numpy(np.int64)[mine]  # one row per iteration of a model
    lo, hi = int(ids.min()), int(ids.max())
    if iteration_id is None:
        first, last = lo, hi
    else:
        if not 1 <= iteration_count <= MAX_ITERATION_COUNT:
            raise ExportError(f"The iteration count {iteration_count} is invalid for model id "
                              f"{model_id}. Must be greater than 0 and less than or equal to 5. "
                              f"Please enter a valid iteration count.")
        first, last = iteration_id, iteration_id + iteration_count - 1
        if first < lo or last > hi:
            raise ExportError(f"The exported iteration {first}-{last} is invalid for model id "
                              f"{model_id}. Please enter a valid iteration within {lo}-{hi}.")
    start = int(its["step_start_ns"].to_numpy(np.int64)[mine][ids == first][0])
    end = int(its["step_end_ns"].to_numpy(np.int64)[mine][ids == last][0])
    return Selection(model_id, first, last, start, end)


def in_window(start_ns: np.ndarray, end_ns: np.ndarray, sel: Selection) -> np.ndarray:
    """start <= ts < end, or ts < start < ts + dur (docs/formats/export-files.md 1.4)."""
    start_ns = np.asarray(start_ns, dtype=np.int64)
    if sel.start_ns is None:
        return np.ones(len(start_ns), dtype=bool)
    end_ns = np.asarray(end_ns, dtype=np.int64)
    return ((start_ns >= sel.start_ns) & (start_ns < sel.end_ns)) | \
        ((start_ns < sel.start_ns) & (end_ns > sel.start_ns))


def api_window(its: pd.DataFrame, sel: Selection) -> tuple[int, int] | None:
    """The host API rows a step export (--iteration-id) keeps in msprof json's CANN layer,
    as [lo, hi] in local ns: the real analysis (MsprofIteration.get_condition_within_iteration,
    read by ApiDataViewModel) keeps the rows that start in [lo, hi] or straddle lo, where lo is
    the latest step end of any iteration before the first selected one's step start (0 when
    none: the launches of the first step) and hi the last selected one's step end.  None: no
    step export (every row is kept, as in the real all-export mode)."""
    if sel.model_id is None or sel.first is None or len(its) == 0:
        return None
    mine = its[(its["model_id"] == sel.model_id) & (its["iteration_id"] >= sel.first)
               & (its["iteration_id"] <= sel.last)]
    if len(mine) == 0:
        return None
    ends = np.sort(its["step_end_ns"].to_numpy(np.int64))
    starts = mine["step_start_ns"].to_numpy(np.int64)
    before = np.searchsorted(ends, starts, side="left") - 1  # the latest end < start
    prev = np.where(before >= 0, ends[np.maximum(before, 0)], 0)
    return int(prev.min()), int(mine["step_end_ns"].to_numpy(np.int64).max())


def in_api_window(begin_ns: np.ndarray, end_ns: np.ndarray,
                  window: tuple[int, int] | None) -> np.ndarray:
    """The rows `api_window` keeps (closed bounds, as the real analysis's SQL)."""
    begin_ns = np.asarray(begin_ns, dtype=np.int64)
    if window is None:
        return np.ones(len(begin_ns), dtype=bool)
    lo, hi = window
    end_ns = np.asarray(end_ns, dtype=np.int64)
    return ((begin_ns >= lo) & (begin_ns <= hi)) | ((begin_ns <= lo) & (end_ns >= lo))


@dataclass
class ModelChoice:
    """What one device's legacy export kept, among the models of the device."""

    device_id: int
    model_id: int | None  # None: no model (single-op data), everything exported
    first: int | None
    last: int | None
    by_default: bool  # the real tool's default rule chose it (selection.default_model)
    models: list[tuple[int, str, int]] = field(default_factory=list)  # (id, name, iterations)
    training: set[int] | None = None  # the models that train (None: not known)

    def describe(self, all_models: bool = False) -> str:
        """One console line: the model exported, the others and how to export them."""
        names = {m: (name, n) for m, name, n in self.models}

        def model(m: int) -> str:
            name, n = names.get(m, ("", 0))
            return f'model {m}' + (f' "{name}"' if name else "")

        if self.model_id is None:
            return f"device_{self.device_id}: no model in the step trace, every task exported."
        its = (f"iteration {self.first}" if self.first == self.last
               else f"iterations {self.first}-{self.last}")
        text = f"device_{self.device_id}: exported {model(self.model_id)}, {its}"
        others = [m for m, _, _ in self.models if m != self.model_id]
        if all_models or not others:
            return text + "."
        if self.by_default:
            train = self.training or set()
            text += (" (the training model with the most iterations)"
                     if self.model_id in train and any(m not in train for m in others)
                     else " (the model with the most iterations)")
        listed = ", ".join(f"{model(m)} ({names[m][1]} iteration{'s' * (names[m][1] != 1)})"
                           for m in others)
        return (f"{text}. Also collected: {listed}. --all-models exports each model in its "
                f"own files; --model-id {others[0]} --iteration-id 1 one iteration.")
