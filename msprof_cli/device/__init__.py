"""Emulated Ascend NPU: turns captured op executions into CANN raw profiling data."""
from msprof_cli.device.device import Device

__all__ = ["Device"]
