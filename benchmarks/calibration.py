"""Calibration of the emulated Ascend 910 against published single-card figures.

    python benchmarks/calibration.py [--steps 4] [--models resnet50,vgg16,...] [--keras 2|3]
                                     [--precision-mode MODE] [--dropout [--dropout-mode tf|npu]]

Collects each model with `msprof collect` (real TensorFlow on this CPU), exports it, and
prints the median emulated device step (step_trace's Iteration End - FP Start, after the
first step: `_median_iteration_ms`) against the
published single-card Ascend 910 training figure (`PUBLISHED`: the figure, its batch, the GE
precision mode closest to the published run, and where it is published; where two official
figures for one configuration disagree, the band, and the ratio is taken against its nearer
end).  Every model runs in its published batch and input size:

* CNNs from `tf.keras.applications` with random weights: ResNet-50 (batch 32; MLPerf v1.0,
  ~2,010 img/s a chip), VGG-16 (32), MobileNetV2 (256), MobileNetV3-Large (32; depthwise and
  squeeze-excite), DenseNet-121 (32), Inception-v3 (128, 299 x 299, MindSpore O3 -> force_fp16).
* CRNN (conv + two bidirectional LSTMs + CTC, batch 64): the recurrent model; its figures are
  8-card step times (no 1-card figure is published), printed as such.
* BERT-base encoder (12 layers, hidden 768, 12 heads, FFN 3072, sequence 128,
  sentence-pair classification), batch 32: 59.3-83.29 ms/step (two Ascend ModelZoo-TensorFlow
  READMEs for the MRPC fine-tune).  `--dropout` adds the reference's
  dropout 0.1 as Keras writes it: its random mask runs on the AI CPU
  (StatelessRandomUniformV2), where the reference's `npu_ops.dropout` runs DropOutGenMask /
  DropOutDoMask on the AI Core (`--dropout-mode npu` collects it so, `msprof collect --dropout
  npu`), so the default (no dropout) is the closer comparison of the AI Core model
  (docs/device-model.md, calibration).  The train step is the reference's
  optimizer (Google BERT's optimization.py, which run_classifier.py calls: clip_by_global_norm
  1.0, then AdamWeightDecay as element-wise TF ops); `--bert-optimizer keras` uses Keras Adam.
* BERT-large (24 layers, hidden 1024, 16 heads, FFN 4096), the same run: 139.26 ms/step (the
  same ModelZoo README's "Final Performance ms/step").  With both BERTs the script also prints
  large minus base against 139.26 - 83.29 = 55.97 ms: large does ~3x base's arithmetic, so the
  per-step time that does not grow with the model (host, framework, the Estimator loop; the
  published pair puts it at 50-61 ms of the 83.29) cancels, and what is left is the
  device time the emulation models.

`--keras 2` (the default) runs the models with legacy Keras 2 (the `tf_keras` package; the
child gets `TF_USE_LEGACY_KERAS=1`, so `tf.keras` is tf_keras): its BatchNormalization is
`fused=True` and executes FusedBatchNormV3 / FusedBatchNormGradV3, as TF-on-Ascend runs (the
Ascend TF adapter targets TF 1.15 / 2.6 with Keras 2) and MindSpore's fused BatchNorm do -- the
like-for-like graph for the published figures.  `--keras 3` runs Keras 3, whose
BatchNormalization is decomposed into moments and element-wise arithmetic (many more, memory-
bound tasks: docs/device-model.md, calibration).  tf_keras is not a dependency of msprof_cli:
`make calibrate` installs the release matching TensorFlow (`pip install --no-deps
'tf_keras~=2.21.0'` for TF 2.21) and runs this script.

Target: within +-30 %.  The constants of the device model are not fitted to these models
(docs/device-model.md); this only reports how far the emulation is.  The same script runs
itself as the profiled child (`--child MODEL`).
"""
from __future__ import annotations

import argparse
import csv
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

