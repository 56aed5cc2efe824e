"""Host-side unified records (docs/formats/raw-format.md 4): launch windows and record arrays.

Placement rules (docs/device-model.md 6):
* GE launches a graph's tasks from the thread that runs ModelExecute, so the records of an
  iteration's ops are written on the iteration's thread; single (eager) ops keep their thread.
* A node launch API spans the op's measured host interval.  Windows of one thread must not
  overlap (the analysis nests records by time per thread): a window that would overlap the
  previous one starts WINDOW_GAP_NS after it, and a window shorter than MIN_WINDOW_NS is
  widened to MIN_WINDOW_NS.  Inside the window: node_basic_info at +min(1 us, w/4),
  tensor_info at +min(2 us, w/2), task_track at +min(9 us, 3w/4).
* ModelExecute = [min(step start, first launch - 2 ns), max(step end, last launch end)].
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from msprof_cli.raw import enums as EN
from msprof_cli.raw import layouts as L

MIN_WINDOW_NS = 4
WINDOW_GAP_NS = 3
NBI_OFFSET_NS = 1_000
TENSOR_OFFSET_NS = 2_000
TRACK_OFFSET_NS = 9_000


@dataclass
class LaunchWindows:
    """Per op row (rows without a launch hold zeros)."""

    thread: np.ndarray  # u4 thread of the host records
    begin: np.ndarray  # i8
    end: np.ndarray
    nbi_ts: np.ndarray
    tensor_ts: np.ndarray
    track_ts: np.ndarray


def launch_windows(launch: np.ndarray, thread: np.ndarray, start: np.ndarray,
                   end: np.ndarray, last_end: dict[int, int]) -> LaunchWindows:
    """Non-overlapping launch windows per thread (see module doc).  `last_end` (thread ->
    end of the last window) carries the state across chunks and is updated."""
    n = len(launch)
    b = np.zeros(n, np.int64)
    e = np.zeros(n, np.int64)
    rows = np.flatnonzero(launch)
    step = WINDOW_GAP_NS + MIN_WINDOW_NS
    if len(rows):
        thr = thread[rows]
        order = np.lexsort((rows, start[rows], thr))
        rows, thr = rows[order], thr[order]
        bounds = np.flatnonzero(np.diff(thr.astype(np.int64))) + 1
        for seg in np.split(np.arange(len(rows)), bounds):
            r = rows[seg]
            t = int(thr[seg[0]])
            s = start[r]
            a = np.maximum(end[r], s + MIN_WINDOW_NS)
            k = step * np.arange(1, len(r) + 1, dtype=np.int64)
            prev = last_end.get(t, np.iinfo(np.int64).min // 4)
            ee = k + np.maximum(np.maximum.accumulate(a - k), prev)
            prev_e = np.concatenate(([prev], ee[:-1]))
            bb = np.maximum(s, prev_e + WINDOW_GAP_NS)
            b[r], e[r] = bb, ee
            last_end[t] = int(ee[-1])
    q = (e - b) // 4
    return LaunchWindows(
        thread=thread.astype(np.uint32),
        begin=b, end=e,
        nbi_ts=b + np.minimum(NBI_OFFSET_NS, q),
        tensor_ts=b + np.minimum(TENSOR_OFFSET_NS, 2 * q),
        track_ts=b + np.minimum(TRACK_OFFSET_NS, 3 * q),
    )


def api_records(level: int, type_id: int, thread: np.ndarray, begin: np.ndarray,
                end: np.ndarray, item: np.ndarray) -> np.ndarray:
    arr = np.zeros(len(begin), L.API_EVENT)
    arr["magic"] = L.MAGIC
    arr["level"] = level
    arr["type"] = type_id
    arr["thread_id"] = thread
    arr["begin_time"] = begin
    arr["end_time"] = end
    arr["item_id"] = item
    return arr


def type_info_lines() -> list[str]:
    """type_info_dic: the names of the record type ids the host records use (runtime task
    types, the additional records, the runtime APIs and hccl_info: docs/device-model.md 6.1)."""
    lines = [f"{L.LEVEL_RUNTIME}_{tid}:{name}" for tid, name in
             sorted(EN.RUNTIME_TASK_TYPES.items())]
    lines += [f"{lvl}_{tid}:{name}" for (lvl, tid), name in EN.TYPE_INFO_NAMES.items()]
    lines += [f"{L.LEVEL_RUNTIME}_{tid}:{name}" for tid, name in RUNTIME_API_TYPES.items()]
    lines.append(f"{L.LEVEL_HCCL}_{HCCL_INFO_TYPE}:hccl_info")
    return lines


def record_header(arr: np.ndarray, level: int, type_id: int, thread: np.ndarray, ts: np.ndarray,
            data_len: int) -> None:
    arr["magic"] = L.MAGIC
    arr["level"] = level
    arr["type"] = type_id
    arr["thread_id"] = thread
    arr["data_len"] = data_len
    arr["timestamp"] = ts


def task_track_records(thread: np.ndarray, ts: np.ndarray, device_id: int,
                       stream: np.ndarray, task_id: np.ndarray, batch: np.ndarray,
                       runtime_type: np.ndarray, kernel: np.ndarray, blocks: np.ndarray,
                       ratio: np.ndarray | None = None) -> np.ndarray:
    """compact.task_track: header type RUNTIME_TASK_TRACK (1, as the golden data), the
    runtime task-type id in the taskType field; `ratio`: a MIX kernel's vector blocks per
    cube block (kernelInfo's 3-bit ratio: Mix Block Num = numBlocks x ratio)."""
    arr = np.zeros(len(ts), L.TASK_TRACK)
    record_header(arr, L.LEVEL_RUNTIME, L.RUNTIME_TASK_TRACK, thread, ts, L.COMPACT_DATA_LEN)
    arr["device_id"] = device_id & 0x0FFF
    arr["stream_id"] = stream
    arr["task_id"] = task_id
    arr["batch_id"] = batch
    arr["task_type"] = runtime_type
    arr["kernel_name"] = kernel
    arr["num_blocks"] = blocks
    if ratio is not None:
        arr["ratio_sched"] = np.asarray(ratio, np.uint8) & 0x7
    return arr


def node_basic_records(thread: np.ndarray, ts: np.ndarray, op_name: np.ndarray,
                       task_type: np.ndarray, op_type: np.ndarray, block: np.ndarray,
                       ratio: np.ndarray | None = None) -> np.ndarray:
    """compact.node_basic_info; `ratio`: a MIX kernel's, in blockNum's high 16 bits."""
    arr = np.zeros(len(ts), L.NODE_BASIC)
    record_header(arr, L.LEVEL_NODE, L.NODE_BASIC_INFO, thread, ts, L.COMPACT_DATA_LEN)
    arr["op_name"] = op_name
    arr["task_type"] = task_type
    arr["op_type"] = op_type
    arr["block_num"] = (block.astype(np.uint32) & 0xFFFF) if ratio is None else \
        (block.astype(np.uint32) & 0xFFFF) | (np.asarray(ratio, np.uint32) << 16)
    arr["op_flag"] = 0
    arr["op_state"] = 0  # static (unaging files)
    return arr


def tensor_info_records(thread: np.ndarray, ts: np.ndarray, op_name: np.ndarray,
                        op_sig: np.ndarray, sig_tensors: list[np.ndarray]) -> np.ndarray:
    """tensor_info, ≤ 5 tensors per record; an op with more gets several records with the
    same (timestamp, thread, opName).  Vectorised over ops via per-signature templates."""
    if len(ts) == 0:
        return np.zeros(0, L.TENSOR_INFO)
    per = L.MAX_TENSORS_PER_RECORD
    uniq, inv = np.unique(op_sig, return_inverse=True)
    # template records per distinct signature
    templates = []
    counts = np.zeros(len(uniq), np.int64)
    for j, s in enumerate(uniq):
        tens = sig_tensors[int(s)]
        # an op captured without tensor specs gets no tensor_info at all, so export shows
        # N/A (unknown) rather than an empty shape list
        nrec = -(-len(tens) // per)
        t = np.zeros(nrec, L.TENSOR_INFO)
        for r in range(nrec):
            part = tens[r * per:(r + 1) * per]
            t["tensor_num"][r] = len(part)
            t["tensors"][r, :len(part)] = part
        templates.append(t)
        counts[j] = nrec
    flat = np.concatenate(templates)
    first = np.concatenate(([0], np.cumsum(counts)[:-1]))
    nrec_op = counts[inv]
    op_of_rec = np.repeat(np.arange(len(ts)), nrec_op)
    within = np.arange(len(op_of_rec)) - np.repeat(np.cumsum(nrec_op) - nrec_op, nrec_op)
    arr = flat[first[inv][op_of_rec] + within]
    record_header(arr, L.LEVEL_NODE, L.NODE_TENSOR_INFO, thread[op_of_rec], ts[op_of_rec],
            L.ADDITIONAL_DATA_LEN)
    arr["op_name"] = op_name[op_of_rec]
    return arr


def graph_id_map_records(thread: np.ndarray, ts: np.ndarray, model_name: np.ndarray,
                         model_id: np.ndarray) -> np.ndarray:
    arr = np.zeros(len(ts), L.GRAPH_ID_MAP)
    record_header(arr, L.LEVEL_MODEL, L.MODEL_GRAPH_ID_MAP, thread, ts, L.ADDITIONAL_DATA_LEN)
    arr["model_name"] = model_name
    arr["graph_id"] = model_id
    arr["model_id"] = model_id
    return arr


def fusion_op_records(thread: np.ndarray, ts: np.ndarray, op_name: np.ndarray,
                      fused_ids: list[list[int]], bytes_in: np.ndarray, bytes_out: np.ndarray
                      ) -> np.ndarray:
    arr = np.zeros(len(ts), L.FUSION_OP_INFO)
    record_header(arr, L.LEVEL_NODE, L.NODE_FUSION_OP_INFO, thread, ts, L.ADDITIONAL_DATA_LEN)
    arr["op_name"] = op_name
    arr["input_mem_size"] = bytes_in
    arr["output_mem_size"] = bytes_out
    arr["total_mem_size"] = bytes_in + bytes_out
    for i, ids in enumerate(fused_ids):
        ids = ids[:8]
        arr["fusion_op_num"][i] = len(ids)
        arr["fusion_op_id"][i, :len(ids)] = ids
    return arr


def msproftx_records(pid: int, thread: np.ndarray, start: np.ndarray, end: np.ndarray,
                     category: np.ndarray, event_type: np.ndarray, mark_id: np.ndarray,
                     domain: np.ndarray, messages: list[bytes]) -> np.ndarray:
    arr = np.zeros(len(start), L.MSPROFTX)
    record_header(arr, L.LEVEL_TX, 0, thread, start, L.ADDITIONAL_DATA_LEN)
    arr["info_type"] = np.where(end > start, 1, 0)
    arr["tx_magic"] = L.MAGIC
    arr["data_tag"] = L.MSPROFTX_DATA_TAG
    arr["process_id"] = pid
    arr["tx_thread_id"] = thread
    arr["category"] = category
    arr["event_type"] = event_type
    arr["start_time"] = start
    arr["end_time"] = end
    arr["mark_id"] = mark_id
    arr["domain"] = domain
    arr["message"] = np.array([m[:155] for m in messages], dtype="S156")
    return arr


# --- runtime_api, GE copies, hccl_info (docs/device-model.md 6.1) ---------------------------

# Runtime API type ids written as `5000_{id}:{name}` in type_info_dic.  Level 5000 is shared
# with the task types of task_track (layouts.RUNTIME_TASK_TYPES, ids 0..109), so the API ids
# start at 1000 (project choice; the real ids are not documented).
RT_KERNEL_LAUNCH = 1000
RT_CPU_KERNEL_LAUNCH = 1001
RT_MEMCPY_ASYNC = 1002
RUNTIME_API_TYPES = {RT_KERNEL_LAUNCH: "rtKernelLaunch",
                     RT_CPU_KERNEL_LAUNCH: "rtCpuKernelLaunchWithFlag",
                     RT_MEMCPY_ASYNC: "rtMemcpyAsync"}
RT_API_BEFORE_NS = 1_000  # the runtime API begins up to 1 us before its task_track ...
RT_API_AFTER_NS = 2_000  # ... and returns up to 2 us after it
# hccl_info header type at level 5500 (reference: "type unconfirmed"); mirrors node type 10
HCCL_INFO_TYPE = 10
COPY_MAX_NS = 20_000  # GE InputCopy / OutputCopy last at most 20 us


def runtime_api_spans(win_begin: np.ndarray, track_ts: np.ndarray, win_end: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
    """[begin, end] of the runtime launch API around each task_track, strictly inside the node
    launch window: begin < track_ts <= end (the window is >= 4 ns and the task_track sits at
    >= 3 ns from its begin, < its end; see launch_windows)."""
    b = track_ts - np.minimum(RT_API_BEFORE_NS, (track_ts - win_begin) // 2)
    e = track_ts + np.minimum(RT_API_AFTER_NS, (win_end - track_ts) // 2)
    return b, e


def copy_spans(me_begin: np.ndarray, me_end: np.ndarray, first_launch: np.ndarray,
               last_launch_end: np.ndarray) -> tuple[np.ndarray, ...]:
    """GE InputCopy at the start and OutputCopy at the end of each ModelExecute, in the gaps
    before the first and after the last launch (half the gap, 1 ns .. COPY_MAX_NS); they never
    overlap a launch window.  Returns (in_begin, in_end, in_ok, out_begin, out_end, out_ok)."""
    in_gap = first_launch - me_begin
    in_e = me_begin + np.clip(in_gap // 2, 1, COPY_MAX_NS)
    in_ok = in_gap >= 1
    last = np.maximum(last_launch_end, np.where(in_ok, in_e, me_begin))
    out_gap = me_end - last
    out_b = me_end - np.clip(out_gap // 2, 1, COPY_MAX_NS)
    out_ok = out_gap >= 1
    return me_begin, in_e, in_ok, out_b, me_end, out_ok


ROLE_DST, ROLE_SRC = 0, 1  # hccl_info role (docs/formats/raw-format.md 4.7: 0 dst / 1 src)


def hccl_step_plan(ge_type: str, tf_type: str, allreduce: bool, rank: int, n: int,
                   bytes_in: float, bytes_out: float) -> list[tuple[bool, int, int, int]]:
    """The steps of one collective op on rank `rank` of `n` (docs/device-model.md 6.1), as
    (reduce step, role, remote rank, data bytes) per step, in order.

    * all-reduce (ring): n-1 Reduce_Inline (reduce-scatter) then n-1 Memcpy (all-gather);
      each sends a 1/n chunk of the tensor (`bytes_out`) to the next rank (src).
    * broadcast (chain from rank 0, the chief that MultiWorkerMirroredStrategy broadcasts
      from): the sender (`...Send...`) sends the tensor to rank+1 (src); a receiver
      receives it from rank-1 (dst) and, unless it is the last rank, forwards it to
      rank+1 (src).
    * other collectives (gather, reduce-scatter, all-to-all): n-1 Memcpy steps of
      `bytes_in`/n to the next rank (src)."""
    nxt, prev = (rank + 1) % n, (rank - 1) % n
    if allreduce:
        chunk = int(bytes_out // n)
        return [(k < n - 1, ROLE_SRC, nxt, chunk) for k in range(2 * (n - 1))]
    if ge_type == "HcomBroadcast":
        size = int(bytes_out)
        if "Recv" not in tf_type:
            return [(False, ROLE_SRC, nxt, size)]
        steps = [(False, ROLE_DST, prev, size)]
        if rank + 1 < n:
            steps.append((False, ROLE_SRC, nxt, size))
        return steps
    return [(False, ROLE_SRC, nxt, int(bytes_in // n)) for _ in range(n - 1)]


def hccl_info_records(thread: np.ndarray, ts: np.ndarray, dur_ns: np.ndarray,
                      task_name: np.ndarray, op_name: np.ndarray, group: int, local_rank: int,
                      rank_size: int, stage: np.ndarray, data_size: np.ndarray,
                      op_type: np.ndarray, remote_rank: np.ndarray | None = None,
                      role: np.ndarray | None = None) -> np.ndarray:
    """additional.hccl_info: one record per step of a collective on this rank (HCCS link,
    SDMA transport, plane 0); timestamp = step start (host monotonic ns).  Default: src role
    towards the next rank of the ring."""
    arr = np.zeros(len(ts), L.HCCL_INFO)
    record_header(arr, L.LEVEL_HCCL, HCCL_INFO_TYPE, thread, ts, L.ADDITIONAL_DATA_LEN)
    arr["item_id"] = task_name
    arr["ccl_tag"] = op_name
    arr["group_name"] = group
    arr["local_rank"] = local_rank
    arr["remote_rank"] = (local_rank + 1) % max(rank_size, 1) if remote_rank is None \
        else remote_rank
    arr["rank_size"] = rank_size
    arr["plane_id"] = 0
    arr["stage"] = stage
    arr["role"] = ROLE_SRC if role is None else role
    arr["duration_estimated"] = dur_ns / 1000.0
    arr["data_size"] = data_size
    arr["op_type"] = op_type
    arr["data_type"] = 4  # FP32
    arr["link_type"] = 1  # HCCS
    arr["transport_type"] = 0  # SDMA
    return arr
