"""`msprof collect` launcher: run the user's command with the agent injected.

The agent gets into the (unmodified) script through a `sitecustomize.py` prepended to
PYTHONPATH (docs/formats/tensorflow-capture.md 10.1) and one activation variable holding the
resolved
config.  The child's stdout passes through untouched; its stderr passes through except the
known TensorFlow start-up lines (11 "Log noise") and the profiler session chatter that the
agent's own tracer causes; the child's environment is never changed to hide them.  The exit
code is the child's (128+N when it died from signal N).
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO, Callable

from msprof_cli.errors import LaunchError, UsageError
from msprof_cli.options import ProfilingConfig, check_output_dir

BOOTSTRAP_DIR = Path(__file__).resolve().parent / "bootstrap"
SHIMS_DIR = Path(__file__).resolve().parent / "shims"
AGENT_VAR = "MSPROF_CLI_AGENT"
CHILDREN_VAR = "MSPROF_CLI_CHILDREN"  # = routes.CHILDREN_VAR
RESULT_FILE_VAR = "MSPROF_CLI_RESULT_FILE"
WARNING_PREFIX = "[WARNING] "  # a note printed as a warning (a model that does not fit)
NOTE_PREFIX = "#note "  # a result-file line that is a hint (agent.note), not a PROF dir

# stderr lines TF prints at start-up even with TF_CPP_MIN_LOG_LEVEL=3, plus the profiler
# session's own INFO/WARNING lines caused by the agent's tracer (one set per chunk)
NOISE = [re.compile(p) for p in (
    r"^WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR$",
    r"^[IWE]\d{4} [\d:. ]+\s*\d+ port\.cc:\d+\] oneDNN custom operations are on",
    r"^[IWE]\d{4} [\d:. ]+\s*\d+ cpu_feature_guard\.cc:\d+\] This TensorFlow binary is optimized",
    r"^To enable the following instructions: .*rebuild TensorFlow with the appropriate compiler flags\.$",
    r"^[IWE]\d{4} [\d:. ]+\s*\d+ cudart_stub\.cc:\d+\] Could not find cuda drivers",
    r"^[IWE]\d{4} [\d:. ]+\s*\d+ cuda_executor\.cc:\d+\] failed call to cuInit",
    r"^[IWE]\d{4} [\d:. ]+\s*\d+ profiler_session\.cc:\d+\] Profiler session (initializing|started|collecting data|tear down)\.",
    r"^[IWE]\d{4} [\d:. ]+\s*\d+ session_manager\.cc:\d+\] \w+_tracer_level expects an i value\.",
    r"^[IWE]\d{4} [\d:. ]+\s*\d+ save_profile\.cc:\d+\] Collecting XSpace to repository: .*msprof_chunk_",
    r"^[IWE]\d{4} [\d:. ]+\s*\d+ save_profile\.cc:\d+\] Creating directory: .*msprof_chunk_",
    r"^[IWE]\d{4} [\d:. ]+\s*\d+ device_tracer\.cc:\d+\]",
)]
ISOLATING_FLAGS = {"-I": "isolated mode ignores PYTHONPATH",
                   "-E": "ignores PYTHON* variables such as PYTHONPATH",
                   "-S": "skips the site module, which loads the agent"}


def is_noise(line: str) -> bool:
    text = line.rstrip("\r\n")
    return any(p.search(text) for p in NOISE)


def _python_flags(argv: list[str]) -> list[str]:
    """Interpreter flags of a `python ...` command that stop the agent from loading."""
    exe = os.path.basename(argv[0])
    if not re.match(r"^(python[\d.]*|pypy[\d.]*)$", exe):
        return []
    found = []
    for arg in argv[1:]:
        if arg == "--" or not arg.startswith("-") or arg in ("-m", "-c"):
            break
        if arg.startswith("--"):
            continue
        for ch in arg[1:]:
            if f"-{ch}" in ISOLATING_FLAGS:
                found.append(f"-{ch}")
            if ch in "cmWXQ":  # flags with an argument end the cluster
                break
    return found


def _resolve(argv: list[str]) -> str:
    if not argv or not argv[0]:
        raise UsageError("no command to profile: put it after --, e.g. "
                         "`msprof collect -- python train.py`.")
    exe = argv[0]
    if os.sep in exe:
        if not os.path.exists(exe):
            raise LaunchError(f"command not found: {exe} (no such file). Check the path, or "
                              "run `msprof collect -- python train.py`.")
        if not os.access(exe, os.X_OK) or os.path.isdir(exe):
            raise LaunchError(f"{exe} is not executable. Run it through its interpreter, "
                              f"e.g. `msprof collect -- python {exe}`.")
        return exe
    found = shutil.which(exe)
    if found is None:
        raise LaunchError(f"command not found: {exe!r} is not on PATH. Give the full path or "
                          "check the spelling, e.g. `msprof collect -- python train.py`.")
    return found


def child_env(config: ProfilingConfig, result_file: str, children: bool = False
              ) -> dict[str, str]:
    env = dict(os.environ)
    for var in ("PROFILING_MODE", "PROFILING_OPTIONS"):
        if env.get(var):
            print(f"[WARNING] {var} is set in the environment; under msprof collect the "
                  "command-line settings apply and it is ignored.", file=sys.stderr)
    parts = [str(BOOTSTRAP_DIR)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    parts.append(str(SHIMS_DIR))  # last: a real npu_bridge installed elsewhere wins
    env["PYTHONPATH"] = os.pathsep.join(parts)
    env[AGENT_VAR] = config.to_json()
    env[RESULT_FILE_VAR] = result_file
    env.pop("MSPROF_CLI_OWNER", None)
    if children:
        env[CHILDREN_VAR] = "1"  # child interpreters profile themselves (own PROF dir, rank)
    else:
        env.pop(CHILDREN_VAR, None)
    # what the real tool sets for the app (the agent does not activate from these again)
    env["PROFILING_MODE"] = "true"
    env["PROFILING_OPTIONS"] = config.raw_options
    return env


def _pump_stderr(src: IO[bytes], dst: IO[bytes]) -> None:
    for raw in iter(src.readline, b""):
        if is_noise(raw.decode("utf-8", "replace")):
            continue
        dst.write(raw)
        dst.flush()


def run_collect(config: ProfilingConfig, argv: list[str], children: bool = False) -> int:
    """Run `argv` profiled with `config`; return the exit code msprof should exit with.
    With `children`, Python subprocesses that import TensorFlow are profiled too, each into
    its own PROF dir named and ranked after its RANK_ID/RANK/... variable or TF_CONFIG."""
    exe = _resolve(argv)
    # refuse a symlinked / file / unwritable / foreign output dir before the script starts
    check_output_dir(config.output)
    for flag in _python_flags(argv):
        print(f"[WARNING] `{argv[0]} {flag}` {ISOLATING_FLAGS[flag]}: the profiling agent "
              f"cannot load and nothing will be captured. Drop {flag} to profile this script.",
              file=sys.stderr)
    for w in config.warnings:
        print(f"[WARNING] {w}", file=sys.stderr)
    fd, result_file = tempfile.mkstemp(prefix="msprof_result_", suffix=".txt")
    os.close(fd)
    # every line of ours goes to stderr: the script's stdout stays the script's (a
    # `msprof collect -- python gen.py > out.csv` must not find our lines in out.csv)
    print("[INFO] Start profiling....", file=sys.stderr, flush=True)
    try:
        try:
            proc = subprocess.Popen([exe] + argv[1:], env=child_env(config, result_file, children),
                                    stderr=subprocess.PIPE, preexec_fn=_die_with_parent)
        except OSError as exc:
            raise LaunchError(f"could not start {argv[0]!r}: {exc.strerror or exc}.") from None
        pump = threading.Thread(target=_pump_stderr,
                                args=(proc.stderr, sys.stderr.buffer), daemon=True)
        pump.start()
        forwarded = _forward_signals(proc)
        try:
            while True:
                try:
                    rc = proc.wait()
                    break
                except KeyboardInterrupt:
                    continue  # the child got the terminal's SIGINT too; wait for its flush
        finally:
            forwarded()
        pump.join(timeout=5)
        prof_dirs, notes = _read_results(result_file)
    finally:
        try:
            os.unlink(result_file)
        except OSError:
            pass
    if rc < 0:
        sig = -rc
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        print(f"[WARNING] The profiled command was killed by {name}.", file=sys.stderr)
        rc = 128 + sig
    if children and len(prof_dirs) > 1:
        _couple_ranks(prof_dirs)
    _report(prof_dirs, config, notes)
    if rc > 0 and rc < 128:
        print(f"[WARNING] The profiled command failed with exit code {rc}: the profile covers "
              f"what it ran until it stopped.", file=sys.stderr)
    return rc


def _couple_ranks(prof_dirs: list[str]) -> None:
    """The ranks of the job wait for each other in their collectives (device/
    rank_coupling.py): aligned once every rank has ended.  A failure leaves each rank's
    own (uncoupled) data as it was and says so."""
    try:
        from msprof_cli.device.rank_coupling import couple

        done = couple([Path(p) for p in prof_dirs])
    except (OSError, ValueError, KeyError) as exc:
        print(f"[WARNING] The ranks' collectives could not be aligned ({exc}): each rank's "
              "profile shows its own device as if the others were never late.",
              file=sys.stderr)
        return
    if done:
        waits = ", ".join(f"{name} {ns / 1e6:.3f} ms" for name, ns in
                          zip(done["ranks"], done["wait_ns"]))
        print(f"[INFO] {len(done['ranks'])} ranks aligned at their {done['collectives']} "
              f"collectives (each waits for the last to arrive); time spent waiting: {waits}.",
              file=sys.stderr)


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the launcher dies (even by SIGKILL), so the
    training process is never left running as an orphan; its agent flushes what it
    captured on SIGTERM (crash safety) and prints where the data went.  Linux prctl
    PR_SET_PDEATHSIG; elsewhere nothing."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _forward_signals(proc: subprocess.Popen) -> Callable[[], None]:
    """Forward SIGTERM (and a SIGINT not sent to the whole group) to the child."""
    previous = {}

    def handler(signum: int, frame: object) -> None:
        if signum == signal.SIGINT and _foreground():
            return  # the terminal already sent SIGINT to the whole process group
        try:
            proc.send_signal(signum)
        except ProcessLookupError:
            pass

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            previous[sig] = signal.signal(sig, handler)

    def restore() -> None:
        for sig, old in previous.items():
            signal.signal(sig, old)

    return restore


def _foreground() -> bool:
    """True when we run in the terminal's foreground group (Ctrl-C reaches the child too)."""
    try:
        return os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except OSError:
        return False


