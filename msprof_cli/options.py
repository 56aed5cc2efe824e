"""PROFILING_OPTIONS: parse, validate, apply defaults (docs/formats/options.md).

One module owns the option rules for every route that switches profiling on: the
`PROFILING_MODE`/`PROFILING_OPTIONS` environment, `msprof collect` flags (mapped onto the
same JSON keys), the session-config `profiling_options`, and the `Profiler` class.  Standard
library only: it runs inside the profiled process too.
"""
from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

from msprof_cli.errors import OptionsError

ON_OFF = ("on", "off")
TASK_LEVELS = ("on", "off", "l0", "l1")
FORBIDDEN_PATH_CHARS = {"\n": "\\n", "\f": "\\f", "\r": "\\r", "\b": "\\b", "\t": "\\t",
                        "\v": "\\v", "\x7f": "\\u007F"}

# aic_metrics groups of Ascend910 and their PMU events in counter order (docs/formats/raw-format.md
# 7.1)
AIC_METRIC_EVENTS: dict[str, tuple[int, ...]] = {
    "ArithmeticUtilization": (0x49, 0x4A, 0x4B, 0x4C, 0x4D, 0x4E, 0x4F),
    "PipeUtilization": (0x8, 0xA, 0x9, 0xB, 0xC, 0xD, 0x54, 0x55),
    "Memory": (0x15, 0x16, 0x31, 0x32, 0xF, 0x10, 0x12, 0x13),
    "MemoryL0": (0x1B, 0x1C, 0x21, 0x22, 0x27, 0x28, 0x29, 0x2A),
    "MemoryUB": (0x10, 0x13, 0x37, 0x38, 0x3D, 0x3E, 0x43, 0x44),
    "ResourceConflictRatio": (0x64, 0x65, 0x66),
}
# groups that exist for other chips; refused on the emulated Ascend910 (project choice)
OTHER_CHIP_METRICS = ("L2Cache", "MemoryAccess", "PipelineExecuteUtilization")
DEFAULT_AIC_METRICS = "PipeUtilization"
L2_CACHE_EVENTS = (0x5B, 0x59, 0x5C, 0x7D, 0x7E, 0x71, 0x79, 0x7C)

STORAGE_LIMIT_MIN_MB = 200
STORAGE_LIMIT_MAX_MB = 4294967295

# integer keys and their inclusive ranges (JSON integers, never strings)
FREQ_KEYS: dict[str, tuple[int, int]] = {
    "sys_hardware_mem_freq": (1, 100),
    "sys_io_sampling_freq": (1, 100),
    "sys_interconnection_freq": (1, 50),
    "dvpp_freq": (1, 100),
    "instr_profiling_freq": (300, 30000),
    "host_sys_usage_freq": (1, 50),
}
SWITCH_KEYS = ("training_trace", "hccl", "aicpu", "l2", "msproftx", "runtime_api")
STRING_KEYS = ("output", "storage_limit", "fp_point", "bp_point", "aic_metrics", "aiv_metrics",
               "task_trace", "task_time", "llc_profiling", "host_sys", "host_sys_usage", "power")
ALL_KEYS = frozenset(SWITCH_KEYS) | frozenset(STRING_KEYS) | frozenset(FREQ_KEYS)
# keys accepted and validated, but whose data the emulator does not produce
NOT_EMULATED_KEYS = ("llc_profiling", "sys_io_sampling_freq",
                     "sys_interconnection_freq", "dvpp_freq", "host_sys", "host_sys_usage",
                     "host_sys_usage_freq", "power", "aiv_metrics")
# switches that instr_profiling_freq excludes (docs/formats/options.md 4.1)
INSTR_EXCLUDES = ("task_time", "task_trace", "training_trace", "aicpu", "l2", "hccl",
                  "runtime_api", "aic_metrics", "aiv_metrics")


