"""`npu_bridge.profiler`: `with profiler.Profiler(level=..., aic_metrics=..., output_path=...)`."""
from msprof_cli.collect.profiler_scope import Profiler

__all__ = ["Profiler"]
