"""Step hooks: the three monkey-patches that mark graph executions
(docs/formats/tensorflow-capture.md 6).

* `Function.__call__` (tf.function): a top-level eager call is one execution of the
  concrete function it runs; when the call (re)traced, the concrete graph is walked once
  for static shapes (tf_graphs.py) and its `__inference_*` name becomes the graph key.
* `BaseSession.run` (TF1): one execution per run; graph key = graph id + fetch signature;
  the graph is walked again whenever it grew.  `BaseSession.__init__` also watches the
  session config for the NpuOptimizer `profiling_mode` switch (docs/formats/options.md 1).
* Keras 3 `TensorFlowTrainer.make_train_function`: wraps `train_function` so each call is
  one training step named after the model.
Only depth-0 calls are executions: nested calls (a tf.function called while another runs
eagerly, e.g. Keras' variable initialisation) belong to the enclosing one.
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the agent imports this module when TensorFlow arrives: no import cycle
    from msprof_cli.collect.agent import Agent

_local = threading.local()
KERAS_TAG = "_msprof_wrapped"


def _depth() -> int:
    return getattr(_local, "depth", 0)


def install_watch_hooks(agent: Agent) -> None:
    """What must watch a process that does not profile yet: a session config that turns
    profiling on (routes.on_session_config).  Nothing else of ours is on the script's call
    path until a route activates (`install_tf_hooks`)."""
    try:
        from tensorflow.python.client import session as tf_session
    except ImportError:
        return
    _patch_session_init(agent, tf_session.BaseSession)


def install_tf_hooks(agent: Agent) -> None:
    """The step hooks: every tf.function call and Session.run (installed when profiling
    starts)."""
    from tensorflow.python.eager.polymorphic_function import polymorphic_function as pf

    _patch_function_call(agent, pf.Function)
    try:
        from tensorflow.python.client import session as tf_session
    except ImportError:
        return
    _patch_session_init(agent, tf_session.BaseSession)
    _patch_session_run(agent, tf_session.BaseSession)


# -- tf.function ------------------------------------------------------------------------
def _patch_function_call(agent: Agent, cls: Any) -> None:
    if getattr(cls.__call__, KERAS_TAG, False):
        return
    original = cls.__call__
    from tensorflow.python.eager import context

    def __call__(self: Any, *args: Any, **kwds: Any) -> Any:
        if agent.collection is None or not context.executing_eagerly():
            return original(self, *args, **kwds)
        current = getattr(_local, "current", None)
        if _depth() > 0:
            if current is not None and current.fn_name == "" and current.kind == "keras":
                # the Keras train_function itself: adopt its graph identity
                return _observed_call(agent, original, self, args, kwds, current)
            return original(self, *args, **kwds)
        name = getattr(self, "_name", "function")
        key = getattr(self, "_msprof_graph_key", None)
        token = agent.step_begin("tf2", name, name, key, key)
        if token is None:
            return original(self, *args, **kwds)
        _local.depth = 1
        _local.current = token[0]
        try:
            return _observed_call(agent, original, self, args, kwds, token[0])
        finally:
            _local.depth = 0
            _local.current = None
            agent.step_end(token)
            agent.exit_point()

    setattr(__call__, KERAS_TAG, True)
    cls.__call__ = __call__


MAX_SIGNATURES = 64  # input signatures remembered per tf.function


def _input_signature(args: tuple, kwds: dict) -> tuple | None:
    """The shapes and dtypes of a call's tensor arguments: which concrete function (graph) of
    a tf.function the call runs (None: not a plain nest of tensors and values)."""
    try:
        import tensorflow as tf

        out = []
        for x in tf.nest.flatten((args, kwds), expand_composites=True):
            shape, dtype = getattr(x, "shape", None), getattr(x, "dtype", None)
            out.append((tuple(shape.as_list()) if shape is not None and shape.rank is not None
                        else None, str(dtype)) if dtype is not None else
                       (type(x).__name__, x if isinstance(x, (int, float, bool, str)) else None))
        return tuple(out)
    except Exception:
        return None


def _observed_call(agent: Agent, original: Any, fn: Any, args: tuple, kwds: dict,
                   rec: Any) -> Any:
    # a tf.function has one graph per input signature: the graph this call runs is the one
    # its signature ran before; a signature not seen yet is traced from here (sampling could
    # not know it: replaying another graph's schedule would misplace the step)
    sig = _input_signature(args, kwds)
    keys = fn.__dict__.setdefault("_msprof_signature_keys", {}) if sig is not None else {}
    if len(keys) >= MAX_SIGNATURES:  # shapes that change every call: sampling as before
        sig = None
    known = keys.get(sig) if sig is not None else None
    if known is None and sig is not None and not rec.profiled:
        agent.trace_now(rec)
    before = fn.experimental_get_tracing_count()
    optimized = None
    if known is None:  # a graph this call may instantiate: ask for Grappler's result
        optimized, result = _with_function_graphs(lambda: original(fn, *args, **kwds))
    else:
        result = original(fn, *args, **kwds)
    try:
        retraced = fn.experimental_get_tracing_count() != before
        rec.fn_name = getattr(fn, "_name", "") if rec.kind != "tf2" else rec.fn_name
        if known is not None and not retraced:
            rec.model_key = rec.static_key = known
            return result
        if retraced or getattr(fn, "_msprof_graph_key", None) is None or sig is not None:
            rec.traced_now = retraced
            if getattr(fn, "_jit_compile", None):
                # XLA runs the cluster as compiled thunks: TF's host tracer reports no TF op
                # events inside, so these steps reach the device without ops
                agent.warn_once(
                    f"tf.function {getattr(fn, '_name', '?')} is XLA-compiled "
                    "(jit_compile=True): TensorFlow's tracer does not report the ops of the "
                    "compiled cluster, so msprof_cli emulates the function's graph ops (as GE "
                    "compiles the TF graph) without their measured host times. Profile with "
                    "jit_compile=False to trace the ops themselves.")
            concrete = fn.get_concrete_function(*args, **kwds)  # cache hit: no retrace
            key = _concrete_key(concrete)
            if key not in agent.registry.graphs:
                from msprof_cli.collect.tf_graphs import walk_graph
                from msprof_cli.collect.tf_variables import graph_variables

                agent.registry.graphs[key] = walk_graph(concrete.graph)
                agent.registry.graphs[key].variables = graph_variables(concrete.graph)
                if optimized:
                    from msprof_cli.collect.runtime_graph import add_runtime_nodes

                    add_runtime_nodes(agent.registry.graphs[key], optimized, {}, {})
            fn._msprof_graph_key = key
            if sig is not None:
                keys[sig] = key
        rec.model_key = rec.static_key = fn._msprof_graph_key
    except Exception as exc:
        agent.fail(f"the graph of tf.function {getattr(fn, '_name', '?')} could not be read "
                   f"({exc!r}): its ops have no shapes", exc)
    return result


def _with_function_graphs(call: Any) -> tuple[list[Any] | None, Any]:
    """Run `call` with TF's run metadata and graph collection on: the optimized graphs of the
    functions it instantiated (collect/runtime_graph.py), and its result.  TF has no getter
    for whether the script turned run metadata on itself; our own flag keeps a nested call
    from turning it off early."""
    from tensorflow.python.eager import context

    ctx = context.context()
    if getattr(ctx, "_run_metadata_enabled_by_msprof", False):
        return None, call()
    try:
        ctx.enable_run_metadata()
        ctx.enable_graph_collection()
        ctx._run_metadata_enabled_by_msprof = True
    except Exception:
        return None, call()
    graphs = None
    try:
        result = call()
    finally:
        try:
            md = ctx.export_run_metadata()
            graphs = [fg.post_optimization_graph for fg in md.function_graphs] if md else None
        except Exception:
            graphs = None
        finally:
            ctx.disable_graph_collection()
            ctx.disable_run_metadata()
            ctx._run_metadata_enabled_by_msprof = False
    return graphs, result


def _concrete_key(concrete: Any) -> str:
    name = concrete.name
    return name.decode() if isinstance(name, bytes) else str(name)


# -- TF1 sessions -------------------------------------------------------------------------
def fetch_signature(fetches: Any) -> str:
    """Stable text of what a `Session.run` fetches (op and tensor names)."""
    out: list[str] = []

    def visit(f: Any, depth: int = 0) -> None:
        if depth > 4 or len(out) > 64:
            return
        if isinstance(f, (list, tuple)):
            for x in f:
                visit(x, depth + 1)
        elif isinstance(f, dict):
            for k in sorted(f, key=str):
                visit(f[k], depth + 1)
        else:
            out.append(getattr(f, "name", None) or str(f))

    visit(fetches)
    return ",".join(out)


_shape_runs: set[str] = set()


def _full_trace_options() -> tuple[Any, Any] | None:
    try:
        from tensorflow.core.protobuf import config_pb2

        # the partition graphs: the graph as it ran, Grappler's nodes included
        # (collect/runtime_graph.py)
        return (config_pb2.RunOptions(trace_level=config_pb2.RunOptions.FULL_TRACE,
                                      output_partition_graphs=True),
                config_pb2.RunMetadata())
    except Exception:
        return None


def _apply_step_stats(agent: Agent, static_key: str, run_metadata: Any, feed_dict: Any
                      ) -> None:
    try:
        import numpy as np

        from msprof_cli.collect.runtime_graph import (add_runtime_nodes,
                                                      runtime_dtypes_from_step_stats)
        from msprof_cli.collect.tf_graphs import (apply_runtime_shapes,
                                                  runtime_shapes_from_step_stats)

        graph = agent.registry.graphs.get(static_key)
        if graph is None:
            return
        runtime = runtime_shapes_from_step_stats(run_metadata.step_stats)
        # fed tensors (placeholders) are not in step_stats: their shapes are the feeds'
        for key, value in (feed_dict or {}).items():
            op = getattr(key, "op", None)
            if op is not None and hasattr(key, "value_index"):
                runtime.setdefault(op.name, {})[key.value_index] = tuple(np.shape(value))
        add_runtime_nodes(graph, run_metadata.partition_graphs, runtime,
                          runtime_dtypes_from_step_stats(run_metadata.step_stats))
        apply_runtime_shapes(graph, runtime)
    except Exception as exc:
        agent.fail(f"runtime shapes could not be read ({exc!r}): unknown dims stay -1", exc)


def _patch_session_run(agent: Agent, cls: Any) -> None:
    if getattr(cls.run, KERAS_TAG, False):
        return
    original_run = cls.run

    def run(self: Any, fetches: Any, feed_dict: Any = None, options: Any = None,
            run_metadata: Any = None) -> Any:
        if agent.collection is None or _depth() > 0:
            return original_run(self, fetches, feed_dict, options, run_metadata)
        token = None
        try:
            graph = self.graph
            sig = fetch_signature(fetches)
            static_key = f"tf1:{id(graph)}"
            model_key = f"{static_key}:{sig}"
            version = graph.version
            if agent.registry.graphs.get(static_key) is None or \
                    getattr(graph, "_msprof_version", None) != version:
                from msprof_cli.collect.tf_graphs import walk_graph
                from msprof_cli.collect.tf_variables import graph_variables

                agent.registry.graphs[static_key] = walk_graph(graph)
                agent.registry.graphs[static_key].variables = graph_variables(graph)
                graph._msprof_version = version
            name = sig if len(sig) <= 80 else sig[:77] + "..."
            shape_run = options is None and run_metadata is None and \
                model_key not in _shape_runs and agent.was_traced(model_key)
            token = agent.step_begin("tf1", name, "", model_key, static_key,
                                     untraced=shape_run)
        except Exception as exc:
            agent.fail(f"a Session.run could not be recorded ({exc!r})", exc)
        if token is None:
            return original_run(self, fetches, feed_dict, options, run_metadata)
        full_trace = None
        if shape_run:
            # the second run of a fetch signature goes once under FULL_TRACE: runtime shapes
            # for the dims the graph leaves unknown (docs/formats/tensorflow-capture.md 5; never on
            # every
            # step: +41-47%).  The tracer is paused for it (one profiler per process), so
            # this step replays the schedule of the first run.
            _shape_runs.add(model_key)
            full_trace = _full_trace_options()
        _local.depth = 1
        try:
            if full_trace is not None:
                try:
                    return original_run(self, fetches, feed_dict, *full_trace)
                except Exception as exc:
                    if type(exc).__name__ != "AlreadyExistsError":
                        raise
                    full_trace = None  # the user's own profiler holds the slot: run plainly
            return original_run(self, fetches, feed_dict, options, run_metadata)
        finally:
            _local.depth = 0
            agent.step_end(token)
            if full_trace is not None:
                _apply_step_stats(agent, static_key, full_trace[1], feed_dict)
            agent.exit_point()

    setattr(run, KERAS_TAG, True)
    cls.run = run


def _patch_session_init(agent: Agent, cls: Any) -> None:
    if getattr(cls.__init__, KERAS_TAG, False):
        return
    original_init = cls.__init__

    def __init__(self: Any, target: Any = "", graph: Any = None, config: Any = None) -> None:
        original_init(self, target, graph, config)
        try:
            from msprof_cli.collect import routes

            routes.on_session_config(agent, config)
        except Exception as exc:
            agent.fail(f"the session config could not be read ({exc!r})", exc)

    setattr(__init__, KERAS_TAG, True)
    cls.__init__ = __init__


# -- Keras 3 ------------------------------------------------------------------------------
# Keras 3 builds one function per mode; each is its own graph, so its own model.  Training
# keeps the Keras model name; evaluation (fit's validation_data, evaluate) and predict get a
# suffix so the models are told apart in graph_id_map / model names (project choice).
KERAS_MODES = (("make_train_function", "train_function", ""),
               ("make_test_function", "test_function", "_eval"),
               ("make_predict_function", "predict_function", "_predict"))


def install_keras_hooks(agent: Agent, trainer_module: Any) -> None:
    cls = trainer_module.TensorFlowTrainer
    for maker, attr, suffix in KERAS_MODES:
        original = getattr(cls, maker, None)
        if original is None or getattr(original, KERAS_TAG, False):
            continue
        setattr(cls, maker, _wrap_maker(agent, original, attr, suffix))


def _wrap_maker(agent: Agent, original: Any, attr: str, suffix: str) -> Any:
    def make_function(self: Any, force: bool = False) -> Any:
        result = original(self, force)
        fn = getattr(self, attr, None)
        if fn is not None and not getattr(fn, KERAS_TAG, False):
            setattr(self, attr, _wrap_step_function(agent, self, fn, suffix))
        return result if result is None else getattr(self, attr)

    setattr(make_function, KERAS_TAG, True)
    return make_function


def _optimizer_iterations(model: Any) -> int | None:
    """The optimizer's step counter (one eager variable read, ~30 us), or None."""
    try:
        return int(model.optimizer.iterations.numpy())
    except Exception:
        return None


