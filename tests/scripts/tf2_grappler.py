"""A tf.function Grappler rewrites when it is first instantiated: `a + b + c + d` becomes
one AddN named `ArithmeticOptimizer/AddOpsRewrite_add_2` (tests/test_causality_e2e.py: it
gets the shape it ran with)."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

w = tf.Variable(tf.ones((64, 64)) * 0.01)


@tf.function
def step(x):
    with tf.GradientTape() as tape:
        a = tf.matmul(x, w)
        s = a + tf.nn.relu(a) + tf.sigmoid(a) + tf.tanh(a)
        loss = tf.reduce_mean(tf.square(tf.cast(tf.cast(s, tf.float16), tf.float32)))
    w.assign_sub(0.1 * tape.gradient(loss, w))
    return loss


for _ in range(4):
    step(tf.ones((32, 64)))
print("grappler ok")
