"""Tiny custom loop with user annotations: msprof_cli.mstx and tf.profiler Trace ranges."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

from msprof_cli import mstx  # noqa: E402

w = tf.Variable(tf.ones((8, 4)))


@tf.function
def step(x):
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.matmul(x, w))
    w.assign_sub(0.01 * tape.gradient(loss, w))
    return loss


mstx.mark("training starts")
for i in range(3):
    with mstx.range(f"step {i}"):
        with tf.profiler.experimental.Trace("my_input", step=i):
            x = tf.random.uniform((2, 8))
        step(x)
rid = mstx.range_start("tail")
mstx.range_end(rid)
print("annotated done")
