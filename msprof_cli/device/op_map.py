"""TensorFlow op type -> Ascend (GE) op type, task kind and cost class (docs/device-model.md 2).

Everything here is data: the tables say which TF ops become AI Core kernels (and under which GE
type name), which run on the AI CPU (no AI Core kernel exists on Ascend), which are collective
(HCCL) and which launch nothing at all (host-only bookkeeping ops).  Unknown op types default to
an AI Core vector kernel named like the TF type.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from msprof_cli.device.sparse_ops import (ACCESS_DENSE, ACCESS_DENSE_APPLY, ACCESS_GATHER,
                                          ACCESS_SPARSE_APPLY, SPARSE_OPS)

# task kinds (one device task per op, or none)
KIND_NONE = 0  # host-only: no launch, no records
KIND_AI_CORE = 1
KIND_AI_CPU = 2
KIND_HCCL = 3

# cost classes (cost_model.py)
COST_NONE = 0
COST_VECTOR = 1  # element-wise / reductions: vector pipe + MTE
COST_MATMUL = 2  # cube: FLOPs = 2 * |A| * N
COST_CONV = 3  # cube: FLOPs = 2 * |out| * |filter| / Cout
COST_CONV_BP_INPUT = 4  # cube: FLOPs = 2 * |dy| * |filter| / Cout
COST_CONV_BP_FILTER = 5  # cube: FLOPs = 2 * |dy| * |dW| / Cout
COST_DEPTHWISE = 6  # cube (poorly used): FLOPs = 2 * |out| * kh * kw
COST_MOVE = 7  # data movement only (transpose, concat, gather...): MTE dominated
COST_AI_CPU = 8
COST_HCCL = 9


@dataclass(frozen=True)
class OpMapping:
    ge_type: str
    kind: int
    cost: int
    vec_factor: float = 1.0  # vector instructions per output element (relative to an Add)
    allreduce: bool = False  # collective that gets step-trace tags 10000+2k/10001+2k
    access: int = ACCESS_DENSE
    fallback: bool = False  # in no table: placed by the unknown-type rule (collect warns)


# oneDNN (MKL) rewrites that TF applies on CPU: the original op is the text after the prefix
ONEDNN_PREFIXES = ("_MklNative", "_Mkl")
# Grappler fusions (`_Fused*`, also visible after the oneDNN prefix is stripped): TF type of the
# main op of the fusion.  FusedBatchNorm* are real TF ops, not fusions, and stay as they are.
FUSED_MAIN_OP = {
    "FusedConv2D": "Conv2D",
    "FusedConv3D": "Conv3D",
    "FusedMatMul": "MatMul",
    "FusedBatchMatMulV2": "BatchMatMulV2",
    "FusedDepthwiseConv2dNative": "DepthwiseConv2dNative",
    "FusedBatchNormEx": "FusedBatchNormV3",
    "FusedPadConv2D": "Conv2D",
    "FusedResizeAndPadConv2D": "Conv2D",
    "Conv2DWithBias": "Conv2D",
    "FusedConv2DWithBias": "Conv2D",
    # oneDNN's filter gradient with the bias gradient folded in (BiasAddGrad)
    "Conv2DBackpropFilterWithBias": "Conv2DBackpropFilter",
    "Conv3DBackpropFilterWithBias": "Conv3DBackpropFilterV2",
    "FusedInstanceNorm": "InstanceNorm",
}

# TF type -> (GE type, cost class, vector factor)
AI_CORE_OPS: dict[str, tuple[str, int, float]] = {
    # cube
    "MatMul": ("MatMulV2", COST_MATMUL, 1.0),
    "BatchMatMul": ("BatchMatMul", COST_MATMUL, 1.0),
    "BatchMatMulV2": ("BatchMatMulV2", COST_MATMUL, 1.0),
    "BatchMatMulV3": ("BatchMatMulV2", COST_MATMUL, 1.0),
    "Einsum": ("BatchMatMulV2", COST_MATMUL, 1.0),
    "Conv2D": ("Conv2D", COST_CONV, 1.0),
    "Conv3D": ("Conv3D", COST_CONV, 1.0),
    "Conv2DBackpropInput": ("Conv2DBackpropInput", COST_CONV_BP_INPUT, 1.0),
    "Conv2DBackpropFilter": ("Conv2DBackpropFilter", COST_CONV_BP_FILTER, 1.0),
    "Conv3DBackpropInputV2": ("Conv3DBackpropInput", COST_CONV_BP_INPUT, 1.0),
    "Conv3DBackpropFilterV2": ("Conv3DBackpropFilter", COST_CONV_BP_FILTER, 1.0),
    "DepthwiseConv2dNative": ("DepthwiseConv2D", COST_DEPTHWISE, 1.0),
    "DepthwiseConv2dNativeBackpropInput": ("DepthwiseConv2DBackpropInput", COST_DEPTHWISE, 1.0),
    "DepthwiseConv2dNativeBackpropFilter": ("DepthwiseConv2DBackpropFilter", COST_DEPTHWISE,
                                            1.0),
    # npu_ops.dropout (--dropout npu, npu_dropout.py): a bit mask from a seed (Philox: about
    # 4 vector element-ops per element, an assumption) and its application
    "DropOutGenMask": ("DropOutGenMask", COST_VECTOR, 4.0),
    "DropOutDoMask": ("DropOutDoMask", COST_VECTOR, 1.0),
    # GE's fused layer norm (layer_norm_fusion.py): the full-size vector operations of the TBE
    # kernels' compute, broadcasts included (docs/device-model.md 3.5 names the kernel sources
    # and their public mirror)
    "LayerNorm": ("LayerNorm", COST_VECTOR, 12.0),
    "LayerNormXBackpropV2": ("LayerNormXBackpropV2", COST_VECTOR, 14.0),
    "LayerNormBetaGammaBackpropV2": ("LayerNormBetaGammaBackpropV2", COST_VECTOR, 3.0),
    # GE's format conversion, inserted where a tensor changes layout (trans_ops.py): a
    # transposition in the Unified Buffer, one vector pass per element
    "TransData": ("TransData", COST_VECTOR, 1.0),
    # element-wise / activation
    "BiasAdd": ("BiasAdd", COST_VECTOR, 1.0),
    "BiasAddV1": ("BiasAdd", COST_VECTOR, 1.0),
    "BiasAddGrad": ("BiasAddGrad", COST_VECTOR, 1.0),
    "Relu": ("Relu", COST_VECTOR, 1.0),
    "ReluGrad": ("ReluGrad", COST_VECTOR, 1.0),
    "Relu6": ("Relu6", COST_VECTOR, 1.0),
    "Relu6Grad": ("Relu6Grad", COST_VECTOR, 1.0),
    "LeakyRelu": ("LeakyRelu", COST_VECTOR, 2.0),
    "LeakyReluGrad": ("LeakyReluGrad", COST_VECTOR, 2.0),
    "Elu": ("Elu", COST_VECTOR, 4.0),
    "EluGrad": ("EluGrad", COST_VECTOR, 3.0),
    "Selu": ("Selu", COST_VECTOR, 4.0),
    "Softplus": ("Softplus", COST_VECTOR, 6.0),
    "Sigmoid": ("Sigmoid", COST_VECTOR, 4.0),
    "SigmoidGrad": ("SigmoidGrad", COST_VECTOR, 3.0),
    "Tanh": ("Tanh", COST_VECTOR, 4.0),
    "TanhGrad": ("TanhGrad", COST_VECTOR, 3.0),
    "Gelu": ("Gelu", COST_VECTOR, 8.0),
    "Softmax": ("SoftmaxV2", COST_VECTOR, 5.0),
    "LogSoftmax": ("LogSoftmaxV2", COST_VECTOR, 6.0),
    "SoftmaxCrossEntropyWithLogits": ("SoftmaxCrossEntropyWithLogits", COST_VECTOR, 8.0),
    "SparseSoftmaxCrossEntropyWithLogits": ("SparseSoftmaxCrossEntropyWithLogits",
                                            COST_VECTOR, 8.0),
    "Add": ("Add", COST_VECTOR, 1.0),
    "AddV2": ("Add", COST_VECTOR, 1.0),
    "AddN": ("AddN", COST_VECTOR, 1.0),
    "Sub": ("Sub", COST_VECTOR, 1.0),
    "Mul": ("Mul", COST_VECTOR, 1.0),
    "Div": ("Div", COST_VECTOR, 2.0),
    "RealDiv": ("RealDiv", COST_VECTOR, 2.0),
    "DivNoNan": ("DivNoNan", COST_VECTOR, 3.0),
    "FloorDiv": ("FloorDiv", COST_VECTOR, 3.0),
    "FloorMod": ("FloorMod", COST_VECTOR, 3.0),
    "Maximum": ("Maximum", COST_VECTOR, 1.0),
    "Minimum": ("Minimum", COST_VECTOR, 1.0),
    "SquaredDifference": ("SquaredDifference", COST_VECTOR, 2.0),
    "Square": ("Square", COST_VECTOR, 1.0),
    "Sqrt": ("Sqrt", COST_VECTOR, 2.0),
    "Rsqrt": ("Rsqrt", COST_VECTOR, 2.0),
    "RsqrtGrad": ("RsqrtGrad", COST_VECTOR, 3.0),
    "SqrtGrad": ("SqrtGrad", COST_VECTOR, 2.0),
    "Reciprocal": ("Reciprocal", COST_VECTOR, 2.0),
    "Exp": ("Exp", COST_VECTOR, 4.0),
    "Log": ("Log", COST_VECTOR, 4.0),
    "Log1p": ("Log1p", COST_VECTOR, 4.0),
    "Pow": ("Pow", COST_VECTOR, 6.0),
    "Neg": ("Neg", COST_VECTOR, 1.0),
    "Abs": ("Abs", COST_VECTOR, 1.0),
    "Sign": ("Sign", COST_VECTOR, 1.0),
    "Floor": ("Floor", COST_VECTOR, 1.0),
    "Ceil": ("Ceil", COST_VECTOR, 1.0),
    "Round": ("Round", COST_VECTOR, 1.0),
    "Erf": ("Erf", COST_VECTOR, 6.0),
    "Cast": ("Cast", COST_VECTOR, 1.0),
    "Equal": ("Equal", COST_VECTOR, 1.0),
    "NotEqual": ("NotEqual", COST_VECTOR, 1.0),
    "Less": ("Less", COST_VECTOR, 1.0),
    "LessEqual": ("LessEqual", COST_VECTOR, 1.0),
    "Greater": ("Greater", COST_VECTOR, 1.0),
    "GreaterEqual": ("GreaterEqual", COST_VECTOR, 1.0),
    "LogicalAnd": ("LogicalAnd", COST_VECTOR, 1.0),
    "LogicalOr": ("LogicalOr", COST_VECTOR, 1.0),
    "LogicalNot": ("LogicalNot", COST_VECTOR, 1.0),
    # AI Core kernels of the 910 (aic-ascend910-ops-info.ini: BitwiseAnd/Or/Xor, Invert)
    "BitwiseAnd": ("BitwiseAnd", COST_VECTOR, 1.0),
    "BitwiseOr": ("BitwiseOr", COST_VECTOR, 1.0),
    "BitwiseXor": ("BitwiseXor", COST_VECTOR, 1.0),
    "Invert": ("Invert", COST_VECTOR, 1.0),
    "Select": ("Select", COST_VECTOR, 1.0),
    "SelectV2": ("SelectV2", COST_VECTOR, 1.0),
    "ZerosLike": ("ZerosLike", COST_VECTOR, 0.5),
    "OnesLike": ("OnesLike", COST_VECTOR, 0.5),
    "Fill": ("Fill", COST_VECTOR, 0.5),
    "L2Loss": ("L2Loss", COST_VECTOR, 2.0),
    "ClipByValue": ("ClipByValue", COST_VECTOR, 2.0),
    "IsFinite": ("IsFinite", COST_VECTOR, 1.0),
    "CheckNumerics": ("CheckNumerics", COST_VECTOR, 1.0),
    # reductions and normalisation
    "Sum": ("ReduceSumD", COST_VECTOR, 1.0),
    "Mean": ("ReduceMeanD", COST_VECTOR, 1.0),
    "Max": ("ReduceMaxD", COST_VECTOR, 1.0),
    "Min": ("ReduceMinD", COST_VECTOR, 1.0),
    "Prod": ("ReduceProdD", COST_VECTOR, 1.0),
    "All": ("ReduceAllD", COST_VECTOR, 1.0),
    "Any": ("ReduceAnyD", COST_VECTOR, 1.0),
    "ArgMax": ("ArgMaxD", COST_VECTOR, 2.0),
    "ArgMin": ("ArgMinD", COST_VECTOR, 2.0),
    # a training BatchNorm is GE's BNTraining* kernels (split_kernels.py), whose TBE compute
    # casts fp16 to fp32 and runs per element: the reduce 4 instructions and the update 6
    # (the forward's 10), the update-grad 9 and the reduce-grad 10 (the gradient's 19), with
    # the broadcasts of the per-channel terms (BN_KERNEL_OPS, docs/device-model.md 3)
    "FusedBatchNorm": ("BatchNorm", COST_VECTOR, 10.0),
    "FusedBatchNormV2": ("BatchNorm", COST_VECTOR, 10.0),
    "FusedBatchNormV3": ("BatchNorm", COST_VECTOR, 10.0),
    "FusedBatchNormGrad": ("BatchNormGrad", COST_VECTOR, 19.0),
    "FusedBatchNormGradV2": ("BatchNormGrad", COST_VECTOR, 19.0),
    "FusedBatchNormGradV3": ("BatchNormGrad", COST_VECTOR, 19.0),
    "InstanceNorm": ("InstanceNorm", COST_VECTOR, 6.0),
    "LRN": ("LRN", COST_VECTOR, 6.0),
    "MaxPool": ("MaxPool", COST_VECTOR, 4.0),
    "MaxPoolV2": ("MaxPool", COST_VECTOR, 4.0),
    "MaxPoolGrad": ("MaxPoolGrad", COST_VECTOR, 6.0),
    "AvgPool": ("AvgPool", COST_VECTOR, 4.0),
    "AvgPoolGrad": ("AvgPoolGrad", COST_VECTOR, 4.0),
    "MaxPool3D": ("MaxPool3D", COST_VECTOR, 6.0),
    "ResizeBilinear": ("ResizeBilinearV2", COST_VECTOR, 6.0),
    "ResizeNearestNeighbor": ("ResizeNearestNeighborV2", COST_VECTOR, 2.0),
    "Cumsum": ("Cumsum", COST_VECTOR, 2.0),
    "TopKV2": ("TopKD", COST_VECTOR, 8.0),
    "OneHot": ("OneHotD", COST_VECTOR, 1.0),
    "BroadcastTo": ("BroadcastToD", COST_MOVE, 1.0),
    # data movement
    "Transpose": ("TransposeD", COST_MOVE, 1.0),
    "ConjugateTranspose": ("TransposeD", COST_MOVE, 1.0),
    "Pad": ("PadD", COST_MOVE, 1.0),
    "PadV2": ("PadD", COST_MOVE, 1.0),
    "MirrorPad": ("MirrorPad", COST_MOVE, 1.0),
    "Tile": ("TileD", COST_MOVE, 1.0),
    "ConcatV2": ("ConcatV2D", COST_MOVE, 1.0),
    "Concat": ("ConcatD", COST_MOVE, 1.0),
    "Split": ("SplitD", COST_MOVE, 1.0),
    "SplitV": ("SplitVD", COST_MOVE, 1.0),
    "Pack": ("Pack", COST_MOVE, 1.0),
    "Unpack": ("Unpack", COST_MOVE, 1.0),
    "Slice": ("SliceD", COST_MOVE, 1.0),
    "StridedSlice": ("StridedSliceD", COST_MOVE, 1.0),
    "StridedSliceGrad": ("StridedSliceGrad", COST_MOVE, 1.0),
    "ScatterNd": ("ScatterNd", COST_MOVE, 1.0),
    "TensorScatterUpdate": ("TensorScatterUpdate", COST_MOVE, 1.0),
    "UnsortedSegmentSum": ("UnsortedSegmentSum", COST_VECTOR, 2.0),
    "ReverseV2": ("ReverseV2D", COST_MOVE, 1.0),
    "DeepCopy": ("TensorMove", COST_MOVE, 1.0),
    # variable updates and optimizers (variables live in device memory on Ascend)
    "AssignVariableOp": ("Assign", COST_MOVE, 1.0),
    "Assign": ("Assign", COST_MOVE, 1.0),
    "AssignAddVariableOp": ("AssignAdd", COST_VECTOR, 1.0),
    "AssignAdd": ("AssignAdd", COST_VECTOR, 1.0),
    "AssignSubVariableOp": ("AssignSub", COST_VECTOR, 1.0),
    "AssignSub": ("AssignSub", COST_VECTOR, 1.0),
    "ApplyAdam": ("ApplyAdamD", COST_VECTOR, 10.0),
    "ResourceApplyAdam": ("ApplyAdamD", COST_VECTOR, 10.0),
    "ApplyAdamWithAmsgrad": ("ApplyAdamWithAmsgradD", COST_VECTOR, 12.0),
    "ResourceApplyAdamWithAmsgrad": ("ApplyAdamWithAmsgradD", COST_VECTOR, 12.0),
    "ApplyGradientDescent": ("ApplyGradientDescent", COST_VECTOR, 2.0),
    "ResourceApplyGradientDescent": ("ApplyGradientDescent", COST_VECTOR, 2.0),
    "ApplyMomentum": ("ApplyMomentumD", COST_VECTOR, 4.0),
    "ResourceApplyMomentum": ("ApplyMomentumD", COST_VECTOR, 4.0),
    "ResourceApplyKerasMomentum": ("ApplyKerasMomentumD", COST_VECTOR, 4.0),
    "ApplyRMSProp": ("ApplyRMSPropD", COST_VECTOR, 8.0),
    "ResourceApplyRMSProp": ("ApplyRMSPropD", COST_VECTOR, 8.0),
    "ApplyAdagrad": ("ApplyAdagradD", COST_VECTOR, 6.0),
    "ResourceApplyAdagradV2": ("ApplyAdagradV2D", COST_VECTOR, 6.0),
}

# No AI Core kernel on Ascend 910: executed by the AI CPU (documented list).
AI_CPU_OPS: dict[str, str] = {
    "RandomUniform": "RandomUniform",
    "RandomUniformInt": "RandomUniformInt",
    "RandomStandardNormal": "RandomStandardNormal",
    "TruncatedNormal": "TruncatedNormal",
    "RandomShuffle": "RandomShuffle",
    "Multinomial": "Multinomial",
    "StatelessRandomUniformV2": "StatelessRandomUniformV2",
    "StatelessRandomNormalV2": "StatelessRandomNormalV2",
    "StatelessTruncatedNormalV2": "StatelessTruncatedNormalV2",
    "StatelessRandomUniformIntV2": "StatelessRandomUniformIntV2",
    "StatelessRandomGetKeyCounter": "StatelessRandomGetKeyCounter",
    "RngReadAndSkip": "RngReadAndSkip",
    "Unique": "Unique",
    "UniqueV2": "Unique",
    "Where": "Where",
    "NonMaxSuppressionV3": "NonMaxSuppressionV3",
    "NonMaxSuppressionV4": "NonMaxSuppressionV4",
    "NonMaxSuppressionV5": "NonMaxSuppressionV5",
    "CombinedNonMaxSuppression": "CombinedNonMaxSuppression",
    "DynamicStitch": "DynamicStitch",
    "ParallelDynamicStitch": "DynamicStitch",
    "DynamicPartition": "DynamicPartition",
    "SparseToDense": "SparseToDense",
    "SparseSegmentSum": "SparseSegmentSum",
    "SparseSegmentMean": "SparseSegmentMean",
    "Bincount": "Bincount",
    "DenseBincount": "DenseBincount",
    "CTCLoss": "CTCLoss",
    "CTCGreedyDecoder": "CTCGreedyDecoder",
    "Assert": "Assert",
    "PrintV2": "PrintV2",
    "Print": "Print",
    "StringToNumber": "StringToNumber",
    "AsString": "AsString",
    "StringJoin": "StringJoin",
    "StringSplitV2": "StringSplitV2",
    "RegexReplace": "RegexReplace",
    "StaticRegexReplace": "StaticRegexReplace",
    "StringFormat": "StringFormat",
    "DecodeRaw": "DecodeRaw",
    "DecodeJpeg": "DecodeJpeg",
    "DecodeAndCropJpeg": "DecodeAndCropJpeg",
    "DecodePng": "DecodePng",
    "EncodeJpeg": "EncodeJpeg",
    "ParseExample": "ParseExample",
    "ParseExampleV2": "ParseExampleV2",
    "ParseSingleExample": "ParseSingleExample",
    "LookupTableFindV2": "LookupTableFind",
    "LookupTableImportV2": "LookupTableImport",
    "HashTableV2": "HashTable",
    "ListDiff": "ListDiff",
    "InvertPermutation": "InvertPermutation",
    "LogUniformCandidateSampler": "LogUniformCandidateSampler",
    "UniformCandidateSampler": "UniformCandidateSampler",
    "AllCandidateSampler": "AllCandidateSampler",
    "FixedUnigramCandidateSampler": "FixedUnigramCandidateSampler",
    "LearnedUnigramCandidateSampler": "LearnedUnigramCandidateSampler",
    "ThreadUnsafeUnigramCandidateSampler": "ThreadUnsafeUnigramCandidateSampler",
    "ComputeAccidentalHits": "ComputeAccidentalHits",
    "Cholesky": "Cholesky",
    "MatrixInverse": "MatrixInverse",
    "MatrixDeterminant": "MatrixDeterminant",
    "Qr": "Qr",
    "Svd": "Svd",
    "SelfAdjointEigV2": "SelfAdjointEig",
}

# Host-only ops whose measured time is real host work on an Ascend system too (the time model
# keeps it, docs/device-model.md 5.2): Python callbacks, checkpoint I/O, file reads.  Every
# other host-only op is folded away by GE (no host time).  The input pipeline's wait is taken
# from TF's iterator kernel span instead (`Iteration.input_wait_ns`), so the iterator ops are
# not listed here (their op events would count it twice).
HOST_WORK_OPS = frozenset({
    "PyFunc", "PyFuncStateless", "EagerPyFunc", "SaveV2", "RestoreV2", "MergeV2Checkpoints",
    "Save", "SaveSlices", "Restore", "RestoreSlice", "ReadFile", "WriteFile", "MatchingFiles",
})

# Launch nothing: graph bookkeeping, variables handles (variables stay in device memory),
# shape arithmetic folded by GE, control flow callers (their bodies' ops are traced
# separately), host<->device transfers that GE turns into model inputs, data pipeline ops.
HOST_ONLY_OPS = frozenset({
    "NoOp", "Const", "HostConst", "Identity", "IdentityN", "_Arg", "_Retval", "_DeviceArg",
    "_DeviceRetval", "Placeholder", "PlaceholderWithDefault", "PlaceholderV2",
    "VarHandleOp", "ReadVariableOp", "VarIsInitializedOp", "VariableV2", "Variable",
    "DestroyResourceOp", "_Recv", "_Send", "_HostRecv", "_HostSend", "Shape", "ShapeN", "Size",
    "Rank", "Reshape", "ExpandDims", "Squeeze", "StopGradient", "PreventGradient", "Snapshot",
    # GE's BitcastPass deletes the node (graphengine ge/graph/passes/bitcast_pass.cc)
    "Bitcast",
    "EnsureShape", "BroadcastGradientArgs", "BroadcastArgs", "Range", "ConcatOffset",
    "StatefulPartitionedCall", "PartitionedCall", "While", "StatelessWhile", "If",
    "StatelessIf", "Case", "StatelessCase", "Enter", "Exit", "Merge", "Switch",
    "NextIteration", "LoopCond", "ControlTrigger", "IteratorGetNext", "IteratorGetNextSync",
    "IteratorV2", "Iterator", "MakeIterator", "AnonymousIteratorV2", "AnonymousIteratorV3",
    "IteratorToStringHandle", "IteratorFromStringHandleV2", "OptionalGetValue",
    "OptionalHasValue", "OptionalFromValue", "OptionalNone", "DeleteIterator",
    "MultiDeviceIterator", "MultiDeviceIteratorGetNextFromShard", "MultiDeviceIteratorInit",
    "MultiDeviceIteratorToStringHandle", "MultiDeviceIteratorFromStringHandle",
    "DatasetToGraphV2", "OptimizeDatasetV2", "ModelDataset", "TensorDataset",
    "TensorSliceDataset", "BatchDatasetV2", "ShuffleDatasetV3", "RepeatDataset",
    "PrefetchDataset", "MapDataset", "ParallelMapDatasetV2", "RangeDataset",
    "TakeDataset", "FlatMapDataset", "FilterDataset", "CacheDatasetV2", "ZipDataset",
    "OptionsDataset", "DummySeedGenerator", "SeedGenerator", "AnonymousSeedGenerator",
    "SaveV2", "RestoreV2", "MergeV2Checkpoints", "ShardedFilename", "StringJoinHost",
    "TensorListReserve", "TensorListFromTensor", "TensorListStack", "TensorListGetItem",
    "TensorListSetItem", "TensorListLength", "TensorListElementShape",
    "Timestamp", "GuaranteeConst", "FakeParam", "_SwitchN", "Unstage", "Stage",
}) | HOST_WORK_OPS

# collective ops -> GE HCCL op type; AllReduce kinds get step-trace reduce tags
COLLECTIVE_OPS: dict[str, tuple[str, bool]] = {
    "CollectiveReduce": ("HcomAllReduce", True),
    "CollectiveReduceV2": ("HcomAllReduce", True),
    "CollectiveReduceV3": ("HcomAllReduce", True),
    "CollectiveAllReduceV2": ("HcomAllReduce", True),
    "NcclAllReduce": ("HcomAllReduce", True),
    "HorovodAllreduce": ("HcomAllReduce", True),
    "HcomAllReduce": ("HcomAllReduce", True),
    "CollectiveGather": ("HcomAllGather", False),
    "CollectiveGatherV2": ("HcomAllGather", False),
    "HorovodAllgather": ("HcomAllGather", False),
    "CollectiveReduceScatterV2": ("HcomReduceScatter", False),
    "CollectiveBcastSend": ("HcomBroadcast", False),
    "CollectiveBcastRecv": ("HcomBroadcast", False),
    "CollectiveBcastSendV2": ("HcomBroadcast", False),
    "CollectiveBcastRecvV2": ("HcomBroadcast", False),
    "HorovodBroadcast": ("HcomBroadcast", False),
    "CollectiveAllToAllV2": ("HcomAllToAll", False),
    "CollectiveAllToAllV3": ("HcomAllToAll", False),
    "NcclBroadcast": ("HcomBroadcast", False),
    "NcclReduce": ("HcomReduce", False),
}

# the forward depthwise convolution, a windowed AvgPool that GE runs as one (avg_pool.py)
# and the depthwise filter gradient, which multiplies the same im2col of the input: that
# im2col (load3d), not their diagonal cube work, bounds them (cost_model.py;
# docs/device-model.md 3)
IM2COL_BOUND_GE_TYPES = frozenset({"DepthwiseConv2D", "AvgPool", "DepthwiseConv2DBackpropFilter"})

# op types whose execution updates weights: the op before the first of them ends BP
OPTIMIZER_PREFIXES = ("Apply", "ResourceApply", "SparseApply", "ResourceSparseApply")


def normalize_tf_type(tf_type: str) -> tuple[str, bool]:
    """Strip oneDNN prefixes and Grappler fusion names: (TF type of the main op, fused?).

    `_MklNativeFusedConv2D` -> (`Conv2D`, True); `_MklNativeFusedBatchNormV3` ->
    (`FusedBatchNormV3`, False); `_FusedMatMul` -> (`MatMul`, True).
    """
    name = tf_type
    for prefix in ONEDNN_PREFIXES:
        if name.startswith(prefix):
            name = name[len(prefix):]
            break
    bare = name.lstrip("_")
    if bare in FUSED_MAIN_OP:
        return FUSED_MAIN_OP[bare], True
    if name.startswith("_") and bare in AI_CORE_OPS:
        return bare, False
    return name, False


# the collector's mark of an op the script pinned to the CPU (collect/op_shapes.py): the TF
# adapter keeps it on the host, where its measured time is host work
HOST_PINNED_PREFIX = "_HostPinned:"


def is_host_work(tf_type: str) -> bool:
    """The op's measured host time is real host work of the emulated system (time_model)."""
    return tf_type.startswith(HOST_PINNED_PREFIX) or \
        normalize_tf_type(tf_type)[0] in HOST_WORK_OPS


