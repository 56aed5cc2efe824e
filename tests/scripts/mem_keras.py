"""A small Keras 3 conv net for the device memory tests (tests/test_memory_e2e.py): the
optimizer (OPT: sgd = SGD with momentum, adam), the batch (BS) and the classes (CLASSES) from
the environment; prints its trainable parameter count as `PARAMS <n>`."""
import os

import numpy as np
import keras

opt = os.environ.get("OPT", "adam")
bs = int(os.environ.get("BS", "16"))
classes = int(os.environ.get("CLASSES", "10"))
keras.utils.set_random_seed(0)
# activations dominate (convolutions over the image, few parameters): the batch scales them
model = keras.Sequential([
    keras.layers.Input((24, 24, 3)),
    keras.layers.Conv2D(16, 3, activation="relu"),
    keras.layers.Conv2D(16, 3, activation="relu"),
    keras.layers.GlobalAveragePooling2D(),
    keras.layers.Dense(classes),
])
optimizer = keras.optimizers.SGD(0.1, momentum=0.9) if opt == "sgd" else keras.optimizers.Adam()
model.compile(optimizer=optimizer,
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
x = np.random.rand(bs * 3, 24, 24, 3).astype("float32")
y = np.random.randint(0, classes, bs * 3)
model.fit(x, y, batch_size=bs, epochs=1, verbose=0)
print("PARAMS", sum(int(np.prod(w.shape)) for w in model.trainable_weights))
