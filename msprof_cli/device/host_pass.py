"""The host side of a chunk: its model / node level records and the host files they go to
(docs/device-model.md 6.1).

`HostPass.records` builds a chunk's ModelExecute, GE InputCopy / OutputCopy and node launch
APIs (api_event), node_basic_info, tensor_info, graph_id_map and fusion_op_info; the
per-device passes (stream_records.py) add the runtime-level task_track, runtime APIs and
hccl_info, which need the task ids; `HostPass.write` then sorts each kind by time and
appends it.  `write_tx` writes the msproftx markers.

It owns what goes into a PROF dir only once: the hash_dic texts already written
(`hash_lines`, shared with the per-device passes), the models whose graph_id_map is written,
the fused ops whose fusion_op_info is written, and the msproftx mark ids.
"""
from __future__ import annotations

import numpy as np

from msprof_cli.capture import CaptureChunk
from msprof_cli.device import op_map
from msprof_cli.device import scheduler as S
from msprof_cli.device.chunk import ChunkCtx, kind_lut
from msprof_cli.device.host_records import (api_records, copy_spans, fusion_op_records,
                                            graph_id_map_records, msproftx_records,
                                            node_basic_records, tensor_info_records)
from msprof_cli.device.op_table import Interner, SignatureRegistry
from msprof_cli.device.time_model import TimeWarp
from msprof_cli.device.writer import DataDir
from msprof_cli.options import ProfilingConfig
from msprof_cli.raw import enums as EN
from msprof_cli.raw import layouts as L
from msprof_cli.raw.hashing import name_hash

# GE task type of node_basic_info per launched kind of op
_GE_TYPE_LUT = kind_lut({op_map.KIND_AI_CORE: EN.GE_TASK_TYPE_IDS["AI_CORE"],
                         op_map.KIND_AI_CPU: EN.GE_TASK_TYPE_IDS["AI_CPU"],
                         op_map.KIND_HCCL: EN.GE_TASK_TYPE_IDS["HCCL"]})
_GE_AIV = EN.GE_TASK_TYPE_IDS["AI_VECTOR_CORE"]  # a kernel on the A2's AI Vector cores
_GE_MIX_AIC = EN.GE_TASK_TYPE_IDS["MIX_AIC"]  # one kernel on both (cost_model._mix_matmul)


def _in_order(columns: list[np.ndarray]) -> bool:
    """The parts' time columns, one after the other, never go back."""
    last = None
    for ts in columns:
        if len(ts) > 1 and (ts[1:] < ts[:-1]).any():
            return False
        if len(ts):
            if last is not None and ts[0] < last:
                return False
            last = ts[-1]
    return True


def merge_by_key(parts: list[np.ndarray], key: str) -> np.ndarray:
    """The parts' records as one array sorted stably by `key` (ties keep the parts' order):
    each part is scattered straight to its sorted place, without a concatenated copy of the
    records first (fewer fresh pages: api_event / task_track are 10-20 MB a chunk)."""
    keys = np.concatenate([p[key] for p in parts])
    rank = np.empty(len(keys), np.int64)
    rank[np.argsort(keys, kind="stable")] = np.arange(len(keys))
    out = np.empty(len(keys), parts[0].dtype)
    at = 0
    for p in parts:
        out[rank[at:at + len(p)]] = p
        at += len(p)
    return out


