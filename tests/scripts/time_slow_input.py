"""A tiny Keras model fed by a deliberately slow tf.data map (tests/test_time_model_e2e.py):
the input pipeline, not the device, bounds each step."""
import time

import numpy as np
import tensorflow as tf

SLEEP_S = 0.004  # per element, in a Python map function (runs on the host)
x = np.random.default_rng(0).random((48, 8), dtype=np.float32)
y = np.zeros((48, 1), np.float32)


def slow(a, b):
    a = tf.numpy_function(lambda v: (time.sleep(SLEEP_S), v)[1], [a], tf.float32)
    a.set_shape([8])
    return a, b


ds = tf.data.Dataset.from_tensor_slices((x, y)).map(slow).batch(4).prefetch(1)
model = tf.keras.Sequential([tf.keras.layers.Input((8,)), tf.keras.layers.Dense(8),
                             tf.keras.layers.Dense(1)])
model.compile("sgd", "mse")
model.fit(ds, epochs=1, verbose=0)
print("done")
