"""A Conv1D autoencoder: fit, then predict twice with a partial last batch (300 and 500
samples, batch 8): the partial batch runs another graph of the same predict function."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

keras = tf.keras
rng = np.random.default_rng(0)
x = rng.random((96, 20, 1), dtype=np.float32)
model = keras.Sequential([keras.Input((20, 1)),
                          keras.layers.Conv1D(8, 3, padding="same", activation="relu"),
                          keras.layers.Conv1D(1, 3, padding="same")], name="ae")
model.compile("adam", "mse")
model.fit(x, x, batch_size=32, epochs=2, verbose=0)
a = model.predict(rng.random((300, 20, 1), dtype=np.float32), batch_size=8, verbose=0)
b = model.predict(rng.random((500, 20, 1), dtype=np.float32), batch_size=8, verbose=0)
print("predicted", a.shape, b.shape)
