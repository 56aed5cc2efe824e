"""A TF1 session graph Grappler rewrites: `a + b + c + d` becomes one AddN named
`ArithmeticOptimizer/AddOpsRewrite_add_2`, a cast pair is reordered, a common factor is
hoisted (tests/test_causality_e2e.py: those nodes get the shapes they ran with)."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

v1 = tf.compat.v1
v1.disable_eager_execution()
x = v1.placeholder(tf.float32, [None, 64], name="x")
w = v1.get_variable("w", [64, 64])
a = tf.matmul(x, w)
s = a + tf.nn.relu(a) + tf.sigmoid(a) + tf.tanh(a)
m = tf.cast(tf.cast(s, tf.float16), tf.float32) * 2.0
loss = tf.reduce_mean(tf.square(m)) + tf.reduce_mean(s * 3.0 + s * 5.0)
train = v1.train.GradientDescentOptimizer(0.1).minimize(loss)
with v1.Session() as sess:
    sess.run(v1.global_variables_initializer())
    for _ in range(4):
        sess.run([train, loss], {x: np.ones((32, 64), np.float32)})
print("grappler ok")
