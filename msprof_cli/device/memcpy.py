"""Host<->device copies of a step's feeds and fetches (docs/device-model.md 5.1).

Per iteration GE copies the step's input batch to the device before the model runs
(InputCopy -> rtMemcpyAsync host-to-device) and the fetched outputs back after it
(OutputCopy -> device-to-host).  Each copy is one MEMCPY_ASYNC task: a host task_track inside
the GE copy API, and on the 910 two ts_track rptType 11 ("ts memcpy") records (start / end):
the copy runs on the SDMA engine driven by the task scheduler, not on the AI Cores, so it is
not in hwts.data.

Bytes:
* feeds = `ModelInfo.feeds` when the collector knows the graph inputs, else the outputs of
  the step's data-source ops (`DATA_SOURCE_TYPES`) that the device sees;
* fetches = `ModelInfo.fetches` (the function's return values); unknown -> no D2H copy;
* resource / variant tensors (handles) are not copied.
With several devices the bytes of an iteration are split evenly over its devices (a
distribution strategy splits the global batch over the replicas).
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

from msprof_cli.capture import ModelInfo, TensorSpec
from msprof_cli.device.op_table import TF_DTYPES, UNDEFINED_DTYPE, SignatureRegistry, \
    dims_elems

H2D_STREAM = 5  # input copies (host -> device)
D2H_STREAM = 6  # output copies (device -> host)
PCIE_BYTES_PER_S = 24e9  # effective PCIe 4.0 x16 bandwidth per direction (assumption)
MEMCPY_LATENCY_NS = 3_000  # fixed cost of one SDMA copy: descriptor, doorbell, completion
H2D_NAME = "MemcpyAsync_HostToDevice"  # kernel name of the task (task_time kernel_name)
D2H_NAME = "MemcpyAsync_DeviceToHost"
# op types whose outputs are the step's input batch (tf_graphs.DATA_SOURCES + feeds)
DATA_SOURCE_TYPES = frozenset({"IteratorGetNext", "IteratorGetNextSync", "OptionalGetValue",
                               "_Arg", "Placeholder", "PlaceholderV2", "PlaceholderWithDefault"})
_NOT_COPIED = frozenset({"resource", "variant"})


def spec_bytes(specs: Iterable[TensorSpec]) -> int:
    """Bytes of the tensors a copy moves (handles excluded; -1 dims as in the cost model)."""
    total = 0
    for t in specs:
        if t.dtype in _NOT_COPIED:
            continue
        total += dims_elems(t.shape) * TF_DTYPES.get(t.dtype, UNDEFINED_DTYPE)[1]
    return total


def duration_ticks(nbytes: np.ndarray, tick_ns: int) -> np.ndarray:
    """Copy time = MEMCPY_LATENCY_NS + bytes / PCIE_BYTES_PER_S, rounded up to ticks."""
    ns = MEMCPY_LATENCY_NS + np.asarray(nbytes, np.float64) * 1e9 / PCIE_BYTES_PER_S
    return np.ceil(ns / tick_ns).astype(np.int64)


def source_bytes_per_sig(sigs: SignatureRegistry, bytes_out: np.ndarray) -> np.ndarray:
    """Per signature: its output bytes if it is a data-source op, else 0 (a loop over the
    distinct signatures only)."""
    is_src = np.array([t in DATA_SOURCE_TYPES for t in sigs.tf_type], bool)
    return np.where(is_src, bytes_out, 0).astype(np.int64)


def model_bytes(models: dict[int, ModelInfo], model_ids: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(feed bytes, fetch bytes, feeds known) per iteration from ModelInfo (loop over the
    distinct models only)."""
    feed = np.zeros(len(model_ids), np.int64)
    fetch = np.zeros(len(model_ids), np.int64)
    known = np.zeros(len(model_ids), bool)
    for mid in np.unique(model_ids).tolist():
        info = models.get(int(mid))
        if info is None:
            continue
        m = model_ids == mid
        if info.feeds:
            feed[m] = spec_bytes(info.feeds)
            known[m] = True
        fetch[m] = spec_bytes(info.fetches)
    return feed, fetch, known
