"""The ops that touch only the rows their indices select (docs/device-model.md 3, "Sparse
ops"): which TF ops they are, the GE type each runs as and how it touches its first input.
Data only: op_map.py places them, sparse_access.py charges what they move.
"""
from __future__ import annotations

# how a task touches its first input: all of it, or only the rows that the indices select (an
# embedding lookup reads 128 rows of a 50000-row table)
ACCESS_DENSE = 0
ACCESS_GATHER = 1  # reads the indexed rows of input 0, writes them out
ACCESS_SCATTER = 2  # read-modify-writes the indexed rows of input 0 with the last input
ACCESS_SPARSE_APPLY = 3  # an optimizer updating the gradient's rows of var and its slots
ACCESS_DENSE_APPLY = 4  # an optimizer updating var and its slots in place, all of them

# Ops that touch only the rows their indices select (TF type -> (GE type, access)): their cost
# is what they read and write (indices x row size), never the whole variable.  The scatters
# and sparse optimizers update a variable in place (ref or resource input); the functional
# TensorScatter* / ScatterNd build a whole new tensor and stay dense.
SPARSE_OPS: dict[str, tuple[str, int]] = {
    "GatherV2": ("GatherV2", ACCESS_GATHER),
    "Gather": ("GatherV2", ACCESS_GATHER),
    "ResourceGather": ("GatherV2", ACCESS_GATHER),
    "GatherNd": ("GatherNd", ACCESS_GATHER),
    "ResourceGatherNd": ("GatherNd", ACCESS_GATHER),
    "ScatterAdd": ("ScatterAdd", ACCESS_SCATTER),
    "ScatterSub": ("ScatterSub", ACCESS_SCATTER),
    "ScatterMul": ("ScatterMul", ACCESS_SCATTER),
    "ScatterDiv": ("ScatterDiv", ACCESS_SCATTER),
    "ScatterMax": ("ScatterMax", ACCESS_SCATTER),
    "ScatterMin": ("ScatterMin", ACCESS_SCATTER),
    "ScatterUpdate": ("ScatterUpdate", ACCESS_SCATTER),
    "ScatterNdAdd": ("ScatterNdAdd", ACCESS_SCATTER),
    "ScatterNdSub": ("ScatterNdSub", ACCESS_SCATTER),
    "ScatterNdUpdate": ("ScatterNdUpdate", ACCESS_SCATTER),
    "ResourceScatterAdd": ("ScatterAdd", ACCESS_SCATTER),
    "ResourceScatterSub": ("ScatterSub", ACCESS_SCATTER),
    "ResourceScatterMul": ("ScatterMul", ACCESS_SCATTER),
    "ResourceScatterDiv": ("ScatterDiv", ACCESS_SCATTER),
    "ResourceScatterMax": ("ScatterMax", ACCESS_SCATTER),
    "ResourceScatterMin": ("ScatterMin", ACCESS_SCATTER),
    "ResourceScatterUpdate": ("ScatterUpdate", ACCESS_SCATTER),
    "ResourceScatterNdAdd": ("ScatterNdAdd", ACCESS_SCATTER),
    "ResourceScatterNdSub": ("ScatterNdSub", ACCESS_SCATTER),
    "ResourceScatterNdUpdate": ("ScatterNdUpdate", ACCESS_SCATTER),
    "SparseApplyAdagrad": ("SparseApplyAdagradD", ACCESS_SPARSE_APPLY),
    "ResourceSparseApplyAdagrad": ("SparseApplyAdagradD", ACCESS_SPARSE_APPLY),
    "SparseApplyAdagradV2": ("SparseApplyAdagradV2D", ACCESS_SPARSE_APPLY),
    "ResourceSparseApplyAdagradV2": ("SparseApplyAdagradV2D", ACCESS_SPARSE_APPLY),
    "SparseApplyFtrl": ("SparseApplyFtrlD", ACCESS_SPARSE_APPLY),
    "ResourceSparseApplyFtrl": ("SparseApplyFtrlD", ACCESS_SPARSE_APPLY),
    "SparseApplyFtrlV2": ("SparseApplyFtrlV2D", ACCESS_SPARSE_APPLY),
    "ResourceSparseApplyFtrlV2": ("SparseApplyFtrlV2D", ACCESS_SPARSE_APPLY),
    "SparseApplyMomentum": ("SparseApplyMomentum", ACCESS_SPARSE_APPLY),
    "ResourceSparseApplyMomentum": ("SparseApplyMomentum", ACCESS_SPARSE_APPLY),
    "SparseApplyKerasMomentum": ("SparseApplyKerasMomentum", ACCESS_SPARSE_APPLY),
    "ResourceSparseApplyKerasMomentum": ("SparseApplyKerasMomentum", ACCESS_SPARSE_APPLY),
    "SparseApplyRMSProp": ("SparseApplyRMSPropD", ACCESS_SPARSE_APPLY),
    "ResourceSparseApplyRMSProp": ("SparseApplyRMSPropD", ACCESS_SPARSE_APPLY),
    "SparseApplyProximalAdagrad": ("SparseApplyProximalAdagradD", ACCESS_SPARSE_APPLY),
    "ResourceSparseApplyProximalAdagrad": ("SparseApplyProximalAdagradD",
                                           ACCESS_SPARSE_APPLY),
}