@lru_cache(maxsize=4096)
def map_op(tf_type: str) -> OpMapping:
    """The Ascend mapping of a TF op type (oneDNN/fusion names accepted)."""
    if tf_type.startswith(HOST_PINNED_PREFIX):
        return OpMapping(tf_type[len(HOST_PINNED_PREFIX):], KIND_NONE, COST_NONE, 0.0)
    base, _fused = normalize_tf_type(tf_type)
    if base in HOST_ONLY_OPS or tf_type in HOST_ONLY_OPS or is_input_pipeline(base):
        return OpMapping(base, KIND_NONE, COST_NONE, 0.0)
    if base in COLLECTIVE_OPS:
        ge, allreduce = COLLECTIVE_OPS[base]
        return OpMapping(ge, KIND_HCCL, COST_HCCL, 0.0, allreduce)
    if base in AI_CPU_OPS:
        return OpMapping(AI_CPU_OPS[base], KIND_AI_CPU, COST_AI_CPU, 1.0)
    if base in AI_CORE_OPS:
        ge, cost, factor = AI_CORE_OPS[base]
        # a dense optimizer update reads and writes its variable and slots in place
        access = ACCESS_DENSE_APPLY if base.startswith(OPTIMIZER_PREFIXES) else ACCESS_DENSE
        return OpMapping(ge, KIND_AI_CORE, cost, factor, access=access)
    if base in SPARSE_OPS:
        ge, access = SPARSE_OPS[base]
        cost = COST_MOVE if access == ACCESS_GATHER else COST_VECTOR
        factor = 4.0 if access == ACCESS_SPARSE_APPLY else 1.0
        return OpMapping(ge, KIND_AI_CORE, cost, factor, access=access)
    if base.startswith("TensorList"):
        # every TensorList op (PushBack / PopBack of a loop's gradient accumulators, Concat,
        # Gather, ...) manipulates a variant list handle: host bookkeeping like the ones listed
        # in HOST_ONLY_OPS, not a device kernel (it used to fall to the AI CPU by its variant)
        return OpMapping(base, KIND_NONE, COST_NONE, 0.0)
    # unknown: an AI Core vector kernel under the TF name (counted: collect and export say
    # which types took this rule, docs/device-model.md 2)
    return OpMapping(base, KIND_AI_CORE, COST_VECTOR, 1.0, fallback=True)


