"""The device memory records (docs/formats/device-memory.md 1): one definition for the
writer (device/memory_records.py) and the reader (export).

* `npu_mem.app.N` / `npu_mem.data.N` (device): 32 B `=IIQQQ`: the collection version "1.0"
  layout (the real collector writes "1.0" in info.json) takes the u32 at offset 0 as the
  timestamp in µs since the device dir's sync point; the "2.0" layout the u64 at offset 8.
  Both are written.  event 0 = the application (APP, in `.app`), 1 = the device (`.data`).
  Bytes.
* `npu_module_mem.data.N` (device): 24 B `=IIQQ`: module id (the CANN `ModuleName` enum),
  reserved, a CLOCK_MONOTONIC_RAW ns timestamp, the module's reserved bytes.
* `additional.task_memory_info` (host, type 6 at level 10000): 256 B, an allocation (+bytes)
  or a free (-bytes) of device memory with the pool's totals after it.
* `additional.static_op_mem` (host, type 11 at level 10000): 256 B, one block of GE's static
  plan (size, op name hash, life start / end node ids, graph id) or a graph's TOTAL (op 0).

Sources: Ascend/msprof `analysis/msparser/data_struct_size_constant.py` (formats),
`analysis/common_func/file_name_manager.py` (names), `analysis/csrc/infrastructure/utils/
prof_common.h` (type ids).
"""
from __future__ import annotations

import numpy as np

NPU_MEM_APP, NPU_MEM_DEVICE = 0, 1  # npu_mem event
MODULE_HCCL = 3  # the CANN ModuleName of HCCL
MODULE_GE = 45  # the CANN ModuleName of GE (analysis/profiling_bean/prof_enum/data_tag.py)
# the CANN ModuleName enum (the same file): npu_module_mem's Component; "other" for the rest
MODULE_NAMES = {
    0: "SLOG", 1: "IDEDD", 2: "SCC", 3: "HCCL", 4: "FMK", 5: "CCU", 6: "DVPP", 7: "RUNTIME",
    8: "CCE", 9: "HDC", 10: "DRV", 11: "NET", 22: "DEVMM", 23: "KERNEL", 24: "LIBMEDIA",
    25: "CCECPU", 27: "ROS", 28: "HCCP", 29: "ROCE", 30: "TEFUSION", 31: "PROFILING", 32: "DP",
    33: "APP", 34: "TS", 35: "TSDUMP", 36: "AICPU", 37: "LP", 38: "TDT", 39: "FE", 40: "MD",
    41: "MB", 42: "ME", 43: "IMU", 44: "IMP", 45: "GE", 47: "CAMERA", 48: "ASCENDCL",
    49: "TEEOS", 50: "ISP", 51: "SIS", 52: "HSM", 53: "DSS", 54: "PROCMGR", 55: "BBOX",
    56: "AIVECTOR", 57: "TBE", 58: "FV", 60: "TUNE", 61: "HSS", 62: "FFTS", 63: "OP", 64: "UDF",
    65: "HICAID", 66: "TSYNC", 67: "AUDIO", 68: "TPRT", 69: "ASCENDCKERNEL", 70: "ASYS",
    71: "ATRACE", 72: "RTC", 73: "SYSMONITOR", 74: "AML", 75: "ADETECT", 76: "MBUFF",
    77: "CUSTOM"}
TASK_MEMORY_TYPE = 6  # MSPROF_REPORT_NODE_TASK_MEMORY_TYPE
STATIC_OP_MEM_TYPE = 11  # MSPROF_REPORT_NODE_STATIC_OP_MEM_TYPE
TASK_MEMORY_DATA_LEN = 48  # sizeof(MsprofMemoryInfo)
STATIC_OP_MEM_DATA_LEN = 56  # sizeof(MsprofStaticOpMem), tail padding included
LIFE_TO_THE_END = 0xFFFFFFFF  # static_op_mem: released at the end of the graph's life

NPU_MEM = np.dtype([
    ("timestamp_v1", "<u4"),  # µs since the sync point (version "1.0")
    ("event", "<u4"),
    ("timestamp", "<u8"),  # the same µs, in full (version "2.0")
    ("ddr", "<u8"),
    ("hbm", "<u8"),
])
NPU_MODULE_MEM = np.dtype([
    ("module_id", "<u4"),
    ("reserved", "<u4"),
    ("timestamp", "<u8"),  # CLOCK_MONOTONIC_RAW ns
    ("total_size", "<u8"),
])


def _hdr() -> list[tuple]:
    """The additional records' 24-byte header `=HHIIIQ` (raw/layouts.py's)."""
    return [("magic", "<u2"), ("level", "<u2"), ("type", "<u4"), ("thread_id", "<u4"),
            ("data_len", "<u4"), ("timestamp", "<u8")]


TASK_MEMORY_INFO = np.dtype(_hdr() + [
    ("addr", "<u8"),
    ("size", "<i8"),  # + allocated, - freed
    ("node_id", "<u8"),  # hash of the owner's name (hash_dic)
    ("total_allocate", "<u8"),
    ("total_reserve", "<u8"),
    ("device_id", "<u4"),
    ("device_type", "<u4"),
    ("reserved", "V184"),
])
STATIC_OP_MEM = np.dtype(_hdr() + [
    ("size", "<i8"),
    ("op_name", "<u8"),  # hash (hash_dic); 0 = the graph's TOTAL
    ("life_start", "<u8"),
    ("life_end", "<u8"),
    ("total_allocate", "<u8"),  # never set by GE
    ("dyn_op_name", "<u8"),  # 0: a static root graph
    ("graph_id", "<u4"),
    ("reserved", "V180"),
])
assert NPU_MEM.itemsize == 32 and NPU_MODULE_MEM.itemsize == 24
assert TASK_MEMORY_INFO.itemsize == 256 and STATIC_OP_MEM.itemsize == 256

HOST_FILES = {"task_memory_info": "additional.task_memory_info",
              "static_op_mem": "additional.static_op_mem"}
HOST_DTYPES = {"task_memory_info": TASK_MEMORY_INFO, "static_op_mem": STATIC_OP_MEM}
DEVICE_FILES = {"npu_mem_app": "npu_mem.app", "npu_mem": "npu_mem.data",
                "npu_module_mem": "npu_module_mem.data"}
DEVICE_DTYPES = {"npu_mem_app": NPU_MEM, "npu_mem": NPU_MEM, "npu_module_mem": NPU_MODULE_MEM}
