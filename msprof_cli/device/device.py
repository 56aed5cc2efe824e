"""The emulated NPU: CaptureChunk in, raw PROF data out (docs/device-model.md).

    dev = Device(prof_dir, config, clock=ClockPair.now(), pid=os.getpid(), app=sys.argv)
    dev.consume(chunk)      # any number of times; appends + fsyncs the slice files
    dev.close(ClockPair.now())

All control files are written by the constructor, so a run killed at any point leaves a PROF
dir the exporter accepts.  State that must continue across chunks (task ids and flips per
stream, stream clocks, 4-bit record counters, dictionary entries already written, per-thread
host record windows, fp/bp choices) lives in this object or the objects it holds.

`Device` owns the PROF dir, its control files, the emulated devices and their HCCL ranks, the
chunk loop (layer (a) `build_tables`, UB fusion, FP/BP choice), the emulated system's time
(`_emulate_time`, with time_model.py) and the preparation of each chunk (`ChunkCtx`: launch
windows, ModelExecute spans).  The passes over a prepared chunk live beside it: the host
records in host_pass.py, each device's streams in task_schedule.py and their records in
stream_records.py.
"""
from __future__ import annotations

import copy
import dataclasses
import logging
import os
from collections import Counter
from pathlib import Path
from typing import Sequence

import numpy as np

from msprof_cli.capture import CaptureChunk, Iteration
from msprof_cli.device import memcpy as MC
from msprof_cli.device import op_map
from msprof_cli.device import rank_coupling
from msprof_cli.device import scheduler as S
from msprof_cli.device import time_model as TM
from msprof_cli.device.chip import ChipSpec, get_chip
from msprof_cli.device.chunk import ChunkCtx, DeviceDir
from msprof_cli.device.cost_model import CostTable, evaluate
from msprof_cli.device.dependencies import DependencyTables
from msprof_cli.device.l2_residency import L2Pass
from msprof_cli.device.memory import MemoryModel, hccl_buffer_from_env
from msprof_cli.device import memory_records as MR
from msprof_cli.device.host_pass import HostPass
from msprof_cli.device.host_records import launch_windows, type_info_lines
from msprof_cli.device.precision import PrecisionPass
from msprof_cli.device.op_table import Interner, IterTable, OpTable, SignatureRegistry, build_tables
from msprof_cli.device.replay_columns import ReplayColumns
from msprof_cli.device.run_facts import RunFacts
from msprof_cli.device.sample import write_sample_json
from msprof_cli.device.step_trace import FpBp, NameClasses, resolve_per_device
from msprof_cli.device.stream_records import emit, emit_memcpy
from msprof_cli.device.task_schedule import schedule_device
from msprof_cli.device.trans_ops import TransPass
from msprof_cli.device.ub_fusion import UbFuser
from msprof_cli.device.writer import DataDir, RawStorage
from msprof_cli.options import ProfilingConfig, normalize_precision_mode
from msprof_cli.raw import control
from msprof_cli.raw import layouts as L
from msprof_cli.raw import stars_layouts as SL
from msprof_cli.raw.control import ClockPair
from msprof_cli.raw.profdir import make_dir

log = logging.getLogger("msprof_cli.device")

DEV_CNTVCT_BASE = 1_000_000_000  # device syscnt at the sync point (10 s of headroom)


