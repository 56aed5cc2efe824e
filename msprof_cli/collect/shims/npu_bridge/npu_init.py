"""`from npu_bridge.npu_init import *` for msprof_cli: profiler + session-config helpers.

`npu_config_proto()` / `npu_session_config_init()` return a ConfigProto carrying the
`NpuOptimizer` custom optimizer, where scripts set `profiling_mode` / `profiling_options`.
The script's ops still run on the CPU; msprof_cli emulates the NPU.
"""
import tensorflow as tf
from tensorflow.core.protobuf.rewriter_config_pb2 import RewriterConfig

from npu_bridge import profiler  # noqa: F401  (star-import: `profiler.Profiler`)

NPU_OPTIMIZER = "NpuOptimizer"


def npu_optimizer(config_proto):
    """The NpuOptimizer entry of `config_proto` (added if missing)."""
    custom = config_proto.graph_options.rewrite_options.custom_optimizers
    for opt in custom:
        if opt.name == NPU_OPTIMIZER:
            return opt
    opt = custom.add()
    opt.name = NPU_OPTIMIZER
    return opt


def npu_config_proto(config_proto=None):
    """A session ConfigProto prepared for the NPU (as the adapter's helper returns it)."""
    config_proto = config_proto if config_proto is not None else tf.compat.v1.ConfigProto()
    npu_optimizer(config_proto)
    return config_proto


def npu_session_config_init(session_config=None):
    return npu_config_proto(session_config)


def npu_hooks_append(hooks_list=()):
    return list(hooks_list)


def npu_callbacks_append(callbacks_list=()):
    return list(callbacks_list)
