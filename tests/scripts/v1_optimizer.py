"""A tf.function training step with TensorFlow's v1 optimizers (`tf.compat.v1.train`, as TF 1
scripts and the Keras 2 optimizers apply gradients: one fused update op a variable, colocated
with the variable), beside a lookup the script pins to the CPU: 3 steps."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

table = tf.Variable(tf.random.uniform((1000, 16)), name="table")
w1 = tf.Variable(tf.random.uniform((16, 64)), name="w1")
w2 = tf.Variable(tf.random.uniform((64, 4)), name="w2")
momentum = tf.compat.v1.train.MomentumOptimizer(0.01, momentum=0.9)
adam = tf.compat.v1.train.AdamOptimizer(1e-3)


@tf.function
def step(ids):
    with tf.device("/cpu:0"):
        emb = tf.nn.embedding_lookup(table, ids)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.matmul(tf.nn.relu(tf.matmul(emb, w1)), w2))
    g1, g2 = tape.gradient(loss, [w1, w2])
    momentum.apply_gradients([(g1, w1)])
    adam.apply_gradients([(g2, w2)])
    return loss


for _ in range(3):
    step(tf.constant(list(range(32))))
print("v1 optimizer done")
