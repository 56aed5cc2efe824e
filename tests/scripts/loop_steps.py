"""Keras GRU over 16 time steps, 60 training steps of 4 samples: the while loop's body runs
960 times in each direction, so TF's executor learns that its kernels are cheap and stops
tracing them; sampled tracing traces step 51 again (tests/test_collect_e2e.py: traced
steps that lost their loop body)."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

x = np.random.default_rng(1).normal(size=(240, 16, 3)).astype("float32")
y = np.zeros((240, 1), "float32")
model = tf.keras.Sequential([tf.keras.Input((16, 3)), tf.keras.layers.GRU(4),
                             tf.keras.layers.Dense(1)])
model.compile("sgd", "mse")
model.fit(x, y, batch_size=4, epochs=1, verbose=0)
print("loop done")
