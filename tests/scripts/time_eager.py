"""Eager (single-op mode) matmuls of growing size (tests/test_time_model_e2e.py): each op
carries its real shapes and costs more when it is bigger."""
import tensorflow as tf

for n in (64, 256, 1024):
    a = tf.random.stateless_uniform((n, n), seed=(1, 2))
    for _ in range(3):
        b = tf.matmul(a, a)
print("eager done", float(tf.reduce_sum(b)) > 0)
