"""The graph a TF1 session ran (collect/runtime_graph.py): Grappler's nodes join the walked
graph with the run's shapes, and rewired ops take the run's inputs."""
from __future__ import annotations

from types import SimpleNamespace as NS

from msprof_cli.capture import TensorSpec as T
from msprof_cli.collect.runtime_graph import add_runtime_nodes
from msprof_cli.collect.tf_graphs import StaticGraph, StaticOp, apply_runtime_shapes

F = "float32"


def node(name: str, op: str, *inputs: str) -> NS:
    return NS(name=name, op=op, input=list(inputs),
              device="/job:localhost/replica:0/task:0/device:CPU:0")


def walked() -> StaticGraph:
    """x -> relu, sigmoid; add = x + relu; add_1 = add + sigmoid; cast(add_1); mul(y, cast)."""
    g = StaticGraph()
    u = T((-1, 8), F)
    g.add("x", StaticOp("Placeholder", (), (u,), ()))
    g.add("relu", StaticOp("Relu", (u,), (u,), ("x",), (0,)))
    g.add("sigmoid", StaticOp("Sigmoid", (u,), (u,), ("x",), (0,)))
    g.add("add", StaticOp("AddV2", (u, u), (u,), ("x", "relu"), (0, 0)))
    g.add("add_1", StaticOp("AddV2", (u, u), (u,), ("add", "sigmoid"), (0, 0)))
    g.add("cast", StaticOp("Cast", (u,), (T((-1, 8), "float16"),), ("add_1",), (0,)))
    g.add("y", StaticOp("Const", (), (T((), F),), ()))
    g.add("mul", StaticOp("Mul", (u, u), (u,), ("x", "cast"), (0, 0)))
    return g


def test_grappler_nodes_join_with_the_run_shapes_and_their_consumers_are_rewired() -> None:
    g = walked()
    addn = "ArithmeticOptimizer/AddOpsRewrite_add_1"
    ran = [NS(node=[node("_SOURCE", "NoOp"), node("x", "_Arg"), node("relu", "Relu", "x"),
                    node("sigmoid", "Sigmoid", "x"),
                    node(addn, "AddN", "x", "relu:0", "sigmoid", "^relu"),
                    node("cast", "Cast", addn), node("mul", "Mul", "y", "cast:0")])]
    shapes = {"x": {0: (4, 8)}, "relu": {0: (4, 8)}, "sigmoid": {0: (4, 8)}, addn: {0: (4, 8)},
              "cast": {0: (4, 8)}, "mul": {0: (4, 8)}}
    assert add_runtime_nodes(g, ran, shapes, {addn: {0: F}}) == 3  # AddN; cast, mul rewired
    apply_runtime_shapes(g, shapes)
    op = g.ops[addn]
    assert op.type == "AddN" and op.producers == ("x", "relu", "sigmoid")  # no control input
    assert op.inputs == (T((4, 8), F),) * 3 and op.outputs == (T((4, 8), F),)
    assert g.ops["cast"].producers == (addn,) and g.ops["cast"].inputs == (T((4, 8), F),)
    # Grappler moved the constant into mul: its input is the scalar now
    assert g.ops["mul"].inputs == (T((), F), T((4, 8), "float16"))
    # launched right after its latest producer, before the cast it feeds
    assert g.order["sigmoid"] < g.order[addn] < g.order["cast"]
    # the walked nodes it replaced stay, never run: their names are no task
    assert "add" in g.ops and "add_1" in g.ops


def test_nodes_that_reported_nothing_and_plumbing_are_left_out() -> None:
    g = walked()
    before = dict(g.ops)
    ran = [NS(node=[node("ConstantFolding/zeros", "Const"), node("x/_1", "_Recv"),
                    node("relu", "Relu", "x")])]
    assert add_runtime_nodes(g, ran, {"relu": {0: (4, 8)}}, {}) == 0
    assert g.ops == before


def test_without_run_shapes_a_node_takes_the_shape_its_inputs_share() -> None:
    """A tf.function's optimized graph has no shapes: an AddN of same-shaped inputs takes
    their shape; a node whose inputs differ stays unknown."""
    g = walked()
    g.ops["x"].outputs = (T((4, 8), F),)
    for name in ("relu", "sigmoid"):
        g.ops[name].inputs, g.ops[name].outputs = (T((4, 8), F),), (T((4, 8), F),)
    addn, mixed = "ArithmeticOptimizer/AddOpsRewrite_add_1", "ArithmeticOptimizer/Mixed"
    ran = [NS(node=[node(addn, "AddN", "x", "relu", "sigmoid"),
                    node(mixed, "Mul", "x", "y")])]
    add_runtime_nodes(g, ran, {}, {})
    assert g.ops[addn].outputs == (T((4, 8), F),) and g.ops[addn].inputs == (T((4, 8), F),) * 3
    assert mixed not in g.ops
