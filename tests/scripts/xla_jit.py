"""A jit_compile=True tf.function called 3 times: the collector must warn that XLA hides its ops."""
import os

os.environ["TF_CPP_MIN_LOG_LEVEL"]="2"
import tensorflow as tf


@tf.function(jit_compile=True)
def f(x):
    return tf.reduce_sum(tf.nn.relu(tf.matmul(x, x)))
for _ in range(3): f(tf.ones((8, 8)))
print("xla done")
