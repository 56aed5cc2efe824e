"""The graph a TF1 session really ran, from the shape run's RunMetadata (docs/collect.md
"TF1 sessions", docs/formats/tensorflow-capture.md 7.6).

Grappler rewrites a session's graph before it runs: `ArithmeticOptimizer` folds an `a + b + c`
chain into one `AddN` named `ArithmeticOptimizer/AddOpsRewrite_<last add>`, moves casts
(`.../ReorderCastLikeAndValuePreserving_<type>_<cast>`), hoists common factors, and other
optimizers add nodes of their own.  Those nodes are in no Python graph, so the graph walk
(tf_graphs.walk_graph) knows neither their shapes nor their inputs, and the ops they feed
still name the nodes they replaced.  The first run of a session graph is traced in full
(steps.py); asked for `output_partition_graphs` too, it returns the graph as it ran: every
node with its data inputs.  `add_runtime_nodes` adds the nodes the walk lacks, with the
output shapes and dtypes the run reported (`StepStats`), and rewires every node's data
inputs as they ran, so `tf_graphs.apply_runtime_shapes` then gives their inputs real shapes.

A tf.function's graph is optimized by Grappler when it is first instantiated; with TF's run
metadata and graph collection on for that first call (steps.py), the eager context reports
the optimized function graphs (`RunMetadata.function_graphs[].post_optimization_graph`),
without shapes: a node Grappler made takes the one shape its data inputs share (an AddN of an
add chain, a moved Cast), else it stays unknown.
"""
from __future__ import annotations

from typing import Any

from msprof_cli.capture import TensorSpec
from msprof_cli.collect.tf_graphs import StaticGraph, StaticOp, default_format, device_index

# partition-graph nodes that are no ops of the model: the runtime's own plumbing
_PLUMBING_PREFIX = "_"  # _Send, _Recv, _Arg, _Retval, _SOURCE...
_SKIP = frozenset({"NoOp", "ControlTrigger"})


def runtime_dtypes_from_step_stats(step_stats: Any) -> dict[str, dict[int, str]]:
    """node name -> {output slot: dtype name} the run reported."""
    from tensorflow.python.framework import dtypes

    out: dict[str, dict[int, str]] = {}
    for dev in step_stats.dev_stats:
        for ns in dev.node_stats:
            for o in ns.output:
                try:
                    name = dtypes.as_dtype(o.tensor_description.dtype).name
                except (TypeError, ValueError):
                    continue
                out.setdefault(ns.node_name, {})[o.slot] = name
    return out


def _split_input(text: str) -> tuple[str, int]:
    """`name:slot` (or `name`) of a GraphDef data input."""
    name, sep, slot = text.rpartition(":")
    if sep and slot.isdigit():
        return name, int(slot)
    return text, 0


def add_runtime_nodes(graph: StaticGraph, partition_graphs: Any,
                      shapes: dict[str, dict[int, tuple[int, ...]]],
                      dtypes: dict[str, dict[int, str]]) -> int:
    """Add the nodes of the run's partition graphs the walk did not see (with the run's
    output shapes and dtypes) and give every node the run's data inputs; returns how many
    nodes were added or rewired.  A new node takes its place in the op order right after
    its latest producer (GE's task order is topological), so it launches before the ops it
    feeds."""
    nodes = {n.name: n for pg in partition_graphs for n in pg.node
             if not n.op.startswith(_PLUMBING_PREFIX) and n.op not in _SKIP}
    wired: dict[str, tuple[tuple[str, ...], tuple[int, ...]]] = {}
    for name, n in nodes.items():
        data = [_split_input(i) for i in n.input if not i.startswith("^")]
        wired[name] = (tuple(p for p, _ in data), tuple(s for _, s in data))
    changed = 0
    new: list[str] = []
    # producers first: a new node may feed another new node
    for name in _topological([n for n in nodes if n not in graph.ops], wired):
        producers, slots = wired[name]
        inputs = tuple(_spec_of(graph, p, s) for p, s in zip(producers, slots))
        outputs = _run_outputs(shapes.get(name), dtypes.get(name, {})) or \
            _same_shape_output(nodes[name], inputs)
        if outputs is None:  # nothing says its shape: its runtime name stays unknown
            continue
        graph.add(name, StaticOp(nodes[name].op, inputs, outputs, producers, slots,
                                 device_index(nodes[name].device)))
        new.append(name)
        changed += 1
    for name in new:
        before = [graph.order[p] for p in wired[name][0] if p in graph.order]
        graph.order[name] = max(before) + 0.5 if before else graph.order[name]
    for name, (producers, slots) in wired.items():
        op = graph.ops.get(name)
        if op is None or name in new or op.producers == producers:
            continue
        if len(producers) == len(op.inputs) and all(p in graph.ops for p in producers):
            op.producers, op.slots = producers, slots
            op.inputs = tuple(_spec_of(graph, p, k) for p, k in zip(producers, slots))
            changed += 1
    if changed:
        graph.version += 1
    return changed


def _run_outputs(out_shapes: dict[int, tuple[int, ...]] | None, out_types: dict[int, str]
                 ) -> tuple[TensorSpec, ...] | None:
    """The outputs the run reported (TF1's StepStats)."""
    if not out_shapes:
        return None
    return tuple(
        TensorSpec(shape=out_shapes[k], dtype=out_types.get(k, ""),
                   format=default_format(len(out_shapes[k])))
        if k in out_shapes else TensorSpec(shape=(-2,), dtype=out_types.get(k, ""))
        for k in range(max(out_shapes) + 1))


def _same_shape_output(node: Any, inputs: tuple[TensorSpec, ...]
                       ) -> tuple[TensorSpec, ...] | None:
    """Without run shapes (a tf.function's optimized graph): a node whose data inputs all
    have one known shape (Grappler's AddN of an add chain, a moved Cast) outputs that shape,
    in its `DstT` / `T` dtype when it names one."""
    if not inputs or any(t.shape == (-2,) for t in inputs) or len({t.shape for t in inputs}) > 1:
        return None
    dtype = inputs[0].dtype
    attrs = getattr(node, "attr", {})
    for attr in ("DstT", "T"):
        if attr in attrs and attrs[attr].type:
            try:
                from tensorflow.python.framework import dtypes

                dtype = dtypes.as_dtype(attrs[attr].type).name
            except (ImportError, TypeError, ValueError):
                pass
            break
    return (TensorSpec(inputs[0].shape, dtype, inputs[0].format),)


def _spec_of(graph: StaticGraph, producer: str, slot: int) -> TensorSpec:
    """The spec of a producer's output (unknown rank if the producer is not known)."""
    op = graph.ops.get(producer)
    if op is not None and slot < len(op.outputs):
        return op.outputs[slot]
    return TensorSpec(shape=(-2,), dtype="")


def _topological(names: list[str], wired: dict[str, tuple[tuple[str, ...], tuple[int, ...]]]
                 ) -> list[str]:
    """`names` with every one after the ones of them it consumes."""
    pending, done, out = set(names), set(), []

    def visit(name: str, depth: int = 0) -> None:
        if name in done or depth > len(names):
            return
        done.add(name)
        for p in wired[name][0]:
            if p in pending:
                visit(p, depth + 1)
        out.append(name)

    for name in names:
        visit(name)
    return out
