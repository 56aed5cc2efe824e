"""A tf.function that fails, run without profiling: prints CLEAN when no frame of msprof_cli
is in the traceback (the autoload .pth must leave an unprofiled process alone)."""
import os
import traceback

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402


@tf.function
def f(x):
    return tf.debugging.assert_equal(x, 0.0)


try:
    f(tf.constant(1.0))
except Exception:
    print("OURS" if "msprof_cli" in traceback.format_exc() else "CLEAN")
