"""Compute-bound graph-mode training with prefetched input (tests/test_time_model_e2e.py):
on the emulated 910 the device should be busy for most of each step."""
import numpy as np
import tensorflow as tf

B = 32
x = np.random.default_rng(0).random((B * 3, 32, 32, 64), dtype=np.float32)
y = np.zeros((B * 3, 10), np.float32)
ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(B, drop_remainder=True).repeat()
ds = ds.prefetch(4)
model = tf.keras.Sequential([tf.keras.layers.Input((32, 32, 64))] +
                            [tf.keras.layers.Conv2D(256, 3, padding="same", activation="relu")
                             for _ in range(3)] +
                            [tf.keras.layers.GlobalAveragePooling2D(), tf.keras.layers.Dense(10)])
opt = tf.keras.optimizers.SGD(0.01)


@tf.function
def train_step(a, b):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(a, training=True) - b))
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    return loss


for a, b in ds.take(6):
    loss = train_step(a, b)
print("loss", float(loss))
