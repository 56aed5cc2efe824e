"""Unit tests of the collection side that need no TensorFlow (fast)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from msprof_cli.capture import OpRun, TensorSpec
from msprof_cli.collect import launcher, routes
from msprof_cli.collect.convert import convert
from msprof_cli.collect.converter_state import ConverterState, GraphRegistry
from msprof_cli.collect.records import ExecRecord
from msprof_cli.collect.sampling import WARMUP, SamplingPolicy
from msprof_cli.collect.tf_graphs import StaticGraph, StaticOp, resolve
from msprof_cli.collect.xspace import Event, Trace
from msprof_cli.errors import LaunchError, UsageError
from msprof_cli.options import ProfilingConfig

ROOT = Path(__file__).resolve().parents[1]


# -- launcher ---------------------------------------------------------------------------------
def test_python_isolating_flags_are_detected() -> None:
    assert launcher._python_flags(["python", "-I", "x.py"]) == ["-I"]
    assert launcher._python_flags(["python3.11", "-uE", "x.py"]) == ["-E"]
    assert launcher._python_flags(["python", "-S", "-m", "mod"]) == ["-S"]
    assert launcher._python_flags(["python", "x.py", "-I"]) == []  # script argument
    assert launcher._python_flags(["bash", "-E"]) == []


@pytest.mark.parametrize("line", [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n",
    "I0000 00:00:1795997599.297826    4742 port.cc:153] oneDNN custom operations are on. You may",
    "I0000 00:00:1795997601.581830    4742 profiler_session.cc:117] Profiler session initializing.",
    "W0000 00:00:1795997601.581741    4742 session_manager.cc:55] python_tracer_level expects an i value.",
    "To enable the following instructions: AVX2 FMA, in other operations, rebuild TensorFlow with the appropriate compiler flags.",
])
def test_known_tensorflow_noise_is_filtered(line: str) -> None:
    assert launcher.is_noise(line)


@pytest.mark.parametrize("line", ["stderr line from the script\n",
                                  "Traceback (most recent call last):\n",
                                  "W0000 00:00:1.0 1 some_user_op.cc:1] real warning\n"])
def test_other_stderr_passes(line: str) -> None:
    assert not launcher.is_noise(line)


def test_empty_or_missing_command_is_refused(tmp_path: Path) -> None:
    config = ProfilingConfig(output=str(tmp_path))
    with pytest.raises(UsageError):
        launcher.run_collect(config, [])
    with pytest.raises(LaunchError, match="not on PATH"):
        launcher.run_collect(config, ["no-such-command-xyz"])
    with pytest.raises(LaunchError, match="no such file"):
        launcher.run_collect(config, ["./no/such/file.py"])


def test_exit_code_and_nothing_captured(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    config = ProfilingConfig(output=str(tmp_path))
    assert launcher.run_collect(config, ["sh", "-c", "exit 5"]) == 5
    err = capsys.readouterr().err
    assert "Nothing was captured" in err and "never imported TensorFlow" in err


def test_death_by_signal_is_128_plus_n(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    config = ProfilingConfig(output=str(tmp_path))
    assert launcher.run_collect(config, ["sh", "-c", "kill -KILL $$"]) == 128 + 9
    assert "SIGKILL" in capsys.readouterr().err


def test_child_env_activation(tmp_path: Path) -> None:
    config = ProfilingConfig(output=str(tmp_path), raw_options='{"task_time":"on"}')
    env = launcher.child_env(config, "/tmp/x")
    parts = env["PYTHONPATH"].split(os.pathsep)
    assert parts[0] == str(launcher.BOOTSTRAP_DIR) and parts[-1] == str(launcher.SHIMS_DIR)
    assert ProfilingConfig.from_json(env[launcher.AGENT_VAR]) == config
    assert env["PROFILING_MODE"] == "true" and env["PROFILING_OPTIONS"] == config.raw_options


def test_bootstrap_chains_and_stays_inactive_without_activation(tmp_path: Path) -> None:
    """A python child with the bootstrap on PYTHONPATH but no activation variable: the
    shadowed sitecustomize still runs and no agent is loaded."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import builtins; builtins.CHAINED = True\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(launcher.BOOTSTRAP_DIR), str(other)]))
    env.pop(launcher.AGENT_VAR, None)
    code = ("import builtins, sys; print(getattr(builtins, 'CHAINED', False), "
            "'msprof_cli.collect.agent' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout
    assert out.split() == ["True", "False"]


# -- routes -----------------------------------------------------------------------------------
def test_env_route_resolution(tmp_path: Path) -> None:
    env = {"PROFILING_MODE": "true", "PROFILING_OPTIONS": f'{{"output": "{tmp_path}"}}'}
    config, route = routes.config_at_startup(env)
    assert route == "env" and config is not None and config.output == str(tmp_path)
    assert routes.config_at_startup({"PROFILING_MODE": "false"})[0] is None
    assert routes.config_at_startup({})[0] is None
    # a child of a profiled process never re-activates from the inherited variables
    assert routes.config_at_startup({"PROFILING_MODE": "true", routes.OWNER_VAR: "1"})[0] is None


def test_env_route_invalid_options_turn_profiling_off(capsys: pytest.CaptureFixture) -> None:
    config, _ = routes.config_at_startup({"PROFILING_MODE": "true",
                                          "PROFILING_OPTIONS": '{"bogus": "on"}'})
    assert config is None
    assert "parsing invalid key:bogus" in capsys.readouterr().err


def test_env_route_dynamic_is_off_with_warning(capsys: pytest.CaptureFixture) -> None:
    assert routes.config_at_startup({"PROFILING_MODE": "dynamic"})[0] is None
    assert "dynamic" in capsys.readouterr().err


def test_launcher_variable_beats_env_and_marks_owner() -> None:
    cfg = ProfilingConfig(output="/tmp", source="cli")
    env = {routes.AGENT_VAR: cfg.to_json(), "PROFILING_MODE": "true"}
    config, route = routes.config_at_startup(env)
    assert route == "cli" and config == cfg
    assert routes.AGENT_VAR not in env and routes.OWNER_VAR in env


class _Param:
    def __init__(self, b: bool = False, s: bytes = b"") -> None:
        self.b, self.s = b, s


class _Opt:
    def __init__(self, name: str, params: dict) -> None:
        self.name, self.parameter_map = name, params


class _Config:
    def __init__(self, opts: list) -> None:
        self.graph_options = type("G", (), {"rewrite_options": type(
            "R", (), {"custom_optimizers": opts})()})()


def test_session_config_switches_are_read() -> None:
    cfg = _Config([_Opt("other", {}), _Opt("NpuOptimizer", {
        "profiling_mode": _Param(b=True), "profiling_options": _Param(s=b'{"aicpu":"on"}')})])
    assert routes.session_profiling(cfg) == (True, '{"aicpu":"on"}')
    assert routes.session_profiling(_Config([_Opt("NpuOptimizer", {})])) == (False, None)
    assert routes.session_profiling(None) == (False, None)


def test_run_module_without_profiling_is_plain_python(tmp_path: Path) -> None:
    script = tmp_path / "s.py"
    script.write_text("import sys; print('argv', sys.argv[1:]); sys.exit(4)\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PROFILING_MODE",)}
    res = subprocess.run([sys.executable, "-m", "msprof_cli.collect.run", str(script), "a"],
                         capture_output=True, text=True, env=env, cwd=ROOT)
    assert res.returncode == 4 and "argv ['a']" in res.stdout


