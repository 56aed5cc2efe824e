"""tf.distribute.MirroredStrategy over 2 logical CPU devices: a tiny Keras model.fit (3 steps).

Env: CUSTOM=1 uses a custom training loop (strategy.run + @tf.function) instead of fit.
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    cpu, [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()])
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
keras = tf.keras
rng = np.random.default_rng(0)
x = rng.random((24, 8, 8, 1), dtype=np.float32)
y = rng.integers(0, 3, size=24)
with strategy.scope():
    model = keras.Sequential([
        keras.Input(shape=(8, 8, 1)),
        keras.layers.Conv2D(4, 3, activation="relu"),
        keras.layers.Flatten(),
        keras.layers.Dense(3),
    ], name="mirrored_cnn")
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
if os.environ.get("CUSTOM"):
    opt = model.optimizer
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
    ds = strategy.experimental_distribute_dataset(
        tf.data.Dataset.from_tensor_slices((x, y)).batch(8))

    @tf.function
    def train_step(batch):
        def step(xb, yb):
            with tf.GradientTape() as tape:
                loss = tf.nn.compute_average_loss(loss_fn(yb, model(xb, training=True)),
                                                  global_batch_size=8)
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        per_replica = strategy.run(step, args=batch)
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    for batch in ds:
        loss = train_step(batch)
    print(f"mirrored custom loss {float(loss):.3f}")
else:
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    print(f"mirrored replicas {strategy.num_replicas_in_sync}")