def _read_results(path: str) -> tuple[list[str], list[str]]:
    """The PROF dirs the agents wrote, and their hints (each once, in order)."""
    try:
        with open(path, encoding="utf-8") as fh:
            lines = [line.strip() for line in fh if line.strip()]
    except OSError:
        return [], []
    notes = [ln[len(NOTE_PREFIX):] for ln in lines if ln.startswith(NOTE_PREFIX.strip())]
    return ([ln for ln in lines if not ln.startswith(NOTE_PREFIX.strip())],
            list(dict.fromkeys(n.strip() for n in notes)))


def _report(prof_dirs: list[str], config: ProfilingConfig, notes: list[str] = ()) -> None:
    if not prof_dirs:
        print("[WARNING] Nothing was captured: the command never imported TensorFlow in the "
              "profiled process (or the agent could not load; see the messages above). No "
              f"PROF directory was written under {config.output}.", file=sys.stderr)
        return
    for prof in prof_dirs:
        print(f"[INFO] Profiling finished. Data is saved in {prof}", file=sys.stderr)
        print(f"[INFO] Next: msprof export --output {prof} (files), msprof summary {prof} "
              f"(a quick look), msprof report {prof} -o report.html (plots)", file=sys.stderr)
    for text in notes:  # what the run had that the options left out (agent.note)
        print(text if text.startswith(WARNING_PREFIX) else f"[INFO] {text}", file=sys.stderr)