# GE's precision_mode (device/precision.py models them; docs/device-model.md 3.2)
DEFAULT_PRECISION_MODE = "allow_fp32_to_fp16"
PRECISION_MODES = (DEFAULT_PRECISION_MODE, "allow_mix_precision", "allow_mix_precision_fp16",
                   "force_fp16")
PRECISION_ALIASES = {"allow_mix_precision_fp16": "allow_mix_precision"}
# accepted by the TF adapter, not by this emulation, and why (a clear error instead)
PRECISION_REFUSED = {
    "must_keep_origin_dtype": "the Ascend 910 cube has no fp32 kernels, so GE refuses fp32 "
                              "Conv2D / MatMul in this mode",
    "force_fp32": "the Ascend 910 cube has no fp32 kernels",
    "cube_fp16in_fp32out": "it is a mode of the Atlas A2 series and later, not of the 910",
    "allow_fp32_to_bf16": "the Ascend 910 has no bf16",
    "allow_mix_precision_bf16": "the Ascend 910 has no bf16",
}


# how the emulated system runs the script's dropout (docs/device-model.md 3.3): "tf" as the
# script writes it (its random mask on the AI CPU), "npu" as the Ascend migration's
# npu_ops.dropout (DropOutGenMask / DropOutDoMask on the AI Core)
DROPOUT_MODES = ("tf", "npu")
DEFAULT_DROPOUT = "tf"
DROPOUT_ENV = "MSPROF_CLI_DROPOUT"


def normalize_dropout(mode: str | None, where: str = "--dropout") -> str:
    m = (mode or DEFAULT_DROPOUT).strip().lower()
    if m not in DROPOUT_MODES:
        raise OptionsError(f'{where} "{mode}" is not a dropout mode; use one of '
                           f'{", ".join(DROPOUT_MODES)} (docs/device-model.md 3.3).')
    return m


def dropout_from_env(env: Mapping[str, str] | None = None) -> str:
    """The dropout mode the environment asks for (MSPROF_CLI_DROPOUT; default "tf")."""
    env = os.environ if env is None else env
    return normalize_dropout(env.get(DROPOUT_ENV), DROPOUT_ENV)


# the emulated chip (docs/device-model.md 1): a CANN soc_version name
DEFAULT_SOC_VERSION = "Ascend910A"
SOC_VERSION_ENV = "MSPROF_CLI_SOC_VERSION"


def normalize_soc_version(name: str | None, where: str = "--soc-version") -> str:
    """The chip the device emulates; OptionsError naming the choices for another name."""
    if not name or not name.strip():
        return DEFAULT_SOC_VERSION
    from msprof_cli.device.chip import emulated_chip  # the chip table (numpy-free)

    return emulated_chip(name.strip(), where)


def with_soc_version(config: "ProfilingConfig", soc: str) -> "ProfilingConfig":
    """`config` on chip `soc`: an Atlas A2 collects no L2 cache task events here (their A2
    layout is not emulated, docs/formats/ascend910b.md 7), so `l2` is turned off with a
    warning, as the other options whose data is not emulated."""
    from dataclasses import replace

    from msprof_cli.device.chip import get_chip

    if config.l2 and get_chip(soc).raw_layout == "stars":
        return replace(config, soc_version=soc, l2=False,
                       not_emulated=(*config.not_emulated, "l2"),
                       warnings=(*config.warnings, f"l2: the L2 cache task events of {soc} "
                                 "(Atlas A2) are not emulated; no l2_cache data is written"))
    return replace(config, soc_version=soc)


def soc_version_from_env(env: Mapping[str, str] | None = None) -> str:
    """The chip the environment asks for (MSPROF_CLI_SOC_VERSION; default Ascend910A)."""
    env = os.environ if env is None else env
    return normalize_soc_version(env.get(SOC_VERSION_ENV), SOC_VERSION_ENV)


