"""The emulated NPU: CaptureChunk in, raw PROF data out (docs/device-model.md).

    dev = Device(prof_dir, config, clock=ClockPair.now(), pid=os.getpid(), app=sys.argv)
    dev.consume(chunk)      # any number of times; appends + fsyncs the slice files
    dev.close(ClockPair.now())

All control files are written by the constructor, so a run killed at any point leaves a PROF
dir the exporter accepts.  State that must continue across chunks (task ids and flips per
stream, stream clocks, 4-bit record counters, dictionary entries already written, per-thread
host record windows, fp/bp choices) lives in this object.
"""
from __future__ import annotations

from collections import Counter

import copy
import dataclasses
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from msprof_cli.capture import CaptureChunk, Iteration
from msprof_cli.device import memcpy as MC
from msprof_cli.device import op_map
from msprof_cli.device import scheduler as S
from msprof_cli.device import time_model as TM
from msprof_cli.device.chip import ChipSpec, get_chip
from msprof_cli.device.cost_model import CostTable, evaluate
from msprof_cli.device.device_records import (aicore_records, aicpu_records, flip_records,
                                              hwts_records, l2_cache_records,
                                              memcpy_records, step_trace_records,
                                              task_type_records)
from msprof_cli.device.host_records import (HCCL_INFO_TYPE, RT_CPU_KERNEL_LAUNCH,
                                            RT_KERNEL_LAUNCH, RT_MEMCPY_ASYNC,
                                            RUNTIME_API_TYPES, api_records,
                                            copy_spans, fusion_op_records,
                                            graph_id_map_records, hccl_info_records,
                                            hccl_step_plan,
                                            launch_windows, msproftx_records,
                                            node_basic_records, runtime_api_spans,
                                            task_track_records, tensor_info_records)
from msprof_cli.device.op_table import Interner, IterTable, OpTable, SignatureRegistry, \
    build_tables
from msprof_cli.device.pmu import event_counters, l2_counters
from msprof_cli.device.sample import write_sample_json
from msprof_cli.device.step_trace import FpBp, resolve_fp_bp
from msprof_cli.device.ub_fusion import UbFuser
from msprof_cli.device.writer import DataDir, RawStorage
from msprof_cli.options import L2_CACHE_EVENTS, ProfilingConfig
from msprof_cli.raw import control, sampling
from msprof_cli.raw import layouts as L
from msprof_cli.raw.control import ClockPair
from msprof_cli.raw.hashing import name_hash
from msprof_cli.raw.profdir import make_dir

log = logging.getLogger("msprof_cli.device")

DEV_CNTVCT_BASE = 1_000_000_000  # device syscnt at the sync point (10 s of headroom)
TAG_MODEL_START, TAG_MODEL_END, TAG_FP, TAG_BP, TAG_ITER_END = 0, 1, 2, 3, 4
TAG_REDUCE_BASE = 10000
_STREAM_OF_KIND = {op_map.KIND_AI_CORE: S.COMPUTE_STREAM, op_map.KIND_AI_CPU: S.AICPU_STREAM,
                   op_map.KIND_HCCL: S.HCCL_STREAM}
_GE_TASK_TYPE = {op_map.KIND_AI_CORE: L.GE_TASK_TYPE_IDS["AI_CORE"],
                 op_map.KIND_AI_CPU: L.GE_TASK_TYPE_IDS["AI_CPU"],
                 op_map.KIND_HCCL: L.GE_TASK_TYPE_IDS["HCCL"]}
_RUNTIME_TYPE = {op_map.KIND_AI_CORE: L.RUNTIME_TASK_TYPE_IDS["KERNEL_AICORE"],
                 op_map.KIND_AI_CPU: L.RUNTIME_TASK_TYPE_IDS["KERNEL_AICPU"]}
FLIP_TYPE = L.RUNTIME_TASK_TYPE_IDS["FLIP_TASK"]
MEMCPY_TYPE = L.RUNTIME_TASK_TYPE_IDS["MEMCPY_ASYNC"]
REDUCE_TYPE = L.RUNTIME_TASK_TYPE_IDS["REDUCE_ASYNC"]


def _lut(mapping: dict[int, int], default: int = 0) -> np.ndarray:
    lut = np.full(256, default, np.int64)
    for k, v in mapping.items():
        lut[k] = v
    return lut


_STREAM_LUT = _lut(_STREAM_OF_KIND)
_GE_TYPE_LUT = _lut(_GE_TASK_TYPE)
_RT_TYPE_LUT = _lut(_RUNTIME_TYPE)


_REPLICA_SCOPE = re.compile(r"(?<![^/])replica_\d+/")


def _replica_counterpart(name: str | None, names: set[str]) -> str | None:
    """`name` if this device runs it, else this device's op that differs from it only by the
    `replica_N/` scope tf.distribute gives replica N's copy of each op (None if none)."""
    if name is None or name in names:
        return name
    key = _REPLICA_SCOPE.sub("", name)
    for other in names:
        if _REPLICA_SCOPE.sub("", other) == key:
            return other
    return None


@dataclass
class _DeviceDir:
    device_id: int
    path: Path
    data: DataDir
    state: S.DeviceState


@dataclass
class _ChunkCtx:
    """Everything of one chunk that the per-device passes share."""

    ops: OpTable
    iters: IterTable
    sig: dict[str, np.ndarray]
    cost: CostTable
    kind: np.ndarray  # per op row
    win: object  # LaunchWindows
    me_begin: np.ndarray  # per iteration
    me_end: np.ndarray
    fp_name: dict[int, np.ndarray]  # per device, per iteration: name idx of the fp op (-1)
    bp_name: dict[int, np.ndarray]
    # GE InputCopy / OutputCopy spans per iteration (in_b, in_e, in_ok, out_b, out_e, out_ok);
    # None with task_time off (no copies, no memcpy tasks)
    copies: tuple[np.ndarray, ...] | None = None
    # the time model's InputCopy / OutputCopy spans (in_b, in_e, out_b, out_e) per iteration
    copy_spans: tuple[np.ndarray, ...] | None = None


