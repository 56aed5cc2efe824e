"""FP / BP op selection for the step-trace markers (step-trace-and-advice.md 4, adapted to TF).

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
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from msprof_cli.capture import Iteration, ModelInfo
from msprof_cli.device import op_map

FP_NOT_FOUND = "First forward op name can't be found in graph for training trace."
BP_NOT_FOUND = "Last backward op name can't be found in graph for training trace."
WEIGHT_UPDATE_GE = {"Assign", "AssignAdd", "AssignSub"}
_REPLICA_SCOPE = re.compile(r"(?<![^/])replica_\d+/")


@dataclass(frozen=True)
class FpBp:
    fp: str | None
    bp: str | None
    fp_source: str  # "option", "model", "auto", "none"
    bp_source: str


def _is_gradient(name: str) -> bool:
    return any(part.startswith(("gradients", "gradient_tape")) for part in name.split("/"))


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
    several devices each gets the FP/BP of its own ops (`Device._resolve_fp_bp`)."""
    if name is None or name in names:
        return name
    key = _REPLICA_SCOPE.sub("", name)
    for other in names:
        if _REPLICA_SCOPE.sub("", other) == key:
            return other
    return None
