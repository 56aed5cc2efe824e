"""`msprof diff`: what changed between two summaries, and why (plain data, rendered by render.py).

Matching (docs/summary.md):
* **models**, per device: by graph signature (the op-type sequence of a step), then by name,
  then by model id; the outside-models entries match each other.
* **ops**, within a matched model: by name; the ops left are matched by place -- the op-type
  sequences of the unmatched ops of both runs, in step order, aligned (difflib), so a layer
  renamed by Keras (`dense_1` -> `dense_2`) is the same op, and an inserted Conv is "added".

Every metric says which side it describes: **device** (emulated from the real shapes:
deterministic, two runs of the same program give the same numbers), **host** (measured: the
input pipeline, Python between steps: noisy) or **mixed** (Iteration Time holds both).
Op and op-type deltas are ranked by their share of the change of the device step time.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from . import model as M
from .memory import size_text

DEVICE, HOST, MIXED = "device", "host", "mixed"

# (metric key, label, side, how to read it from a ModelSummary)
METRICS: list[tuple[str, str, str]] = [
    ("device-time", "Device step (FP start to iteration end), median", DEVICE),
    ("fp-bp", "FP to BP, median", DEVICE),
    ("refresh", "Iteration Refresh, median", DEVICE),
    ("op-time", "Op task time per step", DEVICE),
    ("communication", "Communication per step", DEVICE),
    ("memcpy", "Memcpy per step", DEVICE),
    ("iteration-time", "Iteration Time, median", MIXED),
    ("iteration-time-p90", "Iteration Time, p90", MIXED),
    ("data-aug-bound", "Data Aug Bound (input pipeline), median", HOST),
]


def metric_value(m: M.ModelSummary, key: str) -> float | None:
    def med(s: M.Stat | None, what: str = "median") -> float | None:
        return None if s is None else getattr(s, what)

    return {
        "device-time": lambda: med(m.device_time),
        "fp-bp": lambda: med(m.fp_bp),
        "refresh": lambda: med(m.refresh),
        "op-time": lambda: m.op_us_per_step,
        "communication": lambda: m.communication_us_per_step,
        "memcpy": lambda: m.memcpy_us_per_step,
        "iteration-time": lambda: med(m.iteration_time),
        "iteration-time-p90": lambda: med(m.iteration_time, "p90"),
        "data-aug-bound": lambda: med(m.data_aug_bound),
    }[key]()


@dataclass
class MetricDelta:
    key: str
    label: str
    side: str
    base: float | None
    new: float | None
    delta: float | None
    pct: float | None  # None when the base is 0 or a side is missing


@dataclass
class TypeDelta:
    op_type: str
    task_type: str
    base_us: float
    new_us: float
    delta_us: float
    pct: float | None
    base_count: float  # tasks per step
    new_count: float
    share: float | None  # of the device step change


@dataclass
class OpDelta:
    name: str  # in NEW (in BASE for a removed op)
    base_name: str  # "" for an added op; differs from `name` for an op matched by place
    op_type: str
    status: str  # changed | added | removed | renamed | same
    base_us: float
    new_us: float
    delta_us: float
    pct: float | None
    share: float | None
    base_shapes: str
    new_shapes: str


@dataclass
class ModelDiff:
    device_id: int
    base_model: int | None
    new_model: int | None
    name: str
    matched_by: str  # signature | name | id | outside
    metrics: list[MetricDelta] = field(default_factory=list)
    types: list[TypeDelta] = field(default_factory=list)  # changed op types, biggest first
    ops: list[OpDelta] = field(default_factory=list)  # changed / added / removed ops
    shape_changes: list[OpDelta] = field(default_factory=list)
    step_change_us: float | None = None  # device step time change (the ranking base)


@dataclass
class MemoryDelta:
    """One device's predicted peak memory, BASE against NEW (docs/summary.md)."""

    device_id: int
    base_peak: int | None  # None: that side has no memory facts
    new_peak: int | None
    new_usable: int | None
    new_fits: bool | None
    parts: list[tuple[str, int, int]] = field(default_factory=list)  # category, base, new
    grown: list[str] = field(default_factory=list)  # the tensors at the peak that grew

    @property
    def delta(self) -> int | None:
        if self.base_peak is None or self.new_peak is None:
            return None
        return self.new_peak - self.base_peak


@dataclass
class Diff:
    base: str
    new: str
    models: list[ModelDiff] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # BASE models with no match in NEW
    extra: list[str] = field(default_factory=list)  # NEW models with no match in BASE
    collection: list[str] = field(default_factory=list)  # versions / options that differ
    notes: list[str] = field(default_factory=list)
    memory: list[MemoryDelta] = field(default_factory=list)


def _pct(base: float | None, new: float | None) -> float | None:
    if base is None or new is None or base == 0:
        return None
    return round((new - base) / base * 100, 3)


