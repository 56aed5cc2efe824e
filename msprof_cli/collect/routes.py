"""The routes that switch profiling on, and how they exclude each other (options.md 1, 6).

1. `msprof collect`: the launcher passes the resolved config in `MSPROF_CLI_AGENT` (popped
   at start-up, so child interpreters do not profile themselves).  It also sets
   `PROFILING_MODE`/`PROFILING_OPTIONS` so the script sees what the real tool sets; the
   agent marks the process tree with `MSPROF_CLI_OWNER` so those variables never activate
   a second time.  Script-level settings (session config, Profiler) are ignored with a
   warning under `msprof collect`.
2. `PROFILING_MODE=true` (+ `PROFILING_OPTIONS`) set by hand: invalid options print one
   clear error and the script runs without profiling, as the real tool does.
3. Session config: NpuOptimizer `profiling_mode` / `profiling_options` seen in
   `tf.compat.v1.Session(config=...)`; beats the environment (options.md 1 precedence).
4. `npu_bridge.profiler.Profiler`: scoped, see shims/npu_bridge/profiler.py.
"""
from __future__ import annotations

import os
import sys
from typing import Any

from msprof_cli.errors import OptionsError
from msprof_cli.options import (ProfilingConfig, config_from_env, default_config,
                                parse_options_json, validate_options)

AGENT_VAR = "MSPROF_CLI_AGENT"
OWNER_VAR = "MSPROF_CLI_OWNER"
# `msprof collect --children`: child interpreters profile themselves too (own PROF dir each)
CHILDREN_VAR = "MSPROF_CLI_CHILDREN"
RANK_VARS = ("RANK_ID", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "LOCAL_RANK")


def rank_from_env(environ: dict[str, str] | None = None) -> int:
    """The process's rank from the usual launcher variables (Ascend's RANK_ID first); -1."""
    env = os.environ if environ is None else environ
    for var in RANK_VARS:
        value = env.get(var, "").strip()
        if value.isdigit():
            return int(value)
    return -1


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


def on_session_config(agent: Any, config: Any) -> None:
    """BaseSession.__init__ hook: the session-config route (options.md 1)."""
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
