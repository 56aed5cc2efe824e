"""What the converter keeps from chunk to chunk of one collection (one PROF dir).

`ConverterState`: model ids and their `ModelInfo`s, iteration counts, stable thread ids, the
op schedule of each graph's last sampled execution (`Schedule`, which unsampled executions
replay: replay.py), the static shape caches and the batch each graph received.
`GraphRegistry`: the static graph maps by key, filled by the step hooks (steps.py) and read
by the converter (convert.py).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from msprof_cli.capture import ModelInfo, OpSchedule
from msprof_cli.collect.input_pipeline import PipelineHistory
from msprof_cli.collect.tf_graphs import OpShape, StaticGraph


@dataclass(eq=False)
class Schedule(OpSchedule):
    """Op schedule of one sampled execution (capture.OpSchedule: plain tuples in OpRun field
    order, times relative to its start), with what the converter needs beside it.  Replayed
    steps carry it as `Iteration.schedule`, so the device turns it into columns once."""

    version: int = 0  # static graph version the shapes came from
    input_wait: int = 0  # measured input wait of the sampled step (ns)
    # production time of the elements it took from prefetched pipelines (ns,
    # collect/input_pipeline.py): the pipeline's, so replayed steps take it unscaled
    input_production: int = 0


@dataclass
class ConverterState:
    """What survives from chunk to chunk within one collection (one PROF dir)."""

    pid: int = field(default_factory=os.getpid)
    main_thread_id: int = 0
    model_ids: dict[str, int] = field(default_factory=dict)
    models: dict[int, ModelInfo] = field(default_factory=dict)
    iteration_counts: dict[int, int] = field(default_factory=dict)
    thread_ids: dict[str, int] = field(default_factory=dict)
    schedules: dict[str, Schedule] = field(default_factory=dict)
    shape_caches: dict[str, dict[tuple[str, str], OpShape]] = field(default_factory=dict)
    fp_bp_done: set[int] = field(default_factory=set)
    # steps_per_execution > 1: per graph key, the schedule of each step of a sampled call
    sub_schedules: dict[str, list[Schedule]] = field(default_factory=dict)
    # the batch each graph's steps received (unknown dims resolved, step_batch) and the
    # specs rewritten with it
    batches: dict[str, int] = field(default_factory=dict)
    batch_shapes: dict[tuple, tuple] = field(default_factory=dict)
    # this process is one rank of a multi-process job (MultiWorkerMirroredStrategy, ...):
    # every collective of a step's graph ran (`restore_collectives`)
    multi_rank: bool = False
    # the script's dropout as written ("tf") or as npu_ops.dropout runs it ("npu",
    # device/npu_dropout.py)
    dropout: str = "tf"
    # the tf.data prefetches seen so far (collect/input_pipeline.py)
    pipelines: PipelineHistory = field(default_factory=PipelineHistory)

    def model_id(self, key: str, name: str) -> int:
        mid = self.model_ids.get(key)
        if mid is None:
            mid = len(self.model_ids) + 1
            self.model_ids[key] = mid
            self.models[mid] = ModelInfo(model_id=mid, name=name, graph_key=key)
        return mid

    def next_index(self, model_id: int) -> int:
        n = self.iteration_counts.get(model_id, 0) + 1
        self.iteration_counts[model_id] = n
        return n

    def thread_id(self, line_name: str) -> int:
        """A stable, OS-like id per TF thread (TF ids are 64-bit hashes, not tids)."""
        tid = self.thread_ids.get(line_name)
        if tid is None:
            tid = (self.pid + 1 + len(self.thread_ids)) & 0x7FFFFFFF
            self.thread_ids[line_name] = tid
        return tid


@dataclass
class GraphRegistry:
    """Static graph maps by key (filled by the step hooks, read by the converter)."""

    graphs: dict[str, StaticGraph] = field(default_factory=dict)
