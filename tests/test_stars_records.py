"""The Atlas A2's device records (device/stars_records.py, raw/stars_layouts.py): what the
writer puts in each field, read back the way the real analysis reads them
(docs/formats/ascend910b.md 1.2), and the export's pairing of them (export/decode/stars.py)."""
from __future__ import annotations

import struct

import numpy as np

from msprof_cli.device.stars_records import acsq_records, context_pmu_records
from msprof_cli.export.decode.device import pair_hwts
from msprof_cli.export.decode.rawread import DecodeLog
from msprof_cli.raw import stars_layouts as SL


def test_acsq_log_is_one_time_ordered_log_the_analysis_struct_reads() -> None:
    # two tasks on stream 2 (AI Core, the second starting as the first ends) and an AI CPU
    # task on stream 3 overlapping them
    arr = acsq_records(np.array([7, 8, 1]), np.array([2, 2, 3]), np.array([100, 150, 120]),
                       np.array([150, 180, 400]), np.array([SL.SQE_AI_CORE, SL.SQE_AI_CORE,
                                                            SL.SQE_AI_CPU]), counter0=14)
    assert arr.dtype.itemsize == 64 and len(arr) == 6
    rows = [struct.unpack("<4HQHH11L", r.tobytes()) for r in arr]  # the analysis's format
    ticks = [r[4] for r in rows]
    assert ticks == sorted(ticks)
    assert all(r[1] == 0x6BD3 for r in rows)
    func = [r[0] & 0x3F for r in rows]
    cnt = [(r[0] >> 6) & 0xF for r in rows]
    sqe = [r[0] >> 10 for r in rows]
    assert cnt == [14, 15, 0, 1, 2, 3]  # the rolling counter wraps at 16
    # at tick 150 the second task's start comes before the first's end
    assert [(r[2], r[3], f) for r, f in zip(rows, func)] == [
        (2, 7, 0), (3, 1, 0), (2, 8, 0), (2, 7, 1), (2, 8, 1), (3, 1, 1)]
    assert sqe == [0, 1, 0, 0, 0, 1]
    # the export pairs each start with its end (the SQE type in the key, as stars.py does)
    key = arr["task_id"].astype(np.int64) * 64 + SL.sqe_type(arr["head"])
    p = pair_hwts(arr["stream_id"].astype(np.int64), key, SL.func_type(arr["head"]),
                  arr["syscnt"], DecodeLog(), "stars_soc", SL.FUNC_ACSQ_START,
                  SL.FUNC_ACSQ_END)
    got = sorted(zip(p["stream_id"], p["task_id"] // 64, p["start_tick"], p["end_tick"]))
    assert got == [(2, 7, 100, 150), (2, 8, 150, 180), (3, 1, 120, 400)]


def test_context_pmu_says_which_core_kind_ran_the_kernel() -> None:
    pmu = np.arange(16, dtype=np.uint64).reshape(2, 8)
    arr = context_pmu_records(np.array([5, 6]), np.array([2, 2]),
                              np.array([SL.FFTS_AIC_ONLY, SL.FFTS_AIV_ONLY]),
                              np.array([1000, 2000], np.uint64), pmu, np.array([10, 20]),
                              np.array([15, 30]), counter0=0)
    assert arr.dtype.itemsize == 128
    rows = [struct.unpack("<4HQ4HQ12Q", r.tobytes()) for r in arr]
    for r, kind, cyc, start, end in zip(rows, (0, 1), (1000, 2000), (10, 20), (15, 30)):
        assert r[0] & 0x3F == SL.FUNC_CONTEXT_PMU
        assert (r[2], r[7] >> 13, r[10], r[20], r[21]) == (2, kind, cyc, start, end)
    assert list(rows[1][12:20]) == list(range(8, 16))  # the counters, in event-list order
    ffts = (arr["ffts_type"] >> 13) & 7
    assert SL.is_aiv(ffts, arr["subtask_type"] & 0xFF).tolist() == [False, True]
    # the C++ rule for FFTS+ contexts: AIC and MIX_AIC subtasks are the cube's
    assert SL.is_aiv(np.array([4, 4, 4, 4]), np.array([0, 6, 1, 7])).tolist() == [
        False, False, True, True]


def test_the_a2_runs_big_unaligned_matmuls_as_mix_kernels() -> None:
    """CANN's profiling reference: a MatMul with inner axis > 1000, > 50 us of MAC time and
    an unaligned inner axis is a MIX_AIC kernel on the Atlas A2 (cost_model._mix_matmul)."""
    from msprof_cli.device import op_map
    from msprof_cli.device.chip import get_chip
    from msprof_cli.device.cost_model import evaluate
    from msprof_cli.device.op_table import DT_FP16

    def matmul(m: int, k: int, n: int) -> dict[str, float]:
        return {"kind": op_map.KIND_AI_CORE, "cost": op_map.COST_MATMUL,
                "flops": 2.0 * m * k * n, "bytes_in": 2.0 * (m * k + k * n),
                "bytes_out": 2.0 * m * n, "dtype_class": DT_FP16, "dtype_bytes": 2.0,
                "vec_elems": 0.0, "max_elems": float(m * n), "mm_k": float(k)}

    cases = [matmul(4096, 1001, 2048),  # MIX
             matmul(4096, 1024, 2048),  # aligned inner axis
             matmul(256, 1001, 256),  # too little MAC time
             matmul(8192, 900, 4096)]  # inner axis <= 1000
    sig = {key: np.array([c[key] for c in cases]) for key in cases[0]}
    assert evaluate(sig, get_chip("Ascend910B3")).mix_ratio.tolist() == [2, 0, 0, 0]
    assert evaluate(sig, get_chip("Ascend910A")).mix_ratio.tolist() == [0, 0, 0, 0]


def test_a_mix_kernel_logs_its_ffts_context_inside_its_task() -> None:
    from msprof_cli.device.stars_records import (block_pmu_records, ffts_log_records,
                                                 merge_logs)
    acsq = acsq_records(np.array([4, 5]), np.array([2, 2]), np.array([10, 40]),
                        np.array([40, 90]), np.array([0, 0]), counter0=0)
    log = merge_logs(acsq, ffts_log_records(np.array([5]), np.array([2]), np.array([40]),
                                            np.array([90]), SL.SUBTASK_MIX_AIC), 0)
    func = SL.func_type(log["head"]).tolist()
    # task 4's end and task 5's start at 40: start first; the context inside task 5
    assert func == [SL.FUNC_ACSQ_START, SL.FUNC_ACSQ_START, SL.FUNC_FFTS_START,
                    SL.FUNC_ACSQ_END, SL.FUNC_FFTS_END, SL.FUNC_ACSQ_END]
    assert (((log["head"] >> 6) & 0xF).tolist() == list(range(6)))
    ffts = log[np.isin(func, [SL.FUNC_FFTS_START, SL.FUNC_FFTS_END])].view(SL.FFTS_LOG)
    assert set(ffts["subtask_type"].tolist()) == {SL.SUBTASK_MIX_AIC}
    assert set(((ffts["ffts_type"] >> 13) & 7).tolist()) == {SL.FFTS_PLUS}
    bp = block_pmu_records(np.array([5]), np.array([2]), np.array([40]),
                           np.array([4000], np.uint64), np.full((1, 8), 80, np.uint64),
                           np.array([40]), np.array([90]), SL.SUBTASK_MIX_AIC)
    assert len(bp) == 40 and (bp["core"] & 1).all()  # the AI Vector cores
    assert bp["total_cycle"].sum() == 4000 and bp["pmu"][:, 0].sum() == 80
