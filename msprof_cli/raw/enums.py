"""The enumerations of the raw data (docs/formats/raw-format.md 4.9): GE task types, data types,
formats,
runtime task types and the names of the other level/type pairs written into type_info_dic; each
with its reverse map.
"""
from __future__ import annotations

from .layouts import (HCCL_MASTER, HCCL_SLAVE, LEVEL_HCCL, LEVEL_MODEL, LEVEL_NODE, MODEL_EXECUTE,
                      MODEL_GRAPH_ID_MAP, MODEL_INPUT_COPY, MODEL_LOAD, MODEL_OUTPUT_COPY,
                      NODE_BASIC_INFO, NODE_FUSION_OP_INFO, NODE_LAUNCH, NODE_TENSOR_INFO)

GE_TASK_TYPES = {
    0: "AI_CORE", 1: "AI_CPU", 2: "AI_VECTOR_CORE", 3: "WRITE_BACK", 4: "MIX_AIC",
    5: "MIX_AIV", 6: "FFTS_PLUS", 7: "DSA_SQE", 8: "DVPP", 9: "HCCL", 10: "FUSION", 11: "INVALID",
}
GE_TASK_TYPE_IDS = {v: k for k, v in GE_TASK_TYPES.items()}

DATA_TYPES = {
    0: "FLOAT", 1: "FLOAT16", 2: "INT8", 3: "INT32", 4: "UINT8", 6: "INT16", 7: "UINT16",
    8: "UINT32", 9: "INT64", 10: "UINT64", 11: "DOUBLE", 12: "BOOL", 13: "STRING",
    14: "DUAL_SUB_INT8", 15: "DUAL_SUB_UINT8", 16: "COMPLEX64", 17: "COMPLEX128", 18: "QINT8",
    19: "QINT16", 20: "QINT32", 21: "QUINT8", 22: "QUINT16", 23: "RESOURCE", 24: "STRING_REF",
    25: "DUAL", 26: "DT_VARIANT", 27: "DT_BF16", 28: "DT_UNDEFINED", 29: "DT_INT4",
    0xFFFFFFFF: "UNDEFINED",
}
DATA_TYPE_IDS = {v: k for k, v in DATA_TYPES.items()}

FORMATS = {
    0: "NCHW", 1: "NHWC", 2: "ND", 3: "NC1HWC0", 4: "FRACTAL_Z", 5: "NC1C0HWPAD", 6: "NHWC1C0",
    7: "FSR_NCHW", 8: "FRACTAL_DECONV", 9: "C1HWNC0", 10: "FRACTAL_DECONV_TRANSPOSE",
    11: "FRACTAL_DECONV_SP_STRIDE_TRANS", 12: "NC1HWC0_C04", 13: "FRACTAL_Z_C04", 14: "CHWN",
    15: "FRACTAL_DECONV_SP_STRIDE8_TRANS", 16: "HWCN", 17: "NC1KHKWHWC0", 18: "BN_WEIGHT",
    19: "FILTER_HWCK", 25: "C1HWNCoC0", 26: "MD", 27: "NDHWC", 28: "FRACTAL_ZZ", 29: "FRACTAL_NZ",
    30: "NCDHW", 31: "DHWCN", 32: "NDC1HWC0", 33: "FRACTAL_Z_3D", 34: "CN", 35: "NC", 36: "DHWNC",
    37: "FRACTAL_Z_3D_TRANSPOSE", 38: "FRACTAL_ZN_LSTM", 39: "FRACTAL_Z_G", 40: "RESERVED",
    41: "ALL", 42: "NULL",
}
FORMAT_IDS = {v: k for k, v in FORMATS.items()}
FORMAT_UNDEFINED = 0xFFFFFFFF

# Runtime task-type ids written into type_info_dic as `5000_{id}:{name}`.  The first ids
# are those of the analysis' own tests; FLIP_TASK/MAINTENANCE/PROFILING_* are project
# choices (the real tool leaves them free), listed in docs/formats/raw-format.md 4.4.
RUNTIME_TASK_TYPES = {
    0: "KERNEL_AICORE",
    1: "KERNEL_AICPU",
    2: "EVENT_RECORD",
    5: "MEMCPY_ASYNC",
    33: "REDUCE_ASYNC",
    50: "STARS_COMMON",
    52: "FFTS_PLUS",
    66: "KERNEL_AIVEC",
    98: "FLIP_TASK",
    99: "MAINTENANCE",
    100: "PROFILING_ENABLE",
    101: "PROFILING_DISABLE",
    108: "KERNEL_MIX_AIC",
    109: "KERNEL_MIX_AIV",
}
RUNTIME_TASK_TYPE_IDS = {v: k for k, v in RUNTIME_TASK_TYPES.items()}

# Names of the other level/type pairs written into type_info_dic.
TYPE_INFO_NAMES = {
    (LEVEL_NODE, NODE_BASIC_INFO): "node_basic_info",
    (LEVEL_NODE, NODE_TENSOR_INFO): "tensor_info",
    (LEVEL_NODE, NODE_FUSION_OP_INFO): "fusion_op_info",
    (LEVEL_NODE, NODE_LAUNCH): "launch",
    (LEVEL_MODEL, MODEL_GRAPH_ID_MAP): "graph_id_map",
    (LEVEL_MODEL, MODEL_EXECUTE): "ModelExecute",
    (LEVEL_MODEL, MODEL_LOAD): "ModelLoad",
    (LEVEL_MODEL, MODEL_INPUT_COPY): "InputCopy",
    (LEVEL_MODEL, MODEL_OUTPUT_COPY): "OutputCopy",
    (LEVEL_HCCL, HCCL_MASTER): "master",
    (LEVEL_HCCL, HCCL_SLAVE): "slave",
}
