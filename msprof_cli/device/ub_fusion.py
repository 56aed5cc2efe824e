"""GE's automatic UB fusion of element-wise chains (docs/device-model.md 3.1).

The fusion engine of GE (FE) merges chains of ElemWise/Broadcast TBE kernels into one kernel
whose intermediates stay in the AI Core's Unified Buffer (`TbeEltwiseFusionPass`: at most six
consecutive ElemWise/Broadcast nodes, static shapes).  Here:

* `plan_chains` (once per model, a loop over graph nodes): the chains, from the data-flow
  edges the collector passes (`ModelInfo.producers`).  A chain grows along an edge p -> c when
  both are element-wise AI Core kernels, p's value has no other consumer (else it must be
  written to global memory: that is a multi-output pattern, not this one) and the chain has
  fewer than `MAX_FUSED_OPS` members.
* `UbFuser.apply` (per chunk, vectorised over op rows): in each iteration where every member
  of a chain ran exactly once, the chain becomes one op row -- the last member's row, with a
  fused signature, the fused op name and the member names as `fused_ops` (fusion_op_info).
  The other members' rows are dropped.

Before those chains, FE's op-specific passes fuse up to two element-wise kernels into the
kernel that feeds them (`head_chains`; the patterns are `HEAD_PATTERNS`, from canndev
`ops/built-in/fusion_pass/buffer_fusion/ub_fusion/ai_core/`):

* `BNUpdateEltwiseFusionPass`: a training BatchNorm's update kernel (BNTrainingUpdate, or the
  one BatchNorm task of a BatchNorm after a convolution: split_kernels.py) + one element-wise
  kernel; `BNUpdateEltwiseEltwiseFusionPass`: + two, each with two inputs or two outputs
  (the residual Add, then ReluV2: relu_mask.py).  The update's other outputs (the batch
  statistics) leave the kernel as before.
* `TbeConv2DBackpropElemwiseFusionPass`: an input gradient (Conv2DBackpropInput, output not
  fp32) + AddN/Add (2 or 3 inputs of one shape and dtype) + ReluGradV2, or + ReluGradV2 or
  Add alone; `TbeDxElemwisePass`: + Relu, LeakyRelu or PRelu.

The fused kernel is one task: vector work = the sum of its members', bytes moved = what enters
the chain from outside plus what leaves its last member, one prologue (cost_model.py); a
head's cube work stays its own.  Its name is the members' names concatenated (FE
`FusionOpComm::CreateFusionOp`; longer than 512 characters: the first name + `_ub_fusion`)
and its OP Type the first member's.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from msprof_cli.capture import ModelInfo
from msprof_cli.device import op_map
from msprof_cli.device.op_table import (CUBE_COSTS, DT_FP16, DT_FP32, DT_INT8, Interner,
                                        OpTable, SignatureRegistry)
from msprof_cli.raw import layouts as L

MAX_FUSED_OPS = 6  # TbeEltwiseFusionPass: "a maximum of six consecutive ElemWise/Broadcast nodes"
MAX_NAME_LEN = 512  # FE kMaxOpNmaLen: longer concatenated names -> first name + "_ub_fusion"
MAX_ADDN_INPUTS = 6  # AddN with more inputs is not UB-fused (CANN UB fusion rule reference)

# GE types whose TBE kernels have the ElemWise / Broadcast pattern (the op_map GE names)
ELEMWISE_GE_TYPES = frozenset({
    "Add", "AddN", "Sub", "Mul", "RealDiv", "Div", "DivNoNan", "FloorDiv", "FloorMod",
    "Maximum", "Minimum", "SquaredDifference", "Square", "Sqrt", "Rsqrt", "RsqrtGrad",
    "SqrtGrad", "Reciprocal", "Exp", "Log", "Log1p", "Pow", "Neg", "Abs", "Sign", "Floor",
    "Ceil", "Round", "Erf", "Cast", "Equal", "NotEqual", "Less", "LessEqual", "Greater",
    "GreaterEqual", "LogicalAnd", "LogicalOr", "LogicalNot", "Select", "SelectV2", "Relu",
    "ReluGrad", "Relu6", "LeakyRelu", "LeakyReluGrad", "Elu", "EluGrad", "Selu", "Softplus",
    "Sigmoid", "SigmoidGrad", "Tanh", "TanhGrad", "Gelu", "BiasAdd", "ClipByValue",
    "ZerosLike", "OnesLike", "IsFinite", "ReluV2", "ReluGradV2", "PRelu",
})


@dataclass(frozen=True)
class Member:
    """What the head patterns check of an element-wise kernel."""

    ge_type: str
    n_inputs: int
    n_outputs: int
    same_inputs: bool  # every input of one shape and dtype
    elems: float  # its largest tensor's elements


def _two_ports(m: Member) -> bool:  # BNUpdateEltwiseEltwise: two outputs or two inputs
    return m.n_inputs == 2 or m.n_outputs == 2


def _dx_sum(m: Member) -> bool:
    return m.ge_type in ("AddN", "Add") and m.n_inputs in (2, 3) and m.same_inputs


HEAD_BN, HEAD_DX = "bn_update", "dx"
# head -> follower patterns, longest first: one predicate per follower
HEAD_PATTERNS: dict[str, tuple[tuple[Callable[[Member], bool], ...], ...]] = {
    HEAD_BN: ((_two_ports, _two_ports), (lambda m: True,)),
    HEAD_DX: ((_dx_sum, lambda m: m.ge_type == "ReluGradV2"),
              (lambda m: m.ge_type in ("ReluGradV2", "Add", "Relu", "LeakyRelu", "PRelu"),)),
}
BN_UPDATE_TYPES = frozenset({"BNTrainingUpdate", "BatchNorm"})
BN_TRAINING_MARKS = frozenset({"BatchNormGrad", "BNTrainingUpdateGrad", "BNTrainingReduceGrad"})
DX_TYPES = frozenset({"Conv2DBackpropInput"})


def _lane_bytes(sigs: SignatureRegistry, s: int) -> float:
    """Bytes an element of `s`'s vector work takes in a lane (cost_model.py: a cube kernel's
    epilogue at fp16, the BatchNorm kernels at fp32, others at their dtype)."""
    if sigs.cost[s] in CUBE_COSTS:
        return 2.0
    if sigs.ge_type[s] in op_map.FP32_COMPUTE_GE_TYPES:
        return 4.0
    d = sigs.dtype_class[s]
    return 2.0 if d == DT_FP16 else 1.0 if d == DT_INT8 else 4.0


def _consumers(producers: dict[str, tuple[str, ...]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, prods in producers.items():
        for p in dict.fromkeys(prods):
            out.setdefault(p, []).append(name)
    return out


def head_chains(producers: dict[str, tuple[str, ...]], heads: dict[str, tuple[str, float]],
                members: dict[str, Member], order: dict[str, int]) -> list[list[str]]:
    """Chains [head, follower, ...] of the op-specific passes (module doc).  `heads`: node ->
    (HEAD_BN / HEAD_DX, its largest tensor's elements); `members`: the element-wise kernels.
    A follower is the head's one element-wise consumer of the head's size (a BatchNorm's
    other outputs are per channel; an input gradient has no other consumer); a second
    follower is the first's only consumer.  Deterministic: heads in topological order."""
    consumers = _consumers(producers)
    big = len(order) + 1
    taken: set[str] = set()
    chains: list[list[str]] = []
    for head in sorted(heads, key=lambda x: (order.get(x, big), x)):
        kind, size = heads[head]
        cons = [c for c in sorted(consumers.get(head, ())) if c != head]
        elem = [c for c in cons if c in members and members[c].elems == size]
        if len(elem) != 1 or (kind == HEAD_DX and len(cons) != 1) or elem[0] in taken:
            continue
        line = [elem[0]]
        nxt = [c for c in consumers.get(elem[0], ()) if c != elem[0]]
        if len(nxt) == 1 and nxt[0] in members and nxt[0] not in taken:
            line.append(nxt[0])
        for pattern in HEAD_PATTERNS[kind]:
            if len(pattern) <= len(line) and all(ok(members[f]) for ok, f in
                                                 zip(pattern, line)):
                chain = [head, *line[:len(pattern)]]
                chains.append(chain)
                taken.update(chain)
                break
    return chains


def plan_chains(producers: dict[str, tuple[str, ...]], eligible: set[str],
                order: dict[str, int], max_ops: int = MAX_FUSED_OPS) -> list[list[str]]:
    """Chains (>= 2 members, in data-flow order) of the element-wise ops `eligible`.

    Deterministic: nodes are taken in topological order (`order`, then name); a node joins
    the open chain of its first producer (input order) that is eligible, has it as its only
    consumer and whose chain is shorter than `max_ops`; otherwise it starts a chain."""
    consumers: dict[str, int] = {}
    for name, prods in producers.items():
        for p in set(prods):
            consumers[p] = consumers.get(p, 0) + 1
    big = len(order) + 1
    chain_of: dict[str, list[str]] = {}
    chains: list[list[str]] = []
    for n in sorted(eligible, key=lambda x: (order.get(x, big), x)):
        joined = None
        for p in producers.get(n, ()):
            ch = chain_of.get(p)
            if (ch is not None and ch[-1] == p and consumers.get(p, 0) == 1
                    and len(ch) < max_ops):
                joined = ch
                break
        if joined is None:
            joined = []
            chains.append(joined)
        joined.append(n)
        chain_of[n] = joined
    return [c for c in chains if len(c) >= 2]


def fused_name(members: list[str]) -> str:
    name = "".join(members)
    return name if len(name) <= MAX_NAME_LEN else members[0] + "_ub_fusion"


@dataclass
class _Plan:
    name_idx: np.ndarray  # member op names (Interner ids)
    gid: np.ndarray  # global chain id per member
    pos: np.ndarray  # position in its chain


@dataclass
class UbFuser:
    """Per-model chain plans and fused signatures, kept across chunks (see module doc)."""

    enabled: bool = True
    plans: dict[int, _Plan | None] = field(default_factory=dict)
    size: list[int] = field(default_factory=list)  # per gid: members
    members: list[tuple[str, ...]] = field(default_factory=list)  # per gid
    fused_name_idx: list[int] = field(default_factory=list)  # per gid
    # per gid, per member: the input slots fed by the previous member (stay in UB)
    internal: list[tuple[tuple[int, ...], ...]] = field(default_factory=list)
    alias: dict[int, int] = field(default_factory=dict)  # member name idx -> fused name idx
    _fused_sig: dict[tuple, int] = field(default_factory=dict)
    _chains: dict[int, dict[int, tuple[int, ...]]] = field(default_factory=dict)

    # --- planning (once per model) ----------------------------------------------------------
    def _plan(self, model: ModelInfo | None, ops: OpTable, rows: np.ndarray,
              sigs: SignatureRegistry, names: Interner) -> _Plan | None:
        if model is None or not model.producers:
            return None
        sig_of: dict[int, int] = {}
        for n, s in zip(ops.name_idx[rows].tolist(), ops.sig[rows].tolist()):
            sig_of.setdefault(n, s)
        eligible: dict[str, Member] = {}
        heads: dict[str, str] = {}
        training = any(sigs.ge_type[s] in BN_TRAINING_MARKS for s in sig_of.values())
        for n, s in sig_of.items():
            if sigs.kind[s] != op_map.KIND_AI_CORE or sigs.n_fused[s] != 0:
                continue
            g = sigs.ge_type[s]
            if (sigs.cost[s] == op_map.COST_VECTOR and g in ELEMWISE_GE_TYPES
                    and not (g == "AddN" and len(sigs.in_bytes[s]) > MAX_ADDN_INPUTS)):
                ins, outs = sigs.specs[s]
                eligible[names.items[n]] = Member(
                    g, len(ins) or len(sigs.in_bytes[s]), len(outs),
                    len({(i.shape, i.dtype) for i in ins}) <= 1, sigs.max_elems[s])
            elif training and g in BN_UPDATE_TYPES:
                heads[names.items[n]] = (HEAD_BN, sigs.max_elems[s])
            elif g in DX_TYPES and sigs.dtype_class[s] != DT_FP32:
                # an fp32 dx is not fused (the pass's check)
                heads[names.items[n]] = (HEAD_DX, sigs.max_elems[s])
        chains = head_chains(model.producers, heads, eligible, model.op_order)
        taken = {m for c in chains for m in c}
        chains += plan_chains(model.producers, set(eligible) - taken, model.op_order)
        if not chains:
            return _Plan(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
        n_idx, g_idx, p_idx = [], [], []
        for ch in chains:
            gid = len(self.size)
            self.size.append(len(ch))
            self.members.append(tuple(ch))
            fname = fused_name(ch)
            f_idx = names(fname)
            self.fused_name_idx.append(f_idx)
            slots = [()] + [tuple(j for j, p in enumerate(model.producers.get(ch[k], ()))
                                  if p == ch[k - 1]) for k in range(1, len(ch))]
            self.internal.append(tuple(slots))
            if model.op_order:  # GE's task order: the fused kernel takes its last member's place
                last = model.op_order.get(ch[-1])
                if last is not None:
                    model.op_order.setdefault(fname, last)
            for k, m in enumerate(ch):
                idx = names(m)
                n_idx.append(idx)
                g_idx.append(gid)
                p_idx.append(k)
                self.alias[idx] = f_idx
        return _Plan(np.array(n_idx, np.int64), np.array(g_idx, np.int64),
                     np.array(p_idx, np.int64))

    def _signature(self, gid: int, member_sigs: tuple[int, ...],
                   sigs: SignatureRegistry) -> int:
        key = (gid, member_sigs)
        hit = self._fused_sig.get(key)
        if hit is not None:
            return hit
        internal = self.internal[gid]
        head = member_sigs[0]
        head_lane = _lane_bytes(sigs, head)
        vec = 0.0
        bytes_in = 0.0
        parts = []
        for k, s in enumerate(member_sigs):
            vec += sigs.vec_elems[s] * _lane_bytes(sigs, s) / head_lane
            ib = sigs.in_bytes[s]
            keep = [j for j in range(len(ib)) if j not in internal[k]]
            bytes_in += sum(ib[j] for j in keep) if ib else (sigs.bytes_in[s] if k == 0 else 0.0)
            t = sigs.tensors[s]
            ins = t[t["tensor_type"] == 0]
            parts.append(ins[[j for j in keep if j < len(ins)]])
        last = member_sigs[-1]
        t_last = sigs.tensors[last]
        parts.append(t_last[t_last["tensor_type"] == 1])
        tensors = np.concatenate(parts) if parts else np.zeros(0, L.TENSOR)
        idx = sigs.add_features(
            tf_type=sigs.tf_type[head], ge_type=sigs.ge_type[head], kind=op_map.KIND_AI_CORE,
            cost=sigs.cost[head], flops=sigs.flops[head], vec_elems=vec, bytes_in=bytes_in,
            bytes_out=sigs.bytes_out[last],
            max_elems=max(sigs.max_elems[s] for s in member_sigs),
            dtype_class=sigs.dtype_class[head], dtype_bytes=sigs.dtype_bytes[head],
            n_fused=len(member_sigs), tensors=tensors)
        self._fused_sig[key] = idx
        return idx

    def chains_of(self, model_id: int) -> dict[int, tuple[int, ...]]:
        """The model's planned chains: fused name idx -> its member name indices (in data-flow
        order); empty before the model's first chunk or when nothing fuses."""
        hit = self._chains.get(model_id)
        if hit is not None:
            return hit
        plan = self.plans.get(model_id)
        if plan is None or not len(plan.gid):
            return {}
        out: dict[int, tuple[int, ...]] = {}
        for g in np.unique(plan.gid).tolist():
            out[self.fused_name_idx[g]] = tuple(plan.name_idx[plan.gid == g]
                                                [np.argsort(plan.pos[plan.gid == g])].tolist())
        self._chains[model_id] = out
        return out

    # --- per chunk --------------------------------------------------------------------------
    def apply(self, ops: OpTable, models: dict[int, ModelInfo], sigs: SignatureRegistry,
              names: Interner) -> OpTable:
        """The chunk's op table with every complete chain instance fused (see module doc)."""
        if not self.enabled or not len(ops):
            return ops
        inn = ops.iter_row >= 0
        if ops.eager is not None:
            inn &= ~ops.eager
        if not inn.any():
            return ops
        n_names = len(names.items)
        gid_row = np.full(len(ops), -1, np.int64)
        pos_row = np.zeros(len(ops), np.int64)
        for m in np.unique(ops.model_id[inn]).tolist():
            sel = inn & (ops.model_id == m)
            if m not in self.plans:
                self.plans[m] = self._plan(models.get(int(m)), ops, np.flatnonzero(sel),
                                           sigs, names)
                n_names = len(names.items)
            plan = self.plans[m]
            if plan is None or not len(plan.gid):
                continue
            lut_g = np.full(n_names, -1, np.int64)
            lut_p = np.zeros(n_names, np.int64)
            lut_g[plan.name_idx] = plan.gid
            lut_p[plan.name_idx] = plan.pos
            r = np.flatnonzero(sel)
            gid_row[r] = lut_g[ops.name_idx[r]]
            pos_row[r] = lut_p[ops.name_idx[r]]
        cand = np.flatnonzero(gid_row >= 0)
        if not len(cand):
            return ops
        # a member that ran more than once in an iteration (a loop body) is not fused there
        key = ops.iter_row[cand] * n_names + ops.name_idx[cand]
        _, inv, cnt = np.unique(key, return_inverse=True, return_counts=True)
        cand = cand[cnt[inv.reshape(-1)] == 1]
        size = np.array(self.size, np.int64)
        # complete instances: every member of the chain ran in the iteration
        n_g = len(size)
        ikey = ops.iter_row[cand] * n_g + gid_row[cand]
        uk, inv, cnt = np.unique(ikey, return_inverse=True, return_counts=True)
        inv = inv.reshape(-1)
        complete = cnt == size[uk % n_g]
        cand = cand[complete[inv]]
        if not len(cand):
            return ops
        inst_keys, inst = np.unique(ops.iter_row[cand] * n_g + gid_row[cand],
                                    return_inverse=True)
        inst = inst.reshape(-1)
        inst_gid = inst_keys % n_g
        mat = np.full((len(inst_keys), MAX_FUSED_OPS), -1, np.int64)
        mat[inst, pos_row[cand]] = ops.sig[cand]
        anchor = np.full(len(inst_keys), -1, np.int64)
        last = pos_row[cand] == size[gid_row[cand]] - 1
        anchor[inst[last]] = cand[last]
        combos, cinv = np.unique(np.column_stack([inst_gid, mat]), axis=0, return_inverse=True)
        fsig = np.array([self._signature(int(c[0]), tuple(int(s) for s in c[1:] if s >= 0), sigs)
                         for c in combos], np.int64)
        inst_sig = fsig[cinv.reshape(-1)]
        # one fused_ops entry per chain used in this chunk
        used = np.unique(inst_gid)
        fused = list(ops.fused)
        f_lut = np.full(n_g, -1, np.int64)
        f_lut[used] = len(fused) + np.arange(len(used))
        fused += [self.members[g] for g in used.tolist()]
        out = OpTable(ops.device_id.copy(), ops.model_id.copy(), ops.iter_row.copy(),
                      ops.name_idx.copy(), ops.sig.copy(), ops.thread.copy(),
                      ops.host_start.copy(), ops.host_end.copy(), ops.fused_idx.copy(), fused,
                      None if ops.eager is None else ops.eager.copy())
        out.sig[anchor] = inst_sig
        out.name_idx[anchor] = np.array(self.fused_name_idx, np.int64)[inst_gid]
        out.fused_idx[anchor] = f_lut[inst_gid]
        # the fused kernel spans its members' host interval
        first = pos_row[cand] == 0
        start = np.zeros(len(inst_keys), np.int64)
        start[inst[first]] = ops.host_start[cand[first]]
        out.host_start[anchor] = np.minimum(start, ops.host_start[anchor])
        keep = np.ones(len(ops), bool)
        keep[cand] = False
        keep[anchor] = True
        return out.take(np.flatnonzero(keep))
