"""npu_bridge Profiler blocks around TF1 session runs (the seed example, fixed)."""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402
from npu_bridge.npu_init import *  # noqa: E402,F401,F403

tf.compat.v1.disable_eager_execution()
a = tf.compat.v1.placeholder(tf.int32, (None, None), name="a")
b = tf.constant([[1, 2], [2, 3]], dtype=tf.int32, shape=(2, 2))
add = tf.add(a, b)
out = sys.argv[1] if len(sys.argv) > 1 else "./"
with tf.compat.v1.Session(config=npu_config_proto()) as sess:  # noqa: F405
    sess.run(add, feed_dict={a: [[0, 0], [0, 0]]})  # outside any block: not profiled
    with profiler.Profiler(level="L1", aic_metrics="ArithmeticUtilization",  # noqa: F405
                           output_path=out):
        result = sess.run(add, feed_dict={a: [[-20, 2], [1, 3]]})
    with profiler.Profiler(output_path=out):  # noqa: F405
        sess.run(add, feed_dict={a: [[1, 1], [1, 1]]})
        sess.run(add, feed_dict={a: [[2, 2], [2, 2]]})
    try:
        with profiler.Profiler(output_path=out):  # noqa: F405
            with profiler.Profiler(output_path=out):  # noqa: F405
                pass
    except RuntimeError as exc:
        print("nested:", exc)
print("result", result.tolist())