# tf.data ops that are neither datasets nor iterators by name: the TF adapter keeps the input
# pipeline on the host (GE sinks only the iterator's GetNext into the graph)
INPUT_PIPELINE_OPS = frozenset({"GetOptions", "ComputeBatchSize", "IteratorGetDevice",
                                "AnonymousMemoryCache", "DeleteMemoryCache", "DeleteSeedGenerator",
                                "AnonymousRandomSeedGenerator", "DeleteRandomSeedGenerator",
                                "DeleteMultiDeviceIterator", "AnonymousMultiDeviceIterator",
                                "AnonymousMultiDeviceIteratorV3", "SerializeIterator",
                                "DeserializeIterator", "RegisterDataset", "RegisterDatasetV2"})


def is_input_pipeline(base: str) -> bool:
    """A tf.data op (a dataset, its cardinality / options / fingerprint, an iterator): host
    work of the input pipeline, never a device task (docs/device-model.md 2)."""
    return "Dataset" in base or base.startswith("Iterator") or base in INPUT_PIPELINE_OPS


def is_optimizer_type(tf_type: str) -> bool:
    base, _ = normalize_tf_type(tf_type)
    return base.startswith(OPTIMIZER_PREFIXES)


# Vector instructions per element of the 910's TBE BatchNorm training kernels (canndev, public
# mirror github.com/dengguojie/vue-element-admin@3f8601f6ee7a, ops/built-in/tbe/impl/
# bn_training_{reduce,update,update_grad,reduce_grad}.py: the casts of fp16 inputs to fp32,
# the element-wise instructions, the broadcasts of per-channel terms and the sums on full-size
# tensors).  They compute in fp32 whatever their inputs' precision (FP32_COMPUTE_GE_TYPES).
BN_KERNEL_OPS = {"BNTrainingReduce": 4.0, "BNTrainingUpdate": 6.0,
                 "BNTrainingUpdateGrad": 9.0, "BNTrainingReduceGrad": 10.0}
FP32_COMPUTE_GE_TYPES = frozenset({"BatchNorm", "BatchNormGrad", *BN_KERNEL_OPS})
