"""The summary model: plain data that `msprof summary`, `diff`, `check` and `report` read.

One summary describes one collection (a PROF dir, or every PROF dir of a job dir): per
device and per model, the step breakdown, the device's busy share, every op and op type with
its time per step, AI Core pipe ratios where PMU data exists, communication and memcpy time,
and the advice's top findings.  It is plain data (dataclasses of numbers, strings and lists),
written as JSON with a `schema_version` (docs/summary.md), so a repository can commit a small
baseline and `diff` / `check` can read it back without the raw data.

Standard library only: building a summary needs pandas (build.py), reading one does not.
"""
from __future__ import annotations

import json
import math
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from msprof_cli.errors import MsprofError

SCHEMA_VERSION = 1
KIND = "msprof_cli.summary"
MAX_STEPS = 1000  # per-iteration series kept per model (every k-th iteration above it)
ACTIVITY_BINS = 240  # time bins of a device's activity minimap
MAX_JSON_BYTES = 256 * 1024 * 1024  # a summary JSON bigger than this is not one of ours


class SummaryError(MsprofError):
    """A summary cannot be built or read (exit code 2: bad input for diff / check)."""

    exit_code = 2


@dataclass
class Stat:
    """A per-iteration series in µs: its median, 90th percentile, mean, min and max."""

    median: float
    p90: float
    mean: float
    min: float
    max: float
    count: int


@dataclass
class OpTypeRow:
    """One (OP Type, Task Type) of a model: its tasks per step and time per step (µs)."""

    op_type: str
    task_type: str
    count: int  # tasks over every iteration of the model
    per_step_count: float
    per_step_us: float
    share: float  # of the model's op time per step (0..1)


@dataclass
class OpRow:
    """One op (by name) of a model.  `position`: the index of its first task within a step
    (tasks of a step in start order), so renamed ops can be matched by place (diff)."""

    name: str
    op_type: str
    task_type: str
    position: int
    count: int
    per_step_count: float
    per_step_us: float
    input_shapes: str
    output_shapes: str


@dataclass
class PipeRow:
    """AI Core pipe ratios of an op type (busy cycles of the pipe / total cycles, weighted by
    cycles over its tasks), from the PipeUtilization PMU counters."""

    op_type: str
    per_step_us: float
    cube: float | None
    vector: float | None
    scalar: float | None
    mte1: float | None
    mte2: float | None
    mte3: float | None


@dataclass
class StepSeries:
    """Per iteration of a model (columns, µs), for plots and the cluster step breakdown:
    every `stride`-th iteration (at most MAX_STEPS of them).  `compute`: the union of its op
    tasks in the step; `communication`: the union of its HCCL executions; `comm_not_overlapped`:
    communication not hidden behind compute."""

    stride: int
    iteration_id: list[int]
    iteration_time: list[float]
    fp_bp: list[float | None]
    refresh: list[float | None]
    data_aug_bound: list[float | None]
    compute: list[float]
    communication: list[float]
    comm_not_overlapped: list[float]


@dataclass
class Activity:
    """A minimap of the device: per stream, the busy share (0..1) of `bins` equal time bins
    over [start_us, end_us] (local µs since the epoch)."""

    start_us: float
    end_us: float
    bins: int
    streams: list[int]
    busy: list[list[float]]


@dataclass
class Overlap:
    """Compute (op tasks) and communication (HCCL executions) of a device, and their overlap
    (µs over the whole collection)."""

    compute_us: float
    communication_us: float
    overlapped_us: float


@dataclass
class ModelSummary:
    """One model of a device.  model_id None: the tasks outside any model (eager ops,
    initialisation), with `iterations` 0 and per-step numbers equal to the totals."""

    model_id: int | None
    name: str
    signature: str  # hash of the op-type sequence of a step (diff matches models by it)
    iterations: int
    measured: str  # iteration ranges traced ("1-4"), "" when unknown
    replayed: str  # iteration ranges replayed from the sampled steps' schedule
    iteration_time: Stat | None
    device_time: Stat | None  # FP start to iteration end: the device-side part of a step
    fp_bp: Stat | None
    refresh: Stat | None
    data_aug_bound: Stat | None
    busy_share: float | None  # union of the device's task time within steps / step time
    op_us_per_step: float  # sum of the model's op (AI Core, AI CPU, ...) task time per step
    communication_us_per_step: float
    memcpy_us_per_step: float
    tasks: int
    op_types: list[OpTypeRow] = field(default_factory=list)
    ops: list[OpRow] = field(default_factory=list)
    pipes: list[PipeRow] | None = None
    steps: StepSeries | None = None
    # warm-up steps (graph tracing, the model's first) left out of the statistics above and
    # of busy_share; `steps` keeps them
    warmup_iterations: int = 0
    # replayed iterations that took far longer on the host than their sampled step
    # (raw/sampling.py): what the host waited for there was not measured
    drifted: str = ""