class Device:
    """Emulated Ascend device(s) writing one PROF dir (see module doc)."""

    def __init__(self, prof_dir: Path, config: ProfilingConfig, *, clock: ClockPair, pid: int,
                 app: list[str], device_ids: Sequence[int] = (0,), rank_id: int = -1,
                 rank_size: int = -1, chip: str = "Ascend910", first_task_id: int = 1,
                 ub_fusion: bool = True) -> None:
        self.prof_dir = Path(prof_dir)
        self._measured: dict[int, list[int]] = {}
        self._replayed: dict[int, list[int]] = {}
        self.config = config
        self.chip: ChipSpec = get_chip(chip)
        self.clock = clock
        self.pid = pid
        self.app = list(app)
        self.rank_id = rank_id
        # ranks of a job with one process per rank (MultiWorkerMirroredStrategy, RANK_ID +
        # RANK_SIZE, ...): the collectives of this process's device span `rank_size` ranks
        self.rank_size = rank_size if rank_id >= 0 and rank_size > rank_id else -1
        self.first_task_id = first_task_id  # test hook: start task ids near the u16 wrap
        self.messages: list[str] = list(config.warnings)
        self.sync_ns = clock.mono_ns
        self.sigs = SignatureRegistry()
        self.fuser = UbFuser(enabled=ub_fusion)  # GE's UB fusion of element-wise chains
        # tasks the run had that the options left out (collect says so at the end):
        # "aicpu" / "hccl" -> op type -> tasks, over every emulated device
        self.uncollected: dict[str, Counter] = {"aicpu": Counter(), "hccl": Counter()}
        self.names = Interner()
        self.models: dict = {}
        self.fpbp: dict[int, FpBp] = {}  # per model: the choice of its lowest device
        self._fpbp_dev: dict[tuple[int, int], FpBp] = {}  # (model id, device id)
        self._hashed: set[str] = set()
        self._graph_mapped: set[int] = set()
        self._fusion_reported: set[str] = set()
        self._thread_last_end: dict[int, int] = {}
        self.warp = TM.TimeWarp()  # real host clock -> the emulated system's (time_model.py)
        self._copy_spans: tuple[np.ndarray, ...] | None = None
        self._cost_cache: tuple[tuple[int, int], CostTable] | None = None
        self._tx_count = 0
        self._closed = False
        self.host_path = self.prof_dir / "host"
        make_dir(self.host_path)  # 0750 whatever the umask
        # slice rotation + storage_limit ageing over all data dirs (device/writer.py)
        self.storage = RawStorage(self.prof_dir, config.storage_limit_mb)
        self.host = DataDir(self.host_path / "data", self.storage)
        self._write_control(self.host_path, None)
        self._write_type_info()
        self.devices: dict[int, _DeviceDir] = {}
        for dev_id in device_ids:
            self._device(int(dev_id))

    # --- control files ---------------------------------------------------------------------
    def _write_info(self, result_dir: Path, device_id: int | None, rank_id: int) -> None:
        info = control.info_json(pid=self.pid, device_id=device_id, rank_id=rank_id,
                                 device_info=None if device_id is None
                                 else self.chip.device_info(device_id))
        info["platform_version"] = self.chip.platform_version
        control.write_info_json(result_dir, info, device_id)

    def _write_control(self, result_dir: Path, device_id: int | None) -> None:
        self._write_info(result_dir, device_id, self.rank_id)
        write_sample_json(result_dir, self.config, device_id=device_id, app=self.app,
                          pid=self.pid)
        control.write_host_start_log(result_dir, self.sync_ns, device_id)
        if device_id is not None:
            control.write_dev_start_log(result_dir, self.sync_ns, DEV_CNTVCT_BASE, device_id)
        control.write_start_info(result_dir, self.clock, device_id)

    def _write_type_info(self) -> None:
        lines = [f"{L.LEVEL_RUNTIME}_{tid}:{name}" for tid, name in
                 sorted(L.RUNTIME_TASK_TYPES.items())]
        lines += [f"{lvl}_{tid}:{name}" for (lvl, tid), name in L.TYPE_INFO_NAMES.items()]
        # runtime_api / hccl_info ids (docs/device-model.md 6.1)
        lines += [f"{L.LEVEL_RUNTIME}_{tid}:{name}" for tid, name in RUNTIME_API_TYPES.items()]
        lines.append(f"{L.LEVEL_HCCL}_{HCCL_INFO_TYPE}:hccl_info")
        f = self.host.file("type_info_dic",
                           lambda i: L.host_file_name("type_info_dic", i))
        f.write_lines(lines)
        f.sync()

    def _device(self, dev_id: int) -> _DeviceDir:
        dd = self.devices.get(dev_id)
        if dd is None:
            path = self.prof_dir / f"device_{dev_id}"
            make_dir(path)
            clock = S.DeviceClock(self.sync_ns, DEV_CNTVCT_BASE, int(round(self.chip.tick_ns)))
            dd = _DeviceDir(dev_id, path, DataDir(path / "data", self.storage),
                            S.DeviceState(clock, first_task_id=self.first_task_id))
            self.devices[dev_id] = dd
            self._write_control(path, dev_id)
            if len(self.devices) > 1 and self.rank_id == -1:
                # several devices in one process (MirroredStrategy replicas): each device is
                # an HCCL rank, rank id = index in the sorted device ids (as hccl_info's
                # localRank); the host dir keeps -1
                for rank, d in enumerate(sorted(self.devices)):
                    self._write_info(self.devices[d].path, d, rank)
        return dd

    def rank_of(self, device_id: int) -> int:
        """HCCL rank of a device: the explicit rank id, else its index among the devices."""
        return self.rank_id if self.rank_id != -1 else sorted(self.devices).index(device_id)

    def multi_process(self) -> bool:
        """One process per rank: this PROF dir's one device is rank `rank_id` of
        `rank_size` (a job of several processes, docs/device-model.md 6.2)."""
        return self.rank_size > 1 and len(self.devices) == 1

    def hccl_ranks(self) -> int:
        """The number of ranks taking part in the collectives: the job's rank size when each
        process is a rank (one device), else the devices of this process (replicas)."""
        return self.rank_size if self.multi_process() else max(1, len(self.devices))

    def hccl_rank(self, device_id: int) -> int:
        """hccl_info's localRank of a device: the process's rank id when each process is a
        rank, else the device's index among this process's sorted device ids."""
        return self.rank_id if self.multi_process() else sorted(self.devices).index(device_id)

    # --- public ---------------------------------------------------------------------------
    def consume(self, chunk: CaptureChunk) -> None:
        """Turn one chunk into host + device records, appended and fsynced."""
        if self._closed:
            raise RuntimeError("Device.consume() after close(): create a new Device")
        self.models.update(chunk.models)
        self._record_sampling(chunk)
        ops, iters = build_tables(chunk, self.sigs, self.names)
        ops = self.fuser.apply(ops, self.models, self.sigs, self.names)
        for dev_id in np.unique(ops.device_id).tolist():
            self._device(int(dev_id))
        self._resolve_fp_bp(chunk.iterations)
        if len(ops) or len(iters):
            self._consume_tables(ops, iters)
        if chunk.markers and self.config.msproftx:
            self._write_tx(chunk)
        self._end_chunk()

    def consume_tables(self, ops: OpTable, iters: IterTable) -> None:
        """Layer (b) only: a chunk already in columns (benchmark generators build these
        directly), then flush + fsync as `consume` does."""
        if self._closed:
            raise RuntimeError("Device.consume_tables() after close(): create a new Device")
        for dev_id in np.unique(ops.device_id).tolist():
            self._device(int(dev_id))
        if len(ops) or len(iters):
            self._consume_tables(ops, iters)
        self._end_chunk()

    def _end_chunk(self) -> None:
        """fsync every data dir, then rotate / age the slices (writer.RawStorage)."""
        self.host.sync()
        for dd in self.devices.values():
            dd.data.sync()
        for msg in self.storage.end_chunk():
            log.warning(msg)
            self.messages.append(msg)

    def _consume_tables(self, ops: OpTable, iters: IterTable) -> None:
        self._emulate_time(ops, iters)
        ctx = self._prepare(ops, iters, self._thread_last_end, self._copy_spans)
        host = self._host_records(ctx)
        for dd in self.devices.values():
            self._device_pass(ctx, dd, host)
        self._write_host(ctx, host)

    def _record_sampling(self, chunk: CaptureChunk) -> None:
        """Keep msprof_cli_sampling.json (raw/sampling.py) up to date: which iterations were
        traced and which were replayed from a sampled schedule."""
        if not chunk.iterations:
            return
        for it in chunk.iterations:
            target = self._replayed if it.replayed else self._measured
            target.setdefault(it.model_id, []).append(it.index)
        sampling.write(self.prof_dir, self._measured, self._replayed)

    def close(self, clock: ClockPair) -> None:
        """Write end_info(.N) and close the files; calling it again does nothing."""
        if self._closed:
            return
        self._closed = True
        # the end of the collection on the emulated system's clock (time_model.TimeWarp)
        clock = ClockPair(wall_us=clock.wall_us + self.warp.delta // 1000,
                          mono_ns=clock.mono_ns + self.warp.delta)
        control.write_end_info(self.host_path, clock, None)
        self.host.close()
        for dd in self.devices.values():
            control.write_end_info(dd.path, clock, dd.device_id)
            dd.data.close()

    # --- chunk preparation ------------------------------------------------------------------
    def _resolve_fp_bp(self, iterations: list[Iteration]) -> None:
        """FP/BP per (model, device).  With several devices (replicas) each device gets the
        FP/BP of its own ops: a name chosen by the collector or by fp_point/bp_point is used
        on the device that runs it, the other devices detect theirs automatically (the
        replicas run the same graph, so they get the replica's counterpart ops)."""
        for it in iterations:
            if not it.ops:
                continue
            devs = sorted({o.device_id for o in it.ops})
            model = self.models.get(it.model_id)
            for dev in devs:
                if (it.model_id, dev) in self._fpbp_dev:
                    continue
                sub, m, fp_pt, bp_pt = it, model, self.config.fp_point, self.config.bp_point
                if len(devs) > 1:
                    sub = dataclasses.replace(it, ops=[o for o in it.ops if o.device_id == dev])
                    here = {o.name for o in sub.ops}
                    everywhere = {o.name for o in it.ops} | set(model.op_order if model else ())
                    if model is not None:
                        m = dataclasses.replace(model, fp_op=_replica_counterpart(model.fp_op, here),
                                                bp_op=_replica_counterpart(model.bp_op, here))
                    # an option naming another replica's op: auto here, no warning
                    fp_pt = "" if fp_pt in everywhere and fp_pt not in here else fp_pt
                    bp_pt = "" if bp_pt in everywhere and bp_pt not in here else bp_pt
                warn: list[str] = []
                fb = resolve_fp_bp(m, sub, fp_point=fp_pt, bp_point=bp_pt, warn=warn)
                self._fpbp_dev[(it.model_id, dev)] = fb
                self.fpbp.setdefault(it.model_id, fb)
                for w in warn:
                    if w not in self.messages:
                        log.warning(w)
                        self.messages.append(w)

    # --- the emulated system's time (time_model.py) ----------------------------------------
    def _cost(self, sig: dict[str, np.ndarray]) -> CostTable:
        """The cost of every signature, evaluated once per new signature / rank size (a
        chunk needs it for the time model, its scratch schedule and the real one)."""
        key = (len(self.sigs), self.hccl_ranks())
        if self._cost_cache is None or self._cost_cache[0] != key:
            self._cost_cache = (key, evaluate(sig, self.chip, rank_size=key[1]))
        return self._cost_cache[1]

    def _emulate_time(self, ops: OpTable, iters: IterTable) -> None:
        """Rewrite the chunk's host times onto the emulated system's clock (in place).

        1. `time_model.layout`: each step's host part relative to its start.
        2. A scratch schedule of the chunk with every step far from the others gives each
           step's device span (the real scheduler, all devices and streams).
        3. Steps and eager ops are placed one after the other, each keeping the measured
           gap before it (`TimeWarp.place`)."""
        sig = self.sigs.arrays()
        cost = self._cost(sig)
        kind = sig["kind"][ops.sig].astype(np.int64)
        launch = kind != op_map.KIND_NONE
        eager = ops.eager if ops.eager is not None else np.zeros(len(ops), bool)
        host_work = sig["host_work"][ops.sig]
        n_it = len(iters)
        wait = iters.input_wait if len(iters.input_wait) == n_it else np.zeros(n_it, np.int64)
        tick = int(round(self.chip.tick_ns))
        dev_ns = cost.dur_ticks[ops.sig].astype(np.int64) * tick
        lay = TM.layout(ops.iter_row, launch, eager, host_work, ops.host_start, ops.host_end,
                        n_it, wait, dev_ns,
                        TM.launch_keys(ops.model_id, ops.iter_row, ops.name_idx,
                                       ops.host_start, {m: i.op_order for m, i in
                                                        self.models.items()}, self.names.items))
        inn = ops.iter_row >= 0
        single = np.flatnonzero(~inn)
        emul_dur = np.zeros(n_it, np.int64)
        if n_it:
            emul_dur = self._step_spans(ops, iters, lay, inn, single)
        # placement: steps and single ops in real order, measured gaps kept
        s_launch = launch[single]
        s_dur = np.where(s_launch, TM.EAGER_LAUNCH_NS,
                         np.where(host_work[single],
                                  ops.host_end[single] - ops.host_start[single], 0))
        # the agent's own time before a step is not the script's: the step's real span
        # reaches back over it, so the gap before the step loses it
        agent = iters.agent_before if len(iters.agent_before) == n_it else np.zeros(n_it, np.int64)
        ev_rs = np.r_[iters.start - np.clip(agent, 0, None), ops.host_start[single]]
        ev_re = np.r_[np.maximum(iters.end, iters.start), ops.host_end[single]]
        ev_dur = np.r_[emul_dur, s_dur].astype(np.int64)
        order = np.lexsort((np.arange(len(ev_rs)), ev_rs))
        es = np.empty(len(ev_rs), np.int64)
        es[order] = self.warp.place(ev_rs[order], ev_re[order], ev_dur[order])
        it_s = es[:n_it]
        # steps on the device's tick grid: the scratch schedule holds when shifted
        it_s = self.sync_ns + -((self.sync_ns - it_s) // tick) * tick
        if n_it:
            r = np.flatnonzero(inn)
            base = it_s[ops.iter_row[r]]
            ops.host_start[r] = base + lay.op_rel_start[r]
            ops.host_end[r] = base + lay.op_rel_end[r]
        s_start = es[n_it:]
        ops.host_start[single] = s_start
        ops.host_end[single] = s_start + np.where(s_launch, TM.EAGER_WINDOW_NS, s_dur)
        iters.start[:] = it_s
        iters.end[:] = it_s + emul_dur
        self._copy_spans = (it_s + lay.in_copy[0], it_s + lay.in_copy[1],
                            it_s + lay.out_copy[0], it_s + lay.out_copy[1])

    def _step_spans(self, ops: OpTable, iters: IterTable, lay: TM.Layout, inn: np.ndarray,
                    single: np.ndarray) -> np.ndarray:
        """Emulated length of each step: its host part, or its device work (a scratch
        schedule, each step on an idle device), whichever ends last, plus the return."""
        tick = int(round(self.chip.tick_ns))
        free = max([self.sync_ns] + [
            int(dd.state.clock.ns(np.array([st.free_tick]))[0])
            for dd in self.devices.values() for st in dd.state.streams.values()
            if st.free_tick > S.NEVER] + list(self._thread_last_end.values()))
        ub = -(-lay.upper_bound // tick) * tick
        v = free + 1_000_000
        v = self.sync_ns + -((self.sync_ns - v) // tick) * tick
        V = v + np.r_[0, np.cumsum(ub)[:-1]]
        v_end = int(V[-1] + ub[-1])
        v_ops = dataclasses.replace(ops, host_start=ops.host_start.copy(),
                                    host_end=ops.host_end.copy())
        r = np.flatnonzero(inn)
        v_ops.host_start[r] = V[ops.iter_row[r]] + lay.op_rel_start[r]
        v_ops.host_end[r] = V[ops.iter_row[r]] + lay.op_rel_end[r]
        # single ops after all steps, so they cannot delay them
        k = np.arange(len(single), dtype=np.int64) * TM.EAGER_LAUNCH_NS
        v_ops.host_start[single] = v_end + k
        v_ops.host_end[single] = v_end + k + TM.EAGER_WINDOW_NS
        v_iters = dataclasses.replace(iters, start=V.copy(), end=V + ub - 1)
        spans = (V + lay.in_copy[0], V + lay.in_copy[1], V + lay.out_copy[0],
                 V + lay.out_copy[1])
        ctx = self._prepare(v_ops, v_iters, dict(self._thread_last_end), spans)
        dev_end, d2h = self._device_ends(ctx)
        dev_rel = np.where(dev_end > S.NEVER, dev_end - V, 0)
        return TM.finish(lay, dev_rel, d2h)

    def _device_ends(self, ctx: _ChunkCtx) -> tuple[np.ndarray, np.ndarray]:
        """Per iteration: the end (ns) of its last task on any device and stream but the
        output copy, and the output copy's device time (ns, the longest over the devices),
        scheduled on scratch copies of the streams (nothing is emitted, no state changes)."""
        self._copy_apis(ctx, {"api_event": []})
        n_it = len(ctx.iters)
        end = np.full(n_it, S.NEVER, np.int64)
        d2h = np.zeros(n_it, np.int64)
        for dd in self.devices.values():
            saved = copy.deepcopy(dd.state.streams)
            try:
                res = self._schedule_device(ctx, dd)
            finally:
                dd.state.streams = saved
            if res is None:
                continue
            scheduled, memcpy, _ = res
            tick = dd.state.clock.tick_ns
            for sch in list(scheduled.values()) + memcpy:
                sel = sch.iter_row >= 0
                if not sel.any():
                    continue
                if sch.stream_id == MC.D2H_STREAM:
                    np.maximum.at(d2h, sch.iter_row[sel], (sch.end - sch.start)[sel] * tick)
                else:
                    np.maximum.at(end, sch.iter_row[sel], dd.state.clock.ns(sch.end[sel]))
        return end, d2h

    def _prepare(self, ops: OpTable, iters: IterTable, last_end: dict[int, int],
                 copy_spans: tuple[np.ndarray, ...] | None = None) -> _ChunkCtx:
        sig = self.sigs.arrays()
        cost = self._cost(sig)
        kind = sig["kind"][ops.sig].astype(np.int64)
        launch = kind != op_map.KIND_NONE
        in_iter = ops.iter_row >= 0
        rec_thread = np.where(in_iter, iters.thread[np.maximum(ops.iter_row, 0)]
                              if len(iters) else 0, ops.thread).astype(np.uint32)
        win = launch_windows(launch, rec_thread, ops.host_start, ops.host_end, last_end)
        n_it = len(iters)
        me_begin = iters.start.copy()
        me_end = iters.end.copy()
        rows = np.flatnonzero(launch & in_iter)
        if len(rows):
            np.minimum.at(me_begin, ops.iter_row[rows], win.begin[rows] - 2)
            # task_time on: 1 ns after the last launch for GE's OutputCopy (copy_spans)
            tail = 1 if self.config.task_time != "off" else 0
            np.maximum.at(me_end, ops.iter_row[rows], win.end[rows] + tail)
        me_end = np.maximum(me_end, me_begin + 1)
        if n_it:
            t = iters.thread
            for thr in np.unique(t).tolist():
                m = t == thr
                last_end[thr] = max(last_end.get(thr, -1), int(me_end[m].max()))
        fp_name: dict[int, np.ndarray] = {}
        bp_name: dict[int, np.ndarray] = {}
        for dev in self.devices:
            fp_name[dev] = np.full(n_it, -1, np.int64)
            bp_name[dev] = np.full(n_it, -1, np.int64)
            for i, mid in enumerate(iters.model_id.tolist()):
                fb = self._fpbp_dev.get((int(mid), dev))
                if fb:
                    fp_name[dev][i] = self._name_idx(fb.fp)
                    bp_name[dev][i] = self._name_idx(fb.bp)
            if self.fuser.alias:  # an FP/BP op UB-fused into a chain: the fused op's task
                fp_name[dev] = self._fused_alias(ops, fp_name[dev])
                bp_name[dev] = self._fused_alias(ops, bp_name[dev])
        return _ChunkCtx(ops, iters, sig, cost, kind, win, me_begin, me_end, fp_name, bp_name,
                         copy_spans=copy_spans)

    def _fused_alias(self, ops: OpTable, name_of_iter: np.ndarray) -> np.ndarray:
        """Per iteration: the fused op's name where the named op ran inside a UB-fused
        kernel in that iteration (GE reports the fused kernel's task for it)."""
        alias = np.array([self.fuser.alias.get(int(n), -1) for n in name_of_iter.tolist()],
                         np.int64)
        if not (alias >= 0).any():
            return name_of_iter
        n = max(len(self.names.items), 1)
        rows = ops.iter_row >= 0
        present = ops.iter_row[rows] * n + ops.name_idx[rows]
        it = np.arange(len(name_of_iter), dtype=np.int64)
        fused_here = (alias >= 0) & np.isin(it * n + alias, present)
        return np.where(fused_here, alias, name_of_iter)

    def _name_idx(self, name: str | None) -> int:
        idx = None if name is None else self.names.get(name)
        return -1 if idx is None else idx

    # --- host side -------------------------------------------------------------------------
    def _hash_lines(self, texts: list[str]) -> list[str]:
        lines = []
        for text in texts:
            if text not in self._hashed:
                self._hashed.add(text)
                lines.append(f"{name_hash(text)}:{text}")
        return lines

    def _host_records(self, ctx: _ChunkCtx) -> dict[str, list[np.ndarray]]:
        """Model/node level records of the chunk (runtime-level task_track is added by the
        per-device passes, which know the task ids)."""
        ops, iters, win = ctx.ops, ctx.iters, ctx.win
        task_on = self.config.task_time != "off"
        out: dict[str, list[np.ndarray]] = {k: [] for k in (
            "api_event", "task_track", "node_basic_info", "tensor_info", "graph_id_map",
            "fusion_op_info", "hccl_info")}
        hash_texts: list[str] = []
        # ModelExecute per iteration (level 15000 type 1, itemId = model id)
        out["api_event"].append(api_records(L.LEVEL_MODEL, L.MODEL_EXECUTE, iters.thread,
                                            ctx.me_begin, ctx.me_end, iters.model_id))
        if task_on and len(iters):
            self._copy_apis(ctx, out)
        rows = np.flatnonzero(ctx.kind != op_map.KIND_NONE) if task_on else np.zeros(0, int)
        name_hashes = np.array([name_hash(n) for n in self.names.items], np.uint64) \
            if self.names.items else np.zeros(0, np.uint64)
        if len(rows):
            item = name_hashes[ops.name_idx[rows]]
            out["api_event"].append(api_records(L.LEVEL_NODE, L.NODE_LAUNCH, win.thread[rows],
                                                win.begin[rows], win.end[rows], item))
            used = np.unique(ops.name_idx[rows])
            hash_texts += [self.names.items[i] for i in used.tolist()]
        if len(rows) and self.config.op_info:
            sigs_used = np.unique(ops.sig[rows])
            ge_hash = np.zeros(len(self.sigs), np.uint64)
            for s in sigs_used.tolist():
                ge_hash[s] = name_hash(self.sigs.ge_type[s])
                hash_texts.append(self.sigs.ge_type[s])
            block = ctx.cost.block_dim[ops.sig[rows]]
            out["node_basic_info"].append(node_basic_records(
                win.thread[rows], win.nbi_ts[rows], name_hashes[ops.name_idx[rows]],
                _GE_TYPE_LUT[ctx.kind[rows]], ge_hash[ops.sig[rows]], block))
            out["tensor_info"].append(tensor_info_records(
                win.thread[rows], win.tensor_ts[rows], name_hashes[ops.name_idx[rows]],
                ops.sig[rows], self.sigs.tensors))
            self._graph_and_fusion(ctx, rows, name_hashes, out, hash_texts)
        ctx_lines = self._hash_lines(hash_texts)
        out["_hash_lines"] = ctx_lines  # type: ignore[assignment]
        return out

    def _copy_apis(self, ctx: _ChunkCtx, out: dict[str, list[np.ndarray]]) -> None:
        """GE InputCopy (15000/3) / OutputCopy (15000/4) inside each ModelExecute."""
        ops, iters, win = ctx.ops, ctx.iters, ctx.win
        first = ctx.me_end.copy()
        last = np.full(len(iters), S.NEVER, np.int64)
        rows = np.flatnonzero((ctx.kind != op_map.KIND_NONE) & (ops.iter_row >= 0))
        if len(rows):
            np.minimum.at(first, ops.iter_row[rows], win.begin[rows])
            np.maximum.at(last, ops.iter_row[rows], win.end[rows])
        if ctx.copy_spans is not None:  # the time model's InputCopy / OutputCopy
            ib, ie, ob, oe = ctx.copy_spans
            iok = ook = np.ones(len(iters), bool)
        else:
            ib, ie, iok, ob, oe, ook = copy_spans(ctx.me_begin, ctx.me_end, first, last)
        ctx.copies = (ib, ie, iok, ob, oe, ook)
        for typ, b, e, ok in ((L.MODEL_INPUT_COPY, ib, ie, iok),
                              (L.MODEL_OUTPUT_COPY, ob, oe, ook)):
            if ok.any():
                out["api_event"].append(api_records(L.LEVEL_MODEL, typ, iters.thread[ok],
                                                    b[ok], e[ok], iters.model_id[ok]))

    def _graph_and_fusion(self, ctx: _ChunkCtx, rows: np.ndarray, name_hashes: np.ndarray,
                          out: dict[str, list[np.ndarray]], hash_texts: list[str]) -> None:
        iters = ctx.iters
        # graph_id_map once per model, at the begin of its first ModelExecute
        g_thr, g_ts, g_name, g_id = [], [], [], []
        for i, mid in enumerate(iters.model_id.tolist()):
            info = self.models.get(mid)
            if mid in self._graph_mapped or info is None or not info.name:
                continue
            self._graph_mapped.add(mid)
            hash_texts.append(info.name)
            g_thr.append(int(iters.thread[i]))
            g_ts.append(int(ctx.me_begin[i]))
            g_name.append(name_hash(info.name))
            g_id.append(mid)
        if g_ts:
            out["graph_id_map"].append(graph_id_map_records(
                np.array(g_thr, np.uint32), np.array(g_ts, np.int64),
                np.array(g_name, np.uint64), np.array(g_id, np.uint64)))
        # fusion_op_info once per fused op, beside the graph_id_map (outside node APIs)
        ops = ctx.ops
        fz = rows[(ops.fused_idx[rows] >= 0) & (ops.iter_row[rows] >= 0)]
        f_thr, f_ts, f_name, f_ids, f_sig = [], [], [], [], []
        for r in fz.tolist():
            name = self.names.items[int(ops.name_idx[r])]
            if name in self._fusion_reported:
                continue
            self._fusion_reported.add(name)
            originals = list(ops.fused[int(ops.fused_idx[r])])
            hash_texts += originals
            it = int(ops.iter_row[r])
            f_thr.append(int(iters.thread[it]))
            f_ts.append(int(ctx.me_begin[it]))
            f_name.append(int(name_hashes[ops.name_idx[r]]))
            f_ids.append([name_hash(o) for o in [name] + originals][1:] or [f_name[-1]])
            f_sig.append(int(ops.sig[r]))
        if f_ts:
            sig = np.array(f_sig)
            out["fusion_op_info"].append(fusion_op_records(
                np.array(f_thr, np.uint32), np.array(f_ts, np.int64),
                np.array(f_name, np.uint64), f_ids,
                ctx.sig["bytes_in"][sig].astype(np.uint64),
                ctx.sig["bytes_out"][sig].astype(np.uint64)))

    def _write_host(self, ctx: _ChunkCtx, host: dict[str, list[np.ndarray]]) -> None:
        hash_lines = host.pop("_hash_lines")  # type: ignore[arg-type]
        if hash_lines:
            self.host.file("hash_dic", lambda i: L.host_file_name("hash_dic", i)
                           ).write_lines(hash_lines)  # type: ignore[arg-type]
        sort_key = {"api_event": "end_time"}
        for kind, parts in host.items():
            parts = [p for p in parts if len(p)]
            if not parts:
                continue
            arr = np.concatenate(parts) if len(parts) > 1 else parts[0]
            ts = arr[sort_key.get(kind, "timestamp")]
            if len(ts) > 1 and (ts[1:] < ts[:-1]).any():  # already in order: no copy (the
                arr = arr[np.argsort(ts, kind="stable")]  # tensor_info records are ~200 B)
            self.host.file(kind, lambda i, k=kind: L.host_file_name(k, i)).write_records(arr)

    def _write_tx(self, chunk: CaptureChunk) -> None:
        mk = chunk.markers
        n = len(mk)
        # the domain names must reach hash_dic (the exporter resolves msproftx domains)
        lines = self._hash_lines([m.domain for m in mk])
        if lines:
            self.host.file("hash_dic", lambda i: L.host_file_name("hash_dic", i)
                           ).write_lines(lines)
        arr = msproftx_records(
            self.pid, np.array([m.thread_id for m in mk], np.uint32),
            self.warp(np.array([m.start_ns for m in mk], np.int64)),
            self.warp(np.array([m.end_ns for m in mk], np.int64)),
            np.array([m.category for m in mk], np.uint32),
            np.array([m.event_type for m in mk], np.uint32),
            np.arange(self._tx_count, self._tx_count + n, dtype=np.uint64),
            np.array([name_hash(m.domain) for m in mk], np.uint64),
            [m.message.encode("utf-8") for m in mk])
        self._tx_count += n
        self.host.file("msproftx", lambda i: L.host_file_name("msproftx", i)
                       ).write_records(arr)

    # --- device side -----------------------------------------------------------------------
    def _device_pass(self, ctx: _ChunkCtx, dd: _DeviceDir,
                     host: dict[str, list[np.ndarray]]) -> None:
        res = self._schedule_device(ctx, dd)
        if res is None:
            return
        scheduled, memcpy, copies = res
        self._emit(ctx, dd, scheduled, host, self._emit_memcpy(ctx, dd, memcpy, copies, host))

    def _schedule_device(self, ctx: _ChunkCtx, dd: _DeviceDir
                         ) -> tuple[dict[int, S.ScheduledStream], list[S.ScheduledStream],
                                    dict[str, np.ndarray] | None] | None:
        """Schedule this device's tasks of the chunk on its streams (state updated)."""
        ops, iters, win, kind = ctx.ops, ctx.iters, ctx.win, ctx.kind
        cfg = self.config
        clk = dd.state.clock
        trace = cfg.training_trace
        rows = np.flatnonzero((ops.device_id == dd.device_id) & (kind != op_map.KIND_NONE))
        # iterations that this device takes part in (markers); empty iterations -> first device
        it_rows = np.unique(ops.iter_row[(ops.device_id == dd.device_id) & (ops.iter_row >= 0)])
        if len(iters) and dd.device_id == min(self.devices):
            have_ops = np.zeros(len(iters), bool)
            have_ops[ops.iter_row[ops.iter_row >= 0]] = True
            it_rows = np.union1d(it_rows, np.flatnonzero(~have_ops))
        if len(rows) == 0 and (len(it_rows) == 0 or not trace):
            return None
        tt = win.track_ts[rows]
        ready = clk.ticks(tt + S.LAUNCH_LATENCY_NS)
        dur = ctx.cost.dur_ticks[ops.sig[rows]]
        stream = _STREAM_LUT[kind[rows]]
        op_iter = ops.iter_row[rows]
        n_it = len(iters)
        copies = self._memcpy_tasks(ctx, dd, it_rows)
        h2d = None
        if copies is not None and len(copies["h2d_it"]):
            # input copy first: every task of the iteration waits for its batch (GE: the
            # model's first task waits on the copy's event)
            plan = S.StreamPlan()
            plan.add(op_row=-1, order_ns=copies["h2d_ts"], sub=0,
                     ready=clk.ticks(copies["h2d_ts"] + S.LAUNCH_LATENCY_NS),
                     dur=copies["h2d_dur"], gap=S.TASK_GAP_TICKS, tag=-1,
                     iter_row=copies["h2d_it"])
            h2d = S.schedule(plan, dd.state, MC.H2D_STREAM)
            h2d_end = np.full(n_it, S.NEVER, np.int64)
            h2d_end[h2d.iter_row] = h2d.end
            inn = op_iter >= 0
            ready = ready.copy()
            ready[inn] = np.maximum(ready[inn], h2d_end[op_iter[inn]])

        # Cross-stream order (GE's event record/wait): an AI CPU / HCCL task waits for the
        # compute-stream task launched just before it (its producer), and the iteration-end
        # markers wait for the other streams.  Pass A schedules the compute stream on a
        # scratch copy of its state to learn the producers' end times.
        comp = dd.state.stream(S.COMPUTE_STREAM)
        saved = (comp.counter, comp.free_tick)
        no_end = np.full(n_it, S.NEVER, np.int64)
        trial = S.schedule(self._compute_plan(ctx, clk, it_rows, rows, tt, ready, dur, stream,
                                              op_iter, no_end, {}, dd.device_id),
                           dd.state, S.COMPUTE_STREAM)
        comp.counter, comp.free_tick = saved
        k_ops = trial.op_row >= 0
        k_order, k_end = trial.order_ns[k_ops], trial.end[k_ops]
        # Pass B: the AI CPU / HCCL streams wait for their producers, then the compute stream
        # (whose end markers wait for those streams).  The trial compute schedule does not
        # have those waits, so a producer can really end later than the trial says (the
        # iteration before waited for a long collective): then a second round uses the
        # producers of the first round's compute schedule, so an AI CPU / HCCL task (and its
        # Reduce markers) never runs before its iteration's start marker.
        sids = (S.AICPU_STREAM, S.HCCL_STREAM, S.COMPUTE_STREAM)
        saved_all = {sid: (st.counter, st.free_tick) if (st := dd.state.streams.get(sid))
                     else None for sid in sids}
        for round_ in range(2):
            if round_:  # the streams as they were before the first round
                for sid, was in saved_all.items():
                    if was is None:
                        dd.state.streams.pop(sid, None)
                    else:
                        st = dd.state.streams[sid]
                        st.counter, st.free_tick = was
            scheduled, other_end = self._side_and_compute(
                ctx, dd, clk, it_rows, rows, tt, ready, dur, stream, op_iter, k_order, k_end,
                trace, n_it)
            comp_sch = scheduled.get(S.COMPUTE_STREAM)
            side = [scheduled[sid] for sid in (S.AICPU_STREAM, S.HCCL_STREAM)
                    if sid in scheduled]
            if round_ or comp_sch is None or not side:
                break
            k_ops = comp_sch.op_row >= 0
            new_end = comp_sch.end[k_ops]
            if np.array_equal(new_end, k_end) or len(new_end) != len(k_end):
                break  # the trial was right: nothing to redo
            k_order, k_end = comp_sch.order_ns[k_ops], np.maximum(k_end, new_end)
        memcpy: list[S.ScheduledStream] = [h2d] if h2d is not None else []
        if copies is not None and len(copies["d2h_it"]):
            # output copy after the iteration's last task on every stream
            last = other_end.copy()
            comp = scheduled.get(S.COMPUTE_STREAM)
            if comp is not None:
                sel = comp.iter_row >= 0
                np.maximum.at(last, comp.iter_row[sel], comp.end[sel])
            it = copies["d2h_it"]
            plan = S.StreamPlan()
            plan.add(op_row=-1, order_ns=copies["d2h_ts"], sub=0,
                     ready=np.maximum(clk.ticks(copies["d2h_ts"] + S.LAUNCH_LATENCY_NS),
                                      last[it]),
                     dur=copies["d2h_dur"], gap=S.TASK_GAP_TICKS, tag=-1, iter_row=it)
            memcpy.append(S.schedule(plan, dd.state, MC.D2H_STREAM))
        return scheduled, memcpy, copies

    def _side_and_compute(self, ctx: _ChunkCtx, dd: _DeviceDir, clk: S.DeviceClock,
                          it_rows: np.ndarray, rows: np.ndarray, tt: np.ndarray,
                          ready: np.ndarray, dur: np.ndarray, stream: np.ndarray,
                          op_iter: np.ndarray, k_order: np.ndarray, k_end: np.ndarray,
                          trace: bool, n_it: int
                          ) -> tuple[dict[int, S.ScheduledStream], np.ndarray]:
        """AI CPU / HCCL streams after their producers (`k_order`/`k_end`: launch times and
        end ticks of the compute-stream tasks), then the compute stream."""
        scheduled: dict[int, S.ScheduledStream] = {}
        for sid in (S.AICPU_STREAM, S.HCCL_STREAM):
            m = stream == sid
            dep = ready[m].copy()
            if len(k_order) and m.any():
                pos = np.searchsorted(k_order, tt[m], side="left") - 1
                has = pos >= 0
                dep[has] = np.maximum(dep[has], k_end[pos[has]] + S.EVENT_WAIT_TICKS)
            plan = S.StreamPlan()
            if sid == S.HCCL_STREAM and self._hccl_steps_on() and m.any():
                # one task per step of the collective (hccl_step_plan), back to back, the
                # op's duration split evenly: HCCL launches each step as its own task
                steps, _ = self._hccl_steps(ctx, rows[m], dd.device_id)
                rep = np.repeat(np.arange(int(m.sum())), steps)
                k = np.arange(len(rep)) - np.repeat(np.cumsum(steps) - steps, steps)
                d, n = dur[m][rep], steps[rep]
                plan.add(op_row=rows[m][rep], order_ns=tt[m][rep], sub=0, ready=dep[rep],
                         dur=np.maximum(d * (k + 1) // n - d * k // n, 1),
                         gap=np.where(k == 0, S.TASK_GAP_TICKS, 0), tag=-1,
                         iter_row=op_iter[m][rep])
            else:
                plan.add(op_row=rows[m], order_ns=tt[m], sub=0, ready=dep, dur=dur[m],
                         gap=S.TASK_GAP_TICKS, tag=-1, iter_row=op_iter[m])
            if sid == S.HCCL_STREAM and trace:
                self._reduce_markers(plan, ctx, rows[m], tt[m], dep, op_iter[m])
            if plan.op_row:
                scheduled[sid] = S.schedule(plan, dd.state, sid)
        other_end = np.full(n_it, S.NEVER, np.int64)
        op_end = {}
        for sch in scheduled.values():
            sel = sch.iter_row >= 0
            if n_it and sel.any():
                np.maximum.at(other_end, sch.iter_row[sel], sch.end[sel])
            for r, e in zip(sch.op_row[sch.op_row >= 0].tolist(),
                            sch.end[sch.op_row >= 0].tolist()):
                op_end[r] = e
        plan = self._compute_plan(ctx, clk, it_rows, rows, tt, ready, dur, stream, op_iter,
                                  other_end, op_end, dd.device_id)
        if plan.op_row:
            scheduled[S.COMPUTE_STREAM] = S.schedule(plan, dd.state, S.COMPUTE_STREAM)
        return scheduled, other_end

    def _memcpy_tasks(self, ctx: _ChunkCtx, dd: _DeviceDir, it_rows: np.ndarray
                      ) -> dict[str, np.ndarray] | None:
        """Input / output copies of this device's iterations (device/memcpy.py): iteration
        rows, task_track times (middle of the GE InputCopy / OutputCopy API), durations."""
        if ctx.copies is None or not len(it_rows):
            return None
        ops, iters = ctx.ops, ctx.iters
        n_it = len(iters)
        ib, ie, iok, ob, oe, ook = ctx.copies
        feed, fetch, known = MC.model_bytes(self.models, iters.model_id)
        # devices per iteration: the batch is split over the replicas
        inn = ops.iter_row >= 0
        # distinct (iteration, device) pairs as one int64 key each (np.unique with axis=1
        # sorts void records: ~10x slower, it was 5 % of a loop-heavy model's collect)
        dev = ops.device_id[inn].astype(np.int64)
        if len(dev):
            dev = dev - dev.min()
        span = int(dev.max()) + 1 if len(dev) else 1
        pairs_it = np.unique(ops.iter_row[inn].astype(np.int64) * span + dev) // span
        n_dev = np.maximum(np.bincount(pairs_it, minlength=n_it), 1)
        # fallback: outputs of this device's data-source ops of the step
        src = MC.source_bytes_per_sig(self.sigs, ctx.sig["bytes_out"])[ops.sig]
        mine = inn & (ops.device_id == dd.device_id) & (src > 0)
        seen = np.zeros(n_it, np.int64)
        np.add.at(seen, ops.iter_row[mine], src[mine])
        hb = np.where(known, -(-feed // n_dev), seen)  # bytes per iteration (ceil split)
        db = -(-fetch // n_dev)
        tick = dd.state.clock.tick_ns
        h = it_rows[(hb[it_rows] > 0) & iok[it_rows]]
        d = it_rows[(db[it_rows] > 0) & ook[it_rows]]
        # the input copy is issued at the end of InputCopy (which may span a wait for the
        # batch: time_model.py), the output copy in the middle of OutputCopy
        return {"h2d_it": h, "h2d_ts": ie[h] - np.minimum(1_000, (ie[h] - ib[h]) // 2),
                "h2d_dur": MC.duration_ticks(hb[h], tick), "h2d_bytes": hb[h],
                "d2h_it": d, "d2h_ts": ob[d] + (oe[d] - ob[d]) // 2,
                "d2h_dur": MC.duration_ticks(db[d], tick), "d2h_bytes": db[d]}

    def _emit_memcpy(self, ctx: _ChunkCtx, dd: _DeviceDir, scheduled: list[S.ScheduledStream],
                     copies: dict[str, np.ndarray] | None, host: dict[str, list[np.ndarray]]
                     ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Host task_track (MEMCPY_ASYNC) + rtMemcpyAsync API, flips, and the ts_track
        rptType 11 start/end records of the copies; returns the ts_track parts."""
        if not scheduled or copies is None:
            return []
        clk = dd.state.clock
        dev = dd.device_id
        iters = ctx.iters
        out: list[tuple[np.ndarray, np.ndarray]] = []
        host["_hash_lines"].extend(self._hash_lines([MC.H2D_NAME, MC.D2H_NAME]))
        for sch in scheduled:
            key = "h2d" if sch.stream_id == MC.H2D_STREAM else "d2h"
            name = MC.H2D_NAME if key == "h2d" else MC.D2H_NAME
            n = len(sch)
            # schedule() keeps launch order = the order of copies[...] (one per iteration,
            # increasing times); map back by iteration row to be safe
            pos = np.searchsorted(copies[f"{key}_it"], sch.iter_row)
            ts = copies[f"{key}_ts"][pos]
            thr = iters.thread[sch.iter_row].astype(np.uint32)
            stream = np.full(n, sch.stream_id)
            host["task_track"].append(task_track_records(
                thr, ts, dev, stream, sch.task_id, np.zeros(n, np.int64),
                np.full(n, MEMCPY_TYPE), np.full(n, name_hash(name), np.uint64),
                np.zeros(n, np.uint16)))
            if self.config.runtime_api:
                b = ts - np.minimum(1_000, (ts - ctx.copies[0 if key == "h2d" else 3][
                    sch.iter_row]) // 2)
                e = ts + np.minimum(2_000, (ctx.copies[1 if key == "h2d" else 4][
                    sch.iter_row] - ts) // 2)
                ok = e > b
                host["api_event"].append(api_records(
                    L.LEVEL_RUNTIME, RT_MEMCPY_ASYNC, thr[ok], b[ok], e[ok],
                    np.zeros(int(ok.sum()), np.uint64)))
            fl = np.flatnonzero(sch.flip_start)
            if len(fl):
                host["task_track"].append(task_track_records(
                    thr[fl], ts[fl] - 1, dev, stream[fl], sch.task_id[fl], sch.flip[fl],
                    np.full(len(fl), FLIP_TYPE), np.zeros(len(fl), np.uint64),
                    np.zeros(len(fl), np.uint16)))
                f_ts = clk.syscnt(sch.start[fl] - 1)
                out.append((flip_records(f_ts, stream[fl], sch.flip[fl], sch.task_id[fl]), f_ts))
            # received by the TS when the launch reaches it (never after the start), started,
            # ended: the three states the analysis needs (layouts.TS_TRACK_MEMCPY)
            r_ts = clk.syscnt(np.minimum(clk.ticks(ts + S.LAUNCH_LATENCY_NS), sch.start))
            s_ts, e_ts = clk.syscnt(sch.start), clk.syscnt(sch.end)
            for state, t_ in ((L.TS_STATE_RECEIVE, r_ts), (L.TS_STATE_START, s_ts),
                              (L.TS_STATE_END, e_ts)):
                out.append((memcpy_records(t_, stream, sch.task_id, state), t_))
        return out

    def _compute_plan(self, ctx: _ChunkCtx, clk: S.DeviceClock, it_rows: np.ndarray,
                      rows: np.ndarray, tt: np.ndarray, ready: np.ndarray, dur: np.ndarray,
                      stream: np.ndarray, op_iter: np.ndarray, other_end: np.ndarray,
                      op_end: dict[int, int], dev: int) -> S.StreamPlan:
        """AI Core kernels + step-trace markers of the compute stream."""
        m = stream == S.COMPUTE_STREAM
        plan = S.StreamPlan()
        plan.add(op_row=rows[m], order_ns=tt[m], sub=0, ready=ready[m], dur=dur[m],
                 gap=S.TASK_GAP_TICKS, tag=-1, iter_row=op_iter[m])
        if self.config.training_trace and len(it_rows):
            self._step_markers(plan, ctx, clk, it_rows, rows, tt, ready, op_iter, other_end,
                               op_end, dev)
        return plan

    def _reduce_markers(self, plan: S.StreamPlan, ctx: _ChunkCtx, rows: np.ndarray,
                        tt: np.ndarray, ready: np.ndarray, op_iter: np.ndarray) -> None:
        ar = ctx.sig["allreduce"][ctx.ops.sig[rows]] & (op_iter >= 0)
        if not ar.any():
            return
        r, t, rd, it = rows[ar], tt[ar], ready[ar], op_iter[ar]
        order = np.lexsort((t, it))
        r, t, rd, it = r[order], t[order], rd[order], it[order]
        first = np.r_[0, np.flatnonzero(np.diff(it)) + 1]
        k = np.arange(len(it)) - np.repeat(first, np.diff(np.r_[first, len(it)]))
        plan.add(op_row=-1, order_ns=t, sub=-1, ready=rd, dur=0, gap=S.MARKER_GAP_TICKS,
                 tag=TAG_REDUCE_BASE + 2 * k, iter_row=it)
        plan.add(op_row=-1, order_ns=t, sub=1, ready=rd, dur=0, gap=0,
                 tag=TAG_REDUCE_BASE + 2 * k + 1, iter_row=it)

    def _step_markers(self, plan: S.StreamPlan, ctx: _ChunkCtx, clk: S.DeviceClock,
                      it_rows: np.ndarray, rows: np.ndarray, tt: np.ndarray,
                      ready: np.ndarray, op_iter: np.ndarray, other_end: np.ndarray,
                      op_end: dict[int, int], dev: int) -> None:
        lat = S.LAUNCH_LATENCY_NS
        me_b = ctx.me_begin[it_rows]
        plan.add(op_row=-1, order_ns=me_b, sub=-2, ready=clk.ticks(me_b + lat), dur=0,
                 gap=S.MARKER_GAP_TICKS, tag=TAG_MODEL_START, iter_row=it_rows)
        # last launch of each iteration on this device
        last = ctx.me_begin.copy()
        inn = op_iter >= 0
        if inn.any():
            np.maximum.at(last, op_iter[inn], tt[inn])
        last_it = last[it_rows]
        end_ready = np.maximum(clk.ticks(last_it + lat), other_end[it_rows])
        # the end markers are launched before the next iteration's model start: a launch
        # pushed past it (launch windows serialise a thread behind a long collective, whose
        # host span can outlast the step) must not put the next iteration's start marker
        # ahead of this one's end on the stream -- the iterations would overlap and the
        # step trace lose this one's FP/BP/Reduce markers (seen in CI: Reduce N/A)
        starts = np.sort(ctx.me_begin)
        nxt = np.searchsorted(starts, me_b, side="right")
        has_next = nxt < len(starts)
        next_b = np.where(has_next, starts[np.minimum(nxt, len(starts) - 1)], last_it + 1)
        last_it = np.maximum(np.minimum(last_it, next_b - 1), me_b)
        names = ctx.ops.name_idx[rows]
        for tag, name_of_iter, sub in ((TAG_FP, ctx.fp_name[dev], -1),
                                       (TAG_BP, ctx.bp_name[dev], 1)):
            hit = inn & (names == name_of_iter[np.maximum(op_iter, 0)]) & \
                (name_of_iter[np.maximum(op_iter, 0)] >= 0)
            idx = np.flatnonzero(hit)
            if not len(idx):
                continue
            order = np.lexsort((tt[idx], op_iter[idx]))
            idx = idx[order]
            its = op_iter[idx]
            if tag == TAG_FP:
                pick = idx[np.r_[0, np.flatnonzero(np.diff(its)) + 1]]
            else:
                pick = idx[np.r_[np.flatnonzero(np.diff(its)), len(its) - 1]]
            rd = ready[pick].copy()
            if tag == TAG_BP:  # after the bp op even when it runs on another stream
                rd = np.maximum(rd, [op_end.get(int(r), S.NEVER) for r in rows[pick]])
            plan.add(op_row=-1, order_ns=tt[pick], sub=sub, ready=rd, dur=0,
                     gap=S.MARKER_GAP_TICKS, tag=tag, iter_row=op_iter[pick])
        plan.add(op_row=-1, order_ns=last_it, sub=2, ready=end_ready, dur=0,
                 gap=S.MARKER_GAP_TICKS, tag=TAG_ITER_END, iter_row=it_rows)
        plan.add(op_row=-1, order_ns=last_it, sub=3, ready=end_ready, dur=0,
                 gap=S.MARKER_GAP_TICKS, tag=TAG_MODEL_END, iter_row=it_rows)

    def _hccl_steps_on(self) -> bool:
        """HCCL data is written (hccl on, several ranks): each collective runs as its steps."""
        return bool(self.config.hccl) and self.config.task_time != "off" \
            and self.hccl_ranks() > 1

    def _hccl_steps(self, ctx: _ChunkCtx, rows: np.ndarray, device_id: int
                    ) -> tuple[np.ndarray, np.ndarray]:
        """Per op row, its number of steps on this rank (`host_records.hccl_step_plan`), and
        per step (the rows' steps in order) (reduce step, role, remote rank, data bytes)."""
        n = self.hccl_ranks()
        rank = self.hccl_rank(device_id)
        uniq, plan_of = np.unique(ctx.ops.sig[rows], return_inverse=True)
        plans = [hccl_step_plan(self.sigs.ge_type[sg], self.sigs.tf_type[sg],
                                bool(ctx.sig["allreduce"][sg]), rank, n,
                                float(ctx.sig["bytes_in"][sg]), float(ctx.sig["bytes_out"][sg]))
                 for sg in uniq.tolist()]
        width = max([len(pl) for pl in plans] + [1])
        table = np.zeros((len(plans), width, 4), np.int64)
        for i, pl in enumerate(plans):
            table[i, :len(pl)] = pl
        steps = np.maximum(np.array([len(pl) for pl in plans], np.int64), 1)[plan_of] \
            if len(plans) else np.zeros(0, np.int64)
        task = np.repeat(np.arange(len(rows)), steps)
        k = np.arange(len(task)) - np.repeat(np.cumsum(steps) - steps, steps)
        return steps, table[plan_of[task], k]

    def _hccl_step_records(self, ctx: _ChunkCtx, dd: _DeviceDir, sch: S.ScheduledStream,
                           host: dict[str, list[np.ndarray]]) -> np.ndarray:
        """Host records of the collectives' steps on this rank (several ranks, hccl on), as
        the analysis links them (Ascend/msprof mscalculate/cann/cann_analysis_gear.py
        TaskGear.add_hccl_task / add_hccl_op): per step (= one task of the HCCL stream) an
        HCCL-level API (level 5500, master) inside the op's node launch API, enclosing the
        step's hccl_info and its runtime task_track (MEMCPY_ASYNC for a copy, REDUCE_ASYNC for
        an inline reduce).  The op's steps share its launch window from its task_track
        point on, one slot each.  Returns the task_track time of every stream entry (-1 for
        markers), for the flips."""
        win = ctx.win
        is_op = sch.op_row >= 0
        rows = sch.op_row[is_op]
        track = np.full(len(sch), -1, np.int64)
        if not len(rows):
            return track
        # the stream holds each op's steps consecutively, in step order
        first = np.r_[True, rows[1:] != rows[:-1]]
        op_rows = rows[first]
        steps, info = self._hccl_steps(ctx, op_rows, dd.device_id)
        if int(steps.sum()) != len(rows):
            raise RuntimeError("HCCL steps do not match the HCCL stream's tasks")
        task = np.repeat(np.arange(len(op_rows)), steps)
        k = np.arange(len(task)) - np.repeat(np.cumsum(steps) - steps, steps)
        reduce_step = info[:, 0].astype(bool)
        # one slot [b, e] per step in [track_ts, window end) of the op's launch
        t0 = win.track_ts[rows]
        slot = np.maximum((win.end[rows] - t0) // steps[task], 1)
        b = t0 + k * slot
        e = b + np.maximum(slot - 1, 0)
        info_ts = np.minimum(b + 1, e)
        track_ts = np.minimum(b + 2, e)
        thread = win.thread[rows]
        name_hash_of = np.array([name_hash(n_) for n_ in self.names.items], np.uint64)
        op_h = name_hash_of[ctx.ops.name_idx[rows]]
        host["api_event"].append(api_records(L.LEVEL_HCCL, L.HCCL_MASTER, thread, b, e, op_h))
        clk = dd.state.clock
        start, end = clk.ns(sch.start[is_op]), clk.ns(sch.end[is_op])
        names = {True: "Reduce_Inline", False: "Memcpy"}
        host["_hash_lines"].extend(self._hash_lines(list(names.values()) + ["hccl_world_group"]))
        name_h = np.where(reduce_step, name_hash(names[True]), name_hash(names[False]))
        host["hccl_info"].append(hccl_info_records(
            thread, info_ts, end - start, name_h.astype(np.uint64), op_h,
            name_hash("hccl_world_group"), self.hccl_rank(dd.device_id), self.hccl_ranks(), k,
            info[:, 3].astype(np.uint64), np.zeros(len(rows), np.uint32),
            remote_rank=info[:, 2].astype(np.uint32), role=info[:, 1].astype(np.uint32)))
        rt = np.where(reduce_step, REDUCE_TYPE, MEMCPY_TYPE)
        host["task_track"].append(task_track_records(
            thread, track_ts, dd.device_id, np.full(len(rows), sch.stream_id),
            sch.task_id[is_op], np.zeros(len(rows), np.int64), rt, op_h,
            np.zeros(len(rows), np.uint16)))
        track[is_op] = track_ts
        return track

    def _emit(self, ctx: _ChunkCtx, dd: _DeviceDir, scheduled: dict[int, S.ScheduledStream],
              host: dict[str, list[np.ndarray]],
              extra_ts: list[tuple[np.ndarray, np.ndarray]] | None = None) -> None:
        cfg = self.config
        ops, iters, win, cost = ctx.ops, ctx.iters, ctx.win, ctx.cost
        clk = dd.state.clock
        task_on = cfg.task_time != "off"
        files = dd.data
        dev = dd.device_id
        ts_parts: list[np.ndarray] = [p for p, _ in extra_ts or ()]
        ts_time: list[np.ndarray] = [t for _, t in extra_ts or ()]
        name_hash_of = np.array([name_hash(n) for n in self.names.items], np.uint64)
        hw_parts: list[tuple[np.ndarray, ...]] = []
        for sid, sch in scheduled.items():
            is_op = sch.op_row >= 0
            op_rows = sch.op_row[is_op]
            # host task_track of the launched kernels (AI Core / AI CPU; HCCL has none)
            kinds = ctx.kind[op_rows] if len(op_rows) else np.zeros(0, np.int64)
            tracked = np.isin(kinds, [op_map.KIND_AI_CORE, op_map.KIND_AI_CPU])
            if task_on and tracked.any():
                r = op_rows[tracked]
                host["task_track"].append(task_track_records(
                    win.thread[r], win.track_ts[r], dev, np.full(len(r), sid),
                    sch.task_id[is_op][tracked], np.zeros(len(r), np.int64),
                    _RT_TYPE_LUT[ctx.kind[r]], name_hash_of[ops.name_idx[r]],
                    cost.block_dim[ops.sig[r]]))
            if cfg.runtime_api and tracked.any():
                # the runtime launch API around each task_track (level 5000, runtime_api on)
                r = op_rows[tracked]
                rb, re_ = runtime_api_spans(win.begin[r], win.track_ts[r], win.end[r])
                rt = np.where(ctx.kind[r] == op_map.KIND_AI_CORE, RT_KERNEL_LAUNCH,
                              RT_CPU_KERNEL_LAUNCH)
                host["api_event"].append(api_records(L.LEVEL_RUNTIME, rt, win.thread[r], rb,
                                                     re_, np.zeros(len(r), np.uint64)))
            steps_on = sid == S.HCCL_STREAM and self._hccl_steps_on()
            step_track = self._hccl_step_records(ctx, dd, sch, host) if steps_on else None
            left_out = ("aicpu" if sid == S.AICPU_STREAM and not cfg.aicpu else
                        "hccl" if sid == S.HCCL_STREAM and not cfg.hccl
                        and self.hccl_ranks() > 1 else None)
            if left_out is not None and len(op_rows):
                sigs, counts = np.unique(ops.sig[op_rows], return_counts=True)
                for sg, c in zip(sigs.tolist(), counts.tolist()):
                    self.uncollected[left_out][self.sigs.tf_type[sg]] += c
            # flips: host FLIP_TASK + device ts_track rptType 14
            fl = np.flatnonzero(sch.flip_start)
            if len(fl):
                row = sch.op_row[fl]
                it = np.maximum(sch.iter_row[fl], 0)
                # host flip strictly between the launches of the tasks around it: before an
                # op task's task_track, or beside the marker's anchor launch
                op_track = win.track_ts[np.maximum(row, 0)] if step_track is None \
                    else step_track[fl]
                h_ts = np.where(row >= 0, op_track - 1,
                                sch.order_ns[fl] + np.where(sch.sub[fl] > 0, 1, -1))
                h_thr = np.where(row >= 0, win.thread[np.maximum(row, 0)],
                                 iters.thread[it] if len(iters) else 0)
                if task_on:
                    host["task_track"].append(task_track_records(
                        h_thr.astype(np.uint32), h_ts, dev, np.full(len(fl), sid),
                        sch.task_id[fl], sch.flip[fl], np.full(len(fl), FLIP_TYPE),
                        np.zeros(len(fl), np.uint64), np.zeros(len(fl), np.uint16)))
                f_ts = clk.syscnt(sch.start[fl] - 1)
                ts_parts.append(flip_records(f_ts, np.full(len(fl), sid), sch.flip[fl],
                                             sch.task_id[fl]))
                ts_time.append(f_ts)
            # step-trace markers
            mk = np.flatnonzero(~is_op)
            if len(mk) and cfg.training_trace:
                it = sch.iter_row[mk]
                m_ts = clk.syscnt(sch.start[mk])
                ts_parts.append(step_trace_records(m_ts, iters.index[it], iters.model_id[it],
                                                   np.full(len(mk), sid), sch.task_id[mk],
                                                   sch.tag[mk]))
                ts_time.append(m_ts)
            if not task_on or not len(op_rows):
                continue
            if sid == S.COMPUTE_STREAM or steps_on:
                # the task log: AI Core kernels and the collectives' steps (the analysis
                # takes the 910's device tasks from hwts.data and, for AI CPU, ts_track)
                hw_parts.append((sch.task_id[is_op], np.full(int(is_op.sum()), sid),
                                 sch.start[is_op], sch.end[is_op]))
            if sid == S.COMPUTE_STREAM:
                tid = sch.task_id[is_op]
                st, en = sch.start[is_op], sch.end[is_op]
                by_end = np.argsort(en, kind="stable")
                tsig = ops.sig[op_rows][by_end]
                if cfg.pmu_on:
                    pmu = event_counters(cost, tsig, ctx.sig, cfg.aic_events)
                    ac = aicore_records(tid[by_end], np.full(len(tid), sid),
                                        cost.total_cycles[tsig], pmu, dd.state.aicore_count)
                    dd.state.aicore_count += len(ac)
                    files.file("aicore", lambda i: L.device_file_name("aicore", dev, i)
                               ).write_records(ac)
                if cfg.l2:
                    ev = l2_counters(cost, tsig, ctx.sig, self.chip.l2_line_bytes,
                                     L2_CACHE_EVENTS)
                    files.file("l2_cache", lambda i: L.device_file_name("l2_cache", dev, i)
                               ).write_records(l2_cache_records(
                                   np.full(len(tid), sid), tid[by_end], ev))
            elif sid == S.AICPU_STREAM:
                # the TS's task-type reports (ts_track rptType 12): on the 910 the only
                # device record of an AI CPU task's start and end (the task log hwts.data
                # holds AI Core tasks only), written with task trace like hwts.data;
                # aicpu.data (the AI CPU scheduler's timings, --aicpu on) adds the details
                tid = sch.task_id[is_op]
                st, en = sch.start[is_op], sch.end[is_op]
                rd = np.minimum(clk.ticks(win.track_ts[op_rows] + S.LAUNCH_LATENCY_NS), st)
                strm = np.full(len(tid), sid)
                for state, tk in ((L.TS_STATE_RECEIVE, rd), (L.TS_STATE_START, st),
                                  (L.TS_STATE_END, en)):
                    t_ = clk.syscnt(tk)
                    ts_parts.append(task_type_records(t_, strm, tid, L.TS_TASK_TYPE_AI_CPU,
                                                      state))
                    ts_time.append(t_)
                if not cfg.aicpu:
                    continue
                thr = (4 + np.arange(len(tid)) % self.chip.ai_cpu_core_num).astype(np.uint32)
                files.file("aicpu", lambda i: L.device_file_name("aicpu", dev, i)
                           ).write_records(aicpu_records(
                               dev, np.full(len(tid), sid), tid, clk.syscnt(rd),
                               clk.syscnt(st), clk.syscnt(en), clk.ns(st), clk.ns(en), thr))
        if hw_parts:
            tid, strm, st, en = (np.concatenate(c) for c in zip(*hw_parts))
            hw = hwts_records(tid, strm, clk.syscnt(st), clk.syscnt(en), dd.state.hwts_count)
            dd.state.hwts_count += len(hw)
            files.file("hwts", lambda i: L.device_file_name("hwts", dev, i)).write_records(hw)
        if ts_parts:
            arr = np.concatenate([p.view(np.uint8).reshape(-1, L.TS_TRACK_SIZE)
                                  for p in ts_parts])
            order = np.argsort(np.concatenate(ts_time), kind="stable")
            files.file("ts_track", lambda i: L.device_file_name("ts_track", dev, i)
                       ).write_records(arr[order].reshape(-1).view(L.TS_TRACK_STEP))
