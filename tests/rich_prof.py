"""PROF dirs for the db / mindstudio-compat tests, built with the project's emulated Device
from hand-made CaptureChunks: two models, several iterations, AI Core PMU on
(PipeUtilization), AI CPU on, msproftx markers."""
from __future__ import annotations

from pathlib import Path

from msprof_cli.capture import CaptureChunk, ModelInfo, TxMarker
from msprof_cli.device import Device
from msprof_cli.raw.control import ClockPair
from tests.test_device_records import CLOCK, STEP_OPS, STEP_THREAD, T0, config, make_iteration

PROF_NAME = "PROF_000001_20250101120000123_ABCDEFGHIJKLMNOP"
MARKERS = [("epoch 1", 10, 600_000), ("checkpoint", 20, 20)]


def marker_spans(prof: Path) -> list[tuple[int, int]]:
    """(start, end) ns of the msproftx records the device wrote: the markers on the emulated
    system's clock (device-model.md 5.2), which the export must reproduce exactly."""
    from msprof_cli.device import readback
    rec = readback.host_records(prof, "msproftx")
    return [(int(a), int(b)) for a, b in zip(rec["start_time"], rec["end_time"])]


def rich_chunk(n_iter: int = 6, start: int = T0, markers: bool = True, devices=(0,)
               ) -> CaptureChunk:
    """Iterations alternate between model 1 (train) and model 2 (eval); with several devices
    each iteration runs on every device (data parallel)."""
    order = {o[0]: i for i, o in enumerate(STEP_OPS)}
    its, t = [], start
    for i in range(n_iter):
        model = 1 if i % 2 == 0 else 2
        it = make_iteration(model, i // 2 + 1, t, device_id=devices[0])
        for d in devices[1:]:  # the same ops, launched for the other devices
            it.ops.extend(make_iteration(model, i // 2 + 1, t, device_id=d).ops)
        its.append(it)
        t = it.end_ns + 50_000
    models = {1: ModelInfo(1, "train", "__inference_train_step_1", op_order=order),
              2: ModelInfo(2, "eval", "__inference_test_step_2", op_order=order)}
    tx = [TxMarker(msg, start + a, start + b, STEP_THREAD, event_type=2 if b > a else 0)
          for msg, a, b in MARKERS] if markers else []
    return CaptureChunk(models=models, iterations=its, markers=tx)


def build_prof(root: Path, *, name: str = PROF_NAME, n_iter: int = 6, pid: int = 4242,
               device_ids=(0,), rank_id: int = -1, markers: bool = True, **cfg) -> Path:
    prof = root / name
    opts = dict(msproftx=True)
    opts.update(cfg)
    dev = Device(prof, config(**opts), clock=CLOCK, pid=pid, app=["python3", "train.py"],
                 device_ids=device_ids, rank_id=rank_id)
    dev.consume(rich_chunk(n_iter, markers=markers, devices=tuple(device_ids)))
    dev.close(ClockPair(CLOCK.wall_us + 10_000_000, CLOCK.mono_ns + 10_000_000_000))
    return prof
