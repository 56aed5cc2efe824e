"""Record layouts: sizes and field offsets exactly as docs/formats/raw-format.md."""
import struct

import numpy as np
import pytest

from msprof_cli.raw import layouts as L

SIZES = {"API_EVENT": 40, "TASK_TRACK": 64, "NODE_BASIC": 64, "TENSOR_INFO": 256,
         "GRAPH_ID_MAP": 256, "FUSION_OP_INFO": 256, "HCCL_INFO": 256, "MSPROFTX": 256,
         "HWTS": 64, "AICORE": 128, "TS_TRACK_STEP": 40, "TS_TRACK_FLIP": 40, "AICPU": 128,
         "L2_CACHE": 72}
STRUCTS = {"API_EVENT": "=HHIIIQQQ", "TASK_TRACK": "=HHIIIQHHHHQQ16B",
           "TENSOR_INFO": "=HHIIIQQI55I", "GRAPH_ID_MAP": "=HHIIIQQ56I",
           "FUSION_OP_INFO": "=HHIIIQQI13Q29I", "HCCL_INFO": "=HHIII4Q6IQ2Id3Q6I112B",
           "MSPROFTX": "=HH3IQ2HI2H4Ii5Qi156s", "HWTS": "=BBHHHQ12I", "AICORE": "=BBHHHII10Q8I",
           "TS_TRACK_STEP": "=BBHLQQQHHHH", "TS_TRACK_FLIP": "=BBHLQHHHH16B",
           "AICPU": "=HHHHQQQQQQQIIQQQQIIIHBBQ", "L2_CACHE": "=HHHH8Q"}


@pytest.mark.parametrize("name", sorted(SIZES))
def test_sizes(name):
    assert getattr(L, name).itemsize == SIZES[name]


@pytest.mark.parametrize("name", sorted(STRUCTS))
def test_sizes_match_reference_struct_formats(name):
    assert struct.calcsize(STRUCTS[name]) == getattr(L, name).itemsize


@pytest.mark.parametrize("dtype,field,offset", [
    (L.API_EVENT, "begin_time", 16), (L.API_EVENT, "item_id", 32),
    (L.TASK_TRACK, "device_id", 24), (L.TASK_TRACK, "task_id", 28), (L.TASK_TRACK, "task_type", 32),
    (L.TASK_TRACK, "kernel_name", 40), (L.TASK_TRACK, "num_blocks", 48),
    (L.NODE_BASIC, "op_name", 24), (L.NODE_BASIC, "task_type", 32), (L.NODE_BASIC, "op_type", 36),
    (L.NODE_BASIC, "block_num", 44), (L.NODE_BASIC, "op_flag", 48), (L.NODE_BASIC, "op_state", 52),
    (L.TENSOR_INFO, "tensor_num", 32), (L.TENSOR_INFO, "tensors", 36),
    (L.HWTS, "task_id", 6), (L.HWTS, "syscnt", 8), (L.HWTS, "stream_id", 16),
    (L.AICORE, "task_id", 6), (L.AICORE, "total_cycles", 16), (L.AICORE, "pmu", 32),
    (L.AICORE, "stream_id", 96),
    (L.TS_TRACK_STEP, "timestamp", 8), (L.TS_TRACK_STEP, "index_id", 16),
    (L.TS_TRACK_STEP, "model_id", 24), (L.TS_TRACK_STEP, "tag_id", 36),
    (L.TS_TRACK_FLIP, "stream_id", 16), (L.TS_TRACK_FLIP, "flip_num", 18),
    (L.TS_TRACK_FLIP, "task_id", 22),
    (L.AICPU, "run_start_tick", 16), (L.AICPU, "run_end_tick", 56), (L.AICPU, "submit_tick", 72),
    (L.AICPU, "kernel_type", 104), (L.AICPU, "dispatch_time", 108), (L.AICPU, "version", 118),
    (L.MSPROFTX, "tx_magic", 32), (L.MSPROFTX, "start_time", 64), (L.MSPROFTX, "message", 100),
    (L.GRAPH_ID_MAP, "model_id", 36), (L.FUSION_OP_INFO, "fusion_op_id", 76),
    (L.HCCL_INFO, "duration_estimated", 88), (L.L2_CACHE, "events", 8),
])
def test_field_offsets(dtype, field, offset):
    assert dtype.fields[field][1] == offset


def test_struct_and_numpy_agree_on_a_task_track_record():
    raw = struct.pack("=HHIIIQHHHHQQ16B", 0x5A5A, 5000, 1, 5242, 40, 5000002011000, 0, 2, 1, 0,
                      0, 10000000000, 32, 0, *([0] * 14))
    rec = np.frombuffer(raw, dtype=L.TASK_TRACK)[0]
    assert (rec["magic"], rec["level"], rec["stream_id"], rec["task_id"], rec["num_blocks"]) == (
        0x5A5A, 5000, 2, 1, 32)
    assert rec["kernel_name"] == 10000000000 and rec["timestamp"] == 5000002011000


def test_hwts_flags():
    flags = L.hwts_flags(np.array([0, 1, 0]), np.array([0, 1, 17]))
    assert flags.tolist() == [0, 17, 16]


def test_file_names():
    assert L.host_file_name("task_track") == "unaging.compact.task_track.slice_0"
    assert L.host_file_name("api_event", 2, aging=True) == "aging.api_event.data.slice_2"
    assert L.device_file_name("hwts", 0) == "hwts.data.0.slice_0"
