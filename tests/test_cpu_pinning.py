"""Which ops the script pinned to the CPU (collect/tf_graphs.script_pinned_to_cpu): a
`tf.device` scope pins, colocation with an eagerly created variable (whose device is `CPU:0`
on any CPU-only machine) does not, colocation with an op a scope placed does."""
from __future__ import annotations

import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
tf = pytest.importorskip("tensorflow")

from msprof_cli.collect.tf_graphs import script_pinned_to_cpu, walk_graph  # noqa: E402


def _ops(fn, *args) -> dict:  # type: ignore[no-untyped-def]
    graph = tf.function(fn).get_concrete_function(*args).graph
    return {op.name: op for op in graph.get_operations()}


def test_a_device_scope_pins_and_a_variables_colocation_does_not() -> None:
    var = tf.Variable(tf.ones((4, 4)), name="weights")
    assert "CPU:0" in var.device  # the eager placement every variable gets here

    def step(x):  # type: ignore[no-untyped-def]
        with tf.device("/cpu:0"):
            pinned = tf.square(x, name="pinned")
        with tf.compat.v1.colocate_with(var):
            update = var.assign_add(pinned, name="update")
        return tf.identity(update, name="free")

    ops = _ops(step, tf.ones((4, 4)))
    assert script_pinned_to_cpu(ops["pinned"])
    assert "CPU" in ops["update"].device and not script_pinned_to_cpu(ops["update"])
    assert not script_pinned_to_cpu(ops["free"])


def test_a_lookup_under_a_scope_stays_pinned_through_its_colocation() -> None:
    table = tf.Variable(tf.ones((10, 4)), name="table")

    def lookup(ids):  # type: ignore[no-untyped-def]
        with tf.device("/cpu:0"):
            return tf.nn.embedding_lookup(table, ids)

    graph = tf.function(lookup).get_concrete_function(tf.constant([1, 2])).graph
    static = walk_graph(graph)
    gathers = [n for n, op in static.ops.items() if op.type == "ResourceGather"]
    assert gathers and all(static.ops[n].cpu_pinned for n in gathers)
