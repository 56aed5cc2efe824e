"""TF1 Session.run token MLP with a layer norm written as BERT's reference writes it
(tf.nn.moments + tf.nn.batch_normalization over the last axis, the gradient from
tf.gradients via the optimizer): 1 init run + 3 training runs."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

v1 = tf.compat.v1
v1.disable_eager_execution()
x = v1.placeholder(tf.float32, (16, 32, 64), name="x")
w1 = v1.get_variable("w1", (64, 64))
h = tf.tensordot(x, w1, 1, name="dense")
with v1.variable_scope("LayerNorm"):
    gamma = v1.get_variable("gamma", (64,), initializer=v1.ones_initializer())
    beta = v1.get_variable("beta", (64,), initializer=v1.zeros_initializer())
    mean, variance = tf.nn.moments(h, [-1], keepdims=True)
    y = tf.nn.batch_normalization(h, mean, variance, beta, gamma, 1e-12)
w2 = v1.get_variable("w2", (64, 1))
loss = tf.reduce_mean(tf.square(tf.tensordot(y, w2, 1, name="head")))
train = v1.train.GradientDescentOptimizer(0.1).minimize(loss)
rng = np.random.default_rng(0)
with v1.Session() as sess:
    sess.run(v1.global_variables_initializer())
    for _ in range(3):
        _, value = sess.run([train, loss], {x: rng.random((16, 32, 64), dtype=np.float32)})
print(f"tf1 layer norm loss {value:.3f}")
