"""Binary record layouts of the Atlas A2 (Ascend 910B, platform_version "5") device data.

The 910B's task scheduler (STARS) logs every task's start and end in `stars_soc.data` and
the AI Core / AI Vector PMU per task in `ffts_profile.data`; these replace the 910's
`hwts.data` / `aicore.data` (docs/formats/ascend910b.md 1.1-1.2).  One definition for the
emulated device's writer and the exporter's decoder, as `layouts.py` is for the 910's records.
All records are little-endian, packed, 64 or 128 bytes; reserved areas are named padding so
a record written from a zeroed array is byte-exact.  Only numpy is imported.

Sources (docs/formats/ascend910b.md 1.2): the open-source analysis's struct formats
(`Ascend/msprof` `analysis/msparser/data_struct_size_constant.py`: ACSQ "4HQHH11L", FFTS+
"4HQ4H10L", context PMU "4HQ4HQ12Q", block PMU "4HQ2HBBHLHH12Q") and its C++ parser items
(`analysis/csrc/domain/services/parser/parser_item/*.h`).
"""
from __future__ import annotations

import numpy as np

STARS_MAGIC = 0x6BD3  # bytes 2-3 of every stars_soc record (analysis drops records without)

# funcType, bits 0-5 of the first u16 (analysis/msconfig/stars_config.py)
FUNC_ACSQ_START = 0b000000
FUNC_ACSQ_END = 0b000001
FUNC_FFTS_START = 0b100010
FUNC_FFTS_END = 0b100011
FUNC_CONTEXT_PMU = 0b101000
FUNC_BLOCK_PMU = 0b101001

# SQE types, bits 10-15 of the first u16 (analysis/msmodel/sqe_type_map.py StarsSqeType)
SQE_AI_CORE = 0  # AIC and AIV kernels alike (the SQE's fftsType tells them apart)
SQE_AI_CPU = 1
SQE_AIV = 2
SQE_EVENT_RECORD = 4
SQE_EVENT_WAIT = 5
SQE_NOTIFY_RECORD = 6
SQE_NOTIFY_WAIT = 7
SQE_SDMA = 11

# FFTS types (bits 13-15 of the PMU record's u16 H7) and subtask types (its low 8 bits of H5)
FFTS_AIC_ONLY = 0
FFTS_AIV_ONLY = 1
FFTS_PLUS = 4
SUBTASK_AIC = 0
SUBTASK_AIV = 1
SUBTASK_MIX_AIC = 6
SUBTASK_MIX_AIV = 7

# 64 B: an ACSQ task start or end ("4HQHH11L")
ACSQ_LOG = np.dtype([
    ("head", "<u2"),  # funcType | cnt << 6 | sqeType << 10
    ("magic", "<u2"),
    ("stream_id", "<u2"),
    ("task_id", "<u2"),
    ("syscnt", "<u8"),
    ("reserved0", "<u2"),
    ("acc", "<u2"),  # acc_id = acc & 63, acsq_id = (acc >> 6) & 127
    ("reserved1", "<u4", (11,)),
])

# 64 B: an FFTS+ subtask (context) start or end ("4HQ4H10L")
FFTS_LOG = np.dtype([
    ("head", "<u2"),
    ("magic", "<u2"),
    ("stream_id", "<u2"),
    ("task_id", "<u2"),
    ("syscnt", "<u8"),
    ("subtask_type", "<u2"),  # low 8 bits
    ("subtask_id", "<u2"),  # the context id
    ("ffts_type", "<u2"),  # bits 13-15
    ("thread_id", "<u2"),
    ("reserved", "<u4", (10,)),
])

# 128 B: the PMU of one task (one context under FFTS+) in ffts_profile.data ("4HQ4HQ12Q")
CONTEXT_PMU = np.dtype([
    ("head", "<u2"),  # funcType 101000 | cnt << 6
    ("reserved0", "<u2"),
    ("stream_id", "<u2"),
    ("task_id", "<u2"),
    ("reserved1", "<u8"),
    ("subtask_type", "<u2"),  # bits 0-7; bit 10: counter overflow (the analysis drops it)
    ("subtask_id", "<u2"),
    ("ffts_type", "<u2"),  # bits 13-15
    ("reserved2", "<u2"),
    ("reserved3", "<u8"),
    ("total_cycle", "<u8"),
    ("reserved4", "<u8"),
    ("pmu", "<u8", (8,)),  # the sample.json event list's order
    ("start_syscnt", "<u8"),
    ("end_syscnt", "<u8"),  # must lie inside the task's ACSQ window
])

