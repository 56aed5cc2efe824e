"""A tiny Keras model: fit (2 epochs x 3 steps), then predict twice (8 batches each), so the
predict model has more iterations than the training one."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

keras = tf.keras
rng = np.random.default_rng(0)
x = rng.random((24, 16), dtype=np.float32)
model = keras.Sequential([keras.Input(shape=(16,)), keras.layers.Dense(8, activation="relu"),
                          keras.layers.Dense(16)], name="autoencoder")
model.compile("adam", "mse")
model.fit(x, x, batch_size=8, epochs=2, verbose=0)
test = rng.random((64, 16), dtype=np.float32)
for _ in range(2):
    out = model.predict(test, batch_size=8, verbose=0)
print(f"predicted {out.shape}")
