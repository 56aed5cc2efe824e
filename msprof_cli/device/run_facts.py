"""What a collection says about its own steps, beside the raw data (raw/sampling.py,
`msprof_cli_sampling.json`): which iterations were traced and which replayed, which were
warm-up steps, which models train, and which op types took the unknown-type placement rule.
The real analysis ignores the file; export, summary and query read it."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from msprof_cli.capture import CaptureChunk
from msprof_cli.device import op_map
from msprof_cli.device.op_table import Interner, OpTable, SignatureRegistry
from msprof_cli.device.step_trace import NameClasses
from msprof_cli.raw import sampling


@dataclass
class RunFacts:
    """The facts of one PROF dir, kept across chunks and rewritten after each."""

    prof_dir: Path
    measured: dict[int, list[int]] = field(default_factory=dict)
    replayed: dict[int, list[int]] = field(default_factory=dict)
    # per model: its first iteration and those whose call traced the graph
    warmup: dict[int, list[int]] = field(default_factory=dict)
    training: set[int] = field(default_factory=set)  # a step ran a backward op / optimizer
    # per model: replayed iterations far longer than the sampled step they replay
    drifted: dict[int, list[int]] = field(default_factory=dict)
    fallback_types: Counter = field(default_factory=Counter)  # op type -> tasks

    def record(self, chunk: CaptureChunk, ops: OpTable, sigs: SignatureRegistry,
               names: Interner, classes: NameClasses) -> None:
        fallback = self._count_fallback(ops, sigs)
        if not chunk.iterations and not fallback:
            return
        for it in chunk.iterations:
            target = self.replayed if it.replayed else self.measured
            target.setdefault(it.model_id, []).append(it.index)
            if it.warmup or it.index == 1:
                self.warmup.setdefault(it.model_id, []).append(it.index)
            if it.replayed and it.sampled_ns() > 0 and \
                    it.end_ns - it.start_ns > sampling.DRIFT_RATIO * it.sampled_ns():
                self.drifted.setdefault(it.model_id, []).append(it.index)
        inn = ops.iter_row >= 0
        if inn.any():
            _, backward = classes.of(names.items)
            optimizer = np.array([op_map.is_optimizer_type(t) for t in sigs.tf_type], bool)
            trains = inn & (backward[ops.name_idx] | optimizer[ops.sig])
            self.training.update(int(m) for m in np.unique(ops.model_id[trains]).tolist())
        sampling.write(self.prof_dir, self.measured, self.replayed, self.training,
                       self.fallback_types, self.warmup, self.drifted)

    def _count_fallback(self, ops: OpTable, sigs: SignatureRegistry) -> bool:
        """Count the chunk's tasks whose op type is in no op table (op_map's unknown-type
        rule, one lookup per distinct signature); True when there were any."""
        if not len(ops):
            return False
        uniq, counts = np.unique(ops.sig, return_counts=True)
        hit = False
        for sg, c in zip(uniq.tolist(), counts.tolist()):
            tf_type = sigs.tf_type[sg]
            if op_map.map_op(tf_type).fallback and sigs.n_fused[sg] == 0:
                self.fallback_types[tf_type] += c
                hit = True
        return hit
