"""Replayed iterations are recorded in the PROF dir and reported by query and export."""
from __future__ import annotations

import dataclasses
import json

from test_device_records import make_chunk, run

from msprof_cli.export.api import run_export
from msprof_cli.query import _replayed, query_rows
from msprof_cli.raw import sampling


def test_ranges_round_trip(tmp_path):
    assert sampling.to_ranges([5, 1, 2, 3, 9, 8]) == [[1, 3], [5, 5], [8, 9]]
    assert sampling.describe([[1, 3], [5, 5]]) == "1-3,5"
    sampling.write(tmp_path, {1: [1, 2]}, {1: [3, 4, 5]}, warmup={1: [1]})
    assert sampling.read(tmp_path) == {1: {"measured": [[1, 2]], "replayed": [[3, 5]],
                                           "warmup": [[1, 1]], "drifted": []}}
    (tmp_path / sampling.FILE_NAME).write_text("{not json")
    assert sampling.read(tmp_path) == {}


def test_device_records_replayed_iterations_and_tools_report_them(tmp_path, capsys):
    chunk = make_chunk(4)
    for it in chunk.iterations[2:]:
        it.replayed = True
    later = make_chunk(1, first_index=5, start=5_000_000_400_000_000)
    later.iterations[0] = dataclasses.replace(later.iterations[0], replayed=True)
    prof = run(tmp_path, [chunk, later])
    data = json.loads((prof / sampling.FILE_NAME).read_text())
    # the model's steps run gradient ops (make_chunk: a training step)
    assert data["models"]["1"] == {"measured": [[1, 2]], "replayed": [[3, 5]], "training": True,
                                   "warmup": [[1, 1]], "drifted": []}
    rows = [r for r in query_rows(prof) if r.dir_name == "device_0"]
    assert _replayed(rows[0]) == "3-5"
    run_export(prof)
    out = capsys.readouterr().out
    assert "iterations 3-5 were replayed from the op schedule of the sampled iterations 1-2" \
        in out


def test_replayed_steps_far_longer_than_their_sample_are_said(tmp_path, capsys):
    """A replayed step that took 10x its sampled step on the host (an input wait, another
    rank): recorded as drifted, and export warns that the step trace is an estimate there."""
    from msprof_cli.capture import OpSchedule

    chunk = make_chunk(4)
    first = chunk.iterations[0]
    dur = first.end_ns - first.start_ns
    sched = OpSchedule(duration=dur, ops=tuple(
        (o.name, o.tf_type, o.start_ns - first.start_ns, o.end_ns - first.start_ns,
         o.thread_id, o.inputs, o.outputs, o.fused_ops, o.device_id, o.eager)
        for o in first.ops))
    for k, it in enumerate(chunk.iterations[1:], start=1):
        it.replayed, it.schedule, it.ops = True, sched, []
        it.end_ns = it.start_ns + (10 * dur if k == 3 else dur)
    prof = run(tmp_path, [chunk])
    assert sampling.read(prof)[1]["drifted"] == [[4, 4]]
    run_export(prof)
    err = capsys.readouterr().err
    assert "[WARNING] model 1: iteration 4 took over 2.5x the time of the sampled step" in err
