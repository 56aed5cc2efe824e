"""A small Keras conv net for the Atlas A2 end-to-end tests: a Conv2D (cube work), ReLU,
max pooling and a Dense head, one epoch of 4 batches."""
import numpy as np
import tensorflow as tf

x = np.random.RandomState(0).rand(64, 16, 16, 3).astype("float32")
y = np.random.RandomState(1).randint(0, 10, 64)
m = tf.keras.Sequential([tf.keras.layers.Input((16, 16, 3)),
                         tf.keras.layers.Conv2D(8, 3, activation="relu"),
                         tf.keras.layers.MaxPooling2D(), tf.keras.layers.Flatten(),
                         tf.keras.layers.Dense(10)])
m.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
m.fit(x, y, batch_size=16, epochs=1, verbose=0)
print("done")
