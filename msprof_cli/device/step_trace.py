"""FP / BP op selection for the step-trace markers (docs/formats/step-trace-and-advice.md 4, adapted
to TF).

Order of precedence per model: PROFILING_OPTIONS fp_point/bp_point (if they name an op of the
model; else a warning and auto-detection), then ModelInfo.fp_op/bp_op from the collector, then
auto-detection over the model's device ops in topological order (ModelInfo.op_order; execution
order of the first captured iteration when the order is unknown):

* FP = the first op that launches a device task and is neither a gradient nor a weight-update op
  (the first compute op consuming the graph input: TF graphs have no GE Data nodes, and the
  ops between the input and it - reads, reshapes, identity - launch nothing).
* BP = with collectives: the last device op before the last AllReduce (GE: the AllReduce's input
  with the largest op id); else the last op under a `gradients/` / `gradient_tape/` name scope;
  else the op just before the first optimizer apply op; else the last device op (inference:
  GE uses the input of NetOutput).

`loop_scope` / `is_backward` / `NameClasses` classify op names for the placement of the
markers around the chosen ops (task_schedule.py; docs/device-model.md 7).
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Callable

import numpy as np

from msprof_cli.capture import Iteration, ModelInfo
from msprof_cli.device import op_map

FP_NOT_FOUND = "First forward op name can't be found in graph for training trace."
BP_NOT_FOUND = "Last backward op name can't be found in graph for training trace."
WEIGHT_UPDATE_GE = {"Assign", "AssignAdd", "AssignSub"}
_REPLICA_SCOPE = re.compile(r"(?<![^/])replica_\d+/")
# TF's runtime name of an op in a lowered While's cond/body function: `{while op}/body/_N/...`
_LOOP_PART = re.compile(r"/(?:body|cond)/_\d+/")


@dataclass(frozen=True)
class FpBp:
    fp: str | None
    bp: str | None
    fp_source: str  # "option", "model", "auto", "none"
    bp_source: str


def _is_gradient(name: str) -> bool:
    return any(part.startswith(("gradients", "gradient_tape")) for part in name.split("/"))


def is_backward(name: str) -> bool:
    """An op of the backward pass: under a `gradients` / `gradient_tape` name scope."""
    return _is_gradient(name)


def loop_scope(name: str) -> str | None:
    """The outermost While loop an op runs in (the While op's name), None outside loops.

    GE looks for the BP op from the NetOutput (or AllReduce) inwards, "descending into
    subgraph outputs" (docs/formats/step-trace-and-advice.md 4.2): seen from the root graph the BP
    op of a
    loop is the While node, whose last task is the loop's last task.  TF runs a loop's
    counter and condition ops ahead of its data (they depend on no forward data), so the
    host launch order -- the device's stream order -- puts the last execution of a loop's
    condition op long before the loop ends, even before the forward pass's first op."""
    m = _LOOP_PART.search(name)
    return name[:m.start()] if m else None


def resolve_fp_bp(model: ModelInfo | None, first_iteration: Iteration, *, fp_point: str,
                  bp_point: str, warn: list[str]) -> FpBp:
    """Choose the fp/bp op names of a model (see module doc); warnings go to `warn`."""
    seen: dict[str, int] = {}
    device_ops: list[tuple[str, str]] = []  # (name, tf_type) of ops launching a device task
    for i, op in enumerate(first_iteration.ops):
        if op.name not in seen:
            seen[op.name] = i
            if op_map.map_op(op.tf_type).kind != op_map.KIND_NONE:
                device_ops.append((op.name, op.tf_type))
    order = model.op_order if model else {}
    if order:
        big = len(order) + len(seen)
        device_ops.sort(key=lambda t: (order.get(t[0], big + seen[t[0]]), seen[t[0]]))
    known = set(seen) | set(order)
    label = f"model {first_iteration.model_id}"

    fp, fp_src = _choose("fp_point", fp_point, FP_NOT_FOUND, "FP", known, label, warn,
                         model.fp_op if model else None, lambda: _auto_fp(device_ops))
    bp, bp_src = _choose("bp_point", bp_point, BP_NOT_FOUND, "BP", known, label, warn,
                         model.bp_op if model else None,
                         lambda: _auto_bp(device_ops) if device_ops else None)
    return FpBp(fp, bp, fp_src, bp_src)


def _choose(key: str, option: str, not_found: str, what: str, known: set[str], label: str,
            warn: list[str], from_model: str | None,
            auto: Callable[[], str | None]) -> tuple[str | None, str]:
    """The option if it names an op of the model (else a warning), then the collector's
    choice, then auto-detection; returns (op name, source)."""
    if option:
        if option in known:
            return option, "option"
        warn.append(f"{not_found} {key}={option!r} is not an op of {label}; the {what} op is "
                    "auto-detected instead.")
    if from_model:
        return from_model, "model"
    found = auto()
    return found, ("auto" if found else "none")


def _auto_fp(device_ops: list[tuple[str, str]]) -> str | None:
    for name, tf_type in device_ops:
        ge = op_map.map_op(tf_type).ge_type
        if _is_gradient(name) or op_map.is_optimizer_type(tf_type) or ge in WEIGHT_UPDATE_GE:
            continue
        return name
    return None


def _auto_bp(device_ops: list[tuple[str, str]]) -> str | None:
    kinds = [op_map.map_op(t) for _, t in device_ops]
    reduces = [i for i, m in enumerate(kinds) if m.allreduce]
    if reduces:
        for i in range(reduces[-1] - 1, -1, -1):
            if kinds[i].kind in (op_map.KIND_AI_CORE, op_map.KIND_AI_CPU):
                return device_ops[i][0]
    grads = [i for i, (name, _) in enumerate(device_ops) if _is_gradient(name)]
    if grads:
        return device_ops[grads[-1]][0]
    for i, (_, tf_type) in enumerate(device_ops):
        if op_map.is_optimizer_type(tf_type) and i > 0:
            return device_ops[i - 1][0]
    return device_ops[-1][0]


def replica_counterpart(name: str | None, names: set[str]) -> str | None:
    """`name` if this device runs it, else this device's op that differs from it only by the
    `replica_N/` scope tf.distribute gives replica N's copy of each op (None if none): with
    several devices each gets the FP/BP of its own ops (`resolve_per_device`)."""
    if name is None or name in names:
        return name
    key = _REPLICA_SCOPE.sub("", name)
    for other in names:
        if _REPLICA_SCOPE.sub("", other) == key:
            return other
    return None


def resolve_per_device(iterations: list[Iteration], models: dict[int, ModelInfo],
                       fp_point: str, bp_point: str, known: dict[tuple[int, int], FpBp],
                       first: dict[int, FpBp]) -> list[str]:
    """FP/BP per (model, device), added to `known` (and a model's first to `first`); the
    warnings.  With several devices (replicas) each device gets the FP/BP of its own ops: a
    name chosen by the collector or by fp_point/bp_point is used on the device that runs it,
    the other devices detect theirs automatically (the replicas run the same graph, so they
    get the replica's counterpart ops)."""
    warnings: list[str] = []
    for it in iterations:
        if it.schedule is not None:  # a replayed step: objects only when still needed
            if all((it.model_id, d) in known for d in it.schedule.device_ids):
                continue
            it = dataclasses.replace(it, ops=it.op_runs(), schedule=None)
        if not it.ops:
            continue
        devs = sorted({o.device_id for o in it.ops})
        model = models.get(it.model_id)
        for dev in devs:
            if (it.model_id, dev) in known:
                continue
            sub, m, fp_pt, bp_pt = it, model, fp_point, bp_point
            if len(devs) > 1:
                sub = dataclasses.replace(it, ops=[o for o in it.ops if o.device_id == dev])
                here = {o.name for o in sub.ops}
                everywhere = {o.name for o in it.ops} | set(model.op_order if model else ())
                if model is not None:
                    m = dataclasses.replace(model, fp_op=replica_counterpart(model.fp_op, here),
                                            bp_op=replica_counterpart(model.bp_op, here))
                # an option naming another replica's op: auto here, no warning
                fp_pt = "" if fp_pt in everywhere and fp_pt not in here else fp_pt
                bp_pt = "" if bp_pt in everywhere and bp_pt not in here else bp_pt
            fb = resolve_fp_bp(m, sub, fp_point=fp_pt, bp_point=bp_pt, warn=warnings)
            known[(it.model_id, dev)] = fb
            first.setdefault(it.model_id, fb)
    return warnings


class NameClasses:
    """Per interned op name (`Device.names`, append-only): its loop (`loop_scope`, numbered;
    -1 outside loops) and whether it is a backward op (`is_backward`), for the placement of
    the FP / BP markers (task_schedule.py).  Names seen before are not classified again."""

    def __init__(self) -> None:
        self._loop: list[int] = []
        self._backward: list[bool] = []
        self._loop_ids: dict[str, int] = {}
        self._arrays = (np.zeros(0, np.int64), np.zeros(0, bool))

    def of(self, names: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(loop id, backward flag) per name index of `names`."""
        if len(names) == len(self._loop):
            return self._arrays
        for name in names[len(self._loop):]:
            scope = loop_scope(name)
            self._loop.append(-1 if scope is None else
                              self._loop_ids.setdefault(scope, len(self._loop_ids)))
            self._backward.append(is_backward(name))
        self._arrays = (np.array(self._loop, np.int64), np.array(self._backward, bool))
        return self._arrays