class HostPass:
    """The host records of every chunk of one PROF dir (see module doc).  `models`,
    `sigs`, `names` and `warp` are the Device's own objects (they grow chunk by chunk)."""

    def __init__(self, config: ProfilingConfig, data: DataDir, *, sigs: SignatureRegistry,
                 names: Interner, models: dict, warp: TimeWarp, pid: int) -> None:
        self.config = config
        self.data = data  # the host's data dir
        self.sigs = sigs
        self.names = names
        self.models = models
        self.warp = warp
        self.pid = pid
        self._hashed: set[str] = set()
        self._graph_mapped: set[int] = set()
        self._fusion_reported: set[str] = set()
        self._tx_count = 0

    def hash_lines(self, texts: list[str]) -> list[str]:
        lines = []
        for text in texts:
            if text not in self._hashed:
                self._hashed.add(text)
                lines.append(f"{name_hash(text)}:{text}")
        return lines

    def records(self, ctx: ChunkCtx) -> dict[str, list[np.ndarray]]:
        """Model/node level records of the chunk (runtime-level task_track is added by the
        per-device passes, which know the task ids)."""
        ops, iters, win = ctx.ops, ctx.iters, ctx.win
        task_on = self.config.task_time != "off"
        out: dict[str, list[np.ndarray]] = {k: [] for k in (
            "api_event", "task_track", "node_basic_info", "tensor_info", "graph_id_map",
            "fusion_op_info", "hccl_info")}
        hash_texts: list[str] = []
        if task_on and len(iters):
            self.copy_apis(ctx, out)
        exe_b, exe_e = ctx.execute if ctx.execute is not None else (ctx.me_begin, ctx.me_end)
        # ModelExecute per iteration (level 15000 type 1, itemId = model id)
        out["api_event"].append(api_records(L.LEVEL_MODEL, L.MODEL_EXECUTE, iters.thread,
                                            exe_b, exe_e, iters.model_id))
        rows = np.flatnonzero(ctx.kind != op_map.KIND_NONE) if task_on else np.zeros(0, int)
        name_hashes = np.array([name_hash(n) for n in self.names.items], np.uint64) \
            if self.names.items else np.zeros(0, np.uint64)
        if len(rows):
            item = name_hashes[ops.name_idx[rows]]
            out["api_event"].append(api_records(L.LEVEL_NODE, L.NODE_LAUNCH, win.thread[rows],
                                                win.begin[rows], win.end[rows], item))
            used = np.unique(ops.name_idx[rows])
            hash_texts += [self.names.items[i] for i in used.tolist()]
        if len(rows) and self.config.op_info:
            sigs_used = np.unique(ops.sig[rows])
            ge_hash = np.zeros(len(self.sigs), np.uint64)
            for s in sigs_used.tolist():
                ge_hash[s] = name_hash(self.sigs.ge_type[s])
                hash_texts.append(self.sigs.ge_type[s])
            # built in time order (`write` sorts each kind stably by time; sorting the rows
            # first gives the same records and order): a loop-heavy chunk's tensor_info is
            # ~70 MB, and a sorted copy of it was ~20k page faults of system time
            r = rows[np.argsort(win.nbi_ts[rows], kind="stable")]
            out["node_basic_info"].append(node_basic_records(
                win.thread[r], win.nbi_ts[r], name_hashes[ops.name_idx[r]],
                np.select([ctx.cost.vector_core[ops.sig[r]], ctx.cost.mix_ratio[ops.sig[r]] > 0],
                          [_GE_AIV, _GE_MIX_AIC], _GE_TYPE_LUT[ctx.kind[r]]),
                ge_hash[ops.sig[r]], ctx.cost.block_dim[ops.sig[r]],
                ctx.cost.mix_ratio[ops.sig[r]]))
            # an op's tensor_info records (several when it has > 5 tensors) share its time
            # and stay together, so sorting the ops sorts the records
            r = rows[np.argsort(win.tensor_ts[rows], kind="stable")]
            out["tensor_info"].append(tensor_info_records(
                win.thread[r], win.tensor_ts[r], name_hashes[ops.name_idx[r]],
                ops.sig[r], self.sigs.tensors))
            self._graph_and_fusion(ctx, rows, name_hashes, out, hash_texts)
        ctx_lines = self.hash_lines(hash_texts)
        out["_hash_lines"] = ctx_lines  # type: ignore[assignment]
        return out

    def copy_apis(self, ctx: ChunkCtx, out: dict[str, list[np.ndarray]]) -> None:
        """GE InputCopy (15000/3) / OutputCopy (15000/4) inside each ModelExecute."""
        ops, iters, win = ctx.ops, ctx.iters, ctx.win
        first = ctx.me_end.copy()
        last = np.full(len(iters), S.NEVER, np.int64)
        rows = np.flatnonzero((ctx.kind != op_map.KIND_NONE) & (ops.iter_row >= 0))
        if len(rows):
            np.minimum.at(first, ops.iter_row[rows], win.begin[rows])
            np.maximum.at(last, ops.iter_row[rows], win.end[rows])
        if ctx.copy_spans is not None:  # the time model's InputCopy / OutputCopy
            ib, ie, ob, oe = ctx.copy_spans
            iok = ook = np.ones(len(iters), bool)
        else:
            ib, ie, iok, ob, oe, ook = copy_spans(ctx.me_begin, ctx.me_end, first, last)
        # GE reports InputCopy, ModelExecute (the inference) and OutputCopy one after another,
        # never nested (hicann/ge runtime/v1/graph/load/model_manager/davinci_model.cc: the
        # PRE_PROC, INFER and AFTER_PROC spans).  The analysis's C++ path keeps one of two
        # model-level APIs that overlap on a thread and its sort of equal begins is not
        # stable: a ModelExecute that began with its InputCopy could be the one dropped, and
        # the step's tasks got no model (docs/formats/raw-format.md 8).  ModelExecute opens
        # 2 ns before the first launch and closes 1 ns before OutputCopy; 1 ns between each.
        exe_b = np.minimum(ie, first) - 2
        iok = iok & (exe_b - 1 > ib)
        ie = np.where(iok, exe_b - 1, ie)
        exe_b = np.where(iok, exe_b, np.minimum(ctx.me_begin, first - 2))
        ook = ook & (ob - 1 >= last)
        exe_e = np.where(ook, ob - 1, ctx.me_end)
        ctx.execute = (exe_b, exe_e)
        ctx.copies = (ib, ie, iok, ob, oe, ook)
        for typ, b, e, ok in ((L.MODEL_INPUT_COPY, ib, ie, iok),
                              (L.MODEL_OUTPUT_COPY, ob, oe, ook)):
            if ok.any():
                out["api_event"].append(api_records(L.LEVEL_MODEL, typ, iters.thread[ok],
                                                    b[ok], e[ok], iters.model_id[ok]))

    def _graph_and_fusion(self, ctx: ChunkCtx, rows: np.ndarray, name_hashes: np.ndarray,
                          out: dict[str, list[np.ndarray]], hash_texts: list[str]) -> None:
        iters = ctx.iters
        exe_b = ctx.execute[0] if ctx.execute is not None else ctx.me_begin
        # graph_id_map once per model, at the begin of its first ModelExecute
        g_thr, g_ts, g_name, g_id = [], [], [], []
        for i, mid in enumerate(iters.model_id.tolist()):
            info = self.models.get(mid)
            if mid in self._graph_mapped or info is None or not info.name:
                continue
            self._graph_mapped.add(mid)
            hash_texts.append(info.name)
            g_thr.append(int(iters.thread[i]))
            g_ts.append(int(exe_b[i]))  # at the ModelExecute's begin, outside node APIs
            g_name.append(name_hash(info.name))
            g_id.append(mid)
        if g_ts:
            out["graph_id_map"].append(graph_id_map_records(
                np.array(g_thr, np.uint32), np.array(g_ts, np.int64),
                np.array(g_name, np.uint64), np.array(g_id, np.uint64)))
        # fusion_op_info once per fused op, after the graph_id_map (outside node APIs)
        ops = ctx.ops
        fz = rows[(ops.fused_idx[rows] >= 0) & (ops.iter_row[rows] >= 0)]
        f_thr, f_ts, f_name, f_ids, f_sig = [], [], [], [], []
        for r in fz.tolist():
            name = self.names.items[int(ops.name_idx[r])]
            if name in self._fusion_reported:
                continue
            self._fusion_reported.add(name)
            originals = list(ops.fused[int(ops.fused_idx[r])])
            hash_texts += originals
            it = int(ops.iter_row[r])
            f_thr.append(int(iters.thread[it]))
            # strictly inside the ModelExecute API (the C++ analysis attaches a record to
            # an API whose (start, end] holds it: tree_builder.cpp), before its first node
            # API (ModelExecute opens >= 2 ns before the first launch, host_records.py)
            f_ts.append(int(exe_b[it]) + 1)
            f_name.append(int(name_hashes[ops.name_idx[r]]))
            f_ids.append([name_hash(o) for o in [name] + originals][1:] or [f_name[-1]])
            f_sig.append(int(ops.sig[r]))
        if f_ts:
            sig = np.array(f_sig)
            out["fusion_op_info"].append(fusion_op_records(
                np.array(f_thr, np.uint32), np.array(f_ts, np.int64),
                np.array(f_name, np.uint64), f_ids,
                ctx.sig["bytes_in"][sig].astype(np.uint64),
                ctx.sig["bytes_out"][sig].astype(np.uint64)))

    def write(self, host: dict[str, list[np.ndarray]]) -> None:
        hash_lines = host.pop("_hash_lines")  # type: ignore[arg-type]
        if hash_lines:
            self.data.file("hash_dic", lambda i: L.host_file_name("hash_dic", i)
                           ).write_lines(hash_lines)  # type: ignore[arg-type]
        sort_key = {"api_event": "end_time"}
        for kind, parts in host.items():
            parts = [p for p in parts if len(p)]
            if not parts:
                continue
            field_ = sort_key.get(kind, "timestamp")
            out = self.data.file(kind, lambda i, k=kind: L.host_file_name(k, i))
            if _in_order([p[field_] for p in parts]):  # no copy (tensor_info: ~200 B a record)
                for part in parts:
                    out.write_records(part)
                continue
            out.write_records(merge_by_key(parts, field_))

    def write_tx(self, chunk: CaptureChunk) -> None:
        mk = chunk.markers
        n = len(mk)
        # the domain names must reach hash_dic (the exporter resolves msproftx domains)
        lines = self.hash_lines([m.domain for m in mk])
        if lines:
            self.data.file("hash_dic", lambda i: L.host_file_name("hash_dic", i)
                           ).write_lines(lines)
        arr = msproftx_records(
            self.pid, np.array([m.thread_id for m in mk], np.uint32),
            self.warp(np.array([m.start_ns for m in mk], np.int64)),
            self.warp(np.array([m.end_ns for m in mk], np.int64)),
            np.array([m.category for m in mk], np.uint32),
            np.array([m.event_type for m in mk], np.uint32),
            np.arange(self._tx_count, self._tx_count + n, dtype=np.uint64),
            np.array([name_hash(m.domain) for m in mk], np.uint64),
            [m.message.encode("utf-8") for m in mk])
        self._tx_count += n
        self.data.file("msproftx", lambda i: L.host_file_name("msproftx", i)
                       ).write_records(arr)
