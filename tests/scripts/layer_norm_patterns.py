"""Builds three real TensorFlow graphs of one layer norm and prints, as JSON, what GE's
LayerNormTrainingFusionPass makes of each (msprof_cli.device.layer_norm_fusion on the walked
graph): a TF 1 graph differentiated by tf.gradients, the same layer norm under a GradientTape,
and Keras 3's LayerNormalization (tests/test_layer_norm_fusion.py)."""
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

from msprof_cli.collect.op_shapes import layer_norm_plan  # noqa: E402
from msprof_cli.collect.tf_graphs import walk_graph  # noqa: E402


def layer_norm(x, gamma, beta):
    with tf.name_scope("LayerNorm"):
        mean, variance = tf.nn.moments(x, [-1], keepdims=True)
        return tf.nn.batch_normalization(x, mean, variance, beta, gamma, 1e-12)


def plan_of(graph) -> dict:
    return {n: {"type": r.tf_type, "inputs": [list(t.shape) for t in r.inputs],
                "outputs": [list(t.shape) for t in r.outputs]}
            for n, r in layer_norm_plan(walk_graph(graph)).items()}


def tf1() -> dict:
    v1 = tf.compat.v1
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, (4, 8, 32), name="x")
        gamma = v1.get_variable("gamma", (32,))
        beta = v1.get_variable("beta", (32,))
        w = v1.get_variable("w", (32, 32))
        y = layer_norm(tf.tensordot(x, w, 1), gamma, beta)
        v1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(y * y))
    return plan_of(g)


def tape() -> dict:
    x = tf.random.normal((4, 8, 32))
    gamma, beta = tf.Variable(tf.ones(32)), tf.Variable(tf.zeros(32))

    @tf.function
    def step(x):
        with tf.GradientTape() as t:
            t.watch(x)
            y = layer_norm(x, gamma, beta)
            loss = tf.reduce_sum(y * y)
        return t.gradient(loss, [x, gamma, beta])

    return plan_of(step.get_concrete_function(x).graph)


def keras3() -> dict:
    import keras

    x = tf.random.normal((4, 8, 32))
    layer = keras.layers.LayerNormalization(epsilon=1e-12)
    layer.build(x.shape)

    @tf.function
    def step(x):
        with tf.GradientTape() as t:
            t.watch(x)
            y = layer(x, training=True)
            loss = tf.reduce_sum(y * y)
        return t.gradient(loss, [x, *layer.trainable_weights])

    return plan_of(step.get_concrete_function(x).graph)


print(json.dumps({"tf1": tf1(), "tape": tape(), "keras3": keras3()}))
