"""Binary record layouts of the CANN raw profiling data (Ascend910, non-stars).

This is the ONE definition of every record, shared by the emulated device's writer
(`msprof_cli.device.writer`) and the exporter's decoder (`msprof_cli.export.decode`).
All records are little-endian and packed; the field offsets and sizes follow
`docs/formats/raw-format.md` (sections 4 and 5) exactly.  Reserved areas are kept
as named padding fields so that a record written from a zeroed array is byte-exact.

Only numpy is imported here: the agent side (collect/device) must not import pandas.
"""
from __future__ import annotations

import re

import numpy as np

from . import memory_layouts as ML
from . import stars_layouts as SL

# --- magic numbers, levels and fixed type ids (docs/formats/raw-format.md 4.1, 4.8)
# -------------------
MAGIC = 0x5A5A
EVENT_RESERVE = 0xFFFFFFFFFFFFFFFF  # api_event slot 24..31 marks a begin/end *event* record

LEVEL_PYTORCH = 30000
LEVEL_PTA = 25000
LEVEL_TX = 20500
LEVEL_ACL = 20000
LEVEL_MODEL = 15000
LEVEL_NODE = 10000
LEVEL_AICPU = 6000
LEVEL_HCCL = 5500
LEVEL_RUNTIME = 5000

LEVEL_NAMES = {
    LEVEL_ACL: "acl",
    LEVEL_MODEL: "model",
    LEVEL_NODE: "node",
    LEVEL_HCCL: "communication",
    LEVEL_RUNTIME: "runtime",
}

# model level types
MODEL_GRAPH_ID_MAP = 0
MODEL_EXECUTE = 1
MODEL_LOAD = 2
MODEL_INPUT_COPY = 3
MODEL_OUTPUT_COPY = 4
# the model-level APIs of one step, each carrying the model id: a task launched inside any of
# them is the model's (GE reports them one after another, docs/formats/raw-format.md 4.12)
MODEL_STEP_TYPES = (MODEL_EXECUTE, MODEL_INPUT_COPY, MODEL_OUTPUT_COPY)
# node level types
NODE_BASIC_INFO = 0
NODE_TENSOR_INFO = 1
NODE_FUSION_OP_INFO = 2
NODE_CONTEXT_ID_INFO = 4
NODE_LAUNCH = 5
# runtime compact type of task_track records (header `type`; the golden raw data uses 1)
RUNTIME_TASK_TRACK = 1
# HCCL node APIs
HCCL_MASTER = 0x010001
HCCL_SLAVE = 0x010002

COMPACT_DATA_LEN = 40
ADDITIONAL_DATA_LEN = 232

# --- host records ----------------------------------------------------------------------

def _hdr(data_len_name: str = "data_len") -> list[tuple]:
    """The common 24-byte header `=HHIIIQ`."""
    return [
        ("magic", "<u2"),
        ("level", "<u2"),
        ("type", "<u4"),
        ("thread_id", "<u4"),
        (data_len_name, "<u4"),
        ("timestamp", "<u8"),
    ]


# api_event.data: API record (40 B, `=HHIIIQQQ`).  Event records share the file and layout:
# for them `end_time` holds EVENT_RESERVE and `begin_time` the event's timestamp, and
# the `reserve` slot holds the requestId pairing begin with end.
API_EVENT = np.dtype(
    [
        ("magic", "<u2"),
        ("level", "<u2"),
        ("type", "<u4"),
        ("thread_id", "<u4"),
        ("reserve", "<u4"),
        ("begin_time", "<u8"),
        ("end_time", "<u8"),
        ("item_id", "<u8"),
    ]
)

# compact.task_track (64 B, `=HHIIIQHHHHQQ16B`)
TASK_TRACK = np.dtype(
    _hdr()
    + [
        ("device_id", "<u2"),
        ("stream_id", "<u2"),
        ("task_id", "<u2"),
        ("batch_id", "<u2"),
        ("task_type", "<u8"),
        ("kernel_name", "<u8"),
        ("num_blocks", "<u2"),
        ("args_size", "<u2"),
        ("ratio_sched", "u1"),
        ("reserved", "V11"),
    ]
)

