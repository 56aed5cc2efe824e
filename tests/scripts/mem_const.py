"""A TF1 graph whose step multiplies by a 256 x 256 fp32 constant (GE copies it to the
device when the model loads) and reshapes with a constant shape (folded away), for the device
memory tests (tests/test_memory_e2e.py)."""
import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1
tf1.disable_eager_execution()
x = tf1.placeholder(tf.float32, (8, 256))
table = tf.constant(np.linspace(0.0, 1.0, 256 * 256, dtype=np.float32).reshape(256, 256),
                    name="table")
w = tf1.get_variable("w", (256, 16), initializer=tf1.zeros_initializer())
h = tf.reshape(tf.matmul(x, table), (8, 256))
loss = tf.reduce_sum(tf.matmul(h, w))
train = tf1.train.GradientDescentOptimizer(0.1).minimize(loss)
with tf1.Session() as sess:
    sess.run(tf1.global_variables_initializer())
    for _ in range(3):
        sess.run(train, {x: np.ones((8, 256), np.float32)})