@dataclass
class LinkRow:
    """Data a device sent to another rank (its hccl_info steps where it is the source), per
    communication op name and link: the cluster's communication matrix is made of these."""

    op_name: str
    src_rank: int
    dst_rank: int
    transport: str  # SDMA / RDMA / LOCAL
    link: str  # HCCS / PCIE / ROCE ...
    count: int  # steps
    bytes: int
    time_us: float  # the steps' summed duration

    @property
    def bandwidth_gbs(self) -> float | None:
        return round(self.bytes / (self.time_us * 1000), 4) if self.time_us > 0 else None


@dataclass
class TensorRow:
    """A tensor live at a model's memory peak (the output of one task)."""

    op: str  # the task that writes it
    bytes: int  # its planned (aligned) size
    first_node: int  # its lifetime, as node indices of the step
    last_node: int
    # "activation" (forward) / "gradient" (backward) / "update" (optimizer) / "workspace"
    kind: str


@dataclass
class ModelMemoryRow:
    model_id: int
    name: str
    feature_map: int  # the block GE allocates when the model loads
    live_peak: int  # the most bytes live at one node (the least any plan needs)
    io: int  # the step's input and output buffers
    activations: int  # at the peak: forward outputs (kept for backward)
    gradients: int  # at the peak: backward outputs
    updates: int = 0  # at the peak: the optimizer's temporaries
    constants: int = 0  # the graph's Const values its tasks read (copied at load)
    top: list[TensorRow] = field(default_factory=list)
    # bytes live over the step by kind ({"node": [...], "activation": [...], ...})
    curve: dict[str, list[int]] = field(default_factory=dict)


@dataclass
class DeviceMemory:
    """The device's predicted memory (docs/summary.md "Device memory")."""

    peak: int  # bytes: variables + every loaded graph's feature map and buffers
    usable: int  # the chip's HBM less what its system keeps
    capacity: int
    fits: bool
    parts: dict[str, int] = field(default_factory=dict)  # the peak's split by category
    problems: list[str] = field(default_factory=list)  # GE's out-of-memory messages
    advice: str = ""
    variables: int = 0  # how many variables
    variable_limit: int = 0  # GE's variable memory pool
    graph_limit: int = 0  # GE's graph memory pool
    variable_bytes: int = 0  # what the variables take of it
    graph_bytes: int = 0  # what the loaded graphs take of theirs
    # a real collection's npu_mem samples (no emulated plan): the peak is measured, the
    # split unknown; `usable` 0 when the chip's HBM is not known
    measured: bool = False
    samples: int = 0
    models: list[ModelMemoryRow] = field(default_factory=list)


@dataclass
class DeviceSummary:
    prof: str  # PROF dir name
    device_id: int
    rank_id: int
    tasks: int
    span_us: float  # first task start to last task end
    busy_share: float | None  # union of task time / span
    models: list[ModelSummary] = field(default_factory=list)
    advice: list[str] = field(default_factory=list)  # the brief findings (export's console)
    advice_note: str = ""  # why there is no advice, when there is none
    # the model the advice covers: the one msprof export's default prof_rule covers
    advice_model: int | None = None
    overlap: Overlap | None = None
    activity: Activity | None = None
    links: list[LinkRow] = field(default_factory=list)
    memory: DeviceMemory | None = None


@dataclass
class Collection:
    chip: str
    emulated: bool  # collected by msprof_cli's emulated device (else: a real CANN PROF dir)
    msprof_cli: str  # version that collected it ("" for a real CANN PROF dir)
    tensorflow: str
    python: str
    options: dict[str, Any] = field(default_factory=dict)
    # the emulated system's settings (msprof collect --precision-mode, --dropout)
    emulation: dict[str, str] = field(default_factory=dict)


@dataclass
class Summary:
    source: str  # what was summarised (path as given)
    made_by: str  # msprof_cli version that made this summary
    collection: Collection
    devices: list[DeviceSummary] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    schema_version: int = SCHEMA_VERSION
    kind: str = KIND

    def models(self) -> list[tuple[DeviceSummary, ModelSummary]]:
        return [(d, m) for d in self.devices for m in d.models]