@dataclass(frozen=True)
class Figure:
    """A published single-card Ascend 910 training figure: ms per step (a band where two
    official figures for one configuration disagree), in its configuration."""

    low_ms: float
    high_ms: float
    batch: int
    precision: str  # GE's precision mode closest to the published run
    source: str
    note: str = ""

    def ratio(self, ms: float) -> tuple[float, bool]:
        """emulated / published (against the nearer end of the band), and within +-30 %
        of the band."""
        ref = self.low_ms if ms < self.low_ms else self.high_ms if ms > self.high_ms else ms
        return ms / ref, 0.7 <= ms / ref <= 1.3


MIX = "allow_mix_precision"
FP16 = "force_fp16"  # MindSpore amp_level O3: the whole network in fp16
MZ_OLD = "github.com/Ascend/modelzoo@99a485e18d997fcdc96d4fb30abc0b8924017f47"
MZ_TF = "github.com/Ascend/ModelZoo-TensorFlow@a2c3332a6cea24b56ab936a746b994c89c8fc7f8"
MS = "github.com/mindspore-ai/models@eab643f51336dbf7d711f02d27e6516e5affee59"
PUBLISHED: dict[str, Figure] = {
    "resnet50": Figure(16.0, 16.0, 32, MIX,
                       "MLPerf Training v1.0 closed, Peng Cheng Lab, MindSpore: ~2,010 img/s a "
                       "chip"),
    "vgg16": Figure(37.6, 58.0, 32, MIX,
                    f"{MZ_OLD} built-in/TensorFlow/Official/cv/image_classification/"
                    "VGG16_for_TensorFlow/00-access/README.md: 1 card 850 img/s; "
                    f"{MS} official/cv/VGG/vgg16/README.md: '1pc: 58 ms/step'"),
    "mobilenet_v2": Figure(182.9, 182.9, 256, MIX,
                           f"{MZ_OLD} built-in/TensorFlow/Official/cv/image_classification/"
                           "MobileNetV2_for_TensorFlow/00-access/README.md: 1 card 1400 img/s "
                           "at batch 256"),
    "mobilenet_v3": Figure(28.8, 28.8, 32, MIX,
                           f"{MZ_TF} TensorFlow/contrib/cv/mobilenetv3-large/"
                           "mobilenetv3_large_ID0592_for_TensorFlow/README.md: 1xAscend 910, "
                           "batch 32, 1110 img/s"),
    "mobilenet_v3_bs1": Figure(14.7, 14.7, 1, MIX,
                               f"{MZ_TF} TensorFlow/contrib/cv/mobilenetv3-large/"
                               "mobilenetv3_large_ID0592_for_TensorFlow/README.md: 1xAscend "
                               "910, batch 1, 68 img/s", "the sweep's per-step floor"),
    "mobilenet_v3_bs128": Figure(70.9, 70.9, 128, MIX,
                                 f"{MZ_TF} TensorFlow/contrib/cv/mobilenetv3-large/"
                                 "mobilenetv3_large_ID0592_for_TensorFlow/README.md: "
                                 "1xAscend 910, batch 128, 1805 img/s"),
    "densenet121": Figure(42.1, 60.7, 32, MIX,
                          f"{MS} research/cv/densenet/README.md: '1pc:760 img/s' (O3); {MZ_TF} "
                          "TensorFlow/built-in/cv/image_classification/"
                          "DenseNet121_ID0067_for_TensorFlow/README.md: 8-card log FPS 4216.5",
                          "the TF figure is 8 cards / 8"),
    "inception_v3": Figure(106.7, 106.7, 128, FP16,
                           f"{MS} official/cv/Inception/inceptionv3/README.md: '1pc:1200 img/s' "
                           "(amp_level O3, 299 x 299)"),
    "bert": Figure(59.3, 83.29, 32, MIX,
                   f"{MZ_TF} TensorFlow/built-in/nlp/Bert_Google_MRPC_ID1466_for_TensorFlow/"
                   "README.md: ActualFPS = 540; TensorFlow/built-in/nlp/"
                   "Bert_Google_finetune_for_TensorFlow/README.md: 83.29 ms/step (MRPC)"),
    "bert_large": Figure(139.26, 139.26, 32, MIX,
                         f"{MZ_TF} TensorFlow/built-in/nlp/Bert_Google_finetune_for_TensorFlow/"
                         "README.md: 139.26 ms/step (MRPC)"),
    "crnn": Figure(118.0, 168.0, 64, MIX,
                   f"{MS} official/cv/CRNN/README.md: '118ms/step(8pcs)'; {MZ_TF} TensorFlow/"
                   "built-in/cv/detection/CRNN_Kernel_ID0055_for_TensorFlow/README.md: "
                   "'~ 168ms/step' (8 cards)", "8 cards (with their all-reduce); no 1-card figure"),
}
BATCH = 32
BERT_DROPOUT = 0.0  # --dropout: 0.1, as the reference's modeling.py (see below)
BERT_OPTIMIZER = "reference"  # --bert-optimizer: the reference's (see _reference_train_step)
IMAGE_MODELS = ("resnet50", "vgg16", "mobilenet_v2", "mobilenet_v3", "mobilenet_v3_bs1",
                "mobilenet_v3_bs128", "densenet121", "inception_v3")


