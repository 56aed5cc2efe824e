"""A Keras model with a 3 x 3 stride-1 and a 2 x 2 stride-2 AveragePooling2D (windowed: GE
runs them as depthwise convolutions on the cube) and a global average pooling (a reduction):
2 steps."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

keras = tf.keras
inp = keras.Input((35, 35, 64))
x = keras.layers.AveragePooling2D(3, strides=1, padding="same")(inp)
x = keras.layers.AveragePooling2D(2)(x)
x = keras.layers.GlobalAveragePooling2D()(x)
model = keras.Model(inp, keras.layers.Dense(10)(x))
model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
rng = np.random.default_rng(0)
model.fit(rng.random((32, 35, 35, 64), dtype=np.float32), rng.integers(0, 10, 32),
          batch_size=16, verbose=0)
print("avg pool done")
