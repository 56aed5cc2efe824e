"""The device memory records CANN writes, from the emulated memory (memory.py): what `--task-memory
on` and `--sys-hardware-mem on` collect (docs/formats/device-memory.md 1, 6).

* `static_op_mem` (host, `--task-memory`): GE reports its static plan when it builds a graph:
  one record per planned tensor (its size, the op writing it, its life as 1-based node ids)
  and one TOTAL record (op 0, life 1 .. 0xFFFFFFFF, the plan's total), graph id = model id.
  Written when the model's first step is laid out, just before it.
* `task_memory_info` (host, `--task-memory`): the feature-map block (with the step's buffers)
  each model allocates when it loads, named after the model, and its free when the
  collection ends (GE frees a session's graphs then), with the pool's totals after each.
* `npu_mem` / `npu_module_mem` (device, `--sys-hardware-mem`): the application's and the
  device's HBM every 1000/freq ms after the sync point to the end of the emulated timeline:
  the variables from the first model load on, each model's block from its own load on (a
  static graph's memory is a step at load and flat while it runs); the device's = the
  application's + what the chip's system keeps; DDR 0.  npu_module_mem: GE's reserved
  memory (module 45) at the same instants, and HCCL's buffers (module 3) on a device that
  runs collectives.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from msprof_cli.device.host_records import record_header
from msprof_cli.device.memory import MemoryModel
from msprof_cli.device.memory_plan import ge_tensor_bytes
from msprof_cli.raw import layouts as L
from msprof_cli.raw import memory_layouts as ML
from msprof_cli.raw.hashing import name_hash

ADDR_BASE = 0x1_0000_0000  # device address of the first block (the values are arbitrary)


@dataclass
class Load:
    model_id: int
    device_id: int
    ns: int  # emulated host ns of the load (the model's first step begins)
    thread: int
    block: int  # bytes: the feature map and the step's buffers
    addr: int


@dataclass
class MemoryRecords:
    """What has been written so far, across chunks."""

    sync_ns: int
    period_ns: int  # npu_mem sampling period (0: off)
    task_memory: bool
    reserved: int  # bytes the chip's system keeps
    loads: list[Load] = field(default_factory=list)
    # index of the next npu_mem sample: the first is one period after the sync point (a
    # sample at it could land before the collection's begin in the analysis's float time,
    # which leaves such samples out of the timeline)
    _next_sample: int = 1
    _allocated: int = 0
    _var_at: dict[int, int] = field(default_factory=dict)  # device -> ns of its first load

    def on_loads(self, memory: MemoryModel, pending: list[tuple[int, int, int]],
                 me_begin: np.ndarray, thread: np.ndarray) -> tuple[list[np.ndarray],
                                                                    list[np.ndarray], list[str]]:
        """The models that loaded in this chunk (`pending`: model, device, iteration row;
        `me_begin`: the emulated step begins): (static_op_mem arrays, task_memory_info
        arrays, names for hash_dic)."""
        static, task, names = [], [], []
        for mid, dev, row in pending:
            dm = memory.facts.devices[dev]
            mm = dm.models[mid]
            ts = int(me_begin[row]) - 1
            thr = int(thread[row])
            block = mm.allocation()
            load = Load(mid, dev, ts, thr, block, ADDR_BASE + self._allocated)
            self.loads.append(load)
            self._var_at.setdefault(dev, ts)
            if not self.task_memory:
                continue
            tensors = memory.tensors.get((mid, dev), [])
            static.append(_static_records(mid, thr, ts - 1, tensors, mm.feature_map))
            names += [t[0] for t in tensors]
            self._allocated += block
            task.append(_task_memory(thr, ts, load.addr, block, name_hash(mm.name),
                                     self._allocated, dev))
            names.append(mm.name)
        return static, task, names

    def frees(self, memory: MemoryModel, end_ns: int) -> list[np.ndarray]:
        """The blocks freed when the collection ends (the session closes)."""
        if not self.task_memory:
            return []
        out = []
        for ld in self.loads:
            self._allocated -= ld.block
            name = memory.facts.devices[ld.device_id].models[ld.model_id].name
            out.append(_task_memory(ld.thread, end_ns, ld.addr, -ld.block, name_hash(name),
                                    self._allocated, ld.device_id))
        return out

    def samples(self, memory: MemoryModel, device_id: int, until_ns: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """npu_mem APP and Device records and npu_module_mem records of one device for the
        sampling instants up to `until_ns` not written yet (call `advance` after every
        device)."""
        empty = (np.zeros(0, ML.NPU_MEM), np.zeros(0, ML.NPU_MEM),
                 np.zeros(0, ML.NPU_MODULE_MEM))
        if not self.period_ns or until_ns < self.sync_ns:
            return empty
        last = (until_ns - self.sync_ns) // self.period_ns
        k = np.arange(self._next_sample, last + 1, dtype=np.int64)
        if not len(k):
            return empty
        t = self.sync_ns + k * self.period_ns
        ge = np.zeros(len(t), np.int64)  # GE's: variables and the loaded graphs
        hccl = np.zeros(len(t), np.int64)  # HCCL's buffers
        dm = memory.facts.devices.get(device_id)
        if dm is not None and device_id in self._var_at:  # the session's from its start
            ge += np.where(t >= self._var_at[device_id], dm.pool, 0)
            hccl += np.where(t >= self._var_at[device_id], dm.hccl, 0)
        for ld in self.loads:
            if ld.device_id == device_id:
                ge += np.where(t >= ld.ns, ld.block, 0)
        app = ge + hccl
        us = (t - self.sync_ns) // 1000
        out = []
        for event, hbm in ((ML.NPU_MEM_APP, app), (ML.NPU_MEM_DEVICE, app + self.reserved)):
            arr = np.zeros(len(t), ML.NPU_MEM)
            arr["timestamp_v1"] = us & 0xFFFFFFFF
            arr["timestamp"] = us
            arr["event"] = event
            arr["hbm"] = hbm
            out.append(arr)
        modules = [(ML.MODULE_GE, ge)] + ([(ML.MODULE_HCCL, hccl)] if hccl.any() else [])
        mod = np.zeros(len(t) * len(modules), ML.NPU_MODULE_MEM)
        for i, (module, size) in enumerate(modules):
            part = mod[i * len(t):(i + 1) * len(t)]
            part["module_id"] = module
            part["timestamp"] = t
            part["total_size"] = size
        return out[0], out[1], mod

    def advance(self, until_ns: int) -> None:
        if self.period_ns and until_ns >= self.sync_ns:
            self._next_sample = max(self._next_sample,
                                    (until_ns - self.sync_ns) // self.period_ns + 1)


def write_chunk(device: Any, ctx: Any, host: dict[str, list[np.ndarray]]) -> None:
    """The records of a chunk's model loads and the samples up to its end (`device`: the
    Device, whose `memrec` is set; `host`: its host records of the chunk)."""
    rec: MemoryRecords = device.memrec
    static, task, names = rec.on_loads(device.memory, device.memory.pending, ctx.me_begin,
                                       ctx.iters.thread)
    device.memory.pending = []
    if static:
        host.setdefault("static_op_mem", []).extend(static)
        host["_hash_lines"] += device.host_pass.hash_lines(names)
    _write_task_memory(device, task)
    if len(ctx.me_end):
        _write_samples(device, int(ctx.me_end.max()))


def write_close(device: Any, end_ns: int) -> None:
    """At the end of the collection: the session's blocks freed, the last samples."""
    _write_task_memory(device, device.memrec.frees(device.memory, end_ns))
    _write_samples(device, end_ns)