def _optimizer(kind: str):  # type: ignore[no-untyped-def]
    """The optimizer the published TF runs used, as one fused kernel per variable: Keras 2's
    legacy optimizers execute ResourceApplyKerasMomentum / ResourceApplyAdam, as TF 1.15's
    tf.train.MomentumOptimizer / AdamOptimizer (the ModelZoo scripts) do; the Keras 2.11+
    optimizers write the update as element-wise ops on each variable (several tasks a
    variable: Keras 3's too).  Keras 3 has no legacy optimizers: its own are used."""
    import tensorflow as tf

    def make(opts):  # type: ignore[no-untyped-def]
        return opts.SGD(0.1, momentum=0.9) if kind == "sgd" else opts.Adam(1e-3)

    try:
        return make(tf.keras.optimizers.legacy)
    except (AttributeError, ImportError):  # Keras 3: "not supported in Keras 3"
        return make(tf.keras.optimizers)


def _batches(batch, steps: int):  # type: ignore[no-untyped-def]
    """One batch served `steps` times: the published runs fed their device from a tuned,
    prefetched pipeline; slicing fresh batches out of numpy arrays on this CPU would make
    the emulated step wait for this machine's input pipeline (Data Aug Bound, as it should),
    which is not what the figures measure."""
    import tensorflow as tf

    return tf.data.Dataset.from_tensors(batch).repeat(steps).prefetch(2)


def _image_model(name: str, steps: int) -> None:
    """A keras.applications network with random weights, trained in the published batch and
    input size with SGD + momentum (the TF ModelZoo CNN scripts' optimizer, fused: `_optimizer`)."""
    import numpy as np
    import tensorflow as tf

    apps = tf.keras.applications
    build, size = {"resnet50": (apps.ResNet50, 224), "vgg16": (apps.VGG16, 224),
                   "mobilenet_v2": (apps.MobileNetV2, 224),
                   "mobilenet_v3": (apps.MobileNetV3Large, 224),
                   "densenet121": (apps.DenseNet121, 224),
                   "inception_v3": (apps.InceptionV3, 299)}[name.split("_bs")[0]]
    batch = PUBLISHED[name].batch
    model = build(weights=None, classes=1000, input_shape=(size, size, 3))
    model.compile(_optimizer("sgd"), "sparse_categorical_crossentropy")
    rng = np.random.default_rng(0)
    x = rng.random((batch, size, size, 3), dtype=np.float32)
    y = rng.integers(0, 1000, batch)
    model.fit(_batches((x, y), steps), steps_per_epoch=steps, epochs=1, verbose=0)


