"""`msprof collect [OPTIONS] -- COMMAND...`: profile a command (usually `python train.py`).

The flags mirror the real msprof collection switches (docs/formats/options.md 7) and are mapped
onto PROFILING_OPTIONS keys, so one validator (msprof_cli.options) judges every route."""
from __future__ import annotations

from typing import Any

import click

ON_OFF = click.Choice(["on", "off"])


def flags_to_options(**flags: Any) -> dict[str, Any]:
    """Map `msprof collect` flags onto a PROFILING_OPTIONS object (None = flag not given)."""
    opts: dict[str, Any] = {}
    task_time = flags.get("task_time") or "on"
    opts["task_time"] = task_time
    # on the CLI route --task-time also drives step trace, unless --training-trace says otherwise
    training = flags.get("training_trace")
    opts["training_trace"] = training if training else ("off" if task_time == "off" else "on")
    if flags.get("ai_core", "on") == "off":
        opts["aic_metrics"] = None  # removed below: PMU off
    else:
        opts["aic_metrics"] = flags.get("aic_metrics") or "PipeUtilization"
    if flags.get("sys_hardware_mem") == "on":
        opts["sys_hardware_mem_freq"] = flags.get("sys_hardware_mem_freq") or 50
    elif flags.get("sys_hardware_mem_freq") is not None:
        from msprof_cli.errors import UsageError

        raise UsageError("--sys-hardware-mem-freq needs --sys-hardware-mem on.")
    for key in ("hccl", "aicpu", "l2", "runtime_api", "msproftx", "fp_point", "bp_point",
                "storage_limit", "output"):
        value = flags.get(key)
        if value is not None:
            opts[key] = value
    return {k: v for k, v in opts.items() if v is not None}


@click.command(context_settings={"allow_interspersed_args": False,
                                 "help_option_names": ["-h", "--help"]})
@click.option("--output", metavar="DIR", help="Root directory for the PROF_* result "
              "directory (created if missing). Default: the current directory.")
@click.option("--task-time", type=click.Choice(["on", "off", "l0", "l1"]), default=None,
              help="Device task timing (on = l1: with op shapes and types; l0: times only). "
              "Also switches step trace on. Default: on.")
@click.option("--training-trace", type=ON_OFF, default=None,
              help="Step (iteration) trace markers. Default: follows --task-time.")
@click.option("--ai-core", type=ON_OFF, default="on", show_default=True,
              help="AI Core PMU counters (op_summary metric columns).")
@click.option("--aic-mode", type=click.Choice(["task-based", "sample-based"]),
              default="task-based", show_default=True, help="PMU sampling mode.")
@click.option("--aic-metrics", default=None, metavar="GROUP",
              help="PMU group: ArithmeticUtilization, PipeUtilization (default), Memory, "
              "MemoryL0, MemoryUB, ResourceConflictRatio, Custom:0x..,0x..; on an Atlas A2 also "
              "L2Cache, MemoryAccess")
@click.option("--aicpu", type=ON_OFF, default=None, help="AI CPU task data. Default: off.")
@click.option("--hccl", type=ON_OFF, default=None,
              help="Collective communication data (multi-device). Default: off.")
@click.option("--l2", type=ON_OFF, default=None, help="L2 cache hit/victim rates. Default: off.")
@click.option("--sys-hardware-mem", type=ON_OFF, default=None,
              help="Device memory samples (npu_mem: the application's and the device's HBM; "
              "npu_module_mem). Default: off.")
@click.option("--sys-hardware-mem-freq", type=click.IntRange(1, 100), default=None,
              metavar="HZ", help="Sampling rate of --sys-hardware-mem, 1-100 Hz. Default: 50.")
@click.option("--task-memory", type=ON_OFF, default=None,
              help="GE's memory records: its static plan of each graph (static_op_mem) and "
              "its allocations (operator_memory, memory_record). Default: off.")
@click.option("--runtime-api", type=ON_OFF, default=None, help="Runtime API calls. Default: off.")
@click.option("--msproftx", type=ON_OFF, default=None,
              help="User annotations (msproftx markers and tf.profiler Trace ranges).")
@click.option("--ascendcl", type=ON_OFF, default="on", show_default=True,
              help="AscendCL API layer (model execute, node launch).")
@click.option("--fp-point", default=None, metavar="OP",
              help="Op that starts forward propagation. Default: detected.")
@click.option("--bp-point", default=None, metavar="OP",
              help="Op that ends backward propagation. Default: detected.")
