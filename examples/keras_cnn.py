"""msprof_cli demo: a small Keras 3 CNN trained for a few steps on random data.

    msprof collect --output demo_output -- python examples/keras_cnn.py
    msprof export --output demo_output
    msprof query --output demo_output
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

keras = tf.keras


def build_model() -> "keras.Model":
    return keras.Sequential([
        keras.Input(shape=(28, 28, 1)),
        keras.layers.Conv2D(16, 3, activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Conv2D(32, 3, activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Flatten(),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(10),
    ], name="small_cnn")


def main() -> None:
    rng = np.random.default_rng(0)
    x = rng.random((256, 28, 28, 1), dtype=np.float32)
    y = rng.integers(0, 10, size=256)
    model = build_model()
    model.compile(optimizer="adam",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    history = model.fit(x, y, batch_size=32, epochs=2, verbose=0)
    print(f"trained {len(history.history['loss'])} epochs, "
          f"final loss {history.history['loss'][-1]:.4f}")


if __name__ == "__main__":
    main()