def _crnn(steps: int) -> None:
    """CRNN (Shi, Bai, Yao 2015, arXiv:1507.05717, table 4): 7 conv layers on a 32 x 100
    image, two bidirectional LSTMs of 256, CTC loss over 37 classes; the TF ModelZoo CRNN's
    configuration (batch 64, 100 x 32 RGB)."""
    import numpy as np
    import tensorflow as tf

    L = tf.keras.layers
    batch, classes, label_len = PUBLISHED["crnn"].batch, 37, 10
    img = tf.keras.Input((32, 100, 3))
    h = img
    for filters, pool, bn in ((64, (2, 2), False), (128, (2, 2), False), (256, None, False),
                              (256, (2, 1), False), (512, None, True), (512, (2, 1), True)):
        h = L.Conv2D(filters, 3, padding="same", use_bias=not bn)(h)
        if bn:
            h = L.BatchNormalization()(h)
        h = L.ReLU()(h)
        if pool:
            h = L.MaxPooling2D(pool, strides=pool)(h)
    h = L.ReLU()(L.Conv2D(512, 2, padding="valid")(h))  # 1 x 24 x 512
    h = L.Reshape((-1, 512))(h)
    for _ in range(2):
        h = L.Bidirectional(L.LSTM(256, return_sequences=True))(h)
    logits = L.Dense(classes)(h)
    labels = tf.keras.Input((label_len,), dtype="int32")

    class CTC(L.Layer):
        def call(self, inputs):  # type: ignore[no-untyped-def]
            y, pred = inputs
            n = tf.shape(pred)[0]
            t = tf.shape(pred)[1]
            loss = tf.keras.backend.ctc_batch_cost(
                y, tf.nn.softmax(pred), tf.fill([n, 1], t), tf.fill([n, 1], label_len))
            self.add_loss(tf.reduce_mean(loss))
            return pred

    model = tf.keras.Model([img, labels], CTC()([labels, logits]))
    model.compile(_optimizer("adam"))
    rng = np.random.default_rng(0)
    model.fit(_batches(((rng.random((batch, 32, 100, 3), dtype=np.float32),
                         rng.integers(0, classes - 1, (batch, label_len)).astype("int32")),),
                       steps), steps_per_epoch=steps, epochs=1, verbose=0)


# BERT shapes (layers, hidden, heads, FFN): Devlin et al. 2018, table of BERT-base / -large
BERT_SHAPES = {"bert": (12, 768, 12, 3072), "bert_large": (24, 1024, 16, 4096)}


def _reference_train_step(model_cls):  # type: ignore[no-untyped-def]
    """A Keras Model whose train step is the reference's optimizer, written as TF ops.

    Google BERT's `optimization.py` (what its run_classifier.py calls; google-research/bert is
    the reference implementation the ModelZoo README names for its Ascend port):
    gradients clipped by global norm 1.0, then AdamWeightDecayOptimizer -- Adam's moments,
    the update and the decoupled weight decay (0.01, not on LayerNorm or bias) as separate
    element-wise TF ops on every variable, not one fused ApplyAdam. The learning-rate
    schedule (a few scalar ops) is left out."""
    import tensorflow as tf

    class ReferenceOptimizerModel(model_cls):
        def init_slots(self) -> None:
            self.ref_slots = [(tf.Variable(tf.zeros_like(v), trainable=False),
                               tf.Variable(tf.zeros_like(v), trainable=False))
                              for v in self.trainable_variables]

        def train_step(self, data):  # type: ignore[no-untyped-def]
            x, y = data
            with tf.GradientTape() as tape:
                loss = self.compute_loss(x=x, y=y, y_pred=self(x, training=True))
            tvars = self.trainable_variables
            grads, _ = tf.clip_by_global_norm(tape.gradient(loss, tvars), 1.0)
            lr, b1, b2, eps, wd = 2e-5, 0.9, 0.999, 1e-6, 0.01
            for g, v, (m, s) in zip(grads, tvars, self.ref_slots):
                # the embeddings' IndexedSlices become dense, as the reference's tf.multiply
                # converts them
                g = tf.convert_to_tensor(g)
                next_m = b1 * m + (1.0 - b1) * g
                next_s = b2 * s + (1.0 - b2) * tf.square(g)
                update = next_m / (tf.sqrt(next_s) + eps)
                if not any(k in v.name for k in ("LayerNorm", "layer_norm", "bias")):
                    update += wd * v
                v.assign(v - lr * update)
                m.assign(next_m)
                s.assign(next_s)
            return {"loss": loss}

    return ReferenceOptimizerModel


