"""Columnar replay (device/replay_columns.py): a replayed step carried as its sampled
schedule (`Iteration.schedule`) gives the same op rows, and the same raw files byte for
byte, as the same step carried as `OpRun` objects (`Iteration.op_runs()`)."""
from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

import numpy as np
from test_device_records import CLOCK, STEP_OPS, T0, config, make_chunk, make_iteration

from msprof_cli.capture import CaptureChunk, Iteration, OpRun, OpSchedule
from msprof_cli.capture import TensorSpec as T
from msprof_cli.device import Device
from msprof_cli.device.op_table import Interner, SignatureRegistry, build_tables
from msprof_cli.device.replay_columns import ReplayColumns, replay_times
from msprof_cli.raw.control import ClockPair


def schedule_of(it: Iteration) -> OpSchedule:
    """A traced step's schedule, as the converter records it (collect/replay.py)."""
    return OpSchedule(max(it.end_ns - it.start_ns, 1), tuple(
        (o.name, o.tf_type, o.start_ns - it.start_ns, o.end_ns - it.start_ns, o.thread_id,
         o.inputs, o.outputs, o.fused_ops, o.device_id, o.eager) for o in it.ops))


def replayed(sched: OpSchedule, model_id: int, index: int, start: int, end: int) -> Iteration:
    return Iteration(model_id, index, start, end, 4242, replayed=True, schedule=sched)


def materialised(chunk: CaptureChunk) -> CaptureChunk:
    """The same chunk with every replayed step's ops as objects."""
    return dataclasses.replace(chunk, iterations=[
        dataclasses.replace(it, ops=it.op_runs(), schedule=None, sampled_duration=it.sampled_ns())
        for it in chunk.iterations])


def test_replay_times_equal_op_runs_bit_for_bit() -> None:
    rng = np.random.default_rng(7)
    n = 500
    rel_s = rng.integers(-5_000, 40_000_000, n)
    rel_e = rel_s + rng.integers(-3_000, 9_000_000, n)  # some end before their start
    sched = OpSchedule(39_999_937, tuple(
        (f"op{i}", "Mul", int(s), int(e), 1, (), (), (), 0, False)
        for i, (s, e) in enumerate(zip(rel_s, rel_e))))
    starts = T0 + rng.integers(0, 10**12, 40)
    ends = starts + rng.integers(-10, 90_000_000, 40)  # odd scales, an empty span
    cols = ReplayColumns().of(sched, SignatureRegistry().intern, Interner())
    s, e = replay_times(sched, cols, starts, ends)
    want = [(o.start_ns, o.end_ns) for a, b in zip(starts.tolist(), ends.tolist())
            for o in sched.runs(a, b)]
    assert s.tolist() == [w[0] for w in want] and e.tolist() == [w[1] for w in want]


def mixed_chunk() -> CaptureChunk:
    """Traced steps, runs of replayed ones of two schedules, a traced step between them and
    single ops; two models; fused ops; a replica on device 1; an op ending before it starts."""
    chunk = make_chunk(2)
    first = chunk.iterations[0]
    first.ops += make_iteration(1, 1, first.start_ns, device_id=1).ops
    first.ops[3].end_ns = first.ops[3].start_ns - 10  # clamped to its start by the replay
    first.ops.append(OpRun("late/NewOp", "Relu", first.ops[-1].start_ns + 10,
                           first.ops[-1].end_ns, 77, (T((8, 16), "float32"),),
                           (T((8, 16), "float32"),), ("late/a", "late/b")))
    s1 = schedule_of(first)
    s2 = schedule_of(chunk.iterations[1])
    t = chunk.iterations[-1].end_ns + 100_000
    its = list(chunk.iterations)
    for k, (sched, dur) in enumerate([(s1, 1_000_003), (s1, 700_001), (s2, 2_500_000),
                                      (s1, 900_000), (s1, 0)]):
        its.append(replayed(sched, 1, len(its) + 1, t, t + dur))
        t += max(dur, 1) + 50_000
        if k == 2:  # a traced step of a second model between replayed runs
            tr = make_iteration(2, 1, t, ops=STEP_OPS[2:6])
            its.append(tr)
            t = tr.end_ns + 50_000
            its.append(replayed(schedule_of(tr), 2, 2, t, t + 333_333))
            t += 400_000
    single = [OpRun("MatMul", "MatMul", t, t + 5_000, 4242, (T((4, 4), "float32"),) * 2,
                    (T((4, 4), "float32"),), eager=True)]
    return dataclasses.replace(chunk, iterations=its, single_ops=single)


