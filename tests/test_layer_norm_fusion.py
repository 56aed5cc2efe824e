"""GE's LayerNormTrainingFusionPass on real TensorFlow graphs (docs/device-model.md 3.5): a
TF 1 layer norm (tf.nn.moments + tf.nn.batch_normalization, differentiated by tf.gradients)
becomes LayerNorm + LayerNormXBackpropV2 + LayerNormBetaGammaBackpropV2 with the rest folded;
the GradientTape's own graph of the same layer norm (its AddN in another order, which Grappler
rebuilds before GE sees it) and Keras 3's LayerNormalization do not match."""
from __future__ import annotations

import pytest

tf = pytest.importorskip("tensorflow")

from msprof_cli.collect.op_shapes import layer_norm_plan  # noqa: E402
from msprof_cli.collect.tf_graphs import walk_graph  # noqa: E402
from msprof_cli.device.layer_norm_fusion import (BETA_GAMMA_BACKPROP, FOLDED,  # noqa: E402
                                                 LAYER_NORM, X_BACKPROP)


def _plan(graph) -> dict:
    return layer_norm_plan(walk_graph(graph))


def _layer_norm(x, gamma, beta):
    with tf.name_scope("LayerNorm"):
        mean, variance = tf.nn.moments(x, [-1], keepdims=True)
        return tf.nn.batch_normalization(x, mean, variance, beta, gamma, 1e-12)


def test_a_tf1_layer_norm_and_its_tf_gradients_fuse_into_three_kernels() -> None:
    v1 = tf.compat.v1
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, (4, 8, 32), name="x")
        gamma = v1.get_variable("gamma", (32,))
        beta = v1.get_variable("beta", (32,))
        w = v1.get_variable("w", (32, 32))
        y = _layer_norm(tf.tensordot(x, w, 1), gamma, beta)
        v1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(y * y))
    got = _plan(g)
    kernels = {n: r for n, r in got.items() if r.tf_type != FOLDED}
    assert sorted(r.tf_type for r in kernels.values()) == sorted(
        [LAYER_NORM, X_BACKPROP, BETA_GAMMA_BACKPROP])
    by_type = {r.tf_type: (n, r) for n, r in kernels.items()}
    name, ln = by_type[LAYER_NORM]
    assert name == "LayerNorm/batchnorm/add_1"
    assert [t.shape for t in ln.inputs] == [(4, 8, 32), (32,), (32,)]
    assert [t.shape for t in ln.outputs] == [(4, 8, 32), (4, 8, 1), (4, 8, 1)]
    assert by_type[X_BACKPROP][0].startswith("gradients/AddN_")  # the AddN into x
    assert [t.shape for t in by_type[BETA_GAMMA_BACKPROP][1].outputs] == [(32,), (32,)]
    folded = {n for n, r in got.items() if r.tf_type == FOLDED}
    for op in ("LayerNorm/moments/mean", "LayerNorm/moments/SquaredDifference",
               "LayerNorm/batchnorm/Rsqrt", "LayerNorm/batchnorm/sub",
               "gradients/LayerNorm/batchnorm/Rsqrt_grad/RsqrtGrad",
               "gradients/LayerNorm/moments/SquaredDifference_grad/sub",
               "gradients/LayerNorm/batchnorm/mul_grad/Mul",
               "gradients/LayerNorm/moments/mean_grad/truediv"):
        assert op in folded, op
    assert by_type[BETA_GAMMA_BACKPROP][0] == "gradients/LayerNorm/batchnorm/mul_grad/Sum_1"
    assert "gradients/LayerNorm/batchnorm/sub_grad/Sum" in folded  # dbeta: the same kernel
    # what the fused kernels do not replace keeps running
    assert not any(n.startswith(("gradients/Tensordot", "GradientDescent")) for n in got)
    assert "Tensordot/MatMul" not in got


def test_a_tf2_tape_order_and_keras3_layer_norms_do_not_match() -> None:
    x = tf.random.normal((4, 8, 32))
    gamma, beta = tf.Variable(tf.ones(32)), tf.Variable(tf.zeros(32))

    @tf.function
    def tape_step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = _layer_norm(x, gamma, beta)
            loss = tf.reduce_sum(y * y)
        return tape.gradient(loss, [x, gamma, beta])

    assert _plan(tape_step.get_concrete_function(x).graph) == {}
    import keras

    layer = keras.layers.LayerNormalization(epsilon=1e-12)
    layer.build(x.shape)

    @tf.function
    def keras_step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x, training=True)
            loss = tf.reduce_sum(y * y)
        return tape.gradient(loss, [x, *layer.trainable_weights])

    assert _plan(keras_step.get_concrete_function(x).graph) == {}