@click.option("--storage-limit", default=None, metavar="NMB",
              help="Cap on raw data size, 200MB..4294967295MB; oldest slices are aged out.")
@click.option("--children", is_flag=True, default=False,
              help="Also profile Python subprocesses that run TensorFlow (e.g. one per rank): "
              "each gets its own PROF dir, ranked by its RANK_ID/RANK/LOCAL_RANK variable "
              "or its TF_CONFIG task (MultiWorkerMirroredStrategy).")
@click.option("--full-trace", is_flag=True, default=False,
              help="Trace every op of every step. Default: trace sampled steps fully and replay "
              "their op schedule for the other steps (see docs/collect.md).")
@click.option("--precision-mode", default="allow_fp32_to_fp16", show_default=True,
              metavar="MODE",
              help="GE's precision mode of the emulated system: allow_fp32_to_fp16 (cube ops "
              "in fp16), allow_mix_precision (also the graylist ops downstream of them), "
              "allow_mix_precision_fp16 (the same), force_fp16. A script's own NPU session "
              "config / NPURunConfig precision_mode takes precedence (docs/device-model.md "
              "3.2).")
@click.option("--dropout", "dropout_mode", default=None, metavar="MODE",
              help="How the emulated system runs the script's dropout: tf (as written: its "
              "random mask on the AI CPU; the default, or MSPROF_CLI_DROPOUT) or npu (as "
              "the Ascend migration's npu_ops.dropout: DropOutGenMask / DropOutDoMask on the "
              "AI Core) (docs/device-model.md 3.3).")
@click.option("--soc-version", default=None, metavar="NAME",
              help="The emulated chip, by its CANN soc_version name: Ascend910A (the default, "
              "or MSPROF_CLI_SOC_VERSION) or an Atlas A2 chip, Ascend910B1-B4 "
              "(docs/device-model.md 11).")
@click.option("--graph-memory-max-size", "graph_mem", default=None, metavar="SIZE",
              help="GE's graph memory pool of the emulated system (the TF adapter's "
              "graph_memory_max_size: bytes, or 26GiB): the planned feature maps must fit it. "
              "Default 26/32 of the chip's HBM; a script's session config takes precedence.")
@click.option("--variable-memory-max-size", "var_mem", default=None, metavar="SIZE",
              help="GE's variable memory pool (variable_memory_max_size): the weights and "
              "optimizer state must fit it. Default 5/32 of the chip's HBM.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=False)
def collect(command: tuple[str, ...], aic_mode: str, ascendcl: str, full_trace: bool,
            children: bool, precision_mode: str, dropout_mode: str | None,
            soc_version: str | None, graph_mem: str | None, var_mem: str | None,
            task_memory: str | None, **flags: Any) -> None:
    """Run COMMAND with profiling on and write a PROF_* directory.

    \b
    Example:
      msprof collect --output prof -- python train.py --epochs 1

    The script is not modified: msprof injects its agent through PYTHONPATH and sets
    PROFILING_MODE / PROFILING_OPTIONS for it. The script's output and exit code pass
    through unchanged; afterwards msprof prints the PROF path and the export command.
    """
    from dataclasses import replace

    from msprof_cli.errors import OptionsError, UsageError
    from msprof_cli.options import (dropout_from_env, normalize_dropout,
                                    normalize_memory_size, normalize_precision_mode,
                                    normalize_soc_version, soc_version_from_env,
                                    validate_options)

    if not command:
        raise UsageError("no command to profile: put it after --, e.g. "
                         "`msprof collect -- python train.py`.")
    if aic_mode == "sample-based":
        raise OptionsError('--aic-mode=sample-based is not emulated; use "task-based".')
    opts = flags_to_options(**flags)
    soc = normalize_soc_version(soc_version) if soc_version is not None \
        else soc_version_from_env()
    config = validate_options(opts, source="cli", soc=soc)
    config = replace(config, ascendcl=ascendcl == "on", full_trace=full_trace,
                     precision_mode=normalize_precision_mode(precision_mode,
                                                             "--precision-mode"),
                     dropout=normalize_dropout(dropout_mode) if dropout_mode is not None
                     else dropout_from_env(),
                     task_memory=task_memory == "on",
                     graph_memory_max_size=normalize_memory_size(
                         graph_mem, "--graph-memory-max-size") if graph_mem else 0,
                     variable_memory_max_size=normalize_memory_size(
                         var_mem, "--variable-memory-max-size") if var_mem else 0)

    from msprof_cli.collect.launcher import run_collect

    rc = run_collect(config, list(command), children=children)
    raise SystemExit(rc)
