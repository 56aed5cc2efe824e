"""Keras GRU (a while loop forward and backward), 2 training steps: TF runs the loops'
counter / condition ops ahead of their data (the step-trace FP / BP placement case)."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

rng = np.random.default_rng(1)
x = rng.normal(size=(8, 6, 3)).astype("float32")
y = (x[:, :, 0].mean(axis=1) > 0).astype("float32")
model = tf.keras.Sequential([tf.keras.Input((6, 3)), tf.keras.layers.GRU(4),
                             tf.keras.layers.Dense(1, activation="sigmoid")])
model.compile("rmsprop", "binary_crossentropy")
model.fit(x, y, batch_size=4, epochs=1, verbose=0)
print("gru done")