def normalize_precision_mode(mode: str, where: str = "precision_mode") -> str:
    """The mode GE runs (aliases resolved); OptionsError for one the 910 cannot run."""
    m = (mode or DEFAULT_PRECISION_MODE).strip()
    if m in PRECISION_REFUSED:
        raise OptionsError(f'{where} "{m}" is not emulated: {PRECISION_REFUSED[m]}. Use one '
                           f'of {", ".join(PRECISION_MODES)}.')
    if m not in PRECISION_MODES:
        raise OptionsError(f'{where}: unknown mode "{m}"; the Ascend 910 takes '
                           f'{", ".join(PRECISION_MODES)}.')
    return PRECISION_ALIASES.get(m, m)


_SIZE = re.compile(r"^\s*(\d+)\s*(b|kib|mib|gib|kb|mb|gb)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {"b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "kb": 1000,
               "mb": 10**6, "gb": 10**9}


def normalize_memory_size(text: str | int, where: str) -> int:
    """A GE memory pool size: bytes, as the TF adapter takes it ("27917287424"), or with a
    unit (512MiB, 26GiB); OptionsError otherwise."""
    m = _SIZE.match(str(text))
    if not m or int(m.group(1)) <= 0:
        raise OptionsError(f'{where}: "{text}" is not a memory size; give bytes (as the TF '
                           'adapter takes them, e.g. 27917287424) or a size with a unit '
                           '(26GiB, 512MiB)')
    return int(m.group(1)) * _SIZE_UNITS[(m.group(2) or "b").lower()]


@dataclass(frozen=True)
class ProfilingConfig:
    """The resolved collection switches, whatever route set them."""

    output: str  # absolute root directory for PROF_* dirs
    training_trace: bool = False
    task_time: str = "l1"  # "off", "l0" or "l1"
    hccl: bool = False
    aicpu: bool = False
    l2: bool = False
    msproftx: bool = False
    runtime_api: bool = False
    ascendcl: bool = True
    fp_point: str = ""
    bp_point: str = ""
    aic_metrics: str = DEFAULT_AIC_METRICS  # "" = AI Core PMU off
    aic_events: tuple[int, ...] = AIC_METRIC_EVENTS[DEFAULT_AIC_METRICS]
    storage_limit_mb: int | None = None
    raw_options: str = ""  # the PROFILING_OPTIONS JSON as the user gave it
    source: str = "env"  # env | cli | session | profiler
    full_trace: bool = False  # trace every step (no sampling); see docs/collect.md
    # GE's precision_mode of the emulated system (not a profiling option: the TF adapter's
    # session config / NPURunConfig, or `msprof collect --precision-mode`); device/precision.py
    precision_mode: str = DEFAULT_PRECISION_MODE
    # the script's dropout as written ("tf") or as npu_ops.dropout runs it ("npu")
    dropout: str = DEFAULT_DROPOUT
    soc_version: str = DEFAULT_SOC_VERSION  # the emulated chip (--soc-version)
    # GE's memory pools of the emulated system, bytes (the TF adapter's session options
    # graph_memory_max_size / variable_memory_max_size; 0: the chip's defaults, 26/32 and
    # 5/32 of its HBM; docs/device-model.md 12)
    graph_memory_max_size: int = 0
    variable_memory_max_size: int = 0
    # device memory records (docs/formats/device-memory.md 1): npu_mem / npu_module_mem
    # samples at this rate (Hz; 0 = off: `sys_hardware_mem_freq`, --sys-hardware-mem), and
    # GE's static plan and allocations (--task-memory, the msprof CLI's only)
    hardware_mem_freq: int = 0
    task_memory: bool = False
    not_emulated: tuple[str, ...] = ()
    warnings: tuple[str, ...] = field(default=(), compare=False)

    @property
    def pmu_on(self) -> bool:
        return bool(self.aic_metrics) and self.task_time != "l0" and self.task_time != "off"

    @property
    def op_info(self) -> bool:
        """task_time l1 writes node_basic_info / tensor_info (docs/formats/options.md 4.2)."""
        return self.task_time == "l1"

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "ProfilingConfig":
        data = json.loads(text)
        data["aic_events"] = tuple(data.get("aic_events", ()))
        data["not_emulated"] = tuple(data.get("not_emulated", ()))
        data["warnings"] = tuple(data.get("warnings", ()))
        return cls(**data)