# 128 B: one block's PMU (the secondary core of a MIX kernel) ("4HQ2HBBHLHH12Q")
BLOCK_PMU = np.dtype([
    ("head", "<u2"),
    ("reserved0", "<u2"),
    ("stream_id", "<u2"),
    ("task_id", "<u2"),
    ("reserved1", "<u8"),
    ("subtask_type", "<u2"),
    ("subtask_id", "<u2"),
    ("core", "u1"),  # bit 0: coreType (0 AIC, 1 AIV); bits 1-7: core id
    ("ffts_type", "u1"),  # bits 5-7
    ("reserved2", "<u2"),
    ("reserved3", "<u4"),
    ("sub_block_id", "<u2"),
    ("block_id", "<u2"),
    ("total_cycle", "<u8"),
    ("reserved4", "<u8"),
    ("pmu", "<u8", (8,)),
    ("start_syscnt", "<u8"),
    ("end_syscnt", "<u8"),
])

# 888 B: the AI Core frequency changes of lpmFreqConv.data ("II" + "QII" * 55;
# docs/formats/ascend910b.md 1.1): `count` entries of (syscnt, MHz) are valid; count 0 = no
# change
LPM_FREQ_ENTRIES = 55
LPM_FREQ = np.dtype([
    ("count", "<u4"),
    ("reserved", "<u4"),
    ("entries", [("syscnt", "<u8"), ("mhz", "<u4"), ("reserved", "<u4")], (LPM_FREQ_ENTRIES,)),
])

RECORD_SIZES = {"acsq": 64, "ffts_log": 64, "context_pmu": 128, "block_pmu": 128,
                "lpm_freq": 888}
for _name, _dt in (("acsq", ACSQ_LOG), ("ffts_log", FFTS_LOG), ("context_pmu", CONTEXT_PMU),
                   ("block_pmu", BLOCK_PMU), ("lpm_freq", LPM_FREQ)):
    assert _dt.itemsize == RECORD_SIZES[_name], (_name, _dt.itemsize)

# device files (docs/formats/ascend910b.md 1.1): <name>.data.<device>.slice_<n>
DEVICE_FILES = {"stars_soc": "stars_soc.data", "ffts_profile": "ffts_profile.data",
                "lpm_freq": "lpmFreqConv.data"}


def head(func_type: np.ndarray | int, counter: np.ndarray | int,
         sqe_type: np.ndarray | int = 0) -> np.ndarray:
    """The first u16 of a STARS record: funcType | 4-bit rolling counter << 6 | sqe << 10."""
    return ((np.asarray(func_type, np.uint32) & 0x3F)
            | ((np.asarray(counter, np.uint32) & 0xF) << 6)
            | ((np.asarray(sqe_type, np.uint32) & 0x3F) << 10)).astype(np.uint16)


def func_type(head_u16: np.ndarray) -> np.ndarray:
    return np.asarray(head_u16, np.uint16) & 0x3F


def sqe_type(head_u16: np.ndarray) -> np.ndarray:
    return (np.asarray(head_u16, np.uint16) >> 10) & 0x3F


def ffts_type_bits(ffts: np.ndarray | int) -> np.ndarray:
    """The u16 that carries fftsType in bits 13-15."""
    return ((np.asarray(ffts, np.uint32) & 0x7) << 13).astype(np.uint16)


def is_aiv(ffts: np.ndarray, subtask: np.ndarray) -> np.ndarray:
    """A PMU record of an AI Vector core: the C++ analysis's rule (pmu_accelerator_utils.cpp,
    docs/formats/ascend910b.md 1.2 C): AIC when fftsType is 0, or FFTS+ with subtask AIC
    (0) or MIX_AIC (6); everything else AIV."""
    ffts = np.asarray(ffts)
    subtask = np.asarray(subtask)
    aic = (ffts == FFTS_AIC_ONLY) | ((ffts == FFTS_PLUS) & np.isin(subtask, (SUBTASK_AIC,
                                                                                SUBTASK_MIX_AIC)))
    return ~aic
