"""GE's LayerNorm training fusion (docs/device-model.md 3.5).

CANN's graph pass `LayerNormTrainingFusionPass` (canndev `ops/built-in/fusion_pass/graph_fusion/
ai_core/layernorm_training_fusion_pass.cc`) turns a layer norm written as `tf.nn.moments` +
`tf.nn.batch_normalization` over the last axis, together with the gradient TF 1's
`tf.gradients` builds for it, into a `LayerNorm` and a `LayerNormGrad` node; GE removes the
nodes nothing consumes any more, and `LayerNormGradFusionPass` splits the gradient into
`LayerNormXBackpropV2` (dx) + `LayerNormBetaGammaBackpropV2` (dgamma, dbeta).  So a fused layer
norm is three kernels a training step.

`plan` matches the pass's pattern on a captured graph (op types and the data edges GE sees,
`tf_graphs.data_edges`) and says what each matched op becomes: one of the three kernels (with
its tensors) or `FOLDED` (no task).  The checks are the pass's: the forward arithmetic
(ReduceMean, SquaredDifference, ReduceMean, Add, Rsqrt, Mul x3, Sub, Add; keep_dims over the
last axis), RsqrtGrad consuming the Rsqrt, the gradient's Sub consuming the mean and its Mul
feeding the AddN into x, and that AddN's inputs in TF 1's order (the x*inv term third from
last, the SquaredDifference term second from last).  TF 2's GradientTape builds another
order, but GE receives the graph after Grappler, whose AddOpsRewrite rebuilds the AddN: in
the graphs collected from `model.fit` tf_keras' LayerNormalization matches.  Keras 3 writes the
arithmetic differently and never matches.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from msprof_cli.capture import TensorSpec

LAYER_NORM = "LayerNorm"
X_BACKPROP = "LayerNormXBackpropV2"
BETA_GAMMA_BACKPROP = "LayerNormBetaGammaBackpropV2"
FOLDED = "NoOp"  # runs inside the fused kernels: no task of its own

_ADD = frozenset({"Add", "AddV2"})
_SUM = frozenset({"Sum"})
_MUL_DIV = frozenset({"Mul", "RealDiv"})


@dataclass(frozen=True)
class Rewrite:
    """What GE runs for a matched op: a fused kernel's type and tensors, or FOLDED."""

    tf_type: str
    inputs: tuple[TensorSpec, ...] = ()
    outputs: tuple[TensorSpec, ...] = ()


class _Graph:
    def __init__(self, types: Mapping[str, str], producers: Mapping[str, tuple[str, ...]],
                 inputs: Mapping[str, tuple[TensorSpec, ...]],
                 outputs: Mapping[str, tuple[TensorSpec, ...]]) -> None:
        self.types, self.producers, self.inputs, self.outputs = types, producers, inputs, outputs
        self.consumers: dict[str, list[str]] = {}
        for name, prods in producers.items():
            for p in prods:
                self.consumers.setdefault(p, []).append(name)

    def type(self, name: str | None) -> str:
        return self.types.get(name, "") if name else ""

    def prods(self, name: str) -> tuple[str, ...]:
        return self.producers.get(name, ())

    def users(self, name: str, types: frozenset[str] | None = None) -> list[str]:
        return [c for c in self.consumers.get(name, ())
                if types is None or self.types.get(c) in types]

    def other(self, name: str, known: str) -> str | None:
        """The producer of a two-input op that is not `known`."""
        rest = [p for p in self.prods(name) if p != known]
        return rest[0] if len(rest) == 1 and len(self.prods(name)) == 2 else None


def _keeps_last_axis(g: _Graph, mean: str) -> bool:
    """A ReduceMean over the last axis with keep_dims: its output is its input with the last
    dimension 1 (the pass reads the axes and keep_dims attributes; the shapes say the same)."""
    ins, outs = g.inputs.get(mean, ()), g.outputs.get(mean, ())
    if not ins or not outs:
        return False
    x, y = ins[0].shape, outs[0].shape
    return len(x) == len(y) >= 1 and y[-1] == 1 and x[:-1] == y[:-1] and x[-1] != 1