def test_build_tables_columnar_equals_objects() -> None:
    chunk = mixed_chunk()
    sigs_a, names_a = SignatureRegistry(), Interner()
    ops_a, iters_a = build_tables(chunk, sigs_a, names_a, ReplayColumns())
    sigs_b, names_b = SignatureRegistry(), Interner()
    ops_b, iters_b = build_tables(materialised(chunk), sigs_b, names_b)
    assert names_a.items == names_b.items and sigs_a.tf_type == sigs_b.tf_type
    for f in ("device_id", "model_id", "iter_row", "name_idx", "sig", "thread", "host_start",
              "host_end", "eager"):
        a, b = getattr(ops_a, f), getattr(ops_b, f)
        assert a.dtype == b.dtype and a.tolist() == b.tolist(), f
    fa = [ops_a.fused[i] if i >= 0 else None for i in ops_a.fused_idx.tolist()]
    fb = [ops_b.fused[i] if i >= 0 else None for i in ops_b.fused_idx.tolist()]
    assert fa == fb and any(fa)
    for f in ("model_id", "index", "start", "end", "thread", "input_wait", "agent_before"):
        assert getattr(iters_a, f).tolist() == getattr(iters_b, f).tolist(), f


def write(tmp: Path, chunks: list[CaptureChunk]) -> dict[str, bytes]:
    """Every file the device writes for `chunks` (one path each time: sample.json and
    info.json name the dir)."""
    prof = tmp / "PROF_000001_20250101120000123_ABCDEFGHIJKLMNOP"
    shutil.rmtree(prof, ignore_errors=True)
    dev = Device(prof, config(), clock=CLOCK, pid=4242, app=["python3", "train.py"])
    for c in chunks:
        dev.consume(c)
    dev.close(ClockPair(CLOCK.wall_us + 10_000_000, CLOCK.mono_ns + 10_000_000_000))
    # info.json has the machine's uptime in seconds, which may tick between two runs
    return {str(p.relative_to(prof)): re.sub(rb'"upTime": "\d+"', b"", p.read_bytes())
            for p in sorted(prof.rglob("*")) if p.is_file()}


def test_device_output_columnar_equals_objects_byte_for_byte(tmp_path: Path) -> None:
    chunk = mixed_chunk()
    sched = chunk.iterations[2].schedule
    t = chunk.single_ops[-1].end_ns + 1_000_000
    # a second chunk replays the first chunk's schedule (cached columns across chunks)
    later = CaptureChunk(models=chunk.models, iterations=[
        replayed(sched, 1, 20 + i, t + i * 2_000_000, t + i * 2_000_000 + 1_200_000)
        for i in range(3)])
    a = write(tmp_path, [chunk, later])
    b = write(tmp_path, [materialised(chunk), materialised(later)])
    assert a.keys() == b.keys() and len(a) > 10
    assert [k for k in a if a[k] != b[k]] == []


def test_replayed_step_first_of_its_model_resolves_fp_bp_from_its_schedule(tmp_path: Path
                                                                          ) -> None:
    """A model whose first step in a chunk is replayed still gets its FP/BP (the device
    builds the step's objects only for that)."""
    traced = make_chunk(1).iterations[0]
    it = replayed(schedule_of(traced), 1, 2, traced.end_ns + 10_000, traced.end_ns + 900_000)
    chunk = dataclasses.replace(make_chunk(1), iterations=[it])
    a = write(tmp_path, [chunk])
    b = write(tmp_path, [materialised(chunk)])
    assert a == b


# --- the flush's memory and GC patterns (host_pass.merge_by_key, collection.gc_paused) -----

def test_merge_by_key_equals_concatenate_then_stable_sort() -> None:
    from msprof_cli.device.host_pass import merge_by_key
    from msprof_cli.raw import layouts as L

    rng = np.random.default_rng(3)
    parts = []
    for n in (0, 7, 1000, 1, 333):
        p = np.zeros(n, L.API_EVENT)
        p["end_time"] = rng.integers(0, 50, n)  # many ties: the parts' order must hold
        p["item_id"] = np.arange(n) + 10_000 * len(parts)
        parts.append(p)
    parts = [p for p in parts if len(p)]
    ref = np.concatenate(parts)
    ref = ref[np.argsort(ref["end_time"], kind="stable")]
    assert merge_by_key(parts, "end_time").tobytes() == ref.tobytes()


def test_gc_paused_restores_the_collector_state() -> None:
    import gc

    from msprof_cli.collect.collection import gc_paused

    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    try:
        with gc_paused():
            raise KeyError("x")
    except KeyError:
        pass
    assert gc.isenabled()
    gc.disable()  # a script that switched it off keeps it off
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
