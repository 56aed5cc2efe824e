"""Which ops the script pinned to the CPU (collect/tf_graphs.script_pinned_to_cpu): a
`tf.device` scope pins, colocation with an eagerly created variable (whose device is `CPU:0`
on any CPU-only machine) does not, colocation with an op a scope placed does.  TensorFlow runs
in a child process: the test process stays free of it (other tests check what an imported
TensorFlow changes)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

PROBE = r'''
import json, os
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf
from msprof_cli.collect.tf_graphs import script_pinned_to_cpu, walk_graph

var = tf.Variable(tf.ones((4, 4)), name="weights")
table = tf.Variable(tf.ones((10, 4)), name="table")


def step(x):
    with tf.device("/cpu:0"):
        pinned = tf.square(x, name="pinned")
    with tf.compat.v1.colocate_with(var):
        update = var.assign_add(pinned, name="update")
    return tf.identity(update, name="free")


def lookup(ids):
    with tf.device("/cpu:0"):
        return tf.nn.embedding_lookup(table, ids)


ops = {op.name: op for op in
       tf.function(step).get_concrete_function(tf.ones((4, 4))).graph.get_operations()}
static = walk_graph(tf.function(lookup).get_concrete_function(tf.constant([1, 2])).graph)
print(json.dumps({
    "variable_device": var.device,
    "pinned": script_pinned_to_cpu(ops["pinned"]),
    "update_device": ops["update"].device,
    "update": script_pinned_to_cpu(ops["update"]),
    "free": script_pinned_to_cpu(ops["free"]),
    "gathers": [op.cpu_pinned for op in static.ops.values() if op.type == "ResourceGather"],
}))
'''


@pytest.fixture(scope="module")
def probe() -> dict:
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_device_scope_pins_and_a_variables_colocation_does_not(probe: dict) -> None:
    assert "CPU:0" in probe["variable_device"]  # the eager placement every variable gets here
    assert probe["pinned"]
    assert "CPU" in probe["update_device"] and not probe["update"]
    assert not probe["free"]


def test_a_lookup_under_a_scope_stays_pinned_through_its_colocation(probe: dict) -> None:
    assert probe["gathers"] and all(probe["gathers"])