def _forward(g: _Graph, add2: str) -> dict[str, str] | None:
    """The forward pattern ending at `add2` (Add of x*mul1 and beta - mean*mul1)."""
    for mul3 in g.prods(add2):
        sub = g.other(add2, mul3)
        if g.type(mul3) != "Mul" or g.type(sub) != "Sub":
            continue
        mul2 = g.prods(sub)[1] if len(g.prods(sub)) == 2 else None
        if g.type(mul2) != "Mul":
            continue
        for mul1 in g.prods(mul3):
            if g.type(mul1) != "Mul" or mul1 not in g.prods(mul2):
                continue
            x, mean1 = g.other(mul3, mul1), g.other(mul2, mul1)
            rsqrt = next((p for p in g.prods(mul1) if g.type(p) == "Rsqrt"), None)
            if x is None or g.type(mean1) != "Mean" or rsqrt is None:
                continue
            add1 = g.prods(rsqrt)[0] if g.prods(rsqrt) else None
            mean2 = next((p for p in g.prods(add1) if g.type(p) == "Mean"), None) \
                if g.type(add1) in _ADD else None
            sqdiff = g.prods(mean2)[0] if mean2 and g.prods(mean2) else None
            if (g.type(sqdiff) != "SquaredDifference" or set(g.prods(sqdiff)) != {x, mean1}
                    or g.prods(mean1)[:1] != (x,)):
                continue
            if not (_keeps_last_axis(g, mean1) and _keeps_last_axis(g, mean2)):
                continue
            return {"x": x, "gamma": g.other(mul1, rsqrt) or "", "beta": g.prods(sub)[0],
                    "mean1": mean1, "sqdiff": sqdiff, "mean2": mean2, "add1": add1,
                    "rsqrt": rsqrt, "mul1": mul1, "mul2": mul2, "mul3": mul3, "sub": sub,
                    "add2": add2}
    return None


def _backward(g: _Graph, f: dict[str, str]) -> dict[str, str] | None:
    """The gradient the pass requires: RsqrtGrad of the Rsqrt, the Sub of the mean whose Mul
    feeds the AddN into x, that AddN's last inputs in TF 1's order, dy's four consumers."""
    if not g.users(f["rsqrt"], frozenset({"RsqrtGrad"})):
        return None
    for grad_sub in g.users(f["mean1"], frozenset({"Sub"})):
        for mul7 in g.users(grad_sub, frozenset({"Mul"})):
            for add_n in g.users(mul7, frozenset({"AddN"})):
                ins = g.prods(add_n)
                n = len(ins)
                if n < 3 or sum(g.type(p) in _MUL_DIV for p in ins) < 3 or ins[n - 2] != mul7:
                    continue
                mul1 = ins[n - 3]
                dy = g.other(mul1, f["mul1"]) if g.type(mul1) == "Mul" else None
                if dy is None:
                    continue
                users = g.consumers.get(dy, [])
                kinds = sorted(g.type(u) for u in users)
                sums = [u for u in users if g.type(u) in _SUM]
                if len(users) != 4 or kinds.count("Mul") != 2 or "Neg" not in kinds \
                        or len(sums) != 1:
                    continue
                # dgamma: the Sum of the Mul of rsqrt and the gradient of rsqrt * gamma
                dgamma = next((s for m in g.users(f["rsqrt"], frozenset({"Mul"}))
                               if m != f["mul1"] for s in g.users(m, _SUM)), None)
                if dgamma is None or dgamma == sums[0]:
                    continue
                return {"dy": dy, "add_n": add_n, "grad_mul1": mul1, "dbeta": sums[0],
                        "dgamma": dgamma}
    return None


# ops whose effect is not their output: a branch ending in one of them is needed
_EFFECT_PREFIXES = ("Apply", "ResourceApply", "SparseApply", "ResourceSparseApply", "Assign",
                    "ResourceScatter", "Scatter", "Send", "_Send", "Hccl", "Collective",
                    "NcclAllReduce", "Print", "Write", "Save")
_FETCH = frozenset({"_Retval", "_DeviceRetval"})