def _label(dev: M.DeviceSummary, m: M.ModelSummary) -> str:
    what = "tasks outside models" if m.model_id is None else \
        f"model {m.model_id}" + (f' "{m.name}"' if m.name else "")
    return f"device {dev.device_id} {what}"


def match_models(base: list[M.ModelSummary], new: list[M.ModelSummary]
                 ) -> tuple[list[tuple[M.ModelSummary, M.ModelSummary, str]],
                            list[M.ModelSummary], list[M.ModelSummary]]:
    """Pairs (base, new, how), then the unmatched of each side."""
    left, right = list(base), list(new)
    pairs: list[tuple[M.ModelSummary, M.ModelSummary, str]] = []
    rules = [("outside", lambda m: "" if m.model_id is None else None),
             ("signature", lambda m: m.signature or None if m.model_id is not None else None),
             ("name", lambda m: m.name or None if m.model_id is not None else None),
             ("id", lambda m: m.model_id)]
    for how, key in rules:
        for b in list(left):
            kb = key(b)
            if kb is None:
                continue
            for n in right:
                if key(n) == kb:
                    pairs.append((b, n, how))
                    left.remove(b)
                    right.remove(n)
                    break
    return pairs, left, right


def match_ops(base: list[M.OpRow], new: list[M.OpRow]
              ) -> tuple[list[tuple[M.OpRow, M.OpRow]], list[M.OpRow], list[M.OpRow]]:
    """(matched pairs, removed, added): by name, then by place among the rest."""
    by_name = {o.name: o for o in new}
    pairs = [(b, by_name[b.name]) for b in base if b.name in by_name]
    named = {b.name for b, _ in pairs}
    rb = sorted((o for o in base if o.name not in named), key=lambda o: (o.position, o.name))
    rn = sorted((o for o in new if o.name not in named), key=lambda o: (o.position, o.name))
    sm = difflib.SequenceMatcher(None, [o.op_type for o in rb], [o.op_type for o in rn],
                                 autojunk=False)
    used_b, used_n = set(), set()
    for a, b, size in sm.get_matching_blocks():
        for i in range(size):
            pairs.append((rb[a + i], rn[b + i]))
            used_b.add(a + i)
            used_n.add(b + i)
    removed = [o for i, o in enumerate(rb) if i not in used_b]
    added = [o for i, o in enumerate(rn) if i not in used_n]
    return pairs, removed, added


def _share(delta: float, step: float | None) -> float | None:
    return round(delta / step, 4) if step else None


def diff_model(dev_id: int, b: M.ModelSummary, n: M.ModelSummary, how: str,
               eps_us: float = 0.0005) -> ModelDiff:
    md = ModelDiff(device_id=dev_id, base_model=b.model_id, new_model=n.model_id,
                   name=n.name or b.name, matched_by=how)
    for key, label, side in METRICS:
        vb, vn = metric_value(b, key), metric_value(n, key)
        md.metrics.append(MetricDelta(key, label, side, vb, vn,
                                      None if vb is None or vn is None else round(vn - vb, 3),
                                      _pct(vb, vn)))
    dt = next(x for x in md.metrics if x.key == "device-time")
    step = dt.delta if dt.delta else next(x for x in md.metrics if x.key == "op-time").delta
    md.step_change_us = step
    # op types
    tb, tn = _engine_keys(b.op_types, n.op_types)
    for k in list(tb) + [k for k in tn if k not in tb]:
        x, y = tb.get(k), tn.get(k)
        bu, nu = (x.per_step_us if x else 0.0), (y.per_step_us if y else 0.0)
        d = round(nu - bu, 3)
        bc, nc = (x.per_step_count if x else 0.0), (y.per_step_count if y else 0.0)
        if abs(d) > eps_us or bc != nc:
            md.types.append(TypeDelta(k[0], k[1], bu, nu, d, _pct(bu, nu), bc, nc,
                                      _share(d, step)))
    md.types.sort(key=lambda t: (-abs(t.delta_us), t.op_type))
    # ops
    pairs, removed, added = match_ops(b.ops, n.ops)
    for x, y in pairs:
        d = round(y.per_step_us - x.per_step_us, 3)
        renamed = x.name != y.name
        shape = x.input_shapes != y.input_shapes or x.output_shapes != y.output_shapes
        status = "changed" if abs(d) > eps_us else ("renamed" if renamed else "same")
        od = OpDelta(y.name, x.name, y.op_type, status, x.per_step_us, y.per_step_us, d,
                     _pct(x.per_step_us, y.per_step_us), _share(d, step),
                     x.input_shapes, y.input_shapes)
        if status == "changed":
            md.ops.append(od)
        if shape:
            md.shape_changes.append(od)
    for o in removed:
        md.ops.append(OpDelta(o.name, o.name, o.op_type, "removed", o.per_step_us, 0.0,
                              -o.per_step_us, None, _share(-o.per_step_us, step),
                              o.input_shapes, ""))
    for o in added:
        md.ops.append(OpDelta(o.name, "", o.op_type, "added", 0.0, o.per_step_us,
                              o.per_step_us, None, _share(o.per_step_us, step), "",
                              o.input_shapes))
    md.ops.sort(key=lambda o: (-abs(o.delta_us), o.name))
    md.shape_changes.sort(key=lambda o: (-abs(o.delta_us), o.name))
    return md


