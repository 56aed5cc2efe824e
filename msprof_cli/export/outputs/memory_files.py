"""The device memory outputs of the mindstudio layout (derive/memory.py): the five summaries,
read whole when the export closes (a few records a second of collection: not windowed), and
the msprof json's "NPU MEM" counter lane of each device.

Where the analysis writes them (docs/formats/device-memory.md 2): npu_mem and npu_module_mem
per device; memory_record and operator_memory in every device dir with every row (merged:
one copy per device, with its number); static_op_mem from the host dir (`Device_id` host).
The NPU MEM lane's sort index is the Python path's (the next free index before the device's
Overlap Analysis: overlap_layer.overlap_sorts; the C++ path of an Atlas A2 uses 17).
"""
from __future__ import annotations

from pathlib import Path


from msprof_cli.raw import layouts as L

from ..decode.control_info import ResultDirInfo
from ..derive import memory as D
from ..pipeline import Export, Output
from .trace import Layer, pid_of, process_meta

SORT_NPU_MEM = 20  # with one device (overlap_layer.overlap_sorts gives it per device)
NAME = "NPU MEM"


def has_npu_mem(rd: ResultDirInfo | Path) -> bool:
    """The device dir (its ResultDirInfo or its data dir) holds npu_mem records."""
    data = rd if isinstance(rd, Path) else rd.data_dir
    return any(data.glob(f"{L.DEVICE_FILES['npu_mem']}.*")) or any(
        data.glob(f"{L.DEVICE_FILES['npu_mem_app']}.*"))


def npu_mem_meta(device_id: int, app_pid: int, sort: int = SORT_NPU_MEM) -> list[str]:
    return process_meta(pid_of(app_pid, sort, device_id), NAME, f"NPU {device_id}", sort, [])


def npu_mem_layer(rd: ResultDirInfo, app_pid: int, sort: int = SORT_NPU_MEM) -> Layer:
    """The lane's events of one device (none without npu_mem data)."""
    if not has_npu_mem(rd):
        return Layer()
    device_id = rd.device_id or 0
    events, keys = D.npu_mem_events(rd, pid_of(app_pid, sort, device_id), rd.begin_local_ns)
    return Layer(npu_mem_meta(device_id, app_pid, sort), events=events, keys=keys)


class MemoryFiles(Output):
    """npu_mem, npu_module_mem, memory_record, operator_memory, static_op_mem (`merged`: the
    mindstudio layout's files, whose static_op_mem carries the host's `Device_id`; else the
    legacy per-device files, without the column)."""

    def __init__(self, merged: bool = True) -> None:
        self.merged = merged

    def close(self, run: Export) -> list[Path]:
        out: list[Path] = []
        devs = [(j, f.rd) for j, f in enumerate(run.plan.facts)]
        for stem, make in (("npu_mem", D.npu_mem), ("npu_module_mem", D.npu_module_mem)):
            tables = [(j, t) for j, rd in devs if (t := make(rd)) is not None]
            if tables:
                out += run.emit_devices(stem, tables)
        host = run.plan.host_rd()
        if host is None:
            return out
        raw = D.task_memory(host)
        for stem, table in (("operator_memory", D.operator_memory(host, raw)),
                            ("memory_record", D.memory_record(host, raw))):
            out += run.emit_host(stem, table)
        static = D.static_op_mem(host)
        if static is not None and self.merged:  # the host dir's rows (with_device's column)
            header, df = static
            df.insert(0, "Device_id", "host")
            static = (["Device_id"] + header, df)
        out += run.emit("static_op_mem", static)
        return out