# compact.node_basic_info (64 B)
NODE_BASIC = np.dtype(
    _hdr()
    + [
        ("op_name", "<u8"),
        ("task_type", "<u4"),
        ("op_type", "<u8"),
        ("block_num", "<u4"),
        ("op_flag", "<u4"),
        ("op_state", "u1"),
        ("reserved", "V11"),
    ]
)

MAX_TENSORS_PER_RECORD = 5
MAX_DIMS = 8
TENSOR = np.dtype(
    [
        ("tensor_type", "<u4"),  # 0 input, 1 output
        ("format", "<u4"),
        ("data_type", "<u4"),
        ("shape", "<u4", (MAX_DIMS,)),
    ]
)
# additional.tensor_info (256 B, `=HHIIIQQI55I`)
TENSOR_INFO = np.dtype(
    _hdr()
    + [
        ("op_name", "<u8"),
        ("tensor_num", "<u4"),
        ("tensors", TENSOR, (MAX_TENSORS_PER_RECORD,)),
    ]
)

# additional.graph_id_map (256 B, `=HHIIIQQ56I`)
GRAPH_ID_MAP = np.dtype(
    _hdr()
    + [
        ("model_name", "<u8"),
        ("graph_id", "<u4"),
        ("model_id", "<u4"),
        ("reserved", "V216"),
    ]
)

# additional.fusion_op_info (256 B, `=HHIIIQQI13Q29I`)
FUSION_OP_INFO = np.dtype(
    _hdr()
    + [
        ("op_name", "<u8"),
        ("fusion_op_num", "<u4"),
        ("input_mem_size", "<u8"),
        ("output_mem_size", "<u8"),
        ("weight_mem_size", "<u8"),
        ("workspace_mem_size", "<u8"),
        ("total_mem_size", "<u8"),
        ("fusion_op_id", "<u8", (8,)),
        ("reserved", "V116"),
    ]
)

# additional.hccl_info (256 B, `=HHIII4Q6IQ2Id3Q6I112B`)
HCCL_INFO = np.dtype(
    _hdr()
    + [
        ("item_id", "<u8"),
        ("ccl_tag", "<u8"),
        ("group_name", "<u8"),
        ("local_rank", "<u4"),
        ("remote_rank", "<u4"),
        ("rank_size", "<u4"),
        ("work_flow_mode", "<u4"),
        ("plane_id", "<u4"),
        ("ctx_id", "<u4"),
        ("notify_id", "<u8"),
        ("stage", "<u4"),
        ("role", "<u4"),
        ("duration_estimated", "<f8"),
        ("src_addr", "<u8"),
        ("dst_addr", "<u8"),
        ("data_size", "<u8"),
        ("op_type", "<u4"),
        ("data_type", "<u4"),
        ("link_type", "<u4"),
        ("transport_type", "<u4"),
        ("rdma_type", "<u4"),
        ("reserve", "<u4"),
        ("reserved", "V112"),
    ]
)

# additional.msproftx (256 B, `=HH3IQ2HI2H4Ii5Qi156s`)
MSPROFTX = np.dtype(
    _hdr()
    + [
        ("info_type", "<u2"),
        ("res0", "<u2"),
        ("res1", "<u4"),
        ("tx_magic", "<u2"),
        ("data_tag", "<u2"),
        ("process_id", "<u4"),
        ("tx_thread_id", "<u4"),
        ("category", "<u4"),
        ("event_type", "<u4"),
        ("payload_type", "<i4"),
        ("payload_value", "<u8"),
        ("start_time", "<u8"),
        ("end_time", "<u8"),
        ("mark_id", "<u8"),
        ("domain", "<u8"),
        ("message_type", "<i4"),
        ("message", "S156"),
    ]
)
MSPROFTX_DATA_TAG = 120

# --- device records -----------------------------------------------------------------------

