"""GE's precision mode: which ops run in fp16 (docs/device-model.md 3.2).

The TF adapter passes `precision_mode` to GE, which picks each op's kernel dtype:

* `allow_fp32_to_fp16` (the adapter's default for training): matrix (cube) ops compute in
  fp16, vector ops keep fp32 -- already the base features of every signature (op_table.py).
* `allow_mix_precision` (alias `allow_mix_precision_fp16`): mixed precision by the
  operators' lists (`precision_reduce` in the ops-info of each kernel): the *trustlist* runs
  in fp16 (the cube ops), the *blocklist* keeps fp32, a *graylist* op follows the op upstream
  of it ("if the previous operator supports precision reduction, the current one does too",
  CANN `--modify_mixlist` / TF migration guide "修改混合精度黑白灰名单").
* `force_fp16`: every op that has an fp16 kernel runs in fp16.

Here (per model, once): the reduced ops of a graph are found by walking its data-flow edges
(`ModelInfo.producers`) in topological order; per chunk (vectorised) the rows of reduced ops
take their signature's fp16 variant (`SignatureRegistry.reduced`): fp32 tensors move 2 bytes
an element and the vector unit runs 128 lanes wide.  tensor_info keeps the captured dtypes
(as for the cube ops of the default mode).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from msprof_cli.capture import ModelInfo
from msprof_cli.device import op_map
from msprof_cli.device.op_table import CUBE_COSTS, Interner, OpTable, SignatureRegistry
from msprof_cli.options import DEFAULT_PRECISION_MODE as DEFAULT_MODE

MIX = "allow_mix_precision"
FORCE = "force_fp16"

# The blocklist (kept fp32 under allow_mix_precision), by GE type: the kernels whose
# `precision_reduce.flag=false` in the 910's ops-info (CANN canndev
# ops/built-in/tbe/op_info_cfg/ai_core/ascend910/aic-ascend910-ops-info.ini, mirrored in
# github.com/dengguojie/vue-element-admin@3f8601f6ee7ae38d6d2b989908513193fe15bd8e: 35 true,
# 88 false, 619 unset), among the types the op map produces; that file leaves Exp, ReduceSumD,
# SoftmaxV2, Rsqrt... unset (graylist).  The optimizer updates and variable assigns are
# blocked too (ApplyMomentumD, ApplyAdamD, SGD in the file; ops-nn PrecisionReduceFlag(false)
# for the others): variables stay fp32.  Types the file does not cover (Expm1, Log1p, the
# softmax cross-entropies' TF names) follow TensorFlow's own mixed-precision deny list
# (grappler auto_mixed_precision_lists.h).
BLOCK_GE_TYPES = frozenset({
    "Expm1", "L2Loss", "ReduceMeanD", "ReduceMean", "Pow", "ReduceSum",
    "SoftmaxCrossEntropyWithLogits", "SparseSoftmaxCrossEntropyWithLogits", "Log", "Log1p",
    "LogSoftmaxV2", "Assign", "AssignAdd", "AssignSub",
    "BiasAddGrad", "SoftmaxGrad", "SquareSumV1", "SquareSumV2", "SquareSumAll",
    "SigmoidCrossEntropyWithLogits", "SigmoidCrossEntropyWithLogitsV2",
    "SigmoidCrossEntropyWithLogitsGrad", "UnsortedSegmentSum", "UnsortedSegmentSumD",
})
BLOCK_PREFIXES = ("Apply", "SparseApply", "SGD")  # optimizer update kernels


def blocked(ge_type: str) -> bool:
    return ge_type in BLOCK_GE_TYPES or ge_type.startswith(BLOCK_PREFIXES)


def reduced_ops(producers: dict[str, tuple[str, ...]], list_of: dict[str, int],
                order: dict[str, int]) -> set[str]:
    """The device ops of one graph that run in fp16 under allow_mix_precision.

    `list_of`: op name -> 1 trustlist, 0 graylist, -1 blocklist, for the ops with an AI Core
    kernel.  A gray op follows the producer of its first data input.  A graph node without
    an AI Core kernel is transparent: it carries the precision of its own first producer
    (TensorFlow's graph optimizer may have rewritten it into an op of another name, e.g. a
    chain of Adds into one AddN; a host-only node passes its input on); a node without
    producers (a data source, a variable handle) is fp32.  Nodes in topological order
    (`order`, then name), so a producer is decided before its consumers; a producer not
    decided yet (a loop's back edge) counts as fp32."""
    half: set[str] = set()  # every node, device op or not, whose output is fp16
    names = set(producers) | set(list_of)
    for name in sorted(names, key=lambda n: (order.get(n, 1 << 62), n)):
        k = list_of.get(name, 0)
        if k > 0:
            half.add(name)
        elif k == 0:
            prods = producers.get(name, ())
            if prods and prods[0] in half:
                half.add(name)
    return half & set(list_of)


@dataclass
class PrecisionPass:
    """Per device: the run's precision mode applied to each chunk's op table."""

    mode: str = DEFAULT_MODE
    plans: dict[int, np.ndarray] = field(default_factory=dict)  # model -> reduced name idx

    def _plan(self, model: ModelInfo | None, ops: OpTable, rows: np.ndarray,
              sigs: SignatureRegistry, names: Interner) -> np.ndarray:
        sig_of: dict[int, int] = {}
        for n, s in zip(ops.name_idx[rows].tolist(), ops.sig[rows].tolist()):
            sig_of.setdefault(n, s)
        list_of: dict[str, int] = {}
        for n, s in sig_of.items():
            if sigs.kind[s] != op_map.KIND_AI_CORE:
                continue
            list_of[names.items[n]] = (1 if sigs.cost[s] in CUBE_COSTS else
                                       -1 if blocked(sigs.ge_type[s]) else 0)
        if model is None or not model.producers:
            keep = {n for n, k in list_of.items() if k > 0}  # no edges: gray ops stay fp32
        else:
            keep = reduced_ops(model.producers, list_of, model.op_order)
        return np.array(sorted(names(n) for n in keep), np.int64)

    def apply(self, ops: OpTable, models: dict[int, ModelInfo], sigs: SignatureRegistry,
              names: Interner) -> OpTable:
        """`ops` with the rows the mode reduces on their fp16 signatures (a new table)."""
        if self.mode == DEFAULT_MODE or not len(ops):
            return ops
        if self.mode == FORCE:
            hit = np.ones(len(ops), bool)
        else:
            hit = np.zeros(len(ops), bool)
            eager = ops.eager if ops.eager is not None else np.zeros(len(ops), bool)
            for m in np.unique(ops.model_id).tolist():
                sel = ops.model_id == m
                graph = sel & ~eager & (ops.iter_row >= 0)
                if graph.any():
                    if m not in self.plans:
                        self.plans[m] = self._plan(models.get(int(m)), ops,
                                                   np.flatnonzero(graph), sigs, names)
                    hit[graph] = np.isin(ops.name_idx[graph], self.plans[m])
            # single-op mode: no upstream op to follow, only the trustlist is reduced
            single = np.flatnonzero(eager | (ops.iter_row < 0))
            if len(single):
                cube = np.isin(sigs.arrays()["cost"][ops.sig[single]], CUBE_COSTS)
                hit[single[cube]] = True
        rows = np.flatnonzero(hit)
        if not len(rows):
            return ops
        uniq, inv = np.unique(ops.sig[rows], return_inverse=True)
        new = np.array([sigs.reduced(int(s)) for s in uniq.tolist()], np.int64)
        sig = ops.sig.copy()
        sig[rows] = new[inv.reshape(-1)]
        return replace(ops, sig=sig)

