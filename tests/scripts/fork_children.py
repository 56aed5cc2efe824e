"""Train 3 Keras steps, then start a forked and a spawned child that each run TF ops.

The children must not be profiled (no second PROF dir, no capture from their pids).
Prints the children's pids so the test can check the capture dumps.
"""
import multiprocessing as mp
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def child_work(q) -> None:  # type: ignore[no-untyped-def]
    # plain python in the fork (TF is not fork-safe after its threads started)
    q.put(("fork", os.getpid(), sum(range(1000))))


def spawn_work(q) -> None:  # type: ignore[no-untyped-def]
    import tensorflow as tf2

    @tf2.function
    def f(x):
        return tf2.reduce_sum(tf2.matmul(x, x))

    for _ in range(3):
        v = float(f(tf2.ones((4, 4))))
    q.put(("spawn", os.getpid(), v))


if __name__ == "__main__":
    keras = tf.keras
    x = np.random.default_rng(0).random((12, 4), dtype=np.float32)
    model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(2)], name="parent")
    model.compile("sgd", "mse")
    model.fit(x, x[:, :2], batch_size=4, epochs=1, verbose=0)
    for method, target in (("fork", child_work), ("spawn", spawn_work)):
        ctx = mp.get_context(method)
        q = ctx.Queue()
        p = ctx.Process(target=target, args=(q,))
        p.start()
        kind, pid, value = q.get(timeout=120)
        p.join(timeout=120)
        print(f"child {kind} pid {pid} exit {p.exitcode} value {value}", flush=True)
    print(f"parent pid {os.getpid()}")
    sys.exit(0)