# hwts.data (64 B, `=BBHHHQ12I`)
HWTS = np.dtype(
    [
        ("flags", "u1"),  # bits 0-2 log type, bit 3 warn, bits 4-7 rolling counter
        ("task_type", "u1"),
        ("reserved0", "<u2"),
        ("block_id", "<u2"),
        ("task_id", "<u2"),
        ("syscnt", "<u8"),
        ("stream_id", "<u4"),
        ("reserved", "V44"),
    ]
)
HWTS_TASK_START = 0
HWTS_TASK_END = 1

# aicore.data (128 B, `=BBHHHII10Q8I`)
AICORE = np.dtype(
    [
        ("flags", "u1"),  # counter << 4
        ("reserved0", "u1"),
        ("reserved1", "<u2"),
        ("reserved2", "<u2"),
        ("task_id", "<u2"),
        ("reserved3", "<u4"),
        ("reserved4", "<u4"),
        ("total_cycles", "<u8"),
        ("reserved5", "<u8"),
        ("pmu", "<u8", (8,)),
        ("stream_id", "<u4"),
        ("reserved", "V28"),
    ]
)

# ts_track.data (40 B); rptType 10 = step trace (`=BBHLQQQHHHH`)
TS_TRACK_STEP = np.dtype(
    [
        ("mode", "u1"),
        ("rpt_type", "u1"),
        ("buf_size", "<u2"),
        ("reserved0", "<u4"),
        ("timestamp", "<u8"),
        ("index_id", "<u8"),
        ("model_id", "<u8"),
        ("stream_id", "<u2"),
        ("task_id", "<u2"),
        ("tag_id", "<u2"),
        ("reserved1", "<u2"),
    ]
)
# rptType 14 = task flip (`=BBHLQHHHH16B`)
TS_TRACK_FLIP = np.dtype(
    [
        ("mode", "u1"),
        ("rpt_type", "u1"),
        ("buf_size", "<u2"),
        ("reserved0", "<u4"),
        ("timestamp", "<u8"),
        ("stream_id", "<u2"),
        ("flip_num", "<u2"),
        ("reserved1", "<u2"),
        ("task_id", "<u2"),
        ("reserved", "V16"),
    ]
)
# rptType 11 = ts memcpy (`=BBHLQHHBBHQQ`): streamId, taskId, taskState, the rest reserved.
# taskState as the analysis reads it (Ascend/msprof common_func/memcpy_constant.py,
# profiling_bean/struct_info/memcpy_state_machine.py): 0 received by the TS, 1 started,
# 2 ended; a copy without all three is dropped.  Three records per memcpy task.  (Older
# msprof_cli versions wrote two, 0 = started / 1 = ended: export/decode/device.py still reads
# those.)
TS_TRACK_MEMCPY = np.dtype(
    [
        ("mode", "u1"),
        ("rpt_type", "u1"),
        ("buf_size", "<u2"),
        ("reserved0", "<u4"),
        ("timestamp", "<u8"),
        ("stream_id", "<u2"),
        ("task_id", "<u2"),
        ("task_state", "u1"),
        ("reserved1", "u1"),
        ("reserved2", "<u2"),
        ("reserved3", "<u8"),
        ("reserved4", "<u8"),
    ]
)
# rptType 12 = task type (`=BBHLQHHHBBQQ`, Ascend/msprof profiling_bean/struct_info/
# task_type.py): streamId, taskId, taskType, taskState, the rest reserved.  On the 910 (chip
# v2) the AI CPU tasks' start / end come only from these records (taskType 1; taskState 1
# started, 2 ended; 0 received is written too and skipped by the analysis), see
# mscalculate/ts_task/ai_cpu/aicpu_from_ts.py and ascend_task/device_task_collector.py.
TS_TRACK_TASK_TYPE = np.dtype(
    [
        ("mode", "u1"),
        ("rpt_type", "u1"),
        ("buf_size", "<u2"),
        ("reserved0", "<u4"),
        ("timestamp", "<u8"),
        ("stream_id", "<u2"),
        ("task_id", "<u2"),
        ("task_type", "<u2"),
        ("task_state", "u1"),
        ("reserved1", "u1"),
        ("reserved2", "<u8"),
        ("reserved3", "<u8"),
    ]
)
TS_RPT_STEP_TRACE = 10
TS_RPT_MEMCPY = 11
TS_RPT_TASK_TYPE = 12
# taskState of rptType 11 and 12 records
TS_STATE_RECEIVE = 0
TS_STATE_START = 1
TS_STATE_END = 2
# the two states older msprof_cli versions wrote into rptType 11 (read back by export)
TS_MEMCPY_LEGACY_START = 0
TS_MEMCPY_LEGACY_END = 1
TS_TASK_TYPE_AI_CPU = 1  # taskType of an AI CPU task in rptType 12
TS_RPT_FLIP = 14
TS_TRACK_SIZE = 40
FLIP_STREAM_DESTROYED = 65535