def _wrap_step_function(agent: Agent, model: Any, fn: Any, suffix: str) -> Any:
    # Keras 3's train/test/predict function is a Python closure around the tf.function; the
    # graph key learnt on the first call is kept here so the sampling policy knows it up front
    last_key: list[str | None] = [None]
    train = suffix == ""

    def step_function(*args: Any, **kwds: Any) -> Any:
        if agent.collection is None or _depth() > 0:
            return fn(*args, **kwds)
        name = getattr(model, "name", "model") + suffix
        key = last_key[0]
        spe = _steps_per_execution(model)
        before = _optimizer_iterations(model) if train and spe > 1 else None
        token = agent.step_begin("keras", name, "", key, key)
        if token is None:
            return fn(*args, **kwds)
        rec = token[0]
        rec.is_train_step = train
        _local.depth = 1
        _local.current = rec
        try:
            return fn(*args, **kwds)
        finally:
            _local.depth = 0
            _local.current = None
            last_key[0] = rec.model_key
            if spe > 1:
                # steps this call really ran: the optimizer's counter for training (the last
                # call of an epoch may run fewer); evaluation/predict: steps_per_execution
                after = _optimizer_iterations(model) if before is not None else None
                rec.sub_steps = max(1, min(spe, after - before)) if after is not None \
                    and before is not None else spe
            agent.step_end(token)
            agent.exit_point()

    setattr(step_function, KERAS_TAG, True)
    return step_function


def _steps_per_execution(model: Any) -> int:
    try:
        return max(1, int(getattr(model, "steps_per_execution", 1) or 1))
    except Exception:
        return 1