def _accepted(values: tuple[str, ...]) -> str:
    return ", ".join(f'"{v}"' for v in values)


def check_output_path(value: str, key: str = "output") -> None:
    """Refuse an empty path or one with a forbidden control character (docs/formats/options.md 4,
    6)."""
    if value == "":
        raise OptionsError(f'Result path is empty: "{key}" must name a directory '
                           '(absolute, or relative to the current directory).')
    for ch, shown in FORBIDDEN_PATH_CHARS.items():
        if ch in value:
            raise OptionsError(
                f'The value of "{key}" ({value!r}) contains the forbidden character "{shown}". '
                'Paths must not contain \\n \\f \\r \\b \\t \\v or \\u007F.')
    if "\x00" in value:  # no file system takes it (os calls raise "embedded null byte")
        raise OptionsError(f'The value of "{key}" ({value!r}) contains a NUL character '
                           '("\\u0000"); a path cannot hold one. Give a plain directory path.')


def _check_parent_links(p: str) -> None:
    """Refuse a symlink above the output directory that neither root nor the user owns: a
    link another user planted (in /tmp, say) would send the profile into their directory.
    Links the system or the user made (/home -> /data/home) are followed as usual."""
    euid = os.geteuid()
    parts = p.split(os.sep)
    for i in range(2, len(parts)):
        above = os.sep.join(parts[:i])
        try:
            st = os.lstat(above)
        except OSError:
            return  # the rest does not exist yet: it is created, not followed
        if stat.S_ISLNK(st.st_mode) and st.st_uid not in (0, euid):
            raise OptionsError(f'The output path "{p}" goes through the symbolic link '
                               f'"{above}" of another user (uid {st.st_uid}); msprof refuses to '
                               f'follow it. Give a path without it, e.g. '
                               f'"{os.path.realpath(p)}" if that is really yours.')


def check_output_dir(path: str | os.PathLike[str], *, create: bool = True) -> None:
    """Refuse an output directory the collection could not (or must not) write into:
    a symbolic link (refused as the real msprof does), a file where a directory is expected,
    a directory that cannot be created, is not writable, or belongs to another user (root and
    directories owned by root, such as /tmp, are trusted).  With `create` a missing
    directory is created (0750) and checked again.  Call it before the user's script starts."""
    p = os.path.abspath(os.fspath(path))
    if os.path.islink(p):
        raise OptionsError(f'The output path "{p}" is a symbolic link; msprof refuses symlinked '
                           f'output paths. Give the real directory: '
                           f'"{os.path.realpath(p)}".')
    _check_parent_links(p)
    if os.path.exists(p) and not os.path.isdir(p):
        raise OptionsError(f'The output path "{p}" is a file, not a directory. Give a directory '
                           "(it is created if missing).")
    if not os.path.exists(p):
        parent = os.path.dirname(p)
        while parent and not os.path.exists(parent) and parent != os.path.dirname(parent):
            parent = os.path.dirname(parent)
        if not os.path.isdir(parent):
            raise OptionsError(f'The output directory "{p}" cannot be created: "{parent}" is a '
                               "file, not a directory.")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise OptionsError(f'The output directory "{p}" cannot be created: "{parent}" is '
                               "not writable. Choose a directory you can write to.")
        if not create:
            return
        from msprof_cli.raw.profdir import make_dir

        try:
            make_dir(Path(p))
        except OSError as exc:
            raise OptionsError(f'The output directory "{p}" cannot be created: '
                               f"{exc.strerror or exc}.") from None
    if not os.access(p, os.W_OK | os.X_OK):
        raise OptionsError(f'The output directory "{p}" is not writable. Choose a directory you '
                           "can write to, or fix its permissions (chmod u+w).")
    owner = os.stat(p).st_uid
    euid = os.geteuid()
    if euid != 0 and owner not in (euid, 0):
        raise OptionsError(f'The output directory "{p}" belongs to another user (uid {owner}); '
                           "msprof refuses to write into it. Use a directory of your own.")


