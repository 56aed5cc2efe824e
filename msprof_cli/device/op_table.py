"""Layer (a): CaptureChunk -> columnar op table (one row per op execution).

The Python objects of a chunk are walked exactly once here; everything after this module works
on numpy columns (layer (b): cost model, scheduler, record builders), so a benchmark generator
can feed millions of rows by building an `OpTable` (and a `SignatureRegistry`) directly.

Op *signatures* (TF type + tensor specs + fusion count) repeat across iterations, so the shape
arithmetic (FLOPs, bytes, element counts, tensor_info payloads) is done once per signature and
rows only carry the signature index.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

from msprof_cli.capture import DTYPE_BYTES, SINGLE_OP_MODEL_ID, CaptureChunk, OpRun, TensorSpec
from msprof_cli.device import fractal as FR
from msprof_cli.device.cube_shapes import DEFAULT_DIM, cube_flops, device_elems, dims_elems
from msprof_cli.device import op_map
from msprof_cli.device import avg_pool as AP
from msprof_cli.device.npu_dropout import DO_MASK, GEN_MASK
from msprof_cli.device.replay_columns import ReplayColumns, replayed_rows
from msprof_cli.device.sparse_access import sparse_traffic
from msprof_cli.raw import enums as EN
from msprof_cli.raw import layouts as L

DEFAULT_TENSOR_ELEMS = 1024  # an op captured without any tensor spec counts as 1024 elements

# TF dtype name -> (GE data type id, bytes per element)
_GE_DTYPE_IDS: dict[str, int] = {
    "float32": 0, "float": 0, "float16": 1, "half": 1, "int8": 2, "int32": 3, "uint8": 4,
    "int16": 6, "uint16": 7, "uint32": 8, "int64": 9, "uint64": 10, "float64": 11, "double": 11,
    "bool": 12, "string": 13, "complex64": 16, "complex128": 17, "qint8": 18, "qint16": 19,
    "qint32": 20, "quint8": 21, "quint16": 22, "resource": 23, "variant": 26, "bfloat16": 27,
    "int4": 29,
}
TF_DTYPES: dict[str, tuple[int, int]] = {k: (v, DTYPE_BYTES[k]) for k, v in _GE_DTYPE_IDS.items()}
UNDEFINED_DTYPE = (0xFFFFFFFF, 4)

# dtype classes used by the cost model / PMU split
DT_FP16 = 0  # fp16, bf16 (cube native)
DT_FP32 = 1  # fp32 (cube via fp16 in the default allow_fp32_to_fp16 precision mode)
DT_INT8 = 2
DT_INT = 3  # other integers, bool
DT_OTHER = 4  # string, resource, variant, 64-bit floats...
_DT_CLASS = {0: DT_FP32, 1: DT_FP16, 27: DT_FP16, 2: DT_INT8, 4: DT_INT8, 18: DT_INT8,
             21: DT_INT8, 3: DT_INT, 6: DT_INT, 7: DT_INT, 8: DT_INT, 9: DT_INT, 10: DT_INT,
             12: DT_INT}


CUBE_COSTS = (op_map.COST_MATMUL, op_map.COST_CONV, op_map.COST_CONV_BP_INPUT,
              op_map.COST_CONV_BP_FILTER, op_map.COST_DEPTHWISE)
# precision_mode allow_fp32_to_fp16, the TF adapter's default for training (docs/device-model.md
# 3.2): matrix (cube) ops compute in fp16, so their fp32 operands and results move as fp16;
# vector ops keep fp32 when their kernel supports it
CUBE_FP32_AS_FP16 = True
FP32_NAMES = ("float32", "float")


def _moved_bytes(dtype: str, as_fp16: bool) -> int:
    """Bytes per element the device moves: fp32 moves as fp16 where the op runs in fp16."""
    b = TF_DTYPES.get(dtype, UNDEFINED_DTYPE)[1]
    return 2 if as_fp16 and dtype in FP32_NAMES else b


def _dim(shape: Sequence[int], i: int, default: int = 1) -> int:
    try:
        d = shape[i]
    except IndexError:
        return default
    return DEFAULT_DIM if d is None or d < 0 else d


@dataclass
class SignatureRegistry:
    """Distinct op signatures seen so far, with their shape-derived features (append-only)."""

    tf_type: list[str] = field(default_factory=list)
    ge_type: list[str] = field(default_factory=list)
    kind: list[int] = field(default_factory=list)
    cost: list[int] = field(default_factory=list)
    allreduce: list[bool] = field(default_factory=list)
    host_work: list[bool] = field(default_factory=list)  # measured host work (op_map)
    flops: list[float] = field(default_factory=list)
    vec_elems: list[float] = field(default_factory=list)
    bytes_in: list[float] = field(default_factory=list)
    bytes_out: list[float] = field(default_factory=list)
    max_elems: list[float] = field(default_factory=list)
    dtype_class: list[int] = field(default_factory=list)
    dtype_bytes: list[int] = field(default_factory=list)
    n_fused: list[int] = field(default_factory=list)
    tensors: list[np.ndarray] = field(default_factory=list)  # L.TENSOR arrays
    # bytes of each data input as the device moves it (UB fusion: what enters a fused chain)
    in_bytes: list[tuple[float, ...]] = field(default_factory=list)
    # the same op with its fp32 tensors reduced to fp16 (precision.py): (in_bytes, bytes_in,
    # bytes_out), or None when the op has no fp32 tensor to reduce
    half: list[tuple[tuple[float, ...], float, float] | None] = field(default_factory=list)
    # the captured tensor specs (inputs, outputs) of a signature interned from an op; empty for
    # generated ones (fused kernels, benchmark features): GE's boundary tasks read them
    # (trans_ops.py)
    specs: list[tuple[tuple[TensorSpec, ...], tuple[TensorSpec, ...]]] = \
        field(default_factory=list)
    # share of the bytes the task reads that are still in L2 when it starts, from where it
    # sits in its graph (l2_residency.py); NaN: unknown, the working-set rule (cost_model)
    l2_resident: list[float] = field(default_factory=list)
    _index: dict[tuple, int] = field(default_factory=dict)
    _half_sig: dict[int, int] = field(default_factory=dict)
    _resident_sig: dict[tuple[int, int], int] = field(default_factory=dict)
    _by_id: dict[tuple, tuple] = field(default_factory=dict)
    _arrays: dict[str, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.tf_type)

    def intern(self, tf_type: str, inputs: tuple[TensorSpec, ...],
               outputs: tuple[TensorSpec, ...], n_fused: int) -> int:
        # replayed steps (and ops resolved from one shape cache) share their spec tuples: a
        # look-up by identity skips hashing the nested specs (frozen dataclasses hash their
        # fields on every call); the entry keeps the tuples alive, so an id is never reused
        fast = (tf_type, id(inputs), id(outputs), n_fused)
        hit = self._by_id.get(fast)
        if hit is not None:
            return hit[0]
        key = (tf_type, inputs, outputs, n_fused)
        idx = self._index.get(key)
        if idx is None:
            idx = self._add(tf_type, inputs, outputs, n_fused)
            self._index[key] = idx
        if len(self._by_id) >= 1 << 18:
            self._by_id.clear()  # bounded: new tuples of traced steps keep arriving
        self._by_id[fast] = (idx, inputs, outputs)
        return idx

    def add_features(self, *, tf_type: str, ge_type: str, kind: int, cost: int, flops: float,
                     vec_elems: float, bytes_in: float, bytes_out: float, max_elems: float,
                     dtype_class: int = DT_FP32, dtype_bytes: int = 4, n_fused: int = 0,
                     allreduce: bool = False, tensors: np.ndarray | None = None,
                     host_work: bool = False, in_bytes: tuple[float, ...] = ()) -> int:
        """Register a signature from precomputed features (benchmark generators use this)."""
        self.tf_type.append(tf_type)
        self.ge_type.append(ge_type)
        self.kind.append(kind)
        self.cost.append(cost)
        self.allreduce.append(allreduce)
        self.host_work.append(host_work)
        self.flops.append(float(flops))
        self.vec_elems.append(float(vec_elems))
        self.bytes_in.append(float(bytes_in))
        self.bytes_out.append(float(bytes_out))
        self.max_elems.append(float(max_elems))
        self.dtype_class.append(dtype_class)
        self.dtype_bytes.append(dtype_bytes)
        self.n_fused.append(n_fused)
        self.tensors.append(np.zeros(0, L.TENSOR) if tensors is None else tensors)
        self.in_bytes.append(tuple(float(b) for b in in_bytes))
        self.half.append(None)
        self.specs.append(((), ()))
        self.l2_resident.append(float("nan"))
        self._arrays = None
        return len(self.tf_type) - 1

    def with_residency(self, s: int, level: int, levels: int) -> int:
        """Signature `s` whose reads find `level / levels` of their bytes in L2 (the same
        op, shapes and dtypes; l2_residency.py).  Created once per (s, level)."""
        key = (s, level)
        hit = self._resident_sig.get(key)
        if hit is not None:
            return hit
        idx = self.add_features(
            tf_type=self.tf_type[s], ge_type=self.ge_type[s], kind=self.kind[s],
            cost=self.cost[s], flops=self.flops[s], vec_elems=self.vec_elems[s],
            bytes_in=self.bytes_in[s], bytes_out=self.bytes_out[s],
            max_elems=self.max_elems[s], dtype_class=self.dtype_class[s],
            dtype_bytes=self.dtype_bytes[s], n_fused=self.n_fused[s],
            allreduce=self.allreduce[s], tensors=self.tensors[s],
            host_work=self.host_work[s], in_bytes=self.in_bytes[s])
        self.specs[idx] = self.specs[s]
        self.l2_resident[idx] = level / levels
        self._half_sig[idx] = idx  # already in its precision (the pass runs after it)
        self._resident_sig[key] = idx
        return idx

    def reduced(self, s: int) -> int:
        """The signature of op `s` run in fp16 (precision_mode reduced it, precision.py): its
        fp32 tensors move 2 bytes an element and its vector work runs 128 lanes wide.  `s`
        itself when it has nothing to reduce (no fp32 tensor, a fused or generated one)."""
        hit = self._half_sig.get(s)
        if hit is not None:
            return hit
        half = self.half[s]
        if half is None or self.dtype_class[s] != DT_FP32:
            self._half_sig[s] = s
            return s
        in_b, b_in, b_out = half
        idx = self.add_features(
            tf_type=self.tf_type[s], ge_type=self.ge_type[s], kind=self.kind[s],
            cost=self.cost[s], flops=self.flops[s], vec_elems=self.vec_elems[s],
            bytes_in=b_in, bytes_out=b_out, max_elems=self.max_elems[s], dtype_class=DT_FP16,
            dtype_bytes=2, n_fused=self.n_fused[s], allreduce=self.allreduce[s],
            tensors=self.tensors[s], host_work=self.host_work[s], in_bytes=in_b)
        self.specs[idx] = self.specs[s]
        self._half_sig[s] = idx
        self._half_sig[idx] = idx
        return idx

    def _add(self, tf_type: str, inputs: tuple[TensorSpec, ...],
             outputs: tuple[TensorSpec, ...], n_fused: int) -> int:
        m = op_map.map_op(tf_type)
        kind, cost = m.kind, m.cost
        if AP.runs_on_cube(m.ge_type, inputs):
            cost = op_map.COST_DEPTHWISE  # with GE's filter: a depthwise conv (avg_pool.py)
        all_specs = inputs + outputs
        dts = [TF_DTYPES.get(t.dtype, UNDEFINED_DTYPE) for t in all_specs]
        if kind == op_map.KIND_AI_CORE and any(d[0] in (13, 26) for d in dts):
            # string / variant tensors have no AI Core kernel: run on the AI CPU
            kind, cost = op_map.KIND_AI_CPU, op_map.COST_AI_CPU
        main = dts[0] if dts else TF_DTYPES["float32"]
        dclass = _DT_CLASS.get(main[0], DT_OTHER)
        dbytes = main[1]
        # a cube task's operands in the cube's blocked layouts (fractal.py): the elements
        # they occupy, padding included, are the ones moved
        in_elems, out_elems = device_elems(cost, tf_type, inputs, outputs)
        if not inputs and not outputs:
            in_elems, out_elems = [DEFAULT_TENSOR_ELEMS], [DEFAULT_TENSOR_ELEMS]
        cube = cost in CUBE_COSTS
        cube16 = cube and CUBE_FP32_AS_FP16
        in_b = tuple(float(e * _moved_bytes(t.dtype, cube16)) for e, t in zip(in_elems, inputs))
        bytes_in = float(sum(in_b)) if inputs else float(sum(in_elems) * dbytes)
        bytes_out = float(sum(e * _moved_bytes(t.dtype, cube16)
                              for e, t in zip(out_elems, outputs))) if outputs else \
            float(sum(out_elems) * dbytes)
        half = None
        if kind == op_map.KIND_AI_CORE and any(t.dtype in FP32_NAMES for t in all_specs):
            h_in = tuple(float(e * _moved_bytes(t.dtype, True)) for e, t in zip(in_elems, inputs))
            half = (h_in, float(sum(h_in)) if inputs else bytes_in / 2,
                    float(sum(e * _moved_bytes(t.dtype, True)
                              for e, t in zip(out_elems, outputs))) if outputs else bytes_out / 2)
        out_total = float(sum(out_elems))
        max_elems = float(max(in_elems + out_elems))
        sparse = sparse_traffic(m.access, inputs, outputs, in_elems, out_elems,
                                lambda dt: _moved_bytes(dt, cube16))
        if sparse is not None:  # only the indexed rows move (sparse_access.py)
            if half is not None:
                h = sparse_traffic(m.access, inputs, outputs, in_elems, out_elems,
                                   lambda dt: _moved_bytes(dt, True))
                half = (h.in_bytes, float(sum(h.in_bytes)), h.bytes_out) if h else None
            in_b, bytes_out = sparse.in_bytes, sparse.bytes_out
            bytes_in = float(sum(in_b))
            max_elems = out_total = sparse.work_elems
            in_elems = [min(e, int(sparse.work_elems)) for e in in_elems]
        if m.ge_type in (GEN_MASK, DO_MASK):  # the mask is one bit per element
            bits = out_total / 8.0
            if m.ge_type == GEN_MASK:  # from a seed and a shape: it writes the mask only
                in_b, bytes_out = tuple(0.0 for _ in in_b), bits
            elif in_b:  # reads the tensor and the mask, writes the tensor
                rest = bits / max(len(in_b) - 1, 1)
                in_b = (out_total * dbytes,) + tuple(rest for _ in in_b[1:])
            bytes_in = float(sum(in_b))
        flops = cube_flops(cost, tf_type, inputs, outputs, out_total,
                            FR.C0_INT8 if dclass == DT_INT8 else FR.C0)
        if cost in (op_map.COST_VECTOR,):
            vec = m.vec_factor * max(max(in_elems, default=0), out_total) + n_fused * out_total
        elif cost in (op_map.COST_MATMUL, op_map.COST_CONV, op_map.COST_CONV_BP_INPUT,
                      op_map.COST_CONV_BP_FILTER, op_map.COST_DEPTHWISE):
            vec = n_fused * out_total  # fused bias/activation on the cube output
        elif cost == op_map.COST_MOVE:
            vec = 0.0
        else:
            vec = max_elems
        idx = self.add_features(
            tf_type=tf_type, ge_type=m.ge_type, kind=kind, cost=cost, flops=flops,
            vec_elems=vec, bytes_in=bytes_in, bytes_out=bytes_out, max_elems=max_elems,
            dtype_class=dclass, dtype_bytes=dbytes, n_fused=n_fused, allreduce=m.allreduce,
            tensors=tensor_records(inputs, outputs),
            host_work=op_map.is_host_work(tf_type),
            in_bytes=in_b)
        self.half[idx] = half
        self.specs[idx] = (inputs, outputs)
        return idx

    def arrays(self) -> dict[str, np.ndarray]:
        """Column arrays of all signatures (cached until the next new signature)."""
        if self._arrays is None:
            self._arrays = {
                "kind": np.array(self.kind, np.uint8),
                "cost": np.array(self.cost, np.uint8),
                "allreduce": np.array(self.allreduce, bool),
                "host_work": np.array(self.host_work, bool),
                "flops": np.array(self.flops, np.float64),
                "vec_elems": np.array(self.vec_elems, np.float64),
                "bytes_in": np.array(self.bytes_in, np.float64),
                "bytes_out": np.array(self.bytes_out, np.float64),
                "max_elems": np.array(self.max_elems, np.float64),
                "dtype_class": np.array(self.dtype_class, np.uint8),
                "dtype_bytes": np.array(self.dtype_bytes, np.float64),
                "n_fused": np.array(self.n_fused, np.int32),
                "n_tensors": np.array([len(t) for t in self.tensors], np.int64),
                "l2_resident": np.array(self.l2_resident, np.float64),
                # kernels that compute in fp32 whatever their tensors' precision
                "fp32_compute": np.array([g in op_map.FP32_COMPUTE_GE_TYPES
                                          for g in self.ge_type], bool),
                # grouped convolutions bound by their im2col (cost_model.py)
                "im2col_bound": np.array([g in op_map.IM2COL_BOUND_GE_TYPES
                                          for g in self.ge_type], bool),
                # a matmul's inner axis (cost_model: the Atlas A2's MIX matmuls)
                "mm_k": np.array([FR.matmul_k(sp[0][0].shape, sp[1][0].shape, DEFAULT_DIM)
                                  if c == op_map.COST_MATMUL and sp[0] and sp[1] else 0.0
                                  for c, sp in zip(self.cost, self.specs)], np.float64),
            }
        return self._arrays


def tensor_records(inputs: Iterable[TensorSpec], outputs: Iterable[TensorSpec]) -> np.ndarray:
    """The tensor_info tensor slots of one op (inputs then outputs)."""
    specs = [(0, t) for t in inputs] + [(1, t) for t in outputs]
    arr = np.zeros(len(specs), L.TENSOR)
    for i, (ttype, t) in enumerate(specs):
        arr[i]["tensor_type"] = ttype
        arr[i]["format"] = EN.FORMAT_IDS.get(t.format, EN.FORMAT_UNDEFINED)
        arr[i]["data_type"] = TF_DTYPES.get(t.dtype, UNDEFINED_DTYPE)[0]
        dims = [(d if d is not None else -1) & 0xFFFFFFFF for d in t.shape[:L.MAX_DIMS]]
        arr[i]["shape"][:len(dims)] = dims
    return arr


@dataclass
class Interner:
    """Append-only string table (op names, model names...)."""

    items: list[str] = field(default_factory=list)
    _index: dict[str, int] = field(default_factory=dict)

    def __call__(self, text: str) -> int:
        idx = self._index.get(text)
        if idx is None:
            idx = len(self.items)
            self.items.append(text)
            self._index[text] = idx
        return idx

    def get(self, text: str) -> int | None:
        return self._index.get(text)


@dataclass
class IterTable:
    """One row per iteration (step) of the chunk."""

    model_id: np.ndarray  # u8
    index: np.ndarray  # i8, 1-based per model
    start: np.ndarray  # i8 host ns
    end: np.ndarray  # i8 host ns
    thread: np.ndarray  # u4
    # measured input wait per step (ns); empty = none (hand-built tables)
    input_wait: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    # the profiler's own time just before each step (ns; removed from the gap before it)
    agent_before: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    # measured production time of the step's prefetched batch(es) (ns; empty = none)
    production: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    # warm-up steps (tracing, the first execution; empty = none)
    warmup: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))

    def __len__(self) -> int:
        return len(self.model_id)


@dataclass
class OpTable:
    """One row per op execution of the chunk (layer (a) output, layer (b) input)."""

    device_id: np.ndarray  # i4
    model_id: np.ndarray  # u8 (SINGLE_OP_MODEL_ID outside iterations)
    iter_row: np.ndarray  # i8 row of IterTable, -1 for single ops
    name_idx: np.ndarray  # i8 into Interner `names`
    sig: np.ndarray  # i8 into SignatureRegistry
    thread: np.ndarray  # u4 OS thread that ran the op
    host_start: np.ndarray  # i8 ns
    host_end: np.ndarray  # i8 ns
    fused_idx: np.ndarray  # i8 into `fused` list, -1 if the op is not a fusion
    fused: list[tuple[str, ...]] = field(default_factory=list)
    eager: np.ndarray | None = None  # bool per row: a single-op launch (None: no eager op)

    def __len__(self) -> int:
        return len(self.sig)

    def take(self, rows: np.ndarray) -> "OpTable":
        return OpTable(self.device_id[rows], self.model_id[rows], self.iter_row[rows],
                       self.name_idx[rows], self.sig[rows], self.thread[rows],
                       self.host_start[rows], self.host_end[rows], self.fused_idx[rows],
                       self.fused, None if self.eager is None else self.eager[rows])


# OpTable columns as build_tables collects them, and their dtypes
_OP_COLUMNS: dict[str, type] = {"dev": np.int32, "model": np.uint64, "iter": np.int64,
                                "name": np.int64, "sig": np.int64, "thr": np.uint32,
                                "s": np.int64, "e": np.int64, "fz": np.int64, "eager": bool}


def build_tables(chunk: CaptureChunk, sigs: SignatureRegistry, names: Interner,
                 replays: ReplayColumns | None = None) -> tuple[OpTable, IterTable]:
    """Walk the chunk once: iterations in order (their ops), then single ops.

    A replayed step that carries its schedule (`Iteration.schedule`) gets its rows from the
    schedule's columns (replay_columns.py; `replays` caches them across chunks), a run of
    consecutive steps replayed from one schedule in one numpy block; the rows are the ones a
    walk of `Iteration.op_runs()` gives."""
    replays = replays if replays is not None else ReplayColumns()
    cols: dict[str, list[int]] = {k: [] for k in _OP_COLUMNS}
    blocks: list[dict[str, np.ndarray]] = []  # the op rows so far, in order
    fused: list[tuple[str, ...]] = []
    its = chunk.iterations
    it_cols: dict[str, list[int]] = {
        "model": [it.model_id for it in its], "index": [it.index for it in its],
        "s": [it.start_ns for it in its], "e": [it.end_ns for it in its],
        "thr": [it.thread_id for it in its], "wait": [it.input_wait_ns for it in its],
        "agent": [it.agent_before_ns for it in its],
        "prod": [it.input_production_ns for it in its],
        "warm": [it.warmup for it in its]}
    it_start = np.array(it_cols["s"], np.int64)
    it_end = np.array(it_cols["e"], np.int64)

    intern = sigs.intern

    def add_all(ops: list[OpRun], model: int, iter_row: int) -> None:
        """One column at a time (a loop-heavy step has thousands of ops): comprehensions
        instead of ten appends per op."""
        if not ops:
            return
        n = len(ops)
        cols["model"] += [model] * n
        cols["iter"] += [iter_row] * n
        cols["dev"] += [op.device_id for op in ops]
        cols["name"] += [names(op.name) for op in ops]
        cols["sig"] += [intern(op.tf_type, tuple(op.inputs), tuple(op.outputs),
                               len(op.fused_ops)) for op in ops]
        cols["thr"] += [op.thread_id for op in ops]
        cols["s"] += [op.start_ns for op in ops]
        cols["e"] += [op.end_ns for op in ops]
        cols["eager"] += [op.eager for op in ops]
        fz = cols["fz"]
        for op in ops:
            if op.fused_ops:
                fz.append(len(fused))
                fused.append(tuple(op.fused_ops))
            else:
                fz.append(-1)

    def flush() -> None:
        if cols["sig"]:
            blocks.append({k: np.array(v, _OP_COLUMNS[k]) for k, v in cols.items()})
            for v in cols.values():
                v.clear()

    row = 0
    while row < len(its):
        it = its[row]
        sched = it.schedule
        if sched is None:
            add_all(it.ops, it.model_id, row)
            row += 1
            continue
        end = row + 1  # the run of steps replayed from this schedule
        while end < len(its) and its[end].schedule is sched and \
                its[end].model_id == it.model_id:
            end += 1
        sc = replays.of(sched, intern, names)
        if len(sc):
            flush()
            rows = np.arange(row, end, dtype=np.int64)
            blocks.append(replayed_rows(sched, sc, it.model_id, rows, it_start[rows],
                                        it_end[rows], len(fused)))
            fused += sc.fused
        row = end
    add_all(chunk.single_ops, SINGLE_OP_MODEL_ID, -1)
    flush()
    col = {k: (np.concatenate([b[k] for b in blocks]) if len(blocks) > 1 else blocks[0][k])
           if blocks else np.zeros(0, dt) for k, dt in _OP_COLUMNS.items()}
    ops = OpTable(device_id=col["dev"], model_id=col["model"], iter_row=col["iter"],
                  name_idx=col["name"], sig=col["sig"], thread=col["thr"],
                  host_start=col["s"], host_end=col["e"], fused_idx=col["fz"], fused=fused,
                  eager=col["eager"])
    iters = IterTable(
        model_id=np.array(it_cols["model"], np.uint64),
        index=np.array(it_cols["index"], np.int64),
        start=it_start, end=it_end,
        thread=np.array(it_cols["thr"], np.uint32),
        input_wait=np.array(it_cols["wait"], np.int64),
        agent_before=np.array(it_cols["agent"], np.int64),
        production=np.array(it_cols["prod"], np.int64),
        warmup=np.array(it_cols["warm"], bool),
    )
    return ops, iters
