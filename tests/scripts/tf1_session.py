"""TF1 Session.run MLP: 1 init run + 3 training runs + 1 eval run (tiny shapes)."""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

v1 = tf.compat.v1
v1.disable_eager_execution()
x = v1.placeholder(tf.float32, (None, 16), name="x")
y = v1.placeholder(tf.int64, (None,), name="y")
w1 = v1.get_variable("w1", (16, 8))
b1 = v1.get_variable("b1", (8,), initializer=v1.zeros_initializer())
w2 = v1.get_variable("w2", (8, 4))
h = tf.nn.relu(tf.nn.bias_add(tf.matmul(x, w1), b1), name="fc1")
logits = tf.matmul(h, w2, name="logits")
loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
train = v1.train.GradientDescentOptimizer(0.1).minimize(loss)
config = None
if os.environ.get("SESSION_PROFILING"):  # the session-config route (docs/formats/options.md 1)
    config = v1.ConfigProto()
    custom_op = config.graph_options.rewrite_options.custom_optimizers.add()
    custom_op.name = "NpuOptimizer"
    custom_op.parameter_map["profiling_mode"].b = True
    opts = os.environ["SESSION_PROFILING"]
    if opts != "1":
        custom_op.parameter_map["profiling_options"].s = tf.compat.as_bytes(opts)
rng = np.random.default_rng(0)
with v1.Session(config=config) as sess:
    sess.run(v1.global_variables_initializer())
    for _ in range(3):
        _, value = sess.run([train, loss], {x: rng.random((8, 16), dtype=np.float32),
                                            y: rng.integers(0, 4, 8)})
    sess.run(loss, {x: rng.random((8, 16), dtype=np.float32), y: rng.integers(0, 4, 8)})
print(f"tf1 loss {value:.3f}")
sys.exit(int(os.environ.get("EXIT_CODE", "0")))
