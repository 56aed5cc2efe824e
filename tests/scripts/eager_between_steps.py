"""8 tf.function training steps, then EAGER_CALLS eager calls of the model (outside any
tf.function: single-op mode, with real CPU work in each matmul), then 3 more steps.  Prints
how long the eager calls took on this CPU (the script's own clock)."""
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

keras = tf.keras
model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(2048, activation="relu"),
                          keras.layers.Dense(2048, activation="relu"), keras.layers.Dense(10)])
opt = keras.optimizers.SGD(0.01)
x = tf.random.stateless_uniform((256, 64), seed=(1, 2))
y = tf.zeros((256,), tf.int64)


@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        logits = model(x)
        loss = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(y, logits,
                                                                           from_logits=True))
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    return loss


for _ in range(8):
    train_step(x, y)
t = time.perf_counter()
for _ in range(int(os.environ.get("EAGER_CALLS", "5"))):
    out = model(x, training=False)  # eager, outside any tf.function
print(f"eager_seconds {time.perf_counter() - t:.6f}")
for _ in range(3):
    train_step(x, y)
