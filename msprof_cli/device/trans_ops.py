"""GE's boundary tasks: a TransData where a tensor changes layout, a Cast where it changes
precision (docs/device-model.md 3.4).

GE gives every kernel the formats and dtypes its ops-info supports and inserts conversion
nodes wherever a producer's output and a consumer's input disagree ("trans nodes", named
`trans_TransData_<n>` / `trans_Cast_<n>` in a real op_summary).  They are real AI Core tasks:
memory-bound, one per converted tensor, shared by every consumer that needs the same
conversion.

Layouts (fractal.py): convolutions, their backprops, pooling and BatchNorm work on 4-D
feature maps in NC1HWC0; matmuls on FRACTAL_NZ operands; every other AI Core kernel is format
agnostic and keeps the layout of its input of the output's shape (FE's format propagation);
the AI CPU works on ND.  A TransData is inserted where a consumer that needs a blocked layout
(or the AI CPU) receives a tensor in another one: the graph's fed inputs (ND), a tensor that
crossed a reshape (a reshape of a blocked tensor is a reshape of its ND view), a matmul result
entering a convolution and back.  Variables adapt: GE stores a variable in the format its
consumers need (its variable format pass), so weights are not converted every step.

Precisions (precision.py): a Cast converts a tensor between fp32 and fp16 wherever the
producer's output precision differs from what the consumer computes in: in the default
`allow_fp32_to_fp16` mode around every cube op (the cube computes only fp16 and int8; the
vector kernels around it keep fp32), under `allow_mix_precision` at the edges of the fp16
region (fp32 weights into fp16 convolutions, fp16 gradients into the fp32 optimizer update).
The rank-1 parameters of BatchNorm (scale, offset, mean, variance) stay fp32.

Planning runs once per model over its data-flow edges (`ModelInfo.producers`, topological
order `ModelInfo.op_order`); per chunk the planned nodes become op rows placed just before
their first consumer (vectorised), and the model's edges run through them, so UB fusion,
the dependencies and the host records see them as GE's graph has them.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from msprof_cli.capture import ModelInfo, TensorSpec
from msprof_cli.device import atomic_clean as AC
from msprof_cli.device import fractal as FR
from msprof_cli.device import op_map
from msprof_cli.device import relu_mask as RM
from msprof_cli.device import split_kernels as SK
from msprof_cli.device.op_table import CUBE_COSTS, DT_FP16, Interner, OpTable, SignatureRegistry

ND, NC1HWC0, FRACTAL_NZ, FRACTAL_Z = "ND", "NC1HWC0", "FRACTAL_NZ", "FRACTAL_Z"
ANY = "ANY"  # a variable (or an unknown source): stored in whatever format its consumers need

# kernels that work on 4-D feature maps in NC1HWC0 (TBE conv2d / pooling / BNTraining*)
FIVE_HD_TYPES = frozenset({
    "Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "DepthwiseConv2D",
    "DepthwiseConv2DBackpropInput", "DepthwiseConv2DBackpropFilter", "BatchNorm",
    "BatchNormGrad", "MaxPool", "MaxPoolGrad", "AvgPool", "AvgPoolGrad"})
FILTER_GRAD_TYPES = frozenset({"Conv2DBackpropFilter", "DepthwiseConv2DBackpropFilter"})
# kernels whose operands are FRACTAL_NZ (TBE matmul / batch_matmul on the cube)
NZ_TYPES = frozenset({"MatMulV2", "BatchMatMul", "BatchMatMulV2"})
# graph inputs the host feeds: ND (the layout TensorFlow hands over)
FEED_TF_TYPES = frozenset({"IteratorGetNext", "IteratorGetNextSync", "IteratorGetNextAsOptional",
                           "MultiDeviceIteratorGetNextFromShard", "Placeholder",
                           "PlaceholderWithDefault"})
FLOATS = ("float32", "float16")
MAX_WALK = 256  # nodes looked through per consumer (bounds a pathological graph)


def _is_variable_read(name: str, node: "Node | None") -> bool:
    if node is not None:
        return node.tf_type in ("ReadVariableOp", "ResourceGather", "VarHandleOp",
                                "VariableV2", "Variable")
    return name.rsplit("/", 1)[-1].startswith(("ReadVariableOp", "read"))


def _is_constant(name: str) -> bool:
    """GE folds the conversion of a constant at compile time."""
    return name.rsplit("/", 1)[-1].startswith("Const")


@dataclass(frozen=True)
class Node:
    """What the planner needs of one graph node that ran in the step."""

    tf_type: str
    ge_type: str
    kind: int  # op_map.KIND_*
    half: bool  # computes in fp16 (the precision mode's choice, precision.py)
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    fused: bool = False  # a Grappler-fused op (an epilogue after its main op)


@dataclass(frozen=True)
class Boundary:
    """One inserted node: `tf_type` "TransData" or "Cast", reading `producer`'s `source`
    and giving `target`; it runs just before `anchor`, its first consumer."""

    name: str
    tf_type: str
    producer: str
    source: TensorSpec
    target: TensorSpec
    anchor: str


@dataclass
class Plan:
    boundaries: list[Boundary]
    producers: dict[str, tuple[str, ...]]  # the model's edges running through them
    order: dict[str, float]  # their place in GE's task order
    # nodes GE runs as two kernels (split_kernels.py): node -> the kernel run before it
    splits: dict[str, str] = field(default_factory=dict)
    # the ReLUs GE gives a bit mask (relu_mask.py): node -> the GE type it runs as
    relu_masks: dict[str, str] = field(default_factory=dict)
    training: bool = False  # the graph has a BatchNorm gradient


def _same_shape(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    return len(a) == len(b) and all(x == y or x is None or y is None or x < 0 or y < 0
                                    for x, y in zip(a, b))


def required_format(node: Node, spec: TensorSpec) -> str | None:
    """The layout `node` needs for an input of `spec`; None: any (format agnostic)."""
    if node.kind == op_map.KIND_AI_CPU:
        return ND
    if node.kind != op_map.KIND_AI_CORE:
        return None
    if node.ge_type in FIVE_HD_TYPES and len(spec.shape) == 4:
        return NC1HWC0
    if node.ge_type in NZ_TYPES and len(spec.shape) >= 2:
        return FRACTAL_NZ
    return None


def required_dtype(node: Node, spec: TensorSpec) -> str:
    if (node.half and spec.dtype in FLOATS
            and not (node.ge_type in FIVE_HD_TYPES and len(spec.shape) <= 1)):
        return "float16"
    return spec.dtype


def _output_state(node: Node, k: int, in_states: list[tuple[str, str, tuple[int, ...]]]
                  ) -> tuple[str, str]:
    """(layout, dtype) of output `k` of a launched node."""
    spec = node.outputs[k]
    dtype = "float16" if node.half and spec.dtype in FLOATS else spec.dtype
    if node.ge_type in FILTER_GRAD_TYPES:
        # the 910's Conv2DBackpropFilterD reads fp16 and writes the weight gradient in fp32
        # (aic-ascend910-ops-info.ini: output0.dtype=float32, output0.format=FRACTAL_Z)
        dtype = spec.dtype
    if node.kind == op_map.KIND_AI_CPU:
        return ND, dtype
    if node.ge_type in FILTER_GRAD_TYPES and len(spec.shape) == 4:
        return FRACTAL_Z, dtype  # a filter's gradient, in the filter's layout
    if node.ge_type in FIVE_HD_TYPES and len(spec.shape) == 4:
        return NC1HWC0, dtype
    if node.ge_type in NZ_TYPES and len(spec.shape) >= 2:
        return FRACTAL_NZ, dtype
    # format agnostic: the layout of the input with the output's shape (a reduction or a
    # reshaping kernel gives ND; a pad, slice or concatenation TBE runs on 5HD keeps it)
    if any(f == NC1HWC0 for f, _d, _s in in_states) and FR.keeps_5hd(
            node.ge_type, [s for _f, _d, s in in_states], spec.shape):
        return NC1HWC0, dtype
    for fmt, _dt, shape in in_states:
        if _same_shape(shape, spec.shape):
            return fmt, dtype
    return ND, dtype


class _Planner:
    def __init__(self, producers: dict[str, tuple[str, ...]], order: dict[str, int],
                 nodes: dict[str, Node], first_id: int) -> None:
        self.producers = producers
        self.order = order
        self.nodes = nodes
        self.next_id = first_id
        # node -> per output (layout, dtype, shape)
        self.state: dict[str, list[tuple[str, str, tuple[int, ...]]]] = {}
        self.made: dict[tuple, str] = {}  # (producer, layout, dtype, shape) -> inserted node
        self.boundaries: list[Boundary] = []
        self.new_producers: dict[str, tuple[str, ...]] = {}
        self.at_anchor: dict[str, list[str]] = {}
        # nodes GE runs as two kernels (split_kernels.py)
        self.training = any(n.ge_type == SK.BN_GRAD for n in nodes.values())
        self.splits: dict[str, str] = {}
        self.features_of: dict[str, str | None] = {}  # ReluGrad -> what its features read

    def terminals(self, name: str) -> list[tuple[str, bool]]:
        """The nodes `name` really reads, in input order: its producers looked through the
        nodes without a task of their own (a Grappler-fused op carries the name of its last
        node, whose producers are the fused nodes).  Each with whether the path read a
        variable (a `ReadVariableOp`)."""
        out: list[tuple[str, bool]] = []
        seen: set[str] = set()
        stack = [(p, False) for p in reversed(self.producers.get(name, ())) if p != name]
        steps = 0
        while stack and steps < MAX_WALK:
            steps += 1
            p, via_var = stack.pop()
            if p in seen:
                continue
            seen.add(p)
            node = self.nodes.get(p)
            var = via_var or _is_variable_read(p, node)
            prods = self.producers.get(p, ())
            if p in self.state or not prods:
                out.append((p, var))
                continue
            stack.extend((q, var) for q in reversed(prods) if q != p)
        return out

    def terminal_state(self, name: str, via_var: bool, spec: TensorSpec
                       ) -> tuple[str, str, tuple[int, ...]]:
        """What consumer input `spec` receives from terminal `name`."""
        got = self.state.get(name)
        if got:
            for st in got:
                if _same_shape(st[2], spec.shape):
                    return st
            # crossed a reshape: the ND view of the tensor
            return ND if got[0][0] != ANY else ANY, got[0][1], spec.shape
        # a source: a variable adapts, a graph input arrives as the host hands it over
        fmt = ANY if via_var or _is_constant(name) else ND
        return fmt, spec.dtype, spec.shape

    def visit_unlaunched(self, name: str) -> None:
        node = self.nodes.get(name)
        if node is not None and node.tf_type in FEED_TF_TYPES:
            self.state[name] = [(ND, o.dtype, o.shape) for o in node.outputs]

    def insert(self, kind: str, producer: str, src: tuple[str, str, tuple[int, ...]],
               fmt: str, dtype: str, anchor: str) -> tuple[str, tuple[str, str, tuple]]:
        key = (producer, fmt, dtype, src[2])
        hit = self.made.get(key)
        dst = (fmt, dtype, src[2])
        if hit is not None:
            return hit, dst
        name = f"trans_{kind}_{self.next_id}"
        self.next_id += 1
        shape = tuple(int(d) if d is not None else -1 for d in src[2])
        self.boundaries.append(Boundary(
            name, kind, producer, TensorSpec(shape, src[1], src[0] if src[0] != ANY else ND),
            TensorSpec(shape, dtype, fmt if fmt != ANY else ND), anchor))
        self.made[key] = name
        self.new_producers[name] = (producer,)
        self.state[name] = [dst]
        self.at_anchor.setdefault(anchor, []).append(name)
        return name, dst

    def visit_launched(self, name: str, node: Node) -> None:
        terms = self.terminals(name)
        # match the terminals to the inputs: by position when they pair up, else by shape
        pick: list[int | None] = []
        if len(terms) == len(node.inputs):
            pick = list(range(len(terms)))
        else:
            used: set[int] = set()
            for spec in node.inputs:
                k = next((i for i, (t, _v) in enumerate(terms) if i not in used and (
                    t not in self.state
                    or any(_same_shape(st[2], spec.shape) for st in self.state[t]))), None)
                if k is not None:
                    used.add(k)
                pick.append(k)
        new_terms = [t for t, _ in terms]
        in_states: list[tuple[str, str, tuple[int, ...]]] = []
        changed = False
        for spec, k in zip(node.inputs, pick):
            if k is None:
                in_states.append((ANY, spec.dtype, spec.shape))
                continue
            p, via_var = terms[k]
            st = self.terminal_state(p, via_var, spec)
            want_fmt = required_format(node, spec)
            want_dt = required_dtype(node, spec)
            if want_dt != st[1] and want_dt in FLOATS and st[1] in FLOATS:
                p, st = self.insert("Cast", p, st, st[0], want_dt, name)
                changed = True
            if want_fmt is not None and st[0] not in (want_fmt, ANY):
                p, st = self.insert("TransData", p, st, want_fmt, st[1], name)
                changed = True
            new_terms[k] = p
            in_states.append(st)
        if changed:  # GE's edges: the consumer reads the inserted nodes
            self.new_producers[name] = tuple(new_terms)
        x = SK.SPLIT_INPUT.get(node.ge_type)
        if x is not None and x < len(pick) and node.kind == op_map.KIND_AI_CORE:
            k = pick[x]
            src = self.nodes.get(new_terms[k]) if k is not None else None
            if SK.splits(node.ge_type, self.training, src.ge_type if src else None):
                self.splits[name] = SK.PARTNER[node.ge_type]
        if node.ge_type == RM.RELU_GRAD and node.kind == op_map.KIND_AI_CORE:
            k = pick[RM.FEATURES_INPUT] if len(pick) > RM.FEATURES_INPUT else None
            self.features_of[name] = new_terms[k] if k is not None else None
        self.state[name] = [(*_output_state(node, k, in_states), o.shape)
                            for k, o in enumerate(node.outputs)]

    def run(self) -> Plan:
        names = sorted(set(self.producers) | set(self.nodes),
                       key=lambda n: (self.order.get(n, 1 << 62), n))
        for name in names:
            node = self.nodes.get(name)
            if node is not None and node.kind in (op_map.KIND_AI_CORE, op_map.KIND_AI_CPU):
                self.visit_launched(name, node)
            else:
                self.visit_unlaunched(name)
        producers = dict(self.producers)
        producers.update(self.new_producers)
        order: dict[str, float] = {}
        for anchor, ins in self.at_anchor.items():
            base = self.order.get(anchor)
            if base is None:
                continue
            for k, n in enumerate(ins):  # between the op before the anchor and the anchor
                order[n] = base - 1 + (k + 1) / (len(ins) + 1)
        relu_masks = RM.pairs(
            self.features_of, {n: v.ge_type for n, v in self.nodes.items()},
            {n: v.outputs[0].shape for n, v in self.nodes.items() if v.outputs},
            {n for n, v in self.nodes.items() if v.fused})
        return Plan(self.boundaries, producers, order, self.splits, relu_masks, self.training)


def plan(producers: dict[str, tuple[str, ...]], order: dict[str, int], nodes: dict[str, Node],
         first_id: int = 0) -> Plan:
    """GE's boundary nodes of one graph (see the module doc).  `nodes`: the graph nodes that
    ran, by name; `first_id`: the number of the first inserted node."""
    return _Planner(producers, order, nodes, first_id).run()


@dataclass
class _ModelPlan:
    source: dict[str, tuple[str, ...]]  # the producers the plan was made from
    view: ModelInfo  # the model with the boundary nodes in its edges and order
    anchor_idx: np.ndarray  # per inserted node: name idx of the node it runs before
    name_idx: np.ndarray
    sig: np.ndarray
    # sorted name idx of the nodes that run under another GE type: the split ones
    # (split_kernels.RETYPE) and the masked ReLUs (relu_mask.RETYPE)
    retype_idx: np.ndarray
    retype: dict[int, str]  # name idx -> the GE type it runs as


@dataclass
class TransPass:
    """Per device: GE's TransData / Cast tasks inserted into each chunk's op table."""

    enabled: bool = True
    plans: dict[int, _ModelPlan] = field(default_factory=dict)
    next_id: int = 0  # boundary names are unique across the models of a device
    retyped: dict[tuple[int, str], int] = field(default_factory=dict)

    def views(self) -> dict[int, ModelInfo]:
        """Models as GE compiled them (their edges through the boundary nodes)."""
        return {m: p.view for m, p in self.plans.items()}

    def _plan(self, model: ModelInfo, ops: OpTable, rows: np.ndarray, sigs: SignatureRegistry,
              names: Interner) -> _ModelPlan:
        nodes: dict[str, Node] = {}
        node_sig: dict[str, int] = {}
        sig_arr = sigs.arrays()
        for n, s in zip(ops.name_idx[rows].tolist(), ops.sig[rows].tolist()):
            name = names.items[n]
            if name in nodes:
                continue
            node_sig[name] = s
            ins, outs = sigs.specs[s]
            kind = int(sigs.kind[s])
            half = kind == op_map.KIND_AI_CORE and (
                int(sig_arr["dtype_class"][s]) == DT_FP16 or sigs.cost[s] in CUBE_COSTS)
            nodes[name] = Node(sigs.tf_type[s], sigs.ge_type[s], kind, half, ins, outs,
                               sigs.n_fused[s] > 0 or RM.is_fused_norm(sigs.tf_type[s]))
        pl = plan(model.producers, model.op_order, nodes, self.next_id)
        self.next_id += len(pl.boundaries)
        order = dict(model.op_order)
        order.update(pl.order)  # type: ignore[arg-type]
        producers = pl.producers
        anchor = [names(b.anchor) for b in pl.boundaries]
        name_idx = [names(b.name) for b in pl.boundaries]
        sig = [sigs.intern(b.tf_type, (b.source,), (b.target,), 0) for b in pl.boundaries]
        retype = {names(n): t for n, t in pl.relu_masks.items()}
        for bn, partner in sorted(pl.splits.items()):
            node = nodes[bn]
            p_name = f"{bn}/{partner}"
            anchor.append(names(bn))
            name_idx.append(names(p_name))
            sig.append(SK.partner(sigs, node_sig[bn], node.inputs, partner))
            retype[names(bn)] = SK.RETYPE[node.ge_type]
            # it reads what the op reads of its input; the op reads its result
            x_from = producers.get(bn, ())
            x = SK.SPLIT_INPUT[node.ge_type]
            producers[p_name] = (x_from[x],) if x < len(x_from) else x_from[:1]
            producers[bn] = tuple(x_from) + (p_name,)
            if bn in order:
                order[p_name] = order[bn] - 1e-3  # after the node's Casts / TransData
        self._atomic_clean(model, nodes, pl.training, order, producers,
                           (anchor, name_idx, sig), sigs, names)
        view = dataclasses.replace(model, producers=producers, op_order=order)
        return _ModelPlan(model.producers, view, np.array(anchor, np.int64),
                          np.array(name_idx, np.int64), np.array(sig, np.int64),
                          np.array(sorted(retype), np.int64), retype)

    @staticmethod
    def _atomic_clean(model: ModelInfo, nodes: dict[str, Node], training: bool,
                      order: dict[str, float],
                      producers: dict[str, tuple[str, ...]],
                      rows: tuple[list[int], list[int], list[int]], sigs: SignatureRegistry,
                      names: Interner) -> None:
        """GE's one AtomicAddrClean node at the front of the graph (atomic_clean.py): the
        first row of the plan, before the graph's first launched node; every atomic node
        waits for it (its control edges)."""
        atomic = {n: b for n, v in nodes.items() if v.kind == op_map.KIND_AI_CORE
                  and (b := AC.atomic_bytes(v.ge_type, training, v.inputs, v.outputs)) > 0}
        launched = [n for n, v in nodes.items() if v.kind != op_map.KIND_NONE and n in order]
        if not atomic or not launched:
            return
        first = min(launched, key=lambda n: (order[n], n))
        clean = AC.node_name(model.model_id)
        for rows_list, value in zip(rows, (names(first), names(clean),
                                           AC.signature(sigs, sum(atomic.values())))):
            rows_list.insert(0, value)
        order[clean] = order[first] - 1 + 1e-6  # before the first node's own boundary nodes
        for n in atomic:
            producers[n] = tuple(producers.get(n, ())) + (clean,)

    def apply(self, ops: OpTable, models: dict[int, ModelInfo], sigs: SignatureRegistry,
              names: Interner) -> OpTable:
        """`ops` with each planned boundary node's row before its anchor's (a new table)."""
        if not self.enabled or not len(ops):
            return ops
        graph = ops.iter_row >= 0
        if ops.eager is not None:
            graph &= ~ops.eager
        src_rows: list[np.ndarray] = []
        plan_rows: list[np.ndarray] = []
        seq: list[np.ndarray] = []
        retype: list[tuple[np.ndarray, _ModelPlan]] = []
        for m in np.unique(ops.model_id[graph]).tolist():
            model = models.get(int(m))
            if model is None or not model.producers:
                continue
            sel = np.flatnonzero(graph & (ops.model_id == m))
            mp = self.plans.get(int(m))
            if mp is None or (mp.view is not model and mp.source is not model.producers
                              and mp.source != model.producers):  # new edges: plan again
                mp = self._plan(model, ops, sel, sigs, names)
                self.plans[int(m)] = mp
            elif mp.view is not model:
                # the collector's model again (its FP/BP choice may be new): the view takes
                # its fields and keeps GE's edges and order (UB fusion added to that order)
                mp.view = dataclasses.replace(model, producers=mp.view.producers,
                                              op_order=mp.view.op_order)
            if len(mp.retype_idx):
                at = sel[np.isin(ops.name_idx[sel], mp.retype_idx)]
                if len(at):
                    retype.append((at, mp))
            if not len(mp.anchor_idx):
                continue
            # boundary nodes grouped by anchor, in planned order
            by_anchor = np.argsort(mp.anchor_idx, kind="stable")
            anchors, first, count = np.unique(mp.anchor_idx[by_anchor], return_index=True,
                                              return_counts=True)
            pos = np.searchsorted(anchors, ops.name_idx[sel])
            pos = np.minimum(pos, len(anchors) - 1)
            hit = anchors[pos] == ops.name_idx[sel]
            r = sel[hit]
            cnt = count[pos[hit]]
            rep = np.repeat(r, cnt)
            offs = np.arange(len(rep)) - np.repeat(np.cumsum(cnt) - cnt, cnt)
            src_rows.append(rep)
            plan_rows.append(by_anchor[np.repeat(first[pos[hit]], cnt) + offs])
            seq.append(offs)
            mp_sig, mp_name = mp.sig, mp.name_idx
            plan_rows[-1] = np.stack([mp_name[plan_rows[-1]], mp_sig[plan_rows[-1]]])
        for m, mp in self.plans.items():
            if m in models:
                models[m] = mp.view
        if retype:  # the split ops run as their second kernel, the masked ReLUs as V2
            ops = dataclasses.replace(ops, sig=ops.sig.copy())
            for at, mp in retype:
                for s_, n_ in set(zip(ops.sig[at].tolist(), ops.name_idx[at].tolist())):
                    key = (s_, mp.retype[n_])
                    if key not in self.retyped:
                        rule = RM.retyped if key[1] in RM.VECTOR_OPS else SK.retyped
                        self.retyped[key] = rule(sigs, s_, key[1])
                    ops.sig[at[(ops.sig[at] == s_) & (ops.name_idx[at] == n_)]] = \
                        self.retyped[key]
        if not src_rows:
            return ops
        rep = np.concatenate(src_rows)
        nm_sig = np.concatenate(plan_rows, axis=1)
        off = np.concatenate(seq)
        n = len(ops)
        idx = np.concatenate([np.arange(n), rep])
        key = np.concatenate([2 * np.arange(n) + 1, 2 * rep])
        sub = np.concatenate([np.zeros(n, np.int64), off])
        order = np.lexsort((sub, key))
        out = ops.take(idx[order])
        inserted = order >= n
        ins_k = order[inserted] - n
        out.name_idx[inserted] = nm_sig[0][ins_k]
        out.sig[inserted] = nm_sig[1][ins_k]
        out.host_end[inserted] = out.host_start[inserted]
        out.fused_idx[inserted] = -1
        return out