# -- Profiler contract --------------------------------------------------------------------------
def test_profiler_argument_errors_are_value_errors(tmp_path: Path) -> None:
    from msprof_cli.collect.profiler_scope import Profiler

    with pytest.raises(ValueError, match="level"):
        Profiler(level="L3")
    with pytest.raises(ValueError, match="forbidden"):
        Profiler(output_path="a\tb")
    with pytest.raises(ValueError):
        Profiler(level="L1", aic_metrics="NoSuchGroup")
    with pytest.raises(ValueError):
        Profiler(level="L1", aic_metrics="L2Cache")  # not on Ascend910
    with pytest.raises(ValueError):
        Profiler(level=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Profiler("L1")  # type: ignore[misc]  keyword-only


def test_profiler_levels_map_to_switches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from msprof_cli.collect.profiler_scope import Profiler

    monkeypatch.chdir(tmp_path)
    l0 = Profiler(aic_metrics="Memory").config()
    assert l0.task_time == "l1" and not l0.pmu_on and not l0.hccl and not l0.training_trace
    assert l0.output == str(tmp_path) and l0.source == "profiler"
    l1 = Profiler(level="L1", output_path="sub").config()
    assert l1.hccl and l1.aic_metrics == "PipeUtilization" and not l1.aicpu
    assert l1.output == str(tmp_path / "sub")
    l2 = Profiler(level="L2", aic_metrics="Memory").config()
    assert l2.aicpu and l2.runtime_api and l2.hccl and l2.aic_metrics == "Memory"


def test_profiler_usage_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from msprof_cli.collect import profiler_scope
    from msprof_cli.collect.agent import AGENT
    from msprof_cli.collect.profiler_scope import Profiler

    monkeypatch.setattr(profiler_scope, "_ensure_hooks", lambda agent: None)
    monkeypatch.setattr(AGENT, "activate", lambda config: None)
    monkeypatch.setattr(AGENT, "deactivate", lambda: None)
    monkeypatch.delenv("PROFILING_MODE", raising=False)
    monkeypatch.delenv("PROFILING_OPTIONS", raising=False)
    with Profiler(output_path=str(tmp_path)):
        with pytest.raises(RuntimeError, match="nested"):
            with Profiler(output_path=str(tmp_path)):
                pass
        errors: list[BaseException] = []

        def other() -> None:
            try:
                with Profiler(output_path=str(tmp_path)):
                    pass
            except RuntimeError as exc:
                errors.append(exc)

        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert errors and "thread" in str(errors[0])
    monkeypatch.setenv("PROFILING_MODE", "true")
    with pytest.raises(RuntimeError, match="PROFILING_MODE"):
        with Profiler():
            pass
    monkeypatch.delenv("PROFILING_MODE")
    monkeypatch.setattr(AGENT, "session_profiling_seen", True)
    with pytest.raises(RuntimeError, match="session config"):
        with Profiler():
            pass


# -- sampling -----------------------------------------------------------------------------------
def test_sampling_policy() -> None:
    full = SamplingPolicy(full_trace=True)
    assert all(full.should_trace("g") for _ in range(200))
    p = SamplingPolicy(full_trace=False)
    assert p.should_trace(None)
    decisions = []
    for _ in range(120):
        t = p.should_trace("g")
        decisions.append(t)
        p.done("g", t, False, 1_000_000)
    assert decisions[:WARMUP] == [True] * WARMUP
    assert 2 <= sum(decisions[WARMUP:]) <= 5  # every 50th
    p.done("g", False, True, 1_000_000)  # a retrace forces the next sample
    assert p.should_trace("g")
    p.done("g", True, False, 1_000_000)
    p.done("g", False, False, 50_000_000)  # 50x slower than the sampled median
    assert p.should_trace("g")


def test_sampling_drift_is_judged_against_untraced_steps() -> None:
    """A loop-heavy graph: traced steps cost 3x untraced ones (the tracer's own events).  An
    untraced step is not 'drift' for being faster than the traced ones: only the warm-up and
    the every-50th samples are taken; a real change (10x slower, then 10x faster than the
    untraced steps) still forces a sample."""
    p = SamplingPolicy(full_trace=False)
    traced = 0
    for _ in range(100):
        t = p.should_trace("g")
        traced += t
        p.done("g", t, False, 30_000_000 if t else 10_000_000)
    assert traced == WARMUP + 2, traced  # warm-up + the 50th and the 100th
    p.done("g", False, False, 100_000_000)  # 10x the untraced median: drift
    assert p.should_trace("g")
    p.done("g", True, False, 30_000_000)
    p.done("g", False, False, 1_000_000)  # 10x faster than the untraced steps: drift
    assert p.should_trace("g")


# -- conversion on a synthetic trace -----------------------------------------------------------
def _ev(line: int, kind: str, name: str, start: int, end: int, tf_type: str = "",
        **stats: object) -> Event:
    return Event(line, kind, name, tf_type, start, end, dict(stats) if stats else None)


def test_convert_joins_ops_to_steps_by_run_id() -> None:
    trace = Trace(lines=["python", "tf_Compute/1", "tf_Compute/2", "tf_data_iterator/3"])
    base = 1_000_000
    trace.events = [
        _ev(0, "anchor", "msprof_clock_anchor", base, base, mono=str(base + 5)),
        _ev(0, "eager", "MatMul", base + 10, base + 40, "MatMul"),  # outside steps: single op
        _ev(0, "kexec", "EagerKernelExecute", base + 20, base + 30),
        _ev(0, "marker", "msprof_step", base + 100, base + 900, seq=7),
        _ev(0, "fn", "__inference_train_step_12", base + 110, base + 200),
        _ev(0, "run", "FunctionRun", base + 120, base + 130, id=42),
        _ev(1, "proc", "ExecutorState::Process", base + 130, base + 500, id=42),
        _ev(1, "op", "dense/Relu", base + 140, base + 300, "_MklNativeFusedMatMul"),
        _ev(2, "proc", "ExecutorState::Process", base + 300, base + 800, id=42),
        _ev(2, "op", "loss/Mean", base + 310, base + 400, "Mean"),
        _ev(2, "proc", "ExecutorState::Process", base + 950, base + 990, id=-1),
        _ev(2, "op", "folded/Const", base + 960, base + 970, "AddV2"),  # constant folding
        _ev(3, "op", "map/GatherV2", base + 400, base + 410, "GatherV2"),  # input pipeline
        # an eager op of another thread (a data loader's worker) during the step
        _ev(1, "eager", "Sub", base + 600, base + 610, "Sub"),
    ]
    graph = StaticGraph()
    f32 = "float32"
    graph.add("x", StaticOp("Placeholder", (), (TensorSpec((4, 16), f32),), ()))
    graph.add("w", StaticOp("ReadVariableOp", (), (TensorSpec((16, 8), f32),), ()))
    graph.add("b", StaticOp("ReadVariableOp", (), (TensorSpec((8,), f32),), ()))
    graph.add("dense/MatMul", StaticOp("MatMul", (TensorSpec((4, 16), f32), TensorSpec((16, 8), f32)),
                                       (TensorSpec((4, 8), f32),), ("x", "w")))
    graph.add("dense/BiasAdd", StaticOp("BiasAdd", (TensorSpec((4, 8), f32), TensorSpec((8,), f32)),
                                        (TensorSpec((4, 8), f32),), ("dense/MatMul", "b")))
    graph.add("dense/Relu", StaticOp("Relu", (TensorSpec((4, 8), f32),), (TensorSpec((4, 8), f32),),
                                     ("dense/BiasAdd",)))
    graph.add("loss/Mean", StaticOp("Mean", (TensorSpec((4, 8), f32),), (TensorSpec((), f32),),
                                    ("dense/Relu",)))
    graph.inputs.add("x")
    registry = GraphRegistry({"__inference_train_step_12": graph})
    rec = ExecRecord(seq=7, kind="tf2", name="train_step", fn_name="train_step",
                     model_key=None, static_key=None, start_ns=0, end_ns=1, thread_id=555)
    state = ConverterState(pid=100, main_thread_id=555)
    chunk = convert(trace, [rec], state, GraphRegistry(registry.graphs), fallback_offset_ns=0)
    assert [m.graph_key for m in chunk.models.values()] == ["__inference_train_step_12"]
    (it,) = chunk.iterations
    assert (it.model_id, it.index, it.replayed) == (1, 1, False)
    assert (it.start_ns, it.end_ns) == (base + 105, base + 905)  # anchored on the raw clock
    assert [o.name for o in it.ops] == ["dense/Relu", "loss/Mean"]
    relu = it.ops[0]
    assert relu.fused_ops == ("dense/MatMul", "dense/BiasAdd", "dense/Relu")
    assert [t.shape for t in relu.inputs] == [(4, 16), (16, 8), (8,)]
    assert relu.thread_id != it.ops[1].thread_id and relu.thread_id not in (555, 100)
    # an eager op is its whole dispatch (EagerLocalExecute), anchored on the raw clock
    assert [(o.name, o.start_ns, o.end_ns) for o in chunk.single_ops] == [
        ("MatMul", base + 15, base + 45), ("Sub", base + 605, base + 615)]
    assert chunk.single_ops[0].thread_id == 555
    model = chunk.models[1]
    assert model.fp_op == "dense/Relu" and model.op_order["x"] == 1
    assert any("tf.data" in n for n in chunk.notes)

    # an unsampled execution of the same graph replays the sampled schedule
    rec2 = ExecRecord(seq=8, kind="tf2", name="train_step", fn_name="train_step",
                      model_key="__inference_train_step_12", static_key="__inference_train_step_12",
                      start_ns=10_000_000, end_ns=10_001_600, thread_id=555)
    chunk2 = convert(None, [rec2], state, registry, fallback_offset_ns=0)
    (it2,) = chunk2.iterations
    assert it2.replayed and it2.index == 2 and it2.model_id == 1
    # the replayed ops are the sampled schedule itself (the device lays it out in columns)
    assert it2.ops == [] and it2.schedule is state.schedules["__inference_train_step_12"]
    assert [o.name for o in it2.op_runs()] == ["dense/Relu", "loss/Mean"]
    assert all(rec2.start_ns <= o.start_ns <= o.end_ns <= rec2.end_ns for o in it2.op_runs())


def test_resolve_fused_chain_handles_missing_graph() -> None:
    assert resolve(None, "x", "MatMul", {}) is None
    g = StaticGraph()
    g.add("a", StaticOp("Relu", (), (), ()))
    assert resolve(g, "a", "_MklNativeFusedMatMul", {}).fused_ops == ()  # no base op found


def test_post_import_hook(tmp_path: Path) -> None:
    (tmp_path / "watched_mod_xyz.py").write_text("VALUE = 1\n")
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        from msprof_cli.collect.import_hook import when_imported
        seen = []
        when_imported("watched_mod_xyz", lambda m: seen.append(m.VALUE))
        import watched_mod_xyz
        print(seen, type(watched_mod_xyz.__loader__).__name__)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout
    assert out.split() == ["[1]", "SourceFileLoader"]


# --- multi-device (MirroredStrategy replicas) -------------------------------------------------
def test_device_index_and_replica_scope() -> None:
    from msprof_cli.collect.tf_graphs import device_index, replica_of_name

    assert device_index("/job:localhost/replica:0/task:0/device:CPU:1") == 1
    assert device_index("/device:CPU:0") == 0
    assert device_index("") == -1 and device_index("/job:localhost") == -1
    assert replica_of_name("StatefulPartitionedCall/replica_3/dense/MatMul") == 3
    assert replica_of_name("StatefulPartitionedCall/gradient_tape/replica_1/x") == 1
    assert replica_of_name("StatefulPartitionedCall/dense/MatMul") == -1
    assert replica_of_name("my_replica_1/x") == -1


def test_replica_counterpart() -> None:
    from msprof_cli.device.step_trace import replica_counterpart

    names = {"S/replica_1/m/conv/Relu", "S/gradient_tape/replica_1/m/dense/BiasAddGrad"}
    assert replica_counterpart("S/m/conv/Relu", names) == "S/replica_1/m/conv/Relu"
    assert replica_counterpart("S/gradient_tape/m/dense/BiasAddGrad", names) == \
        "S/gradient_tape/replica_1/m/dense/BiasAddGrad"
    assert replica_counterpart("S/m/other", names) is None
    assert replica_counterpart(None, names) is None


def test_split_steps_by_loop_iteration() -> None:
    from msprof_cli.capture import OpRun
    from msprof_cli.collect.convert import split_steps

    def op(name: str, t: int) -> OpRun:
        return OpRun(name=name, tf_type="X", start_ns=t, end_ns=t + 5, thread_id=1)

    setup = op("OptionalGetValue", 0)  # outside the loop: by time
    a0, a1 = op("while/body/_1/m/conv", 10), op("while/body/_1/m/conv", 50)
    inner = op("while/body/_1/m/lstm/while/body/_3/mm", 60)  # nested loop: by time
    late0 = op("while/body/_1/m/grad", 55)  # iteration 0 finishing after step 1 began
    iter_of = {id(a0): 0, id(a1): 1, id(inner): 7, id(late0): 0}
    parts = split_steps([setup, a0, a1, late0, inner], iter_of, 0, 100)
    assert [(s, e) for s, e, _ in parts] == [(0, 50), (50, 100)]
    assert [o.name for o in parts[0][2]] == ["OptionalGetValue", "while/body/_1/m/conv",
                                            "while/body/_1/m/grad"]
    assert [o.start_ns for o in parts[1][2]] == [50, 60]
    # no loop iterations seen: one step
    assert len(split_steps([setup], {}, 0, 100)) == 1


def test_lowered_control_flow_names() -> None:
    from msprof_cli.collect.tf_graphs import lowered_name

    assert lowered_name("while/body/_1/while/cond/then/_87/while/cond/S/conv/Relu") == \
        "while/body/while/cond/then/while/cond/S/conv/Relu"
    assert lowered_name("S/dense/MatMul") == "S/dense/MatMul"


def test_sampled_chunks_are_converted_on_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sampled tracing restarts the tracer every few steps; the chunk age must still count
    from the last conversion, else parked samples pile up until exit (memory, SIGKILL loss)."""
    import time as _time

    from msprof_cli.collect import collection as C

    coll = C.Collection.__new__(C.Collection)
    coll.tracer, coll.records, coll.deferred = None, [], [(b"x", [], 1)]
    coll.pending_steps, coll.events_per_step, coll.steps_in_chunk = 5, 0.0, 0
    coll.chunk_started = _time.monotonic()  # the tracer just restarted for a sample
    coll.converted_at = _time.monotonic() - C.FLUSH_SECONDS - 1
    assert coll.due()
    coll.converted_at = _time.monotonic()
    assert not coll.due()
    coll.pending_steps = C.FLUSH_RECORDS
    assert coll.due()


def test_missing_collective_of_a_replica_is_restored_from_the_graph() -> None:
    from msprof_cli.capture import OpRun, TensorSpec
    from msprof_cli.collect.collectives import restore_collectives
    from msprof_cli.collect.converter_state import ConverterState
    from msprof_cli.collect.tf_graphs import StaticGraph, StaticOp

    spec = (TensorSpec((10,), "float32"),)
    static = StaticGraph()
    static.add("S/sgd/CollectiveReduceV2", StaticOp("CollectiveReduceV2", spec, spec, (), (), 0))
    static.add("S/sgd/CollectiveReduceV2_1",
               StaticOp("CollectiveReduceV2", spec, spec, (), (), 1))
    static.add("S/other/CollectiveReduceV2", StaticOp("CollectiveReduceV2", spec, spec, (), (), 0))
    ops = [OpRun("S/sgd/CollectiveReduceV2", "CollectiveReduceV2", 100, 150, 7),
           OpRun("S/dense/MatMul", "MatMul", 10, 20, 8)]
    assert restore_collectives(ops, static, ConverterState(), "k") == 1
    added = ops[-1]
    assert (added.name, added.device_id, added.start_ns, added.end_ns) == (
        "S/sgd/CollectiveReduceV2_1", 1, 100, 150)
    assert added.outputs == spec
    # nothing observed in the step: nothing to anchor the timing on, nothing restored
    assert restore_collectives([OpRun("a", "MatMul", 1, 2, 1)], static, ConverterState(),
                               "k") == 0


def test_swallowed_sigterm_exit_is_raised_again_at_the_next_step(monkeypatch) -> None:
    from msprof_cli.collect import agent as agent_mod

    monkeypatch.setattr(agent_mod, "_exit_requested", None)
    try:
        agent_mod._on_exit_signal(15, None)
    except SystemExit as exc:  # what a library's `except BaseException` would swallow
        assert exc.code == 143
    with pytest.raises(SystemExit) as again:
        agent_mod.Agent().step_begin("keras", "m", "f", None, None)
    assert again.value.code == 143


def test_sigterm_during_a_step_exits_at_the_step_boundary(monkeypatch) -> None:
    # raised mid-step, SystemExit can land inside TF's context managers (autograph's ag_ctx
    # asserted and turned the exit into an AssertionError): it must wait for the step's end
    from msprof_cli.collect import agent as agent_mod

    monkeypatch.setattr(agent_mod, "_exit_requested", None)
    monkeypatch.setattr(agent_mod, "_SIGTERM_GRACE_S", 3600.0)
    agent = agent_mod.Agent()
    monkeypatch.setattr(agent_mod, "AGENT", agent)
    agent.main_steps = 1  # inside a step on the main thread
    agent_mod._on_exit_signal(15, None)  # recorded, not raised
    agent.exit_point()  # a nested call's end: the outer step is still open
    agent.main_steps = 0
    with pytest.raises(SystemExit) as exc:
        agent.exit_point()
    assert exc.value.code == 143


def test_sigint_during_a_step_interrupts_at_the_step_boundary(monkeypatch) -> None:
    from msprof_cli.collect import agent as agent_mod

    monkeypatch.setattr(agent_mod, "_exit_requested", None)
    agent = agent_mod.Agent()
    monkeypatch.setattr(agent_mod, "AGENT", agent)
    agent.main_steps = 1
    agent_mod._on_exit_signal(2, None)  # recorded, not raised
    with pytest.raises(KeyboardInterrupt):  # a second Ctrl-C acts at once
        agent_mod._on_exit_signal(2, None)
    agent.main_steps = 0
    with pytest.raises(KeyboardInterrupt):  # swallowed by a library: raised at the next step
        agent.step_begin("keras", "m", "f", None, None)


def test_collectives_all_dropped_in_a_step_are_restored() -> None:
    """TF's tracer dropped every replica's collective of a step (CI: a step without its
    AllReduce): they come back at their place in the last schedule, else just before the
    first observed op of their scope."""
    from msprof_cli.capture import OpRun, TensorSpec
    from msprof_cli.collect.collectives import restore_collectives
    from msprof_cli.collect.converter_state import ConverterState, Schedule
    from msprof_cli.collect.tf_graphs import StaticGraph, StaticOp

    spec = (TensorSpec((10,), "float32"),)
    static = StaticGraph()
    static.add("S/sgd/CollectiveReduceV2", StaticOp("CollectiveReduceV2", spec, spec, (), (), 0))
    static.add("S/sgd/CollectiveReduceV2_1",
               StaticOp("CollectiveReduceV2", spec, spec, (), (), 1))

    def step() -> list:
        return [OpRun("S/dense/MatMul", "MatMul", 1010, 1020, 8),
                OpRun("S/sgd/Apply", "AssignSubVariableOp", 1100, 1110, 8)]

    # no earlier schedule: between the last op before the scope's first op and that op
    ops = step()
    assert restore_collectives(ops, static, ConverterState(), "k", (1000, 1200)) == 2
    got = {o.name: (o.start_ns, o.end_ns, o.device_id) for o in ops[2:]}
    assert got == {"S/sgd/CollectiveReduceV2": (1020, 1100, 0),
                   "S/sgd/CollectiveReduceV2_1": (1020, 1100, 1)}
    # with the model's last schedule (step of 100 ns, collectives at 40-60): scaled to this
    # step of 200 ns
    state = ConverterState()
    state.schedules["k"] = Schedule(100, [
        ("S/sgd/CollectiveReduceV2", "CollectiveReduceV2", 40, 60, 7, (), (), (), 0),
        ("S/sgd/CollectiveReduceV2_1", "CollectiveReduceV2", 41, 60, 7, (), (), (), 1)])
    ops = step()
    assert restore_collectives(ops, static, state, "k", (1000, 1200)) == 2
    got = {o.name: (o.start_ns, o.end_ns) for o in ops[2:]}
    assert got == {"S/sgd/CollectiveReduceV2": (1080, 1120),
                   "S/sgd/CollectiveReduceV2_1": (1082, 1120)}


def test_tracer_dropped_recognises_a_sample_missing_its_cheap_kernels():
    from msprof_cli.collect.converter_state import Schedule
    from msprof_cli.collect.replay import tracer_dropped

    def op(name: str) -> OpRun:
        return OpRun(name, "Mul", 0, 1, 1)

    full = Schedule(100, [(f"n{i}", "Mul", 0, 1, 1, (), (), (), 0, False) for i in range(20)])
    assert tracer_dropped([op(f"n{i}") for i in range(5)], full)  # a subset, 75 % gone
    assert not tracer_dropped([op(f"n{i}") for i in range(19)], full)  # 5 % gone: a branch
    assert not tracer_dropped([op("n1"), op("other")], full)  # other code ran
    assert not tracer_dropped([op("n1")], None) and not tracer_dropped([], full)


def test_a_signal_in_a_finalizer_is_delivered_again_outside_it() -> None:
    """Python drops an exception raised in a weakref callback or __del__ ("Exception ignored
    in ..."): the exit signal handler recognises such a frame (and re-delivers the signal
    a moment later, collect/agent.py) instead of raising there."""
    import sys
    import weakref

    from msprof_cli.collect.agent import _in_finalizer

    seen = []

    class Owner:
        def __del__(self) -> None:
            seen.append(_in_finalizer(sys._getframe()))

    class Target:
        pass

    target = Target()
    ref = weakref.WeakValueDictionary({"k": target})  # its callback runs in weakref.py
    del target
    Owner()  # collected at once: __del__ runs
    assert seen == [True]
    assert not _in_finalizer(sys._getframe())
    assert len(ref) == 0


def test_a_signal_inside_framework_code_is_delivered_again_outside_it(tmp_path: Path) -> None:
    """An exit signal that interrupts TensorFlow's or Keras' own code outside a step (a
    tf.function being traced, a C++ error being wrapped) is not raised there: the handler
    recognises such a frame by its file (collect/agent.py) and re-delivers the signal."""
    import importlib.util
    import sys

    from msprof_cli.collect.agent import _in_framework

    pkg = tmp_path / "framework"
    pkg.mkdir()
    (pkg / "inner.py").write_text("import sys\n\ndef where():\n    return sys._getframe()\n")
    spec = importlib.util.spec_from_file_location("framework_inner", pkg / "inner.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    dirs = (str(pkg) + "/",)
    assert _in_framework(module.where(), dirs)
    assert not _in_framework(sys._getframe(), dirs)
    assert not _in_framework(None, dirs)
    assert not _in_framework(module.where(), ())  # no framework imported
