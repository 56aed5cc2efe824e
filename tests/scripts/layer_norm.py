"""A Keras token MLP with two LayerNormalization layers (written as moments and element-wise
ops by Keras, and by tf_keras for a small epsilon): 1 epoch x 3 steps."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

keras = tf.keras
rng = np.random.default_rng(0)
x = rng.random((48, 16, 64), dtype=np.float32)
y = rng.random((48, 16, 1), dtype=np.float32)
model = keras.Sequential([keras.Input(shape=(16, 64)),
                          keras.layers.Dense(128, activation="relu"),
                          keras.layers.LayerNormalization(epsilon=1e-12),
                          keras.layers.Dense(64),
                          keras.layers.LayerNormalization(epsilon=1e-12),
                          keras.layers.Dense(1)], name="ln")
model.compile("sgd", "mse")
model.fit(x, y, batch_size=16, epochs=1, verbose=0)
print("layer norm done")
