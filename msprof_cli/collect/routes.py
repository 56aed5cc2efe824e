"""The routes that switch profiling on, and how they exclude each other (docs/formats/options.md 1,
6).

1. `msprof collect`: the launcher passes the resolved config in `MSPROF_CLI_AGENT` (popped
   at start-up, so child interpreters do not profile themselves).  It also sets
   `PROFILING_MODE`/`PROFILING_OPTIONS` so the script sees what the real tool sets; the
   agent marks the process tree with `MSPROF_CLI_OWNER` so those variables never activate
   a second time.  Script-level settings (session config, Profiler) are ignored with a
   warning under `msprof collect`.
2. `PROFILING_MODE=true` (+ `PROFILING_OPTIONS`) set by hand: invalid options print one
   clear error and the script runs without profiling, as the real tool does.
3. Session config: NpuOptimizer `profiling_mode` / `profiling_options` seen in
   `tf.compat.v1.Session(config=...)`; beats the environment (docs/formats/options.md 1 precedence).
4. `npu_bridge.profiler.Profiler`: scoped, see shims/npu_bridge/profiler.py.
"""
from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from typing import Any, Mapping

from msprof_cli.errors import OptionsError
from msprof_cli.options import (ProfilingConfig, config_from_env, default_config,
                                parse_options_json, validate_options)

