"""The emulated device memory: GE's variable memory and each graph's planned feature map, per
device, from what the collector captured (docs/device-model.md 12).

* Variable memory (GE's `VarManager`, one per session): every variable a model's graph uses
  (`ModelInfo.variables`), at its own dtype, each with GE's tensor size rule; split into
  weights, optimizer state and other state (collect/tf_variables.py says which is which).
* Feature map (one block per loaded graph): the tensors of one step of the model, planned as
  GE plans them (memory_plan.py).  A tensor is the output of a launched task (the outputs of
  a UB-fused chain's inner ops stay in the Unified Buffer; a host-only op has none; an
  optimizer's apply op updates its variable in place); its bytes are what the task writes
  (fp16 where the precision mode makes the op fp16); it lives from its task's index in the
  step to its last consumer's (the data edges of the graph, looked through the ops without a
  task).  All outputs of one task are one tensor.
* Buffers: the step's feeds and fetches (memcpy.py copies them); on a device whose steps run
  collectives, HCCL's send and receive buffers of its communicator (2 x HCCL_BUFFSIZE).

What the device writes is `msprof_cli_memory.json` (raw/memory_plan.py).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from msprof_cli.capture import (DTYPE_BYTES, VAR_OPTIMIZER, VAR_WEIGHT, ModelInfo,
                                TensorSpec, VariableSpec, in_optimizer_scope)
from msprof_cli.device import memory_plan as MP
from msprof_cli.device import op_map
from msprof_cli.device import step_graph as SG
from msprof_cli.device import workspace as WS
from msprof_cli.device.chip import ChipSpec
from msprof_cli.device.op_table import Interner, IterTable, OpTable, SignatureRegistry
from msprof_cli.device.step_trace import NameClasses
from msprof_cli.device.ub_fusion import UbFuser
from msprof_cli.raw import memory_plan as RM


# HCCL_BUFFSIZE's default: each communicator keeps 2 x this many bytes for sending and
# receiving, exclusively (docs/formats/device-memory.md 6, from CANN's environment variables)
HCCL_BUFFER = 200 << 20


def hccl_buffer_from_env(env: dict[str, str]) -> int:
    """HCCL_BUFFSIZE (MB, an integer >= 1) of the profiled process, else the default."""
    try:
        mb = int(env.get("HCCL_BUFFSIZE", ""))
    except ValueError:
        return HCCL_BUFFER
    return mb << 20 if mb >= 1 else HCCL_BUFFER


def spec_bytes(shape: tuple[int, ...], dtype: str) -> int:
    """Bytes of a tensor (an unknown dimension counts as 1)."""
    n = 1
    for d in shape:
        n *= max(int(d), 1)
    return n * DTYPE_BYTES.get(dtype, 4)


class MemoryModel:
    """The facts of one PROF dir's device memory, updated per chunk (module doc)."""

    def __init__(self, prof_dir: Path, chip: ChipSpec, hccl_buffer: int = HCCL_BUFFER) -> None:
        self.prof_dir = Path(prof_dir)
        self.facts = RM.MemoryFacts(chip.name, chip.hbm_capacity_bytes, chip.hbm_reserved_bytes,
                                    chip.ge_variable_limit, chip.ge_graph_limit)
        self._vars: dict[int, dict[str, VariableSpec]] = {}  # device -> name -> variable
        # per (model, device): each planned tensor as (op name, bytes, first node, last node)
        self.tensors: dict[tuple[int, int], list[tuple[str, int, int, int]]] = {}
        # the models planned in the chunk being consumed: (model, device, iteration row of
        # their first step), for the records of their load (memory_records.py)
        self.pending: list[tuple[int, int, int]] = []
        self.hccl_buffer = hccl_buffer

    def set_pools(self, graph: int = 0, variables: int = 0) -> str | None:
        """GE's pool sizes (0: keep); a warning when together they exceed what the chip's
        system leaves (the TF adapter documents their sum as limited by the hardware)."""
        f = self.facts
        if graph:
            f.graph_limit = graph
        if variables:
            f.variable_limit = variables
        if f.devices:
            RM.write(self.prof_dir, f)
        if (graph or variables) and f.graph_limit + f.variable_limit > f.usable:
            return (f"graph_memory_max_size + variable_memory_max_size = "
                    f"{f.graph_limit + f.variable_limit} bytes exceed the {f.usable} bytes "
                    f"{f.chip} leaves usable: GE cannot reserve both pools")
        return None

    def record(self, ops: OpTable, iters: IterTable, models: dict[int, ModelInfo],
               sigs: SignatureRegistry, names: Interner, fuser: UbFuser,
               classes: NameClasses) -> None:
        """Plan the models whose first step on a device is in this chunk; rewrite the file
        when anything changed."""
        inn = np.flatnonzero(ops.iter_row >= 0)
        if not len(inn):
            return
        changed = False
        pairs = np.unique(np.stack([ops.model_id[inn].astype(np.int64),
                                    ops.device_id[inn].astype(np.int64)]), axis=1)
        for mid, dev in pairs.T.tolist():
            dm = self.facts.devices.setdefault(dev, RM.DeviceMemory())
            if mid in dm.models:
                continue
            model = models.get(mid)
            sel = inn[(ops.model_id[inn] == mid) & (ops.device_id[inn] == dev)]
            first = int(ops.iter_row[sel].min())
            rows = sel[ops.iter_row[sel] == first]
            dm.models[mid] = self._plan_model(mid, dev, model, rows, ops, sigs, names, fuser,
                                              classes, int(iters.start[first]))
            self.pending.append((mid, dev, first))
            if model is not None:
                self._add_variables(dev, model.variables, dm)
            kinds = sigs.arrays()["kind"][ops.sig[rows]]
            if not dm.hccl and (kinds == op_map.KIND_HCCL).any():
                # the device's communicator: HCCL's send and receive buffers
                dm.hccl = 2 * self.hccl_buffer
            changed = True
        if changed:
            RM.write(self.prof_dir, self.facts)

    def _add_variables(self, dev: int, variables: tuple[VariableSpec, ...],
                       dm: RM.DeviceMemory) -> None:
        """The session's variable memory holds each variable once, whichever graphs use it;
        a replica's copy belongs to its device."""
        known = self._vars.setdefault(dev, {})
        for v in variables:
            if v.device not in (-1, dev) or v.name in known:
                continue
            known[v.name] = v
            b = spec_bytes(v.shape, v.dtype)
            if v.role == VAR_WEIGHT:
                dm.weight += b
            elif v.role == VAR_OPTIMIZER:
                dm.optimizer += b
            else:
                dm.state += b
            dm.count += 1
            dm.pool += int(MP.ge_tensor_bytes(np.array([b]))[0])

    def _plan_model(self, mid: int, dev: int, model: ModelInfo | None, rows: np.ndarray,
                    ops: OpTable, sigs: SignatureRegistry, names: Interner, fuser: UbFuser,
                    classes: NameClasses, load_ns: int) -> RM.ModelMemory:
        sg = sigs.arrays()
        launched = SG.launched_rows(model, rows, ops, sigs, names)
        sig = ops.sig[launched]
        row_names = [names.items[i] for i in ops.name_idx[launched].tolist()]
        nbytes = sg["bytes_out"][sig].astype(np.int64)
        # an op that writes no tensor (AssignVariableOp; one captured without its output
        # specs: the cost model charges both a default size) or updates its variable in
        # place (an optimizer's apply op) has no block; a UB-fused kernel (no specs of its
        # own) writes its chain's output
        no_out = np.array([op_map.is_optimizer_type(sigs.tf_type[s]) or
                           (not sigs.specs[s][1] and sigs.n_fused[s] == 0)
                           for s in sig.tolist()], bool)
        nbytes[no_out] = 0
        start = np.arange(len(launched), dtype=np.int64)
        end = start.copy()
        first_producer: dict[int, int] = {}  # GE-inserted conversion -> its input's task
        if model is not None:
            # a tensor lives until its last consumer; GE's conversions (`trans_*`,
            # trans_ops.py) take the kind of their first input's task
            src, dst = SG.step_edges(mid, model, row_names, names, fuser)
            np.maximum.at(end, src, dst)
            for k, i in zip(src.tolist(), dst.tolist()):
                if row_names[i].startswith("trans_"):
                    first_producer.setdefault(i, k)
        # each kernel's workspaces: a block of the plan for the node only (workspace.py)
        ws = WS.workspace_bytes(sigs, sig)
        at = np.flatnonzero(ws > 0)
        tasks = len(launched)
        nbytes = np.concatenate([nbytes, ws[at]])
        start, end = np.concatenate([start, at]), np.concatenate([end, at])
        row_names = row_names + [row_names[i] for i in at.tolist()]
        plan = MP.plan(nbytes, start, end)
        _, backward = classes.of(names.items)
        grad = backward[ops.name_idx[launched]].copy()
        update = np.array([in_optimizer_scope(n) for n in row_names[:tasks]], bool)
        for i, j in first_producer.items():  # GE's conversions: their input's kind
            grad[i], update[i] = grad[j], update[j]
        grad &= ~update
        work = np.arange(len(nbytes)) >= tasks
        grad, update = (np.concatenate([a, np.zeros(len(at), bool)]) for a in (grad, update))
        kind = np.where(work, "workspace", np.where(update, "update",
                                                    np.where(grad, "gradient", "activation")))
        p = plan.peak_at
        live = (start <= p) & (end >= p) & (plan.size > 0)
        top = np.flatnonzero(live)
        top = top[np.argsort(-plan.size[top], kind="stable")][:RM.TOP_TENSORS]
        self.tensors[(mid, dev)] = [(row_names[i], int(nbytes[i]), int(start[i]), int(end[i]))
                                    for i in np.flatnonzero(plan.size > 0).tolist()]
        curve = _live_curve(plan.size, start, end, kind)
        io = consts = 0
        if model is not None:
            io = int(MP.ge_tensor_bytes(np.array(
                [_spec_nbytes(t) for t in (*model.feeds, *model.fetches)] or [0])).sum())
            consts = int(MP.ge_tensor_bytes(np.array(list(model.constants.values()) or [0],
                                                     np.int64)).sum())
        return RM.ModelMemory(
            name=model.name if model is not None else f"model {mid}",
            feature_map=plan.total, live_peak=plan.live_peak, peak_node=p,
            tensors=int((plan.size > 0).sum()), io=io, constants=consts,
            activations=int(plan.size[live & (kind == "activation")].sum()),
            gradients=int(plan.size[live & grad].sum()), load_ns=load_ns,
            updates=int(plan.size[live & update].sum()),
            workspace=int(plan.size[live & work].sum()),
            top=[[row_names[i], int(plan.size[i]), int(start[i]), int(end[i]), str(kind[i])]
                 for i in top.tolist()], curve=curve)

KINDS = ("activation", "gradient", "update", "workspace")
CURVE_POINTS = 400  # the memory-over-the-step curve keeps at most this many node indices


def _live_curve(size: np.ndarray, start: np.ndarray, end: np.ndarray, kind: np.ndarray
                ) -> dict[str, list[int]]:
    """Bytes live at each node index, by kind, for the report's plot: every node of a small
    graph; of a big one, per bin of nodes the node where the most is live (the peak is
    always one of them)."""
    if not len(size):
        return {}
    parts = {k: MP.live_sum(np.where(kind == k, size, 0), start, end) for k in KINDS}
    total = sum(parts.values())
    nodes = np.arange(len(total))
    if len(total) > CURVE_POINTS:
        bins = np.array_split(nodes, CURVE_POINTS)
        nodes = np.array([b[int(total[b].argmax())] for b in bins])
    return {"node": nodes.tolist(), **{k: v[nodes].tolist() for k, v in parts.items()}}


def _spec_nbytes(t: TensorSpec) -> int:
    return spec_bytes(t.shape, t.dtype) if t.shape != (-2,) else 0
