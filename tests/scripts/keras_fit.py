"""Tiny Keras 3 model.fit (3 steps) that also exercises passthrough and exit codes.

Env: EXIT_CODE=<n> exits with n after training; RAISE=1 raises after training;
LOOP=1 keeps training (prints "looping" once) until a signal ends it.
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

keras = tf.keras
rng = np.random.default_rng(0)
x = rng.random((12, 8, 8, 1), dtype=np.float32)
y = rng.integers(0, 3, size=12)
model = keras.Sequential([
    keras.Input(shape=(8, 8, 1)),
    keras.layers.Conv2D(4, 3, activation="relu"),
    keras.layers.Flatten(),
    keras.layers.Dense(3),
], name="tiny_cnn")
model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(x, y, batch_size=4, epochs=1, verbose=0)
print("stdout line from the script")
print("stderr line from the script", file=sys.stderr)
if os.environ.get("LOOP"):
    print("looping", flush=True)
    while True:
        model.fit(x, y, batch_size=4, epochs=1, verbose=0)
if os.environ.get("RAISE"):
    raise RuntimeError("boom from the script")
sys.exit(int(os.environ.get("EXIT_CODE", "0")))
