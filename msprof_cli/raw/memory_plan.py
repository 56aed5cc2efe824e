"""The emulated device memory of a collection, beside the raw data: `msprof_cli_memory.json`.

GE logs its memory plan (`[IMAS]AfterAssignMemory`, `model_metrics ... alloc_dev_mem`,
docs/formats/device-memory.md 4) but writes none of it into a PROF dir unless `--task-memory`
is on, and even then without the variables or a verdict.  The device (device/memory.py) writes
what it planned here, after every chunk; summary, diff, check, report and collect's closing line
read it.  The real analysis ignores the file.  Standard library only.

    {"version": 1, "chip": "Ascend910A", "capacity": bytes, "reserved": bytes,
     "variable_limit": bytes, "graph_limit": bytes,
     "devices": {"0": {
        "variables": {"weight": b, "optimizer": b, "state": b, "count": n, "pool": b},
        "hccl": b,
        "models": {"1": {"name": s, "feature_map": b, "live_peak": b, "peak_node": i,
                         "tensors": n, "io": b, "constants": b, "activations": b,
                         "gradients": b, "updates": b, "workspace": b,
                         "load_ns": host ns, "top": [[op, bytes, first node, last node,
                         "activation" | "gradient" | "update" | "workspace"], ...],
                         "curve": {"node": [...], "activation": [...], ...}}}}}}

`activations` / `gradients` / `updates`: the bytes live at the plan's peak node, by what
produced them: a forward op, a backward op, or an op after the last backward op (the
optimizer's update); `workspace`: the kernels' workspaces live there (device/workspace.py);
`top`: the biggest tensors live there; `curve`: the bytes live at each
node index by the same kinds (a big graph's at most 400 nodes, its peak among them).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FILE_NAME = "msprof_cli_memory.json"
VERSION = 1
TOP_TENSORS = 20  # tensors listed per model at its peak


@dataclass
class ModelMemory:
    name: str
    feature_map: int  # the plan's TOTAL: the block the model allocates when it loads
    live_peak: int  # the largest live sum (GE's theory_min)
    peak_node: int  # the node index of the live peak (-1: none)
    tensors: int
    io: int  # the step's input and output buffers (feeds + fetches)
    activations: int  # live at the peak, produced by forward ops
    gradients: int  # live at the peak, produced by backward ops
    load_ns: int  # host ns of the model's first step (when GE loads it)
    updates: int = 0  # live at the peak, produced by the optimizer's ops
    workspace: int = 0  # kernels' workspaces live at the peak (part of the feature map)
    # the graph's constants a task reads, copied into the model's allocation at load (GE's
    # tensor size rule each)
    constants: int = 0
    top: list[list[Any]] = field(default_factory=list)
    # bytes live over the step: {"node": [...], "activation": [...], "gradient": [...],
    # "update": [...]} (at most device/memory.py's CURVE_POINTS node indices)
    curve: dict[str, list[int]] = field(default_factory=dict)

    def allocation(self) -> int:
        """What the model allocates when it loads: its feature map, its step's buffers and
        its constants."""
        return self.feature_map + self.io + self.constants


@dataclass
class DeviceMemory:
    weight: int = 0
    optimizer: int = 0
    state: int = 0
    count: int = 0
    pool: int = 0  # the variable memory with GE's alignment
    models: dict[int, ModelMemory] = field(default_factory=dict)
    hccl: int = 0  # HCCL's send and receive buffers of the device's communicator

    def feature_maps(self) -> int:
        """What the loaded graphs hold (GE's default static memory policy keeps each
        graph's block: docs/formats/device-memory.md 3)."""
        return sum(m.allocation() for m in self.models.values())

    def peak(self) -> int:
        """The device's predicted peak HBM use of the application: variables + every
        loaded graph's feature map, buffers and constants + HCCL's buffers."""
        return self.pool + self.feature_maps() + self.hccl


@dataclass
class MemoryFacts:
    chip: str
    capacity: int
    reserved: int
    variable_limit: int
    graph_limit: int
    devices: dict[int, DeviceMemory] = field(default_factory=dict)

    @property
    def usable(self) -> int:
        return self.capacity - self.reserved


def write(prof_dir: Path, facts: MemoryFacts) -> None:
    from msprof_cli.raw.control import write_json_line

    doc = {"version": VERSION, "chip": facts.chip, "capacity": facts.capacity,
           "reserved": facts.reserved, "variable_limit": facts.variable_limit,
           "graph_limit": facts.graph_limit,
           "devices": {str(d): {
               "variables": {"weight": dm.weight, "optimizer": dm.optimizer,
                             "state": dm.state, "count": dm.count, "pool": dm.pool},
               "hccl": dm.hccl,
               "models": {str(m): vars(mm) for m, mm in sorted(dm.models.items())}}
               for d, dm in sorted(facts.devices.items())}}
    write_json_line(prof_dir / FILE_NAME, doc)


def read(prof_dir: Path) -> MemoryFacts | None:
    """The collection's memory facts; None when absent or unreadable (an older collection,
    or one whose steps never reached the device)."""
    try:
        doc = json.loads((Path(prof_dir) / FILE_NAME).read_text())
        facts = MemoryFacts(doc["chip"], int(doc["capacity"]), int(doc["reserved"]),
                            int(doc["variable_limit"]), int(doc["graph_limit"]))
        for d, dev in doc.get("devices", {}).items():
            v = dev.get("variables", {})
            dm = DeviceMemory(int(v.get("weight", 0)), int(v.get("optimizer", 0)),
                              int(v.get("state", 0)), int(v.get("count", 0)),
                              int(v.get("pool", 0)), hccl=int(dev.get("hccl", 0)))
            for m, mm in dev.get("models", {}).items():
                dm.models[int(m)] = ModelMemory(**mm)
            facts.devices[int(d)] = dm
        return facts
    except (OSError, ValueError, KeyError, TypeError):
        return None
