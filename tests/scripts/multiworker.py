"""tf.distribute.MultiWorkerMirroredStrategy on localhost: N worker processes, one rank each.

Run without arguments it is the launcher: it picks N free localhost ports, starts N real worker
processes (`python multiworker.py --worker`, subprocess, not fork) with a TF_CONFIG each
(`{"cluster": {"worker": [...]}, "task": {"type": "worker", "index": i}}`) and exits with the
workers' worst exit code.  The launcher never imports TensorFlow.  Profile it with
`msprof collect --children --hccl on -- python tests/scripts/multiworker.py`.

Each worker trains a tiny Keras model for STEPS steps with a custom loop (`strategy.run` in a
`tf.function` that reads its batch with `next(iterator)`, so the wait for the batch is inside
the step).  Keras 3's `model.fit` cannot run under MultiWorkerMirroredStrategy in TF 2.21
(`_maybe_symbolic_build` calls `strategy.reduce("MEAN", (x, y))` on a tuple of PerReplica and
CollectiveAllReduceStrategy refuses it: "Attempt to convert a value (PerReplica...)").

Env:
  WORKERS=2          number of worker processes (2-4)
  STEPS=8            training steps per worker
  SLOW_RANK=1        this worker's tf.data map sleeps SLOW_MS per batch (an injected slow rank)
  SLOW_MS=30
  MW_TIMEOUT=120     the launcher kills the workers after this many seconds

A worker's non-zero exit code is printed; the launcher exits with the worst (128+N for a
worker killed by signal N).

Fixed problem (TF 2.21, seen with SLOW_RANK under msprof's default sampled tracing, 5 of 14
runs): the slow worker aborted with "double free or corruption" inside TF's `ProfilerSession`
export and the other worker then failed with "Connection reset by peer".  The slow worker's
collectives resolve their parameters on gRPC threads (`CollectiveExecutor::CompleteParams`
starts on one thread and ends on another), and TF's `TraceMeRecorder::Consume` joins such
cross-thread pairs through dangling pointers; msprof_cli/collect/traceme_fix.py works around
it (tests/test_traceme_fix.py).  tests/test_collect_multiworker.py still uses `--full-trace`
(one collection, a smaller trace to check).
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

GLOBAL_BATCH = 8


def free_ports(n: int) -> list[int]:
    """n distinct free localhost ports (all held open until every one is chosen)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("localhost", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def launch() -> int:
    n = int(os.environ.get("WORKERS", "2"))
    timeout = float(os.environ.get("MW_TIMEOUT", "120"))
    cluster = {"worker": [f"localhost:{p}" for p in free_ports(n)]}
    procs = []
    for i in range(n):
        env = dict(os.environ)
        env["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}})
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"],
                                      env=env))
    deadline = time.monotonic() + timeout
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(timeout=max(1.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            for q in procs:
                if q.poll() is None:
                    q.kill()
            print(f"multiworker: the workers did not finish within {timeout:.0f} s",
                  file=sys.stderr)
            return 124
    for i, code in enumerate(codes):
        if code:
            print(f"multiworker: worker {i} exited with code {code}", file=sys.stderr)
    return max(codes) if min(codes) >= 0 else 128 - min(codes)  # killed by signal N: 128+N


def worker() -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf

    index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    steps = int(os.environ.get("STEPS", "8"))
    slow = os.environ.get("SLOW_RANK", "") == str(index)
    slow_s = float(os.environ.get("SLOW_MS", "30")) / 1000.0

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    keras = tf.keras
    rng = np.random.default_rng(index)
    x = rng.random((GLOBAL_BATCH * steps, 8), dtype=np.float32)
    y = rng.integers(0, 3, size=GLOBAL_BATCH * steps)

    def sleep(v):  # the injected slow input pipeline: a Python map that sleeps per batch
        time.sleep(slow_s)
        return v

    def dataset_fn(ctx: tf.distribute.InputContext) -> tf.data.Dataset:
        ds = tf.data.Dataset.from_tensor_slices((x, y)).repeat()
        ds = ds.batch(ctx.get_per_replica_batch_size(GLOBAL_BATCH), drop_remainder=True)
        if slow:
            def slow_map(a, b):
                a = tf.numpy_function(sleep, [a], tf.float32)
                a.set_shape([None, 8])
                return a, b
            ds = ds.map(slow_map)
        return ds.prefetch(1)

    with strategy.scope():
        model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                                  keras.layers.Dense(3)], name="mw_mlp")
        opt = keras.optimizers.SGD(0.1)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
    it = iter(strategy.distribute_datasets_from_function(dataset_fn))

    @tf.function
    def train_step(iterator):
        def step(xb, yb):
            with tf.GradientTape() as tape:
                loss = tf.nn.compute_average_loss(loss_fn(yb, model(xb, training=True)),
                                                  global_batch_size=GLOBAL_BATCH)
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        per_replica = strategy.run(step, args=next(iterator))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    for _ in range(steps):
        loss = train_step(it)
    print(f"worker {index} of {strategy.num_replicas_in_sync} steps {steps} "
          f"loss {float(loss):.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(worker() if "--worker" in sys.argv[1:] else launch())
