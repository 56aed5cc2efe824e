"""Cross-stream dependencies of the emulated device (device/dependencies.py, scheduler.run_coupled,
docs/device-model.md 5 "Dependencies")."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from test_device_records import T0, config, make_iteration, run

from msprof_cli.capture import CaptureChunk, ModelInfo
from msprof_cli.capture import TensorSpec as T
from msprof_cli.device import dependencies as DEP
from msprof_cli.device import readback as R
from msprof_cli.device import scheduler as S
from msprof_cli.raw import layouts as L

F = "float32"


# --- name level ----------------------------------------------------------------------------

def test_producers_are_looked_through_ops_without_a_task() -> None:
    prods = {"read": ("var",), "mm": ("read", "x"), "id": ("mm",), "relu": ("id",),
             "loss": ("relu", "mm")}
    launched = {"x", "mm", "relu", "loss"}
    order = {n: i for i, n in enumerate(["var", "x", "read", "mm", "id", "relu", "loss"])}
    got = DEP.launched_producers(prods, launched, order)
    assert got == {"x": (), "mm": ("x",), "relu": ("mm",), "loss": ("relu", "mm")}


def test_a_back_edge_does_not_loop_forever() -> None:
    # a TF1 loop: merge <- next_iteration <- body <- merge
    prods = {"merge": ("enter", "next"), "body": ("merge",), "next": ("body",)}
    got = DEP.launched_producers(prods, {"body"}, {"enter": 0, "merge": 1, "body": 2, "next": 3})
    assert got == {"body": ()}


def test_fan_in_is_capped() -> None:
    n = DEP.MAX_PRODUCERS + 50
    prods = {"concat": tuple(f"p{i}" for i in range(n))}
    got = DEP.launched_producers(prods, {f"p{i}" for i in range(n)} | {"concat"}, {})
    assert len(got["concat"]) == DEP.MAX_PRODUCERS


# --- row level -----------------------------------------------------------------------------

def _tables(prods: dict[str, tuple[str, ...]], names: list[str], launched: list[str],
            chains: dict[int, tuple[int, ...]] | None = None) -> DEP.ModelEdges:
    idx = {n: i for i, n in enumerate(names)}
    return DEP.DependencyTables().model_edges(
        1, prods, {n: i for i, n in enumerate(names)}, np.array(sorted(idx[n] for n in launched)),
        chains or {}, names, idx.get)


def test_a_loop_consumer_waits_for_the_latest_execution_before_it() -> None:
    names = ["gen", "use"]
    tab = _tables({"use": ("gen",)}, names, names)
    # one iteration: gen, use, gen, use (a loop body run twice); row = launch order
    name_idx = np.array([0, 1, 0, 1])
    rows = np.arange(4)
    cons, prod, known = DEP.row_edges(rows, np.zeros(4, np.int64), name_idx, np.arange(4),
                                      np.ones(4, np.int64), {1: tab}, {})
    assert known.all()
    assert dict(zip(cons.tolist(), prod.tolist())) == {1: 0, 3: 2}


def test_a_producer_fused_into_a_chain_is_the_fused_kernel() -> None:
    names = ["a", "b", "ab", "c"]  # a -> b fused into "ab"; c consumes b
    tab = _tables({"b": ("a",), "c": ("b",)}, names, ["ab", "c"], chains={2: (0, 1)})
    name_idx = np.array([2, 3])
    cons, prod, known = DEP.row_edges(np.arange(2), np.zeros(2, np.int64), name_idx,
                                      np.arange(2), np.ones(2, np.int64), {1: tab}, {0: 2, 1: 2})
    assert known.all() and cons.tolist() == [1] and prod.tolist() == [0]


def test_ops_the_graph_does_not_describe_wait_for_every_other_stream() -> None:
    stream = np.array([2, 3, 2, 3, 2])
    rows = np.arange(5)
    cons, prod = DEP.previous_on_streams(rows, stream, np.arange(5), np.array([2, 3, 4]))
    assert sorted(zip(cons.tolist(), prod.tolist())) == [(2, 1), (3, 2), (4, 3)]


# --- the coupled streams ---------------------------------------------------------------------

def _stream(sid: int, rows: list[int], ready: list[int], dur: list[int]) -> S.OrderedStream:
    plan = S.StreamPlan()
    plan.add(op_row=np.array(rows), order_ns=np.array(rows), sub=0, ready=np.array(ready),
             dur=np.array(dur), gap=S.TASK_GAP_TICKS, tag=-1, iter_row=0)
    return S.order(plan, sid)


def _state() -> S.DeviceState:
    return S.DeviceState(S.DeviceClock(0, 0, 10))


def test_run_coupled_settles_a_chain_that_crosses_streams_several_times() -> None:
    # rows 0, 2, 4 on the AI CPU stream, 1, 3, 5 on the compute stream; each consumes the
    # one before it: a chain of five cross-stream hops
    aicpu = _stream(3, [0, 2, 4], [0, 0, 0], [1000, 1000, 1000])
    comp = _stream(2, [1, 3, 5], [0, 0, 0], [10, 10, 10])
    c = S.Coupling(6, 1, np.array([1, 2, 3, 4, 5]), np.array([0, 1, 2, 3, 4]))
    out, rounds = S.run_coupled([aicpu, comp], _state(), c)
    a, k = out[3], out[2]
    w = S.EVENT_WAIT_TICKS
    assert a.start[0] == 0 and k.start[0] == a.end[0] + w
    assert a.start[1] == k.end[0] + w and k.start[1] == a.end[1] + w
    assert a.start[2] == k.end[1] + w and k.start[2] == a.end[2] + w
    assert rounds >= 3
    # a brute force event simulation gives the same ends
    end = {}
    free = {2: S.NEVER, 3: S.NEVER}
    for row, sid, dur in [(0, 3, 1000), (1, 2, 10), (2, 3, 1000), (3, 2, 10), (4, 3, 1000),
                          (5, 2, 10)]:
        ready = end[row - 1] + w if row else 0
        st = max(ready, free[sid] + S.TASK_GAP_TICKS)
        end[row] = free[sid] = st + dur
    assert a.end.tolist() == [end[0], end[2], end[4]]
    assert k.end.tolist() == [end[1], end[3], end[5]]


def test_independent_streams_overlap() -> None:
    aicpu = _stream(3, [0], [0], [1000])
    comp = _stream(2, [1, 2], [0, 0], [10, 10])
    out, rounds = S.run_coupled([aicpu, comp], _state(),
                                S.Coupling(3, 1, np.zeros(0, np.int64), np.zeros(0, np.int64)))
    assert out[2].end[-1] < out[3].end[0] and rounds == 2


# --- the device ---------------------------------------------------------------------------

def test_an_ai_core_task_waits_for_its_ai_cpu_producer(tmp_path: Path) -> None:
    """Dropout in a graph: the mask (AI CPU) feeds the compare (AI Core); an unrelated AI Core
    op launched between them does not wait."""
    x = T((32, 512), F)
    ops = [("dense/MatMul", "_MklMatMul", (T((32, 256), F), T((256, 512), F)), (x,), ()),
           ("dropout/uniform", "StatelessRandomUniformV2", (T((2,), "int32"),), (x,), ()),
           ("dense/Relu", "Relu", (x,), (x,), ()),
           ("dropout/GreaterEqual", "GreaterEqual", (x, T((), F)), (T((32, 512), "bool"),), ())]
    prods = {"dense/Relu": ("dense/MatMul",), "dropout/GreaterEqual": ("dropout/uniform",)}
    it = make_iteration(1, 1, T0, ops=ops, spacing=1_000)
    info = {1: ModelInfo(1, "m", "__inference_train_1", op_order={o[0]: i for i, o in
                                                                  enumerate(ops)},
                         producers=prods)}
    prof = run(tmp_path, [CaptureChunk(models=info, iterations=[it])], config())
    hw = R.device_records(prof, "hwts", 0)
    st, en = hw[(hw["flags"] & 7) == 0], hw[(hw["flags"] & 7) == 1]
    tt = R.device_records(prof, "ts_track", 0)
    cpu = tt[tt["rpt_type"] == L.TS_RPT_TASK_TYPE].view(L.TS_TRACK_TASK_TYPE)
    cpu_end = int(cpu["timestamp"][cpu["task_state"] == L.TS_STATE_END].max())
    starts = np.sort(st["syscnt"].astype(np.int64))
    ends = np.sort(en["syscnt"].astype(np.int64))
    assert len(starts) == 3
    # MatMul and Relu run before the mask ends; GreaterEqual starts after it
    assert ends[1] < cpu_end
    assert starts[2] >= cpu_end + S.EVENT_WAIT_TICKS


# --- ranks of a job (device/rank_coupling.py) ----------------------------------------------

def test_ranks_wait_for_the_last_arrival_at_each_collective() -> None:
    from msprof_cli.device import rank_coupling as RC

    # rank 0 reaches its collectives at 0, 10, 20; rank 1 (slow input) at 5, 30, 55
    w, k = RC.shifts([np.array([0, 10, 20]), np.array([5, 30, 55])])
    assert k == 3
    # begin of each collective: 5, 5 + max(10, 25) = 30, 30 + max(10, 25) = 55
    assert w.tolist() == [[5, 20, 35], [0, 0, 0]]
    # a rank that ran fewer collectives (it died): only the common ones are aligned
    w, k = RC.shifts([np.array([0, 10, 20]), np.array([5])])
    assert k == 1 and w.tolist() == [[5], [0]]
    # times move by the wait of the collectives that ended at or before them
    ends = np.array([2, 12, 22])
    assert RC.shift_ns(np.array([1, 2, 3, 12, 30]), ends, np.array([5, 20, 35])).tolist() == \
        [0, 5, 5, 20, 35]


def test_a_task_moves_as_a_whole_except_the_collective_that_waits() -> None:
    from msprof_cli.device import rank_coupling as RC

    # a compute task (key 1) runs across the collective's end (ns 100): its end keeps its
    # start's shift; the collective (key 2) ends at 100 and absorbs the wait
    ns = np.array([90, 110, 95, 100])
    key = np.array([1, 1, 2, 2])
    start = np.array([True, False, True, False])
    sh = RC.shift_ns(ns, np.array([100]), np.array([50]))
    assert sh.tolist() == [0, 50, 0, 50]
    out = RC.whole_tasks(sh, ns, np.array([100]), key, start, ~start)
    assert out.tolist() == [0, 0, 0, 50]