def _write_task_memory(device: Any, parts: list[np.ndarray]) -> None:
    if parts:  # GE reports them as aging data (docs/formats/device-memory.md 1)
        device.host.file("task_memory_info", lambda i: L.host_file_name(
            "task_memory_info", i, aging=True)).write_records(np.concatenate(parts))


def _write_samples(device: Any, until_ns: int) -> None:
    for dev_id, dd in device.devices.items():
        app, dev, module = device.memrec.samples(device.memory, dev_id, until_ns)
        for kind, arr in (("npu_mem_app", app), ("npu_mem", dev),
                          ("npu_module_mem", module)):
            if len(arr):
                dd.data.file(kind, lambda i, k=kind, d=dev_id: L.device_file_name(
                    k, d, i)).write_records(arr)
    device.memrec.advance(until_ns)


def _static_records(model_id: int, thread: int, ts: int,
                    tensors: list[tuple[str, int, int, int]], total: int) -> np.ndarray:
    arr = np.zeros(len(tensors) + 1, ML.STATIC_OP_MEM)
    record_header(arr, L.LEVEL_NODE, ML.STATIC_OP_MEM_TYPE, thread, ts,
                  ML.STATIC_OP_MEM_DATA_LEN)
    if tensors:
        names, nbytes, start, end = zip(*tensors)
        arr["size"][:-1] = ge_tensor_bytes(np.array(nbytes, np.int64))
        arr["op_name"][:-1] = [name_hash(n) for n in names]
        arr["life_start"][:-1] = np.array(start, np.int64) + 1  # GE's node ids are 1-based
        arr["life_end"][:-1] = np.array(end, np.int64) + 1
    arr["size"][-1] = total  # the graph's TOTAL: op 0, its whole life
    arr["life_start"][-1] = 1
    arr["life_end"][-1] = ML.LIFE_TO_THE_END
    arr["graph_id"] = model_id
    return arr


def _task_memory(thread: int, ts: int, addr: int, size: int, node: int, total: int,
                 device_id: int) -> np.ndarray:
    arr = np.zeros(1, ML.TASK_MEMORY_INFO)
    record_header(arr, L.LEVEL_NODE, ML.TASK_MEMORY_TYPE, thread, ts,
                  ML.TASK_MEMORY_DATA_LEN)
    arr["addr"] = addr
    arr["size"] = size
    arr["node_id"] = node
    arr["total_allocate"] = total
    arr["total_reserve"] = total
    arr["device_id"] = device_id
    return arr
