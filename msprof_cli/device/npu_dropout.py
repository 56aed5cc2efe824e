"""Dropout as the Ascend migration runs it (docs/device-model.md 3.3).

A TensorFlow script's dropout draws a uniform random tensor (`RandomUniform`, Keras 3's
`StatelessRandomUniformV2` with its `StatelessRandomGetKeyCounter`), compares it with the
rate (`GreaterEqual`) and scales the kept elements (`Mul`; the gradient: `SelectV2`).  On an
Ascend 910 those random ops are AI CPU kernels, which is what the emulation runs by default
(`--dropout tf`): the script as written.  The Ascend TensorFlow migration replaces
`tf.nn.dropout` / the Keras layer with `npu_ops.dropout`, which GE runs as two AI Core
kernels: `DropOutGenMask` (a bit mask, one bit per element, from a seed: no AI CPU task) and
`DropOutDoMask` (applies mask and scale; the gradient runs the same kernel).  With
`--dropout npu` the ops of a dropout scope are renamed so the device runs that migrated
graph: the random ops become `DropOutGenMask`, the seed ops and the compare / casts run
inside the kernels (no task), the scaling `Mul` / `SelectV2` become `DropOutDoMask`.

Which ops are a dropout's: `msprof_cli.dropout_scope` (by name scope).
"""
from __future__ import annotations

from msprof_cli.dropout_scope import in_dropout

GEN_MASK = "DropOutGenMask"
DO_MASK = "DropOutDoMask"
FOLDED = "NoOp"  # runs inside the two kernels: no task of its own

_RANDOM = frozenset({"RandomUniform", "StatelessRandomUniformV2", "StatelessRandomUniform",
                     "StatelessRandomUniformFullIntV2"})
_SEED = frozenset({"StatelessRandomGetKeyCounter", "StatelessRandomGetKeyCounterAlg",
                   "StatelessRandomGetAlg"})
_COMPARE = frozenset({"GreaterEqual", "Greater", "Less", "LessEqual", "Cast"})
_APPLY = frozenset({"Mul", "SelectV2", "Select", "RealDiv"})


def migrated_type(name: str, tf_type: str) -> str:
    """The op type the migrated graph runs for op `name` of type `tf_type`."""
    if not in_dropout(name):
        return tf_type
    from msprof_cli.device.op_map import normalize_tf_type

    base = normalize_tf_type(tf_type)[0]
    if base in _RANDOM:
        return GEN_MASK
    if base in _SEED or base in _COMPARE:
        return FOLDED
    if base in _APPLY:
        return DO_MASK
    return tf_type