class Device:
    """Emulated Ascend device(s) writing one PROF dir (see module doc)."""

    def __init__(self, prof_dir: Path, config: ProfilingConfig, *, clock: ClockPair, pid: int,
                 app: list[str], device_ids: Sequence[int] = (0,), rank_id: int = -1,
                 rank_size: int = -1, chip: str = "Ascend910A", first_task_id: int = 1,
                 ub_fusion: bool = True, boundary_tasks: bool = True) -> None:
        self.prof_dir = Path(prof_dir)
        # traced / replayed / warm-up steps, training models, unknown op types (run_facts.py)
        self.facts = RunFacts(self.prof_dir)
        self.config = config
        self.chip: ChipSpec = get_chip(chip)
        # GE's variable memory and planned feature maps (memory.py)
        self.memory = MemoryModel(self.prof_dir, self.chip, hccl_buffer_from_env(os.environ))
        self.set_memory_pools(graph_memory_max_size=config.graph_memory_max_size,
                              variable_memory_max_size=config.variable_memory_max_size)
        # the memory records --task-memory / --sys-hardware-mem collect (memory_records.py)
        self.memrec = MR.MemoryRecords(
            clock.mono_ns, 10**9 // config.hardware_mem_freq if config.hardware_mem_freq
            else 0, config.task_memory, self.chip.hbm_reserved_bytes) \
            if config.hardware_mem_freq or config.task_memory else None
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
        # the L2 residency of each graph task's reads (l2_residency.py)
        self.l2 = L2Pass(float(self.chip.l2_bytes))
        # GE's TransData / Cast tasks at layout and precision boundaries (trans_ops.py)
        self.trans = TransPass(enabled=boundary_tasks)
        # GE's precision_mode: which ops run in fp16 (precision.py)
        self.precision = PrecisionPass(normalize_precision_mode(config.precision_mode))
        # tasks the run had that the options left out (collect says so at the end):
        # "aicpu" / "hccl" -> op type -> tasks, over every emulated device
        self.uncollected: dict[str, Counter] = {"aicpu": Counter(), "hccl": Counter()}
        self.names = Interner()
        # replayed steps' schedules as columns, built once per schedule (replay_columns.py)
        self.replays = ReplayColumns()
        self.name_classes = NameClasses()  # loop / backward per name (FP/BP markers)
        # per model, the data edges between its launched ops (dependencies.py)
        self.deps = DependencyTables()
        self.models: dict = {}
        self.fpbp: dict[int, FpBp] = {}  # per model: the choice of its lowest device
        self._fpbp_dev: dict[tuple[int, int], FpBp] = {}  # (model id, device id)
        self._thread_last_end: dict[int, int] = {}
        self.warp = TM.TimeWarp()  # real host clock -> the emulated system's (time_model.py)
        self._copy_spans: tuple[np.ndarray, ...] | None = None
        self._agent_spans: list[tuple[int, int]] = []  # of the chunk being consumed
        self._placed_end = 0  # real end of the last event the time warp placed
        self._pipeline = TM.PipelineState()  # the input pipeline across chunks
        self._cost_cache: tuple[tuple[int, int], CostTable] | None = None
        self._closed = False
        self.host_path = self.prof_dir / "host"
        make_dir(self.host_path)  # 0750 whatever the umask
        # slice rotation + storage_limit ageing over all data dirs (device/writer.py)
        self.storage = RawStorage(self.prof_dir, config.storage_limit_mb)
        self.host = DataDir(self.host_path / "data", self.storage)
        # the host side of every chunk, and what the PROF dir gets only once (host_pass.py)
        self.host_pass = HostPass(config, self.host, sigs=self.sigs, names=self.names,
                                  models=self.models, warp=self.warp, pid=pid)
        self._write_control(self.host_path, None)
        self._write_type_info()
        self.devices: dict[int, DeviceDir] = {}
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
                          pid=self.pid, chip=self.chip)
        control.write_host_start_log(result_dir, self.sync_ns, device_id)
        if device_id is not None:
            control.write_dev_start_log(result_dir, self.sync_ns, DEV_CNTVCT_BASE, device_id)
        control.write_start_info(result_dir, self.clock, device_id)

    def _write_type_info(self) -> None:
        f = self.host.file("type_info_dic",
                           lambda i: L.host_file_name("type_info_dic", i))
        f.write_lines(type_info_lines())
        f.sync()

    def _device(self, dev_id: int) -> DeviceDir:
        dd = self.devices.get(dev_id)
        if dd is None:
            path = self.prof_dir / f"device_{dev_id}"
            make_dir(path)
            clock = S.DeviceClock(self.sync_ns, DEV_CNTVCT_BASE, int(round(self.chip.tick_ns)))
            dd = DeviceDir(dev_id, path, DataDir(path / "data", self.storage),
                           S.DeviceState(clock, first_task_id=self.first_task_id))
            self.devices[dev_id] = dd
            self._write_control(path, dev_id)
            if self.chip.raw_layout == "stars" and self.config.pmu_on:
                # the AI Core frequency log (task-based AI Core profiling on an A2): the
                # emulated chip runs at its rated clock, so its one record says "no change"
                dd.data.file("lpm_freq", lambda i, d=dev_id: L.device_file_name(
                    "lpm_freq", d, i)).write_records(np.zeros(1, SL.LPM_FREQ))
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
    def set_precision_mode(self, mode: str) -> None:
        """GE's precision_mode from now on (a script's session config sets it after start)."""
        self.precision.mode = normalize_precision_mode(mode)

    def set_memory_pools(self, graph_memory_max_size: int = 0,
                         variable_memory_max_size: int = 0) -> None:
        """GE's memory pools (bytes; 0 keeps the current one): a session config may set
        them after the start, as a real session's options do."""
        msg = self.memory.set_pools(graph_memory_max_size, variable_memory_max_size)
        if msg:
            log.warning(msg)
            self.messages.append(msg)

    def consume(self, chunk: CaptureChunk) -> None:
        """Turn one chunk into host + device records, appended and fsynced."""
        if self._closed:
            raise RuntimeError("Device.consume() after close(): create a new Device")
        self.models.update(chunk.models)
        self._agent_spans = chunk.agent_spans
        ops, iters = build_tables(chunk, self.sigs, self.names, self.replays)
        self.facts.record(chunk, ops, self.sigs, self.names, self.name_classes)
        ops = self.precision.apply(ops, self.models, self.sigs, self.names)
        # after the precision mode (it decides the Casts), before UB fusion (a Cast fuses into
        # an element-wise chain); the models get GE's edges through the inserted nodes
        ops = self.trans.apply(ops, self.models, self.sigs, self.names)
        ops = self.fuser.apply(ops, self.models, self.sigs, self.names)
        # after every pass that changes the tasks: what each one reads and from where
        ops = self.l2.apply(ops, self.models, self.sigs, self.names, self.fuser)
        self.memory.pending = []
        self.memory.record(ops, iters, self.models, self.sigs, self.names, self.fuser,
                           self.name_classes)
        for dev_id in np.unique(ops.device_id).tolist():
            self._device(int(dev_id))
        self._resolve_fp_bp(chunk.iterations)
        if len(ops) or len(iters):
            self._consume_tables(ops, iters)
        if chunk.markers and self.config.msproftx:
            self.host_pass.write_tx(chunk)
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
        host = self.host_pass.records(ctx)
        for dd in self.devices.values():
            self._device_pass(ctx, dd, host)
        if self.memrec is not None:
            MR.write_chunk(self, ctx, host)
        self.host_pass.write(host)

    def close(self, clock: ClockPair) -> None:
        """Write end_info(.N) and close the files; calling it again does nothing."""
        if self._closed:
            return
        self._closed = True
        # the end of the collection on the emulated system's clock (time_model.TimeWarp)
        clock = ClockPair(wall_us=clock.wall_us + self.warp.delta // 1000,
                          mono_ns=clock.mono_ns + self.warp.delta)
        if self.memrec is not None:  # the session's graphs freed; the last samples
            MR.write_close(self, clock.mono_ns)
        control.write_end_info(self.host_path, clock, None)
        self.host.close()
        for dd in self.devices.values():
            control.write_end_info(dd.path, clock, dd.device_id)
            dd.data.close()

    # --- chunk preparation ------------------------------------------------------------------
    def _resolve_fp_bp(self, iterations: list[Iteration]) -> None:
        """FP/BP per (model, device) (step_trace.resolve_per_device); its warnings once."""
        for w in resolve_per_device(iterations, self.models, self.config.fp_point,
                                    self.config.bp_point, self._fpbp_dev, self.fpbp):
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
        # each task with the gap before it (an AI Core kernel: the dispatch, §5)
        dev_ns = cost.dur_ticks[ops.sig].astype(np.int64) * tick + np.where(
            kind == op_map.KIND_AI_CORE, self.chip.kernel_gap_ticks * tick, 0)
        lay = TM.layout(ops.iter_row, launch, eager, host_work, ops.host_start, ops.host_end,
                        n_it, wait, dev_ns,
                        TM.launch_keys(ops.model_id, ops.iter_row, ops.name_idx,
                                       ops.host_start, {m: i.op_order for m, i in
                                                        self.models.items()}, self.names.items))
        inn = ops.iter_row >= 0
        single = np.flatnonzero(~inn)
        emul_dur = np.zeros(n_it, np.int64)
        agent = iters.agent_before if len(iters.agent_before) == n_it else np.zeros(n_it, np.int64)
        if n_it:
            emul_dur = self._step_spans(ops, iters, lay, inn, single)
            # the emulated consumer is faster than the CPU: its wait for a prefetched
            # pipeline follows from the pipeline's measured production time
            prod = iters.production if len(iters.production) == n_it else \
                np.zeros(n_it, np.int64)
            extra = TM.pipeline_waits(iters.model_id, iters.thread, iters.start, iters.end,
                                      agent, emul_dur, wait, prod, iters.warmup,
                                      self._pipeline)
            if extra.any():
                TM.shift_steps(lay, ops.iter_row, extra)
                emul_dur = emul_dur + extra
                iters.input_wait = wait + extra
        # placement: steps and single ops in real order, measured gaps kept
        s_launch = launch[single]
        s_dur = np.where(s_launch, TM.EAGER_LAUNCH_NS,
                         np.where(host_work[single],
                                  ops.host_end[single] - ops.host_start[single], 0))
        # the agent's own time before a step is not the script's: the step's real span
        # reaches back over it, so the gap before the step loses it
        ev_rs = np.r_[iters.start - np.clip(agent, 0, None), ops.host_start[single]]
        ev_re = np.r_[np.maximum(iters.end, iters.start), ops.host_end[single]]
        # the agent's own work between them (CaptureChunk.agent_spans): events that take no
        # emulated time, so the gaps keep only the script's own host time
        # (only after the last event already placed: the warp cannot move the past)
        a_s, a_e = TM.outside(self._agent_spans, ev_rs, ev_re, after=self._placed_end)
        ev_rs, ev_re = np.r_[ev_rs, a_s], np.r_[ev_re, a_e]
        ev_dur = np.r_[emul_dur, s_dur, np.zeros(len(a_s), np.int64)].astype(np.int64)
        order = np.lexsort((np.arange(len(ev_rs)), ev_rs))
        es = np.empty(len(ev_rs), np.int64)
        es[order] = self.warp.place(ev_rs[order], ev_re[order], ev_dur[order])
        if len(ev_re):
            self._placed_end = max(self._placed_end, int(ev_re.max()))
        it_s = es[:n_it]
        # steps on the device's tick grid: the scratch schedule holds when shifted
        it_s = self.sync_ns + -((self.sync_ns - it_s) // tick) * tick
        if n_it:
            r = np.flatnonzero(inn)
            base = it_s[ops.iter_row[r]]
            ops.host_start[r] = base + lay.op_rel_start[r]
            ops.host_end[r] = base + lay.op_rel_end[r]
        s_start = es[n_it:n_it + len(single)]
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

    def _device_ends(self, ctx: ChunkCtx) -> tuple[np.ndarray, np.ndarray]:
        """Per iteration: the end (ns) of its last task on any device and stream but the
        output copy, and the output copy's device time (ns, the longest over the devices),
        scheduled on scratch copies of the streams (nothing is emitted, no state changes)."""
        self.host_pass.copy_apis(ctx, {"api_event": []})
        n_it = len(ctx.iters)
        end = np.full(n_it, S.NEVER, np.int64)
        d2h = np.zeros(n_it, np.int64)
        for dd in self.devices.values():
            saved = copy.deepcopy(dd.state.streams)
            try:
                res = schedule_device(self, ctx, dd)
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
                 copy_spans: tuple[np.ndarray, ...] | None = None) -> ChunkCtx:
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
        name_loop, name_backward = self.name_classes.of(self.names.items)
        return ChunkCtx(ops, iters, sig, cost, kind, win, me_begin, me_end, fp_name, bp_name,
                        name_loop, name_backward,
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

    # --- device side (task_schedule.py, stream_records.py) -------------------------------
    def _device_pass(self, ctx: ChunkCtx, dd: DeviceDir,
                     host: dict[str, list[np.ndarray]]) -> None:
        res = schedule_device(self, ctx, dd)
        if res is None:
            return
        scheduled, memcpy, copies = res
        hccl = scheduled.get(S.HCCL_STREAM)
        if hccl is not None and self.multi_process():
            # where this rank's collectives ran: the job aligns the ranks when they have all
            # ended (rank_coupling.py)
            rank_coupling.record_stream(self.prof_dir, dd.device_id, hccl, dd.state.clock)
        emit(self, ctx, dd, scheduled, host, emit_memcpy(self, ctx, dd, memcpy, copies, host))