def _bert(steps: int, shape: tuple[int, int, int, int]) -> None:
    import numpy as np
    import tensorflow as tf

    L, H, A, F = shape
    S, VOCAB = 128, 30522
    # dropout 0.1 where the reference has it (ModelZoo Bert_Google_finetune_for_TensorFlow:
    # modeling.py hidden_dropout_prob = attention_probs_dropout_prob = 0.1 on the embeddings,
    # the attention probabilities, the attention output and the FFN output; run_classifier.py
    # dropout keep_prob 0.9 on the pooled output); only with --dropout (module doc)
    P = BERT_DROPOUT
    Drop = tf.keras.layers.Dropout
    ids = tf.keras.Input((S,), dtype="int32")
    seg = tf.keras.Input((S,), dtype="int32")
    h = tf.keras.layers.Embedding(VOCAB, H)(ids) + tf.keras.layers.Embedding(2, H)(seg)
    h = h + tf.keras.layers.Embedding(S, H)(tf.range(S))
    h = Drop(P)(tf.keras.layers.LayerNormalization(epsilon=1e-12)(h))
    for _ in range(L):
        att = tf.keras.layers.MultiHeadAttention(A, H // A, dropout=P)(h, h)
        h = tf.keras.layers.LayerNormalization(epsilon=1e-12)(h + Drop(P)(att))
        ff = tf.keras.layers.Dense(F, activation="gelu")(h)
        h = tf.keras.layers.LayerNormalization(epsilon=1e-12)(
            h + Drop(P)(tf.keras.layers.Dense(H)(ff)))
    cls = Drop(P)(tf.keras.layers.Dense(H, activation="tanh")(h[:, 0]))
    out = tf.keras.layers.Dense(2)(cls)
    loss = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    if BERT_OPTIMIZER == "reference":
        model = _reference_train_step(tf.keras.Model)([ids, seg], out)
        model.init_slots()
        model.compile(loss=loss)
    else:
        model = tf.keras.Model([ids, seg], out)
        model.compile(tf.keras.optimizers.Adam(2e-5), loss)
    rng = np.random.default_rng(0)
    n = BATCH * steps
    model.fit([rng.integers(0, VOCAB, (n, S)).astype("int32"),
               rng.integers(0, 2, (n, S)).astype("int32")],
              rng.integers(0, 2, n), batch_size=BATCH, epochs=1, verbose=0)


CHILDREN = {**{name: (lambda steps, name=name: _image_model(name, steps))
               for name in IMAGE_MODELS},
            "crnn": _crnn,
            **{name: (lambda steps, shape=shape: _bert(steps, shape))
               for name, shape in BERT_SHAPES.items()}}
LEGACY_KERAS_VAR = "TF_USE_LEGACY_KERAS"


def _check_tf_keras() -> None:
    """--keras 2 needs the tf_keras package in this interpreter (the child's)."""
    if importlib.util.find_spec("tf_keras") is None:
        sys.exit(f"calibration.py: --keras 2 needs the tf_keras package (legacy Keras 2) in "
                 f"{sys.executable}; install the release matching TensorFlow, e.g. "
                 f"`pip install --no-deps 'tf_keras~=2.21.0'` for TF 2.21")


def _child_env(keras: str) -> dict[str, str]:
    env = dict(os.environ)
    if keras == "2":
        env[LEGACY_KERAS_VAR] = "1"
    else:
        env.pop(LEGACY_KERAS_VAR, None)  # an inherited TF_USE_LEGACY_KERAS must not switch it
    return env


def _check_child_keras(keras: str) -> None:
    """In the profiled child: tf.keras is the Keras that --keras asked for."""
    import tensorflow as tf

    legacy = tf.keras.__name__.startswith("tf_keras")
    if legacy != (keras == "2"):
        sys.exit(f"calibration.py --child: --keras {keras} but tf.keras is {tf.keras.__name__} "
                 f"({LEGACY_KERAS_VAR}={os.environ.get(LEGACY_KERAS_VAR)!r})")


def _median_iteration_ms(prof: Path) -> tuple[float, int, float]:
    """(median device step ms after the first step, steps, median FP-BP share).

    The device step runs from the step's forward start to its end (step_trace's Iteration
    End - FP Start): the time before it, since the previous step ended, is this CPU's own work
    between steps (Keras' per-step Python loop, its input pipeline: the Data Aug Bound), which
    the emulation keeps as measured; the published runs sink their steps into the device (the
    TF adapter's iterations_per_loop, MindSpore's dataset sink), so their step has none."""
    [path] = sorted((prof / "device_0" / "summary").glob("step_trace_0_*.csv"))
    with open(path, newline="") as fh:
        steps = list(csv.DictReader(fh))

    def device_ms(r: dict[str, str]) -> float:
        return (float(r["Iteration End(us)"]) - float(r["FP Start(us)"])) / 1000

    times = [device_ms(r) for r in steps[1:]]
    return statistics.median(times), len(steps), statistics.median(
        float(r["FP to BP Time(us)"]) / max(device_ms(r) * 1000, 1e-9) for r in steps[1:])


def run(model: str, steps: int, work: Path, extra: tuple[str, ...] = (),
        precision: str = "allow_mix_precision", keras: str = "3",
        dropout_mode: str = "tf", soc_version: str = "Ascend910A") -> dict[str, object]:
    out = work / model
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "msprof_cli", "collect", "--output", str(out),
                           "--precision-mode", precision, "--dropout", dropout_mode,
                           "--soc-version", soc_version, "--",
                           sys.executable, __file__, "--child", model, "--steps", str(steps),
                           "--keras", keras, *extra],
                          capture_output=True, text=True, env=_child_env(keras))
    if proc.returncode:
        sys.exit(f"calibration.py: collecting {model} failed (exit {proc.returncode}):\n"
                 + "\n".join(proc.stderr.splitlines()[-20:]))
    collect_s = time.perf_counter() - t0
    [prof] = sorted(out.glob("PROF_*"))
    subprocess.run([sys.executable, "-m", "msprof_cli", "export", "--output", str(prof)],
                   check=True, capture_output=True, text=True)
    ms, n, fpbp = _median_iteration_ms(prof)
    fig = PUBLISHED[model]
    ratio, ok = fig.ratio(ms)
    band = f"{fig.low_ms:g}" if fig.low_ms == fig.high_ms else f"{fig.low_ms:g}-{fig.high_ms:g}"
    return {"model": model, "keras": keras, "steps": n, "emulated_ms": round(ms, 2),
            "published_ms": band, "ratio": round(ratio, 3), "ok": ok,
            "fp_bp_share": round(fpbp, 3), "batch": fig.batch, "precision": precision,
            "collect_s": round(collect_s, 1), "prof": str(prof), "note": fig.note}


