"""Keras MLP fit with msproftx markers from a callback and a second thread."""
import os
import threading

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from msprof_cli import mstx  # noqa: E402

rng = np.random.default_rng(0)
x = rng.normal(size=(256, 16)).astype("float32")
y = (x.sum(axis=1) > 0).astype("int32")


class Marks(tf.keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        mstx.mark(f"epoch {epoch} begins", domain="train")
        self.rid = mstx.range_start(f"epoch {epoch}", domain="train")

    def on_epoch_end(self, epoch, logs=None):
        mstx.range_end(self.rid)

    def on_train_batch_begin(self, batch, logs=None):
        mstx.range_push(f"batch {batch}")

    def on_train_batch_end(self, batch, logs=None):
        mstx.range_pop()


def side():
    for i in range(3):
        with mstx.range(f"side work {i}, with comma", category=2):
            sum(range(20000))
        mstx.mark(f"side mark {i}")


model = tf.keras.Sequential([tf.keras.Input((16,)), tf.keras.layers.Dense(32, activation="relu"),
                             tf.keras.layers.Dense(2)])
model.compile("adam", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
mstx.mark("start")
t = threading.Thread(target=side)
t.start()
model.fit(x, y, batch_size=64, epochs=2, verbose=0, callbacks=[Marks()])
t.join()
with mstx.range("evaluate"):
    model.evaluate(x, y, batch_size=128, verbose=0)
print("tx_mlp done")
