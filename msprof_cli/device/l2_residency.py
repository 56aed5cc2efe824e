"""Which of a task's reads still find their data in L2 (docs/device-model.md 3.6).

The L2 cache is shared by all AI Cores and sits in front of HBM (32 MiB on the 910A, 192 MiB
on an Atlas A2).  Whether a task's input is still there when the task reads it depends on
what the chip wrote between its producer and the task, not on the task's own size: the
least-recently-used stack distance of the data (Mattson, Gecsei, Slutz & Traiger, "Evaluation
techniques for storage hierarchies", IBM Systems Journal 9(2), 1970: under LRU, a reference
hits a cache of C bytes exactly when fewer than C distinct bytes were touched since the
data's last use).  In a training step that matters most for what the forward pass keeps for
the backward one: a BatchNorm or ReLU gradient reads its forward input after the rest of the
forward and the later layers' gradients went through L2, so it reads from HBM.

Per graph, once, on one step's tasks in GE's node order (step_graph.py):

* new bytes of task j (what it brings into L2): what it writes, plus what it reads that no
  task of the step wrote (variables, feeds, constants: last touched a step ago);
* distance of an edge producer k -> consumer i: the new bytes of the tasks between them;
* resident bytes of the edge: `clip(C - distance, 0, bytes k wrote)` (the part of the tensor
  written last is the part still cached); of a read from before the step (the same task read
  it a step ago): `clip(C - (the step's new bytes - its own), 0, bytes)`;
* the task's resident share: resident bytes over the bytes of its edges and outside reads,
  in steps of 1/`LEVELS` (the task runs on a signature variant with that share,
  `SignatureRegistry.with_residency`).

A graph without data edges keeps the working-set rule of cost_model.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from msprof_cli.capture import ModelInfo
from msprof_cli.device import step_graph as SG
from msprof_cli.device.op_table import Interner, OpTable, SignatureRegistry
from msprof_cli.device.ub_fusion import UbFuser

LEVELS = 16  # resident share in sixteenths: at most 17 variants of one signature


def resident_share(new_bytes: np.ndarray, src: np.ndarray, dst: np.ndarray,
                   edge_bytes: np.ndarray, outside: np.ndarray, capacity: float) -> np.ndarray:
    """Per task (in execution order): the share of the bytes it reads that are in an LRU
    cache of `capacity` bytes when it starts (module doc); 1 for a task that reads nothing.

    `new_bytes[j]`: bytes task j brings into the cache; `(src, dst)`: its edges, with
    `edge_bytes` the producer's bytes; `outside[j]`: bytes j reads from before the step."""
    n = len(new_bytes)
    done = np.cumsum(np.asarray(new_bytes, np.float64))  # brought in by tasks 0..j
    before = done - new_bytes  # by tasks 0..j-1
    distance = before[dst] - done[src]
    res = np.clip(capacity - distance, 0.0, edge_bytes)
    # read a step ago by the same task: everything else the step brought in came since
    step = float(done[-1]) if n else 0.0
    res_out = np.clip(capacity - (step - outside), 0.0, outside)
    num = np.bincount(dst, res, minlength=n) + res_out
    den = np.bincount(dst, edge_bytes, minlength=n) + outside
    return np.where(den > 0, num / np.maximum(den, 1e-300), 1.0)


def graph_shares(bytes_in: np.ndarray, bytes_out: np.ndarray, src: np.ndarray,
                 dst: np.ndarray, capacity: float) -> np.ndarray:
    """`resident_share` of one step's tasks from their bytes and data edges: a task reads
    each producer's whole output, and the rest of its input bytes from before the step."""
    edge_bytes = np.asarray(bytes_out, np.float64)[src]
    from_edges = np.bincount(dst, edge_bytes, minlength=len(bytes_in))
    outside = np.maximum(np.asarray(bytes_in, np.float64) - from_edges, 0.0)
    return resident_share(np.asarray(bytes_out, np.float64) + outside, src, dst, edge_bytes,
                          outside, capacity)


@dataclass
class L2Pass:
    """Per device: each graph's tasks on signatures with their reads' L2 residency."""

    capacity: float
    # (model, device) -> (name idx of the graph's tasks, their residency level)
    plans: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)

    def apply(self, ops: OpTable, models: dict[int, ModelInfo], sigs: SignatureRegistry,
              names: Interner, fuser: UbFuser) -> OpTable:
        """`ops` with each graph step's tasks on their residency signatures (a new table;
        eager ops and graphs without data edges keep theirs)."""
        if not len(ops):
            return ops
        eager = ops.eager if ops.eager is not None else np.zeros(len(ops), bool)
        graph = ~eager & (ops.iter_row >= 0)
        if not graph.any():
            return ops
        sig = ops.sig.copy()
        keys = np.stack([ops.model_id.astype(np.int64), ops.device_id.astype(np.int64)])
        for mid, dev in np.unique(keys[:, graph], axis=1).T.tolist():
            sel = np.flatnonzero(graph & (keys[0] == mid) & (keys[1] == dev))
            if (mid, dev) not in self.plans:
                first = sel[ops.iter_row[sel] == ops.iter_row[sel].min()]
                self.plans[(mid, dev)] = self._plan(mid, models.get(mid), first, ops, sigs,
                                                    names, fuser)
            known, level = self.plans[(mid, dev)]
            if not len(known):
                continue
            pos = np.searchsorted(known, ops.name_idx[sel])
            pos = np.minimum(pos, len(known) - 1)
            hit = known[pos] == ops.name_idx[sel]
            rows, lev = sel[hit], level[pos[hit]]
            pairs, inv = np.unique(np.stack([sig[rows], lev]), axis=1, return_inverse=True)
            new = np.array([sigs.with_residency(int(s), int(q), LEVELS)
                            for s, q in pairs.T.tolist()], np.int64)
            sig[rows] = new[inv.reshape(-1)]
        return replace(ops, sig=sig)

    def _plan(self, mid: int, model: ModelInfo | None, rows: np.ndarray, ops: OpTable,
              sigs: SignatureRegistry, names: Interner, fuser: UbFuser
              ) -> tuple[np.ndarray, np.ndarray]:
        none = (np.zeros(0, np.int64), np.zeros(0, np.int64))
        if model is None or not model.producers:
            return none
        launched = SG.launched_rows(model, rows, ops, sigs, names)
        row_names = [names.items[i] for i in ops.name_idx[launched].tolist()]
        src, dst = SG.step_edges(mid, model, row_names, names, fuser)
        sg = sigs.arrays()
        s = ops.sig[launched]
        share = graph_shares(sg["bytes_in"][s], sg["bytes_out"][s], src, dst, self.capacity)
        level = np.rint(share * LEVELS).astype(np.int64)
        # a node run several times (a loop body) keeps the level of its first run
        name_idx, first = np.unique(ops.name_idx[launched], return_index=True)
        return name_idx.astype(np.int64), level[first]