def parse_aic_metrics(value: str, key: str = "aic_metrics", chip: str = DEFAULT_SOC_VERSION
                      ) -> tuple[str, tuple[int, ...]]:
    """Return (group name, PMU events); "" means the default group.  `chip`: a group only
    some chips have (the Atlas A2's L2Cache, MemoryAccess) is accepted on those."""
    if value == "":
        return DEFAULT_AIC_METRICS, AIC_METRIC_EVENTS[DEFAULT_AIC_METRICS]
    if value in AIC_METRIC_EVENTS:
        return value, AIC_METRIC_EVENTS[value]
    if value in OTHER_CHIP_METRICS:
        from msprof_cli.device.chip import get_chip

        spec = get_chip(chip)
        if value in spec.metric_events:
            return value, spec.metric_events[value][0]
        raise OptionsError(
            f'The value "{value}" of "{key}" is not supported on {spec.name} (it exists on other '
            f'chips, e.g. the Atlas A2: --soc-version Ascend910B3). Accepted values: '
            f'{_accepted(tuple(AIC_METRIC_EVENTS))}, "Custom:0x..,0x..".')
    if value.startswith("Custom:"):
        items = [s.strip() for s in value[len("Custom:"):].split(",") if s.strip()]
        if not items or len(items) > 8:
            raise OptionsError(f'"{key}" Custom: needs 1 to 8 comma-separated hex events, got '
                               f'{len(items)} in "{value}".')
        events = []
        for item in items:
            try:
                if not item.lower().startswith("0x"):
                    raise ValueError
                events.append(int(item, 16))
            except ValueError:
                raise OptionsError(f'"{key}" Custom event "{item}" is not a hex number like 0x8.'
                                   ) from None
        return value, tuple(events)
    raise OptionsError(f'The value "{value}" of "{key}" is invalid. Accepted values: '
                       f'{_accepted(tuple(AIC_METRIC_EVENTS))}, "Custom:0x..,0x..".')


def parse_storage_limit(value: str) -> int:
    text = value.strip()
    if not text.endswith("MB") or not text[:-2].isdigit():
        raise OptionsError(f'The value "{value}" of "storage_limit" is invalid: use "<n>MB" with '
                           f'n from {STORAGE_LIMIT_MIN_MB} to {STORAGE_LIMIT_MAX_MB} '
                           '(the unit MB is mandatory), e.g. "1024MB".')
    n = int(text[:-2])
    if not STORAGE_LIMIT_MIN_MB <= n <= STORAGE_LIMIT_MAX_MB:
        raise OptionsError(f'The value "{value}" of "storage_limit" is out of range: n must be '
                           f'from {STORAGE_LIMIT_MIN_MB} to {STORAGE_LIMIT_MAX_MB} MB.')
    return n


def _switch(opts: Mapping[str, Any], key: str, default: bool) -> bool:
    if key not in opts:
        return default
    value = opts[key]
    if value not in ON_OFF:
        raise OptionsError(f'The value {json.dumps(value)} of "{key}" is invalid. '
                           f'Accepted values: {_accepted(ON_OFF)}.')
    return value == "on"


