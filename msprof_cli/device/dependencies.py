"""Which task a device task waits for: the data-flow edges of a chunk (docs/device-model.md 5).

On a real Ascend 910, GE assigns a graph's tasks to streams and inserts an event record on the
producer's stream and an event wait on the consumer's wherever a data edge crosses streams
(GE's stream allocation, "Ascend Graph Engine: streams and events", CANN documentation); a
task therefore never starts before the tasks that produce its inputs have ended, on whatever
stream or engine they run.  Inside one stream the in-order execution already gives that.

Here:

* `launched_producers` (once per model and set of launched names): for every op that has a
  device task, the nearest ops *with a device task* among its data producers, looked through
  the ops without one (a `ReadVariableOp` on the host, a `Const`, a folded shape...).  The
  producers come from `ModelInfo.producers` (the graph walk's data edges).
* `row_edges` (per chunk, vectorised): per op row, the rows it waits for.  A producer that
  ran several times in the step (a loop body) is the execution launched last before the
  consumer; a producer UB-fused into a chain is the fused kernel's row.
* An op the graph does not describe (eager single-op launches, a model without data edges, a
  runtime-only name such as a lowered loop body's) waits for the last task launched before it
  on every other stream of its device: single-op mode runs the ops in launch order, and
  without the data edges that is the only order known to be causal.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

# a consumer keeps at most this many nearest launched producers (an op whose input is a
# host-side op with hundreds of launched inputs); the latest-launched of them are what it
# waits for in practice, and the cap bounds the chunk's edge list
MAX_PRODUCERS = 256


def launched_producers(producers: dict[str, tuple[str, ...]], launched: set[str],
                       order: dict[str, int]) -> dict[str, tuple[str, ...]]:
    """Per launched op: its nearest launched producers (names), through unlaunched ops.

    One pass in topological order (`order`, then name): a producer comes before its
    consumers, so the ancestors of an unlaunched op are known when a consumer reaches it.
    A back edge (a TF1 loop's NextIteration) contributes what is known at that point."""
    names = sorted(set(producers) | launched, key=lambda n: (order.get(n, 1 << 62), n))
    through: dict[str, tuple[str, ...]] = {}  # unlaunched op -> its nearest launched ones
    out: dict[str, tuple[str, ...]] = {}
    for name in names:
        seen: dict[str, None] = {}
        for p in producers.get(name, ()):
            if p == name:
                continue
            if p in launched:
                seen[p] = None
            else:
                for q in through.get(p, ()):
                    seen[q] = None
            if len(seen) >= MAX_PRODUCERS:
                break
        got = tuple(seen)[:MAX_PRODUCERS]
        if name in launched:
            out[name] = got
        else:
            through[name] = got
    return out


@dataclass
class ModelEdges:
    """One model's launched-producer table as name indices (CSR)."""

    known: np.ndarray  # bool per name idx: the graph describes this op
    start: np.ndarray  # per name idx: first producer in `flat`
    count: np.ndarray  # per name idx: its number of producers
    flat: np.ndarray  # producer name indices


@dataclass
class DependencyTables:
    """Per model, its `ModelEdges`, rebuilt when the model's launched names change."""

    _cache: dict[int, tuple[bytes, ModelEdges]] = field(default_factory=dict)

    def model_edges(self, model_id: int, producers: dict[str, tuple[str, ...]],
                    order: dict[str, int], launched_idx: np.ndarray,
                    chains: dict[int, tuple[int, ...]], names: list[str],
                    name_idx: Callable[[str], int | None]) -> ModelEdges:
        """`launched_idx`: the sorted name indices of the model's op rows with a device task;
        `chains`: the model's UB-fused kernels (fused name idx -> member name indices);
        `name_idx`: a name's index, None for a name no op row has (never added: a graph's
        names that never ran must not grow the name table, hence hash_dic)."""
        key = launched_idx.tobytes()
        hit = self._cache.get(model_id)
        if hit is not None and hit[0] == key:
            return hit[1]
        launched = {names[i] for i in launched_idx.tolist()}
        prods = producers
        if chains:
            # a fused kernel consumes what its members take from outside the chain; its
            # members stay launched names (a step where the chain did not fuse runs them)
            prods = dict(producers)
            for f, mem in chains.items():
                m_names = [names[i] for i in mem]
                inside = set(m_names)
                prods[names[f]] = tuple(p for m in m_names for p in producers.get(m, ())
                                        if p not in inside)
                launched.add(names[f])
                launched.update(m_names)
        table = launched_producers(prods, launched, order)
        described = set(order) | set(table)
        # every name of `table` ran (launched rows, fused kernels): all have an index
        idx_of = {nm: i for nm in described | {p for ps in table.values() for p in ps}
                  if (i := name_idx(nm)) is not None}
        n = max(len(names), max(idx_of.values(), default=-1) + 1)
        known = np.zeros(n, bool)
        known[[idx_of[nm] for nm in described if nm in idx_of]] = True
        counts = [len(ps) for ps in table.values()]
        cons = [idx_of[c] for c in table]
        count = np.zeros(n, np.int64)
        start = np.zeros(n, np.int64)
        if cons:
            count[cons] = counts
            start[cons] = np.r_[0, np.cumsum(counts)[:-1]]
        flat = np.array([idx_of[p] for ps in table.values() for p in ps], np.int64)
        edges = ModelEdges(known, start, count, flat)
        self._cache[model_id] = (key, edges)
        return edges


def row_edges(rows: np.ndarray, iter_row: np.ndarray, name_idx: np.ndarray,
              launch_rank: np.ndarray, model_of_row: np.ndarray,
              tables: dict[int, ModelEdges], alias: dict[int, int]
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The data edges between the launched op rows `rows` of one device.

    Returns (consumer rows, producer rows, mask of `rows` the graph describes).
    `launch_rank`: per op row, its place in the device's launch order (producers are
    looked up among the rows launched before the consumer); `model_of_row`: the model whose
    graph describes the row (-1: none, e.g. eager ops); `alias`: member name -> UB-fused
    name (a producer fused in this step is the fused kernel's row)."""
    empty = np.zeros(0, np.int64)
    known = np.zeros(len(rows), bool)
    cons_parts: list[np.ndarray] = []
    pname_parts: list[np.ndarray] = []
    m_rows = model_of_row[rows]
    for mid in np.unique(m_rows[m_rows >= 0]).tolist():
        tab = tables.get(int(mid))
        if tab is None:
            continue
        sel = np.flatnonzero(m_rows == mid)
        r = rows[sel]
        nm = name_idx[r]
        inside = nm < len(tab.known)
        k = np.zeros(len(r), bool)
        k[inside] = tab.known[nm[inside]]
        known[sel] = k
        rp, nmp = r[k], nm[k]
        cnt = tab.count[nmp]
        total = int(cnt.sum())
        if total:
            cons_parts.append(np.repeat(rp, cnt))
            first = np.repeat(tab.start[nmp], cnt)
            within = np.arange(total) - np.repeat(np.cumsum(cnt) - cnt, cnt)
            pname_parts.append(tab.flat[first + within])
    if not cons_parts:
        return empty, empty, known
    cons = np.concatenate(cons_parts)
    pname = np.concatenate(pname_parts)
    prod = _latest_before(rows, iter_row, name_idx, launch_rank, cons, pname)
    miss = prod < 0
    if miss.any() and alias:
        # the producer ran inside a UB-fused kernel in this step: wait for the kernel
        lut = np.full(int(max(max(alias), pname.max())) + 1, -1, np.int64)
        lut[list(alias)] = list(alias.values())
        idx = np.flatnonzero(miss)
        al = lut[pname[idx]]
        has = al >= 0
        if has.any():
            idx = idx[has]
            prod[idx] = _latest_before(rows, iter_row, name_idx, launch_rank, cons[idx], al[has])
    ok = (prod >= 0) & (prod != cons)
    return cons[ok], prod[ok], known


def _latest_before(rows: np.ndarray, iter_row: np.ndarray, name_idx: np.ndarray,
                   launch_rank: np.ndarray, cons: np.ndarray, pname: np.ndarray) -> np.ndarray:
    """Per edge: the row of `rows` named `pname` in the consumer's iteration launched last
    before the consumer, -1 when there is none."""
    span = int(max(name_idx[rows].max(initial=0), pname.max(initial=0))) + 1
    n_rank = int(launch_rank.max(initial=0)) + 2
    key = (iter_row[rows].astype(np.int64) + 1) * span + name_idx[rows]
    code = key * n_rank + launch_rank[rows]
    order = np.argsort(code, kind="stable")
    code_s = code[order]
    want_key = (iter_row[cons].astype(np.int64) + 1) * span + pname
    pos = np.searchsorted(code_s, want_key * n_rank + launch_rank[cons], side="left") - 1
    ok = pos >= 0
    ok[ok] = code_s[pos[ok]] // n_rank == want_key[ok]
    return np.where(ok, rows[order[np.maximum(pos, 0)]], -1)


def previous_on_streams(rows: np.ndarray, stream_of_row: np.ndarray,
                        launch_rank: np.ndarray, consumers: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray]:
    """For each row of `consumers`: the last row of `rows` launched before it on each other
    stream (the order single-op mode guarantees).  Returns (consumer rows, producer rows)."""
    cons_parts, prod_parts = [], []
    for sid in np.unique(stream_of_row[rows]).tolist():
        on = rows[stream_of_row[rows] == sid]
        on = on[np.argsort(launch_rank[on], kind="stable")]
        c = consumers[stream_of_row[consumers] != sid]
        if not len(c) or not len(on):
            continue
        pos = np.searchsorted(launch_rank[on], launch_rank[c], side="left") - 1
        has = pos >= 0
        cons_parts.append(c[has])
        prod_parts.append(on[pos[has]])
    if not cons_parts:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(cons_parts), np.concatenate(prod_parts)
