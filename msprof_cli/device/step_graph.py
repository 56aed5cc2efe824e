"""One step of a graph as GE orders it: its launched tasks in node order and the data edges
between them (docs/device-model.md 3.6 and 12).

GE compiles a static graph once, so where a task sits in the step and which earlier tasks it
reads from are properties of the graph, not of the order the host's threads happened to run
the ops in.  Both the memory plan (a tensor lives from its producer to its last consumer,
memory.py) and the L2 residency of a task's inputs (what was written between its producers
and itself, l2_residency.py) are computed on this order.
"""
from __future__ import annotations

import bisect

import numpy as np

from msprof_cli.capture import ModelInfo
from msprof_cli.device import op_map
from msprof_cli.device.dependencies import launched_producers
from msprof_cli.device.op_table import Interner, OpTable, SignatureRegistry
from msprof_cli.device.ub_fusion import UbFuser


def node_order(order: dict[str, int], rows: np.ndarray, ops: OpTable,
               names: Interner) -> np.ndarray:
    """`rows` in GE's node order (the graph's topological ids, with GE's inserted and fused
    nodes in their places), not in the order the host happened to run them: the plan of a
    graph is the same whatever the threads did.  A row of no known node keeps its place after
    the row before it; repeated runs of one node (a loop body) keep their order."""
    key = np.array([order.get(names.items[i], np.nan) for i in ops.name_idx[rows].tolist()],
                   np.float64)
    known = ~np.isnan(key)
    if not known.all():
        last = np.maximum.accumulate(np.where(known, np.arange(len(key)), -1))
        key = np.where(last >= 0, key[np.maximum(last, 0)], -np.inf)
    return np.argsort(key, kind="stable")


def launched_rows(model: ModelInfo | None, rows: np.ndarray, ops: OpTable,
                  sigs: SignatureRegistry, names: Interner) -> np.ndarray:
    """The rows of one step that launch a device task, in GE's node order when the graph
    gives one."""
    launched = rows[sigs.arrays()["kind"][ops.sig[rows]] != op_map.KIND_NONE]
    if model is not None and model.op_order:
        launched = launched[node_order(model.op_order, launched, ops, names)]
    return launched


def step_edges(mid: int, model: ModelInfo, row_names: list[str], names: Interner,
               fuser: UbFuser) -> tuple[np.ndarray, np.ndarray]:
    """The data edges of one step's launched tasks (`row_names`, in node order) as
    (producer index, consumer index) pairs, consumers ascending: a consumer reads from the
    latest run of each of its nearest launched producers before it (the graph's data edges
    looked through the ops without a task; a UB-fused kernel consumes what its members take
    from outside the chain).  Empty when the graph has no edges."""
    prods = model.producers
    if not prods:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    launched = set(row_names)
    alias: dict[str, str] = {}
    chains = fuser.chains_of(mid)
    if chains:
        prods = dict(prods)
        for f, mem in chains.items():
            m_names = [names.items[i] for i in mem]
            inside = set(m_names)
            prods[names.items[f]] = tuple(q for m in m_names for q in prods.get(m, ())
                                          if q not in inside)
            launched.add(names.items[f])
            launched.update(m_names)
            alias.update({m: names.items[f] for m in m_names})
    table = launched_producers(prods, launched, model.op_order)
    positions: dict[str, list[int]] = {}
    for i, n in enumerate(row_names):
        positions.setdefault(n, []).append(i)
    src: list[int] = []
    dst: list[int] = []
    for i, n in enumerate(row_names):  # once per graph, not per record
        for q in table.get(n, ()):
            at = positions.get(q)
            if at is None:
                at = positions.get(alias.get(q, ""))
                if at is None:
                    continue
            k = bisect.bisect_left(at, i) - 1  # the producer's latest run before i
            if k >= 0:
                src.append(at[k])
                dst.append(i)
    return np.array(src, np.int64), np.array(dst, np.int64)
