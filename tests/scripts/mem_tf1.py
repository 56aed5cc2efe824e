"""A TF1 graph trained with the graph-mode MomentumOptimizer (one slot a variable, the
`ApplyMomentum` op) for the device memory tests (tests/test_memory_e2e.py)."""
import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1
tf1.disable_eager_execution()
x = tf1.placeholder(tf.float32, (8, 64))
w = tf1.get_variable("w", (64, 32), initializer=tf1.zeros_initializer())
b = tf1.get_variable("b", (32,), initializer=tf1.zeros_initializer())
loss = tf.reduce_sum(tf.matmul(x, w) + b)
train = tf1.train.MomentumOptimizer(0.1, 0.9).minimize(loss)
with tf1.Session() as sess:
    sess.run(tf1.global_variables_initializer())
    for _ in range(3):
        sess.run(train, {x: np.ones((8, 64), np.float32)})
