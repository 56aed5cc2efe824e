"""Convolutions with ReLUs and a residual add, trained 3 steps (Keras): GE's ReLU bit mask
and the input gradients' fusion with the ReLU gradient and the residual's AddN
(docs/device-model.md 3.1, 3.4)."""
import numpy as np
import tensorflow as tf

x = np.random.default_rng(0).random((48, 16, 16, 8), dtype=np.float32)
y = np.arange(48) % 4
inp = tf.keras.Input((16, 16, 8))
a = tf.keras.layers.Conv2D(16, 3, padding="same", activation="relu", name="conv_a")(inp)
b = tf.keras.layers.Conv2D(16, 3, padding="same", activation="relu", name="conv_b")(a)
c = tf.keras.layers.Conv2D(16, 3, padding="same", name="conv_c")(b)
h = tf.keras.layers.ReLU(name="block_relu")(tf.keras.layers.Add(name="block_add")([c, a]))
h = tf.keras.layers.GlobalAveragePooling2D()(h)
model = tf.keras.Model(inp, tf.keras.layers.Dense(4)(h))
model.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(x, y, batch_size=16, epochs=1, verbose=0)