def _task_level(opts: Mapping[str, Any]) -> str:
    levels = {}
    for key in ("task_time", "task_trace"):
        if key in opts:
            value = opts[key]
            if value not in TASK_LEVELS:
                raise OptionsError(f'The value {json.dumps(value)} of "{key}" is invalid. '
                                   f'Accepted values: {_accepted(TASK_LEVELS)}.')
            levels[key] = "l1" if value == "on" else value
    if len(set(levels.values())) > 1:
        raise OptionsError('"task_time" and "task_trace" are the same switch but were given '
                           f'different values ({levels["task_time"]!r} and '
                           f'{levels["task_trace"]!r}). Set only one of them.')
    return next(iter(levels.values()), "l1")


def validate_options(opts: Mapping[str, Any], *, cwd: str | None = None, source: str = "env",
                     raw: str = "", soc: str | None = None) -> ProfilingConfig:
    """Validate a PROFILING_OPTIONS object and apply the per-key defaults (docs/formats/options.md
    3, 4); `soc`: the emulated chip (default MSPROF_CLI_SOC_VERSION's), whose own aic_metrics
    groups are accepted too."""
    soc = soc_version_from_env() if soc is None else soc
    for key in opts:
        if key not in ALL_KEYS:
            raise OptionsError(f"Error: parsing invalid key:{key}. Valid keys: "
                               + ", ".join(sorted(ALL_KEYS)) + ".")
    for key in STRING_KEYS:
        if key in opts and not isinstance(opts[key], str):
            raise OptionsError(f'The value {json.dumps(opts[key])} of "{key}" must be a JSON '
                               'string.')
    for key, (lo, hi) in FREQ_KEYS.items():
        if key in opts:
            value = opts[key]
            if isinstance(value, bool) or not isinstance(value, int):
                raise OptionsError(f'The value {json.dumps(value)} of "{key}" must be a JSON '
                                   f'integer from {lo} to {hi} (not a string).')
            if not lo <= value <= hi:
                raise OptionsError(f'The value {value} of "{key}" is out of range: '
                                   f'{lo} to {hi}.')
    if "instr_profiling_freq" in opts:
        clash = [k for k in INSTR_EXCLUDES if k in opts]
        if clash:
            raise OptionsError("Profiling fails to start because instrProfilingFreq is set, "
                               f"Params {clash} not allowed to set when instr_profiling_freq "
                               "is set.")
        raise OptionsError('"instr_profiling_freq" (instruction profiling) exists only on '
                           "Ascend910B/910_93; the emulated chip is Ascend910.")
    for key in ("host_sys", "host_sys_usage"):
        if key in opts:
            for part in str(opts[key]).split(","):
                if part not in ("cpu", "mem"):
                    raise OptionsError(f"The value: {part} of {key} is not support. Please "
                                       "input in the range of 'cpu|mem'.")
    if "llc_profiling" in opts and opts["llc_profiling"] not in ("read", "write"):
        raise OptionsError(f'The value {json.dumps(opts["llc_profiling"])} of "llc_profiling" '
                           'is invalid. Accepted values: "read", "write".')

    cwd = cwd or os.getcwd()
    if "output" in opts:
        check_output_path(opts["output"])
        output = os.path.abspath(os.path.join(cwd, os.path.expanduser(opts["output"])))
    else:
        output = os.path.abspath(cwd)

    task_time = _task_level(opts)
    metrics, events = parse_aic_metrics(opts.get("aic_metrics", ""), chip=soc)
    if "aiv_metrics" in opts:
        parse_aic_metrics(opts["aiv_metrics"], key="aiv_metrics", chip=soc)
    warnings = []
    not_emulated = tuple(k for k in NOT_EMULATED_KEYS if k in opts)
    if not_emulated:
        warnings.append("accepted but not emulated (no data is produced for them): "
                        + ", ".join(not_emulated))
    for key in ("fp_point", "bp_point"):
        if key in opts and "\n" in opts[key]:
            raise OptionsError(f'"{key}" must be one op name, got {opts[key]!r}.')
    if task_time != "l1" and metrics:
        if task_time == "l0":
            warnings.append("task_time=l0 collects no op basic info: AI Core PMU is off")
    config = ProfilingConfig(
        output=output,
        training_trace=_switch(opts, "training_trace", False),
        task_time=task_time,
        hccl=_switch(opts, "hccl", False),
        aicpu=_switch(opts, "aicpu", False),
        l2=_switch(opts, "l2", False),
        msproftx=_switch(opts, "msproftx", False),
        runtime_api=_switch(opts, "runtime_api", False),
        fp_point=opts.get("fp_point", ""),
        bp_point=opts.get("bp_point", ""),
        aic_metrics=metrics if task_time == "l1" else "",
        aic_events=events if task_time == "l1" else (),
        storage_limit_mb=parse_storage_limit(opts["storage_limit"]) if "storage_limit" in opts
        else None,
        raw_options=raw or json.dumps(dict(opts)),
        source=source,
        dropout=dropout_from_env(),
        hardware_mem_freq=int(opts.get("sys_hardware_mem_freq", 0)),
        not_emulated=not_emulated,
        warnings=tuple(warnings),
    )
    return with_soc_version(config, soc)