def _print_bert_difference(base_ms: float, large_ms: float) -> None:
    """The BERT-large minus BERT-base check (docs/device-model.md, calibration).

    The published large figure (139.26 ms) and the two base figures (59.3 and 83.29 ms, batch
    32, seq 128) give a band for the difference; large does ~3x base's arithmetic, so whatever
    a step spends that does not grow with the model cancels in it."""
    big, base = PUBLISHED["bert_large"], PUBLISHED["bert"]
    band = Figure(big.low_ms - base.high_ms, big.high_ms - base.low_ms, 32, MIX, "")
    emu = large_ms - base_ms
    ratio, ok = band.ratio(emu)
    print(f"{'large-base':12} {'':>5} {'':>5} {emu:>12.2f} "
          f"{f'{band.low_ms:.2f}-{band.high_ms:.2f}':>13} {ratio:>6.3f} {'':>11} {'':>9}  "
          f"{'ok' if ok else 'OUT OF +-30%'}  (what grows with the model)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--models", default=",".join(PUBLISHED),
                    help="comma-separated, of: " + ", ".join(PUBLISHED))
    ap.add_argument("--child", choices=sorted(CHILDREN))
    ap.add_argument("--keep", help="directory for the PROF dirs (default: a temp dir)")
    ap.add_argument("--dropout-mode", choices=("tf", "npu"), default="tf",
                    help="with --dropout: run it as written (AI CPU masks) or as npu_ops.dropout "
                    "(msprof collect --dropout npu; docs/device-model.md 3.3)")
    ap.add_argument("--precision-mode", default="",
                    help="GE's precision mode of the emulated 910 for every model (default: "
                         "each figure's own, the mode closest to the published run)")
    ap.add_argument("--dropout", action="store_true",
                    help="BERT with the reference's dropout 0.1 (Keras Dropout: AI CPU masks)")
    ap.add_argument("--bert-optimizer", choices=("reference", "keras"), default="reference",
                    help="reference (default): the reference's clip_by_global_norm + "
                         "AdamWeightDecay as element-wise TF ops; keras: Keras Adam (one fused "
                         "ApplyAdam per variable)")
    ap.add_argument("--soc-version", default="Ascend910A",
                    help="the emulated chip; the published figures are the 910's, so on an "
                         "Atlas A2 the ratios are a comparison of chips, not a calibration "
                         "(docs/device-model.md 11)")
    ap.add_argument("--keras", choices=("2", "3"), default="2",
                    help="2 (default): legacy Keras 2 from tf_keras (TF_USE_LEGACY_KERAS=1 in "
                         "the child; fused BatchNorm, the graph the published runs executed); "
                         "3: Keras 3 (decomposed BatchNorm)")
    args = ap.parse_args()
    if args.child:
        _check_child_keras(args.keras)
        global BERT_DROPOUT, BERT_OPTIMIZER
        if args.dropout:
            BERT_DROPOUT = 0.1
        BERT_OPTIMIZER = args.bert_optimizer
        CHILDREN[args.child](args.steps)
        return
    if args.keras == "2":
        _check_tf_keras()
    extra = ("--dropout",) if args.dropout else ()
    extra += ("--bert-optimizer", args.bert_optimizer)
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="msprof_calib_"))
    print(f"{'model':12} {'batch':>5} {'steps':>5} {'emulated ms':>12} {'published ms':>13} "
          f"{'ratio':>6} {'FP-BP share':>11} {'collect s':>9}")
    got: dict[str, float] = {}
    for model in args.models.split(","):
        model = model.strip()
        precision = args.precision_mode or PUBLISHED[model].precision
        try:
            r = run(model, args.steps, work, extra, precision, args.keras, args.dropout_mode,
                    args.soc_version)
        except SystemExit as exc:  # one model failing (e.g. out of memory) does not stop the rest
            print(f"{model:12} FAILED: {exc}", flush=True)
            continue
        got[model] = float(r["emulated_ms"])  # type: ignore[arg-type]
        ok = "ok" if r["ok"] else "OUT OF +-30%"
        note = f"  ({r['note']})" if r["note"] else ""
        print(f"{model:12} {r['batch']:>5} {r['steps']:>5} {r['emulated_ms']:>12} "
              f"{r['published_ms']:>13} {r['ratio']:>6} {r['fp_bp_share']:>11} "
              f"{r['collect_s']:>9}  {ok}  {precision}{note}", flush=True)
    if "bert" in got and "bert_large" in got:
        _print_bert_difference(got["bert"], got["bert_large"])
    print(f"Keras {args.keras}; dropout "
          f"{'as ' + args.dropout_mode if args.dropout else 'none'}; PROF dirs under {work}; "
          "ratio against the nearer end of a band; sources: benchmarks/calibration.py PUBLISHED")

if __name__ == "__main__":
    main()
