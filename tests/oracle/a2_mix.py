"""A Keras MLP whose first Dense is a MatMul the Atlas A2 runs as a MIX_AIC kernel (inner
axis 1001 > 1000 and not 512 B aligned, > 50 us of MAC time on an Ascend910B3): the
fresh_a2_mix oracle case (tests/oracle/README.md)."""
import numpy as np
import tensorflow as tf

x = np.random.RandomState(0).rand(4096, 1001).astype("float32")
y = np.random.RandomState(1).rand(4096, 8).astype("float32")
m = tf.keras.Sequential([tf.keras.layers.Input((1001,)),
                         tf.keras.layers.Dense(2048, activation="relu"),
                         tf.keras.layers.Dense(8)])
m.compile("sgd", "mse")
m.fit(x, y, batch_size=4096, epochs=1, verbose=0)
print("done")
