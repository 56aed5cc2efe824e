"""A tiny Keras fit fed by tf.data, varied by environment for the CI gate tests
(tests/test_summary_e2e.py): WIDTH (units of the hidden Dense, default 32), CONV=1 (adds a
Conv2D), SLOW_MS (a host-side sleep per batch in the input pipeline, default 0)."""
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

WIDTH = int(os.environ.get("WIDTH", "32"))
SLOW_S = float(os.environ.get("SLOW_MS", "0")) / 1000
rng = np.random.default_rng(0)
x = rng.random((96, 8, 8, 2), dtype=np.float32)
y = rng.integers(0, 4, size=96)


def slow(a, b):  # a Python map on the host: the input pipeline, never the device
    a = tf.numpy_function(lambda v: (SLOW_S and time.sleep(SLOW_S), v)[1], [a], tf.float32)
    a.set_shape([8, 8, 8, 2])
    return a, b


# the map is always there (the same graph); only its host-side sleep differs
ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(8).map(slow).prefetch(1)
layers = [tf.keras.Input((8, 8, 2))]
if os.environ.get("CONV"):
    layers.append(tf.keras.layers.Conv2D(8, 3, padding="same", activation="relu"))
layers += [tf.keras.layers.Flatten(), tf.keras.layers.Dense(WIDTH, activation="relu"),
           tf.keras.layers.Dense(4)]
model = tf.keras.Sequential(layers, name="ci_model")
model.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(ds, epochs=1, verbose=0)
print("done")
