"""TF1 word2vec-like embedding model: a 50000 x 200 ref-variable table, 128 ids fed per step,
embedding lookup, a dense layer, plain SGD (the table's gradient is sparse: ScatterSub)."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

v1 = tf.compat.v1
v1.disable_eager_execution()
VOCAB, DIM, BATCH = 50000, 200, 128
ids = v1.placeholder(tf.int32, (None,), name="ids")
labels = v1.placeholder(tf.int64, (None,), name="labels")
table = v1.Variable(v1.random_uniform((VOCAB, DIM), -1.0, 1.0), use_resource=False,
                    name="embeddings")
emb = tf.nn.embedding_lookup(table, ids)
w = v1.get_variable("w", (DIM, 8), use_resource=False)
logits = tf.matmul(emb, w, name="logits")
loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                     logits=logits))
train = v1.train.GradientDescentOptimizer(0.1).minimize(loss)
rng = np.random.default_rng(0)
with v1.Session() as sess:
    sess.run(v1.global_variables_initializer())
    for _ in range(int(os.environ.get("STEPS", "4"))):
        _, value = sess.run([train, loss], {ids: rng.integers(0, VOCAB, BATCH),
                                            labels: rng.integers(0, 8, BATCH)})
print(f"embedding loss {value:.3f}")
