"""TF1 Session: MatMul -> Sigmoid -> Mul -> mean on 16 MB activations, 3 runs.  With
PRECISION_MODE set, the session config's NpuOptimizer carries it, as a script written for
the Ascend TF adapter does (tests/test_time_model_e2e.py: GE's precision_mode)."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

v1 = tf.compat.v1
v1.disable_eager_execution()
x = v1.placeholder(tf.float32, (4096, 1024), name="x")
w = v1.get_variable("w", (1024, 1024))
mm = tf.matmul(x, w)
act = tf.math.sigmoid(mm, name="act") * mm  # Grappler may compose it into _MklSwish (CPU-dependent)
loss = tf.reduce_mean(act, name="loss")
config = None
if os.environ.get("PRECISION_MODE"):
    config = v1.ConfigProto()
    custom_op = config.graph_options.rewrite_options.custom_optimizers.add()
    custom_op.name = "NpuOptimizer"
    custom_op.parameter_map["precision_mode"].s = tf.compat.as_bytes(
        os.environ["PRECISION_MODE"])
feed = {x: np.random.default_rng(0).random((4096, 1024), dtype=np.float32)}
with v1.Session(config=config) as sess:
    sess.run(v1.global_variables_initializer())
    for _ in range(3):
        sess.run(loss, feed)
print("done")
