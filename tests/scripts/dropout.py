"""A Keras MLP with Dropout, whose mask is drawn on the AI CPU (StatelessRandomUniformV2) and
consumed by an AI Core compare (GreaterEqual): 2 epochs x 2 steps."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

keras = tf.keras
rng = np.random.default_rng(0)
x = rng.random((64, 256), dtype=np.float32)
y = rng.integers(0, 4, size=64)
model = keras.Sequential([keras.Input(shape=(256,)), keras.layers.Dense(512, activation="relu"),
                          keras.layers.Dropout(0.5), keras.layers.Dense(4)], name="drop")
model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(x, y, batch_size=32, epochs=2, verbose=0)
print("dropout done")
