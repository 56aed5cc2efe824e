"""msprof_cli: the Ascend msprof profiling workflow for TensorFlow on CPU-only machines."""
__version__ = "0.1.0"
