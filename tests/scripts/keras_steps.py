"""Keras 3 model.fit with validation_data and steps_per_execution=2 (3 epochs).

12 training samples, batch 4: 3 steps per epoch = train_function calls of 2 + 1 steps;
8 validation samples: 2 evaluation steps per epoch = one test_function call.
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

keras = tf.keras
rng = np.random.default_rng(0)
x = rng.random((12, 8, 8, 1), dtype=np.float32)
y = rng.integers(0, 3, size=12)
xv = rng.random((8, 8, 8, 1), dtype=np.float32)
yv = rng.integers(0, 3, size=8)
model = keras.Sequential([
    keras.Input(shape=(8, 8, 1)),
    keras.layers.Conv2D(4, 3, activation="relu"),
    keras.layers.Flatten(),
    keras.layers.Dense(3),
], name="spe_cnn")
model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              steps_per_execution=2)
model.fit(x, y, batch_size=4, epochs=3, verbose=0, validation_data=(xv, yv))
print(f"optimizer steps {int(model.optimizer.iterations.numpy())}")