AGENT_VAR = "MSPROF_CLI_AGENT"
OWNER_VAR = "MSPROF_CLI_OWNER"
# `msprof collect --children`: child interpreters profile themselves too (own PROF dir each)
CHILDREN_VAR = "MSPROF_CLI_CHILDREN"
RANK_VARS = ("RANK_ID", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK")
# the size variable that goes with each rank variable (the job's number of ranks)
SIZE_VARS = {"RANK_ID": "RANK_SIZE", "RANK": "WORLD_SIZE",
             "OMPI_COMM_WORLD_RANK": "OMPI_COMM_WORLD_SIZE", "PMI_RANK": "PMI_SIZE",
             "LOCAL_RANK": "LOCAL_WORLD_SIZE"}
# tf.distribute task types that take part in MultiWorkerMirroredStrategy's collectives
TF_CONFIG_RANK_TYPES = ("chief", "worker")


@dataclass(frozen=True)
class RankInfo:
    """The process's rank in a multi-process job and the job's size (-1: unknown), where they
    came from (a variable name, or "TF_CONFIG"), and a warning for a malformed TF_CONFIG."""

    rank: int = -1
    size: int = -1
    source: str = ""
    warning: str = ""


def _number(value: str | None) -> int | None:
    value = (value or "").strip()
    return int(value) if value.isdigit() else None


def tf_config_rank(text: str) -> RankInfo:
    """Rank and size from a TF_CONFIG (tf.distribute's cluster spec), as
    MultiWorkerMirroredStrategy numbers its workers (`multi_worker_util.id_in_cluster`): the
    chief is rank 0, worker i is rank i (i + 1 when the cluster has a chief); size = chief +
    workers.  Other task types (evaluator, ps) have no rank.  A malformed TF_CONFIG gives
    rank -1 and a warning, never an exception."""
    src = "TF_CONFIG"
    try:
        cfg = json.loads(text)
    except ValueError as exc:
        return RankInfo(source=src, warning=f"TF_CONFIG is not valid JSON ({exc})")
    if not isinstance(cfg, dict):
        return RankInfo(source=src, warning="TF_CONFIG is not a JSON object")
    cluster, task = cfg.get("cluster"), cfg.get("task")
    if not isinstance(cluster, dict) or not isinstance(task, dict):
        return RankInfo(source=src, warning='TF_CONFIG needs a "cluster" and a "task" object')
    ttype, index = task.get("type"), task.get("index", 0)
    if isinstance(index, str) and index.strip().isdigit():
        index = int(index)
    if not isinstance(ttype, str) or isinstance(index, bool) or not isinstance(index, int) \
            or index < 0:
        return RankInfo(source=src, warning='TF_CONFIG "task" needs a "type" (string) and an '
                                            '"index" (number >= 0)')
    members = {}
    for t in TF_CONFIG_RANK_TYPES:
        hosts = cluster.get(t, [])
        if isinstance(hosts, dict):  # sparse cluster spec: {index: address}
            hosts = list(hosts.values())
        if not isinstance(hosts, list):
            return RankInfo(source=src, warning=f'TF_CONFIG cluster "{t}" is not a list')
        members[t] = len(hosts)
    size = sum(members.values())
    if ttype not in TF_CONFIG_RANK_TYPES:
        return RankInfo(size=size or -1, source=src)  # evaluator / ps: not a rank
    if index >= members[ttype]:
        return RankInfo(source=src, warning=f'TF_CONFIG task {ttype}:{index} is not in its '
                                            f'cluster ({members[ttype]} {ttype} task(s))')
    rank = index if ttype == "chief" else index + members["chief"]
    return RankInfo(rank=rank, size=size, source=src)


def rank_info(environ: Mapping[str, str] | None = None) -> RankInfo:
    """The process's rank and the job's size.  First that holds a number: RANK_ID (Ascend),
    RANK, OMPI_COMM_WORLD_RANK, PMI_RANK; then TF_CONFIG (MultiWorkerMirroredStrategy);
    then LOCAL_RANK.  The size comes from the variable that goes with the rank variable
    (RANK_SIZE, WORLD_SIZE, ...) or from TF_CONFIG's cluster; -1 when unknown."""
    env = os.environ if environ is None else environ
    for var in RANK_VARS:
        rank = _number(env.get(var))
        if rank is not None:
            size = _number(env.get(SIZE_VARS[var]))
            return RankInfo(rank=rank, size=size if size and size > rank else -1, source=var)
    warning = ""
    text = env.get("TF_CONFIG", "")
    if text.strip():
        info = tf_config_rank(text)
        if info.rank >= 0:
            return info
        warning = info.warning
    rank = _number(env.get("LOCAL_RANK"))
    if rank is not None:
        size = _number(env.get(SIZE_VARS["LOCAL_RANK"]))
        return RankInfo(rank=rank, size=size if size and size > rank else -1,
                        source="LOCAL_RANK", warning=warning)
    return RankInfo(source="TF_CONFIG" if warning else "", warning=warning)


def rank_from_env(environ: Mapping[str, str] | None = None) -> int:
    """The process's rank (see `rank_info`); -1."""
    return rank_info(environ).rank


def error(message: str) -> None:
    sys.stderr.write(f"[msprof] ERROR {message}\n")
    sys.stderr.flush()


def config_at_startup(environ: dict[str, str] | None = None) -> tuple[ProfilingConfig | None, str]:
    """The config this process profiles with from start-up, and the route that set it."""
    env = os.environ if environ is None else environ
    text = env.pop(AGENT_VAR, None)
    if text is not None:
        env[OWNER_VAR] = str(os.getpid())
        if env.get(CHILDREN_VAR):
            env[AGENT_VAR] = text  # descendants activate too (msprof collect --children)
        return ProfilingConfig.from_json(text), "cli"
    if OWNER_VAR in env:
        return None, ""  # a child of a profiled process: profiling children is not a route
    mode = env.get("PROFILING_MODE", "").strip().lower()
    if mode in ("", "false"):
        return None, ""
    if mode == "dynamic":
        sys.stderr.write("[msprof] WARNING PROFILING_MODE=dynamic (attach profiling) is not "
                         "emulated: this run is not profiled.\n")
        return None, ""
    try:
        config = config_from_env(env)
    except OptionsError as exc:
        error(f"{exc} Profiling is off for this run.")
        return None, ""
    return config, "env"


def session_profiling(config: Any) -> tuple[bool, str | None]:
    """(profiling_mode, profiling_options) of a ConfigProto's NpuOptimizer, if present."""
    if config is None:
        return False, None
    try:
        optimizers = config.graph_options.rewrite_options.custom_optimizers
    except AttributeError:
        return False, None
    for opt in optimizers:
        if opt.name != "NpuOptimizer":
            continue
        params = opt.parameter_map
        mode = "profiling_mode" in params and bool(params["profiling_mode"].b)
        options = None
        if "profiling_options" in params:
            raw = params["profiling_options"].s
            options = raw.decode() if isinstance(raw, bytes) else str(raw)
        return mode, options
    return False, None


def session_precision(config: Any) -> str | None:
    """The NpuOptimizer's `precision_mode` of a ConfigProto (the TF adapter's GE setting)."""
    try:
        optimizers = config.graph_options.rewrite_options.custom_optimizers
    except AttributeError:
        return None
    for opt in optimizers:
        if opt.name == "NpuOptimizer" and "precision_mode" in opt.parameter_map:
            raw = opt.parameter_map["precision_mode"].s
            return raw.decode() if isinstance(raw, bytes) else str(raw)
    return None


MEMORY_POOL_KEYS = ("graph_memory_max_size", "variable_memory_max_size")


def session_memory_pools(config: Any) -> dict[str, str]:
    """The NpuOptimizer's GE memory pool sizes of a ConfigProto, as given (bytes)."""
    try:
        optimizers = config.graph_options.rewrite_options.custom_optimizers
    except AttributeError:
        return {}
    out = {}
    for opt in optimizers:
        if opt.name == "NpuOptimizer":
            for key in MEMORY_POOL_KEYS:
                if key in opt.parameter_map:
                    raw = opt.parameter_map[key].s
                    out[key] = raw.decode() if isinstance(raw, bytes) else str(raw)
    return out


def apply_session_memory(agent: Any, config: Any) -> None:
    """GE's memory pools a script's session config sets hold for the emulated device (they
    win over `msprof collect --graph-memory-max-size`, as for the precision mode)."""
    from msprof_cli.options import normalize_memory_size

    for key, text in session_memory_pools(config).items():
        try:
            size = normalize_memory_size(text, f"session config {key}")
        except OptionsError as exc:
            error(f"{exc} The emulated device keeps its current {key}.")
            continue
        agent.memory_pools[key] = size
        device = getattr(agent.collection, "device", None) if agent.collection else None
        if device is not None:
            device.set_memory_pools(**{key: size})


def apply_session_precision(agent: Any, config: Any) -> None:
    """A script that sets GE's precision_mode in its session config runs the emulated system
    in that mode (it wins over `msprof collect --precision-mode`, as the script is what a real
    run would use); an unknown mode is reported and the current one kept."""
    from msprof_cli.options import normalize_precision_mode

    text = session_precision(config)
    if text is None:
        return
    try:
        mode = normalize_precision_mode(text, "session config precision_mode")
    except OptionsError as exc:
        error(f"{exc} The emulated device keeps its current precision mode.")
        return
    agent.precision_mode = mode
    device = getattr(agent.collection, "device", None) if agent.collection else None
    if device is not None:
        device.set_precision_mode(mode)


def on_session_config(agent: Any, config: Any) -> None:
    """BaseSession.__init__ hook: the session-config route (docs/formats/options.md 1)."""
    apply_session_precision(agent, config)
    apply_session_memory(agent, config)
    mode, options = session_profiling(config)
    if not mode:
        return
    agent.session_profiling_seen = True
    if agent.collection is not None:
        if agent.collection.config.source == "cli":
            sys.stderr.write("[msprof] WARNING the session config switches profiling on; "
                             "under msprof collect the command-line settings apply.\n")
        return
    try:
        if options:
            cfg = validate_options(parse_options_json(options), source="session", raw=options)
        else:
            cfg = default_config(source="session")
    except OptionsError as exc:
        error(f"session config profiling_options: {exc} Profiling is off for this session.")
        return
    agent.scope = "session"
    agent.install_exit_hooks()
    agent.activate(cfg)
