"""Keras fit of a small conv net at the batch size given in argv[1]
(tests/test_time_model_e2e.py: device task times follow the real batch)."""
import sys

import numpy as np
import tensorflow as tf

B = int(sys.argv[1])
x = np.random.default_rng(0).random((B * 3, 48, 48, 16), dtype=np.float32)
y = np.zeros((B * 3, 10), np.float32)
model = tf.keras.Sequential([tf.keras.layers.Input((48, 48, 16)),
                             tf.keras.layers.Conv2D(64, 3, padding="same", activation="relu"),
                             tf.keras.layers.GlobalAveragePooling2D(),
                             tf.keras.layers.Dense(64, activation="relu"),
                             tf.keras.layers.Dense(10)])
model.compile("sgd", "mse")
model.fit(x, y, batch_size=B, epochs=1, verbose=0)
print("done")