# aicpu.data (128 B)
AICPU = np.dtype(
    [
        ("magic", "<u2"),
        ("data_tag", "<u2"),
        ("stream_id", "<u2"),
        ("task_id", "<u2"),
        ("run_start_time", "<u8"),
        ("run_start_tick", "<u8"),
        ("compute_start_time", "<u8"),
        ("memcpy_start_time", "<u8"),
        ("memcpy_end_time", "<u8"),
        ("run_end_time", "<u8"),
        ("run_end_tick", "<u8"),
        ("thread_id", "<u4"),
        ("device_id", "<u4"),
        ("submit_tick", "<u8"),
        ("schedule_tick", "<u8"),
        ("tick_before_run", "<u8"),
        ("tick_after_run", "<u8"),
        ("kernel_type", "<u4"),
        ("dispatch_time", "<u4"),
        ("total_time", "<u4"),
        ("ffts_thread_id", "<u2"),
        ("version", "u1"),
        ("reserved0", "u1"),
        ("reserved", "<u8"),
    ]
)
AICPU_DATA_TAG = 60

# l2_cache.data (72 B, `=HHHH8Q`)
L2_CACHE = np.dtype(
    [
        ("task_type", "<u2"),
        ("stream_id", "<u2"),
        ("task_id", "<u2"),
        ("reserved", "<u2"),
        ("events", "<u8", (8,)),
    ]
)

# Expected sizes, checked by tests and at import (a wrong layout must never ship).
RECORD_SIZES = {
    "API_EVENT": (API_EVENT, 40),
    "TASK_TRACK": (TASK_TRACK, 64),
    "NODE_BASIC": (NODE_BASIC, 64),
    "TENSOR_INFO": (TENSOR_INFO, 256),
    "GRAPH_ID_MAP": (GRAPH_ID_MAP, 256),
    "FUSION_OP_INFO": (FUSION_OP_INFO, 256),
    "HCCL_INFO": (HCCL_INFO, 256),
    "MSPROFTX": (MSPROFTX, 256),
    "HWTS": (HWTS, 64),
    "AICORE": (AICORE, 128),
    "TS_TRACK_STEP": (TS_TRACK_STEP, 40),
    "TS_TRACK_FLIP": (TS_TRACK_FLIP, 40),
    "TS_TRACK_MEMCPY": (TS_TRACK_MEMCPY, 40),
    "TS_TRACK_TASK_TYPE": (TS_TRACK_TASK_TYPE, 40),
    "AICPU": (AICPU, 128),
    "L2_CACHE": (L2_CACHE, 72),
}
for _name, (_dt, _size) in RECORD_SIZES.items():
    assert _dt.itemsize == _size, f"{_name}: {_dt.itemsize} != {_size}"

# --- enumerations (docs/formats/raw-format.md 4.9)
# ---------------------------------------------------------


# --- file names (docs/formats/raw-format.md 2.2, 2.3)
# --------------------------------------------------------

