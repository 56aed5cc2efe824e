"""Custom tf.function training loop (3 steps) plus eager ops outside any step."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

w = tf.Variable(tf.random.normal((16, 8), seed=1), name="w")
b = tf.Variable(tf.zeros((8,)), name="b")
opt = tf.keras.optimizers.SGD(0.1)


@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        logits = tf.nn.relu(tf.matmul(x, w) + b)
        loss = tf.reduce_mean(tf.square(logits - y))
    grads = tape.gradient(loss, [w, b])
    opt.apply_gradients(zip(grads, [w, b]))
    return loss


x = tf.random.uniform((4, 16), seed=2)
y = tf.random.uniform((4, 8), seed=3)
for _ in range(3):
    loss = train_step(x, y)
z = tf.matmul(x, w)  # eager ops outside any step -> single ops
z = tf.nn.softmax(z)
print(f"custom loss {float(loss):.3f} {z.shape}")