# -- JSON ------------------------------------------------------------------------------------
def clean_json(obj: Any) -> Any:
    """NaN / inf are not JSON: None instead (a metric that does not exist)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: clean_json(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [clean_json(v) for v in obj]
    return obj


def to_dict(summary: Summary) -> dict[str, Any]:
    d = clean_json(asdict(summary))
    # the identifying keys first, so `head` of the file says what it is
    return {"kind": d.pop("kind"), "schema_version": d.pop("schema_version"), **d}


def to_json(summary: Summary) -> str:
    return json.dumps(to_dict(summary), indent=1, ensure_ascii=False) + "\n"


def _build(cls: type, data: Any, where: str) -> Any:
    """A dataclass from its dict, with a message naming the field that is wrong."""
    if not isinstance(data, dict):
        raise SummaryError(f"{where}: expected an object, found {type(data).__name__}")
    kwargs = {}
    nested = {ModelSummary: {"iteration_time": Stat, "device_time": Stat, "fp_bp": Stat,
                             "refresh": Stat, "data_aug_bound": Stat, "steps": StepSeries},
              DeviceSummary: {"overlap": Overlap, "activity": Activity,
                              "memory": DeviceMemory},
              Summary: {"collection": Collection}}.get(cls, {})
    lists = {ModelSummary: {"op_types": OpTypeRow, "ops": OpRow, "pipes": PipeRow},
             DeviceSummary: {"models": ModelSummary, "links": LinkRow},
             DeviceMemory: {"models": ModelMemoryRow},
             ModelMemoryRow: {"top": TensorRow},
             Summary: {"devices": DeviceSummary}}.get(cls, {})
    for f in fields(cls):
        if f.name not in data:
            if f.default is not MISSING or f.default_factory is not MISSING:
                continue  # has a default
            raise SummaryError(f"{where}: missing field '{f.name}'")
        v = data[f.name]
        if f.name in nested and v is not None:
            v = _build(nested[f.name], v, f"{where}.{f.name}")
        elif f.name in lists and v is not None:
            if not isinstance(v, list):
                raise SummaryError(f"{where}.{f.name}: expected a list")
            v = [_build(lists[f.name], x, f"{where}.{f.name}[{i}]") for i, x in enumerate(v)]
        _check_type(f.type, v, f"{where}.{f.name}")
        kwargs[f.name] = v
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise SummaryError(f"{where}: {exc}") from None


_SCALARS = {"float": (int, float), "int": (int,), "str": (str,), "bool": (bool,)}


def _check_type(annotation: Any, v: Any, where: str) -> None:
    """Scalars of the schema are what they say (a baseline edited by hand or cut short is
    refused with the field named, not a traceback later)."""
    text = str(annotation).replace(" ", "")
    parts = text.split("|")
    if v is None:
        if "None" not in parts:
            raise SummaryError(f"{where}: null where a value is required")
        return
    kinds = [_SCALARS[p] for p in parts if p in _SCALARS]
    if not kinds:
        return  # a nested object or list, checked by _build
    if isinstance(v, bool) and "bool" not in parts:
        raise SummaryError(f"{where}: expected {text}, found a boolean")
    if not any(isinstance(v, k) for k in kinds):
        raise SummaryError(f"{where}: expected {text}, found {type(v).__name__}")


def from_dict(data: Any, where: str = "summary") -> Summary:
    if not isinstance(data, dict) or data.get("kind") != KIND:
        raise SummaryError(f"{where} is not an msprof summary JSON (no \"kind\": \"{KIND}\"); "
                           "make one with: msprof summary PROF_DIR --format json > base.json")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise SummaryError(f"{where} has schema_version {version!r}; this msprof_cli reads "
                           f"version {SCHEMA_VERSION}: make the baseline again with "
                           "msprof summary --format json")
    return _build(Summary, data, where)


def read_json(path: Path) -> Summary:
    try:
        size = path.stat().st_size
        if size > MAX_JSON_BYTES:
            raise SummaryError(f"{path}: {size} bytes is too big for a summary JSON")
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise SummaryError(f"{path} is not a text file (a summary JSON is UTF-8)") from None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise SummaryError(f"{path} is not valid JSON ({str(exc)[:120]}): was it cut short? "
                           "make it again with msprof summary --format json") from None
    return from_dict(data, str(path))
