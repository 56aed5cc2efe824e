"""Which ops belong to a dropout: the names Keras' Dropout layers and `tf.nn.dropout` give
their ops (device/npu_dropout.py maps them as the Ascend migration runs them; the export's
advice says what that would change).

A dropout scope is a name component that is `dropout` or ends with it, optionally numbered:
`dropout/`, `dropout_1/`, `stateless_dropout/`.  A layer the script renamed
(`Dropout(0.1, name="drop")`) keeps Keras' inner `stateless_dropout/` scope in Keras 3.
"""
from __future__ import annotations

import re

_SCOPE = re.compile(r"(?:^|/)(?:\w*_)?dropout(?:_\d+)?/", re.IGNORECASE)


def in_dropout(name: str) -> bool:
    return bool(_SCOPE.search(name))