def _engine_keys(base: list, new: list) -> tuple[dict, dict]:
    """The op types of each side keyed by (op type, task type); an op type that runs on one
    engine on each side, a different one (an Atlas A2's vector work on AI_VECTOR_CORE
    against the 910's AI_CORE), is keyed (op type, "BASE -> NEW") on both, so the change
    shows as one row of that type."""
    kinds_b: dict[str, set[str]] = {}
    kinds_n: dict[str, set[str]] = {}
    for t in base:
        kinds_b.setdefault(t.op_type, set()).add(t.task_type)
    for t in new:
        kinds_n.setdefault(t.op_type, set()).add(t.task_type)
    moved = {op: f"{next(iter(kinds_b[op]))} -> {next(iter(kn))}"
             for op, kn in kinds_n.items()
             if len(kn) == 1 and len(kinds_b.get(op, ())) == 1 and kinds_b[op] != kn}
    tb = {(t.op_type, moved.get(t.op_type, t.task_type)): t for t in base}
    tn = {(t.op_type, moved.get(t.op_type, t.task_type)): t for t in new}
    return tb, tn


def _collection_changes(b: M.Summary, n: M.Summary) -> list[str]:
    out = []
    for key in ("chip", "msprof_cli", "tensorflow", "python"):
        vb, vn = getattr(b.collection, key), getattr(n.collection, key)
        if vb != vn and (vb or vn):
            out.append(f"{key}: {vb or '?'} -> {vn or '?'}")
    eb, en = b.collection.emulation, n.collection.emulation
    for k in sorted(set(eb) | set(en)):
        if eb and en and eb.get(k) != en.get(k):  # older records have none: not a change
            out.append(f"emulated {k}: {eb.get(k, '?')} -> {en.get(k, '?')}")
    ob, on = b.collection.options, n.collection.options
    for k in sorted(set(ob) | set(on)):
        if ob.get(k) != on.get(k):
            out.append(f"option {k}: {ob.get(k, '(unset)')} -> {on.get(k, '(unset)')}")
    return out


def diff(base: M.Summary, new: M.Summary) -> Diff:
    out = Diff(base=base.source, new=new.source, collection=_collection_changes(base, new))
    # devices by (rank, id) order: a job dir's ranks meet their own rank
    nd = {(d.rank_id, d.device_id): d for d in new.devices}
    bd = {(d.rank_id, d.device_id): d for d in base.devices}
    if len(base.devices) == 1 and len(new.devices) == 1:
        bd, nd = {0: base.devices[0]}, {0: new.devices[0]}  # one device each: compare them
    for key, db in bd.items():
        dn = nd.get(key)
        if dn is None:
            out.missing += [_label(db, m) for m in db.models]
            continue
        if db.memory is not None or dn.memory is not None:
            out.memory.append(memory_delta(dn.device_id, db.memory, dn.memory))
        pairs, left, right = match_models(db.models, dn.models)
        for b, n, how in pairs:
            out.models.append(diff_model(dn.device_id, b, n, how))
        out.missing += [_label(db, m) for m in left]
        out.extra += [_label(dn, m) for m in right]
    for key, dn in nd.items():
        if key not in bd:
            out.extra += [_label(dn, m) for m in dn.models]
    for m in out.models:
        if m.matched_by in ("name", "id") and m.base_model is not None:
            out.notes.append(f"device {m.device_id} model {m.new_model} \"{m.name}\": the graph "
                             f"changed (matched by {m.matched_by}, not by signature)")
    return out


def memory_delta(device_id: int, b: M.DeviceMemory | None, n: M.DeviceMemory | None
                 ) -> MemoryDelta:
    """The peak of each side, its categories, and the tensors live at NEW's peaks that are
    bigger than at BASE's (by the op that writes them) or were not there."""
    out = MemoryDelta(device_id, b.peak if b else None, n.peak if n else None,
                      n.usable if n else None, n.fits if n else None)
    if b is not None and n is not None:
        out.parts = [(k, b.parts.get(k, 0), v) for k, v in n.parts.items()
                     if v != b.parts.get(k, 0)]
        before = {t.op: t.bytes for mm in b.models for t in mm.top}
        grown = []
        for mm in n.models:
            for t in mm.top:
                was = before.get(t.op)
                if was is None or t.bytes > was:
                    grown.append((t.bytes - (was or 0), t.op, was, t.bytes))
        grown.sort(key=lambda g: (-g[0], g[1]))
        out.grown = [f"{op}: {size_text(was) if was is not None else 'not at the peak'} -> "
                     f"{size_text(now)}" for _, op, was, now in grown[:5]]
    return out
