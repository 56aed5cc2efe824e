"""msprof_cli's stand-in for Huawei's `npu_bridge` (TF adapter) on machines without an NPU.

It is only on sys.path after every other entry, so a real npu_bridge always wins.  It
provides what migrated scripts import for profiling: `npu_bridge.npu_init` (star-import
friendly) with `profiler.Profiler` and the session-config helpers.
"""
