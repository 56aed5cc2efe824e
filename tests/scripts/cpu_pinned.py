"""A tf.function whose embedding lookup the script pins to the CPU (`tf.device("/cpu:0")`,
as recommendation models do), the rest unpinned: 3 steps."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

table = tf.Variable(tf.random.uniform((1000, 16)))
w = tf.Variable(tf.random.uniform((16, 4)))


@tf.function
def step(ids):
    with tf.device("/cpu:0"):
        emb = tf.nn.embedding_lookup(table, ids)
    return tf.reduce_sum(tf.matmul(emb, w))


for _ in range(3):
    step(tf.constant([1, 2, 3, 4]))
print("pinned done")