HOST_FILES = {
    "api_event": "api_event.data",
    "task_track": "compact.task_track",
    "node_basic_info": "compact.node_basic_info",
    "tensor_info": "additional.tensor_info",
    "hash_dic": "additional.hash_dic",
    "type_info_dic": "additional.type_info_dic",
    "graph_id_map": "additional.graph_id_map",
    "fusion_op_info": "additional.fusion_op_info",
    "hccl_info": "additional.hccl_info",
    "msproftx": "additional.msproftx",
    **ML.HOST_FILES,  # the device memory records (memory_layouts.py)
}
HOST_DTYPES = {
    "api_event": API_EVENT,
    "task_track": TASK_TRACK,
    "node_basic_info": NODE_BASIC,
    "tensor_info": TENSOR_INFO,
    "graph_id_map": GRAPH_ID_MAP,
    "fusion_op_info": FUSION_OP_INFO,
    "hccl_info": HCCL_INFO,
    "msproftx": MSPROFTX,
    **ML.HOST_DTYPES,
}
DEVICE_FILES = {
    "hwts": "hwts.data",
    "aicore": "aicore.data",
    "ts_track": "ts_track.data",
    # the AI CPU scheduler's task timings (the 128-byte tag-60 records below): the analysis
    # reads them from the data-preprocess channel's file (Ascend/msprof framework/
    # file_dispatch.py DataTag.AI_CPU: ^DATA_PREPROCESS\.AICPU\.(\d+)\.slice_\d+,
    # msparser/aicpu/aicpu_bin_data_parser.py); `aicpu.data` is another channel (AI CPU
    # additional info, level 6000 records: msparser/add_info/aicpu_add_info_parser.py)
    "aicpu": "DATA_PREPROCESS.AICPU",
    "l2_cache": "l2_cache.data",
    # the Atlas A2 family's task log and per-task PMU (stars_layouts.py)
    **SL.DEVICE_FILES,
    **ML.DEVICE_FILES,  # device memory samples (memory_layouts.py)
}
DEVICE_DTYPES = {
    "hwts": HWTS,
    "aicore": AICORE,
    "aicpu": AICPU,
    "l2_cache": L2_CACHE,
    # ts_track records are all 40 B but of several kinds: read as TS_TRACK_STEP and
    # re-view the rptType 14 rows as TS_TRACK_FLIP.
    "ts_track": TS_TRACK_STEP,
    # all 64 B (ACSQ and FFTS+ logs) / 128 B (context and block PMU): read with the first
    # layout, the funcType of the head tells the others apart
    "stars_soc": SL.ACSQ_LOG,
    "ffts_profile": SL.CONTEXT_PMU,
    "lpm_freq": SL.LPM_FREQ,
    **ML.DEVICE_DTYPES,
}


def host_file_name(kind: str, slice_index: int = 0, aging: bool = False) -> str:
    """`unaging.compact.task_track.slice_0` etc."""
    prefix = "aging" if aging else "unaging"
    return f"{prefix}.{HOST_FILES[kind]}.slice_{slice_index}"


# file names older msprof_cli versions wrote for a kind, still read by export
LEGACY_DEVICE_FILES = {"aicpu": "aicpu.data"}


def device_file_regex(kind: str, device_id: int | None = None) -> str:
    """Regex of a kind's slice file names (device id any, or the given one), the legacy
    name included."""
    names = [DEVICE_FILES[kind]] + ([LEGACY_DEVICE_FILES[kind]]
                                    if kind in LEGACY_DEVICE_FILES else [])
    dev = r"\d+" if device_id is None else str(int(device_id))
    return r"^(?:" + "|".join(re.escape(n) for n in names) + r")\." + dev + r"\.slice_\d+$"


def device_file_name(kind: str, device_id: int, slice_index: int = 0) -> str:
    """`hwts.data.0.slice_0` etc."""
    return f"{DEVICE_FILES[kind]}.{device_id}.slice_{slice_index}"


def hwts_flags(log_type: np.ndarray, counter: np.ndarray) -> np.ndarray:
    """Byte 0 of an hwts record: low 3 bits log type, high 4 bits rolling counter."""
    return ((counter.astype(np.uint8) & 0x0F) << 4) | (log_type.astype(np.uint8) & 0x07)
