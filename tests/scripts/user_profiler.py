"""The script runs its own tf.profiler while msprof profiles it (one profiler slot)."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf

w = tf.Variable(tf.ones((8, 4)))
@tf.function
def step(x):
    return tf.reduce_sum(tf.matmul(x, w))
tf.profiler.experimental.start(os.environ["USER_LOGDIR"])
for i in range(3):
    step(tf.ones((2, 8)))
tf.profiler.experimental.stop()
print("user profiler done")