def _fruitless(g: _Graph, node: str, memo: dict[str, bool | None]) -> bool:
    """Whether nothing that needs `node` has an effect or is returned: a gradient branch TF
    builds for a constant or a stop_gradient (ending in `tuple/control_dependency` identities
    nothing reads), which the session prunes before GE sees the graph.  A loop counts as
    needed; so would a tf.identity the script fetches inside a layer norm's gradient, which
    this cannot tell from a pruned branch.  Iterative (graphs have 100k nodes), memoised
    across calls (None: being visited)."""
    stack = [node]
    while stack:
        n = stack[-1]
        if memo.get(n) is not None:
            stack.pop()
            continue
        users = g.consumers.get(n, ())
        if n not in memo:
            memo[n] = None
            t = g.type(n)
            if t.startswith(_EFFECT_PREFIXES) or (not users and t in _FETCH):
                memo[n] = False
                stack.pop()
                continue
            pending = [c for c in users if c not in memo]
            if pending:
                stack.extend(pending)
                continue
        memo[n] = all(memo.get(c) is True for c in users)
        stack.pop()
    return bool(memo[node])


def _dead(g: _Graph, outputs: list[str], boundary: set[str],
          memo: dict[str, bool | None]) -> set[str]:
    """The nodes GE removes once the fused gradient replaces `outputs`: every producer of a
    removed node that nothing else (needed) consumes, up to the fused node's inputs
    (`boundary`)."""
    dead = set(outputs)
    todo = list(outputs)
    while todo:
        node = todo.pop()
        for p in g.prods(node):
            if p in dead or p in boundary or p not in g.types:
                continue
            if all(c in dead or _fruitless(g, c, memo) for c in g.consumers.get(p, ())):
                dead.add(p)
                todo.append(p)
    return dead


def _spec(specs: Mapping[str, tuple[TensorSpec, ...]], name: str, k: int = 0
          ) -> tuple[TensorSpec, ...]:
    got = specs.get(name, ())
    return got[k:k + 1]


def plan(types: Mapping[str, str], producers: Mapping[str, tuple[str, ...]],
         inputs: Mapping[str, tuple[TensorSpec, ...]],
         outputs: Mapping[str, tuple[TensorSpec, ...]]) -> dict[str, Rewrite]:
    """op name -> what GE runs for it, for every layer norm the pass fuses (module doc).
    `types` are TensorFlow op types, `producers` the looked-through data edges."""
    g = _Graph(types, producers, inputs, outputs)
    out: dict[str, Rewrite] = {}
    memo: dict[str, bool | None] = {}
    for add2 in sorted(n for n, t in types.items() if t in _ADD):
        if add2 in out:
            continue
        f = _forward(g, add2)
        if f is None or any(f[k] in out for k in f):
            continue
        b = _backward(g, f)
        if b is None:
            continue
        x_spec = _spec(inputs, f["mean1"])
        gamma = _spec(outputs, f["gamma"]) or _spec(inputs, f["mul1"], 1)
        beta = _spec(inputs, f["sub"])
        mean, var = _spec(outputs, f["mean1"]), _spec(outputs, f["mean2"])
        dy = x_spec  # the gradient of the output, shaped as x
        res = tuple(TensorSpec(t.shape, "float32") for t in x_spec)
        n_in = len(g.prods(b["add_n"]))
        dx_node = b["add_n"] if n_in == 3 else b["grad_mul1"]
        forward = [f[k] for k in ("mean1", "sqdiff", "mean2", "add1", "rsqrt", "mul1", "mul2",
                                  "mul3", "sub")]
        # LayerNormGrad: inputs dy, x, variance, mean, gamma; outputs dx, dgamma, dbeta
        boundary = {b["dy"], f["x"], f["mean1"], f["rsqrt"], f["gamma"], f["mean2"]}
        if n_in > 3:  # the AddN keeps its other inputs (GE drops its last two)
            grad_outs = [b["grad_mul1"], *g.prods(b["add_n"])[n_in - 2:], b["dgamma"],
                         b["dbeta"]]
        else:
            grad_outs = [b["add_n"], b["dgamma"], b["dbeta"]]
        backward = _dead(g, grad_outs, boundary, memo)
        if any(n in out for n in backward) or f["add2"] in backward:
            continue
        for n in forward:
            out[n] = Rewrite(FOLDED)
        for n in backward:
            out[n] = Rewrite(FOLDED)
        out[f["add2"]] = Rewrite(LAYER_NORM, x_spec + gamma + beta,
                                 _spec(outputs, f["add2"]) + mean + var)
        out[dx_node] = Rewrite(X_BACKPROP, dy + x_spec + var + mean + gamma, x_spec + res)
        out[b["dgamma"]] = Rewrite(BETA_GAMMA_BACKPROP, dy + res, gamma + beta)
    return out
