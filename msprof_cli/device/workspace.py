"""The kernels' own scratch memory (workspace) in GE's memory plan (docs/device-model.md 12,
"Workspaces").

A TBE kernel declares its workspaces when it is compiled (the kernel json's
`"workspace": {"num", "size"}`); GE plans each as a block of the graph's feature map that
lives for the node only: allocated after the node's outputs, before its inputs are released,
and reusable by the next node (graphengine `ge/graph/build/memory/block_mem_assigner.cc`,
mindspore-ai/graphengine@4b9a536b: `GetWorkspaceBytes`, `ApplyMemory(..., kWorkspace, ...)`,
`stream_workspace_blocks_`), at GE's 512 B alignment.

Of the 910's static kernels the op map produces, the canndev operator sources (a public
mirror: github.com/dengguojie/vue-element-admin@3f8601f6ee7ae38d6d2b989908513193fe15bd8e,
`ops/built-in/tbe/impl/`) declare none for the convolutions and their backprops, the fp16
matmuls, the BatchNorm kernels, the reductions, the optimizers, GatherV2 or
UnsortedSegmentSum.  Emulated here, the one rule whose trigger is a shape alone:

- **SoftmaxCrossEntropyWithLogits over more than 19,999 classes**
  (`softmax_cross_entropy_with_logits_schedule.py`: `c_size > 19999` moves its intermediates
  to global memory): fp16 logits keep five N x C fp32 tensors there (the two casts, the
  difference, the exponential, the broadcast), fp32 logits three, four when the labels are
  broadcast.  A language model's loss over a 32k vocabulary for 4,096 tokens holds 1.5 GiB.

Not emulated (documented in docs/device-model.md 12): the workspaces whose trigger depends on
the UB tiling (a softmax or a cross-entropy whose class axis outgrows the UB, the generic
TransposeD / PadD fallbacks, TopKD over 5,000 columns, the TIK LayerNorm's fp16 mean and
variance, OneHotD on a leading axis).
"""
from __future__ import annotations

import numpy as np

from msprof_cli.device.op_table import DT_FP16, SignatureRegistry
from msprof_cli.device.split_kernels import SPARSE_XENT

XENT = "SoftmaxCrossEntropyWithLogits"
XENT_LARGE_CLASSES = 19999  # the schedule's c_size threshold


def _xent_workspace(sigs: SignatureRegistry, s: int) -> int:
    ins = sigs.specs[s][0]
    if not ins or len(ins[0].shape) != 2:
        return 0
    n, c = (max(int(d or 1), 1) for d in ins[0].shape)
    if c <= XENT_LARGE_CLASSES:
        return 0
    if int(sigs.dtype_class[s]) == DT_FP16:
        k = 5
    else:
        # the sparse op's labels reach the kernel as the N x C one-hot (split_kernels.py)
        broadcast = (sigs.tf_type[s] != SPARSE_XENT and len(ins) > 1
                     and tuple(ins[1].shape) != tuple(ins[0].shape))
        k = 4 if broadcast else 3
    return k * n * c * 4


def workspace_bytes(sigs: SignatureRegistry, sig: np.ndarray) -> np.ndarray:
    """Workspace bytes of each task of signature `sig` (one evaluation per signature)."""
    uniq, inv = np.unique(np.asarray(sig, np.int64), return_inverse=True)
    per = np.array([_xent_workspace(sigs, s) if sigs.ge_type[s] == XENT else 0
                    for s in uniq.tolist()], np.int64)
    return per[inv] if len(per) else np.zeros(0, np.int64)