def parse_options_json(text: str) -> dict[str, Any]:
    """Parse PROFILING_OPTIONS text; errors give the position of the JSON error."""
    if text.strip() and ":" in text and not text.lstrip().startswith("{"):
        raise OptionsError(f"PROFILING_OPTIONS={text!r} looks like the old colon-list form "
                           "(training_trace:task_trace), which is not supported: give a JSON "
                           'object, e.g. \'{"training_trace":"on","task_trace":"on"}\'.')
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionsError(f"PROFILING_OPTIONS is not valid JSON: {exc.msg} at line {exc.lineno} "
                           f"column {exc.colno} (char {exc.pos}) of {text!r}.") from None
    except RecursionError:
        raise OptionsError(f"PROFILING_OPTIONS is nested too deeply to be read ({len(text)} "
                           "characters): it must be one flat JSON object of options, e.g. "
                           '\'{"training_trace":"on","task_trace":"on"}\'.') from None
    except ValueError:  # Python's limit on the digits of an integer (4300)
        raise OptionsError("PROFILING_OPTIONS holds a number of more than 4300 digits, "
                           "which cannot be read. Option values are short: give "
                           'storage_limit as e.g. "200MB".') from None
    if not isinstance(value, dict):
        raise OptionsError(f"PROFILING_OPTIONS must be a JSON object ({{...}}), got "
                           f"{type(value).__name__}: {text!r}.")
    return value


def default_config(cwd: str | None = None, source: str = "env") -> ProfilingConfig:
    """PROFILING_MODE=true without PROFILING_OPTIONS (docs/formats/options.md 3): training_trace,
    task_trace, hccl, aicpu on, aic_metrics PipeUtilization, output = cwd."""
    return ProfilingConfig(output=os.path.abspath(cwd or os.getcwd()), training_trace=True,
                           task_time="l1", hccl=True, aicpu=True, source=source,
                           dropout=dropout_from_env(), soc_version=soc_version_from_env())


def config_from_env(environ: Mapping[str, str] | None = None, cwd: str | None = None
                    ) -> ProfilingConfig | None:
    """Resolve PROFILING_MODE / PROFILING_OPTIONS; None when profiling is off."""
    env = os.environ if environ is None else environ
    mode = env.get("PROFILING_MODE", "").strip()
    if mode.lower() in ("", "false"):
        return None
    if mode.lower() == "dynamic":
        # dynamic (attach) profiling is not emulated: treated as off, the agent warns
        # (docs/formats/options.md 2; docs/options.md)
        return None
    if mode.lower() != "true":
        raise OptionsError(f'PROFILING_MODE={mode!r} is invalid. Accepted values: "true", '
                           '"false", "dynamic".')
    text = env.get("PROFILING_OPTIONS")
    if text is None or text.strip() == "":
        return default_config(cwd)
    return validate_options(parse_options_json(text), cwd=cwd, source="env", raw=text)
