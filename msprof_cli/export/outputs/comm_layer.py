"""The msprof json Communication layer (docs/formats/timeline.md): a device's HCCL op executions on
a lane per
communication group and its hccl_info steps on a lane per plane, as the project draws them or
(analysis=True) as the real analysis does.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..decode.data import DeviceData
from ..fmt import ts_sort_key
from .trace import Layer, dur_text, int_list, jstr, pid_of, process_meta, us_parts

SORT_COMMUNICATION = 17
PLANE_TID_BASE = 1000  # Communication process: op lanes tid 0.., plane lanes 1000 + plane


@dataclass
class CommData:
    """HCCL data of one device for msprof json (built by communication.device_comm):
    `ops` = op executions (hccl.OP_COLS), `steps` = hccl_info steps (plane_id, name,
    start_local, dur_ns), `step_args` = their args JSON text."""

    ops: pd.DataFrame
    steps: pd.DataFrame
    step_args: np.ndarray
    # the steps are device tasks, shown as the analysis shows them (communication_layer)
    analysis: bool = False

    def __len__(self) -> int:
        return len(self.ops) + len(self.steps)


def comm_lanes(comm: CommData) -> tuple[list[str], list[int]]:
    """The Communication process's lanes: group names and plane ids, sorted (`lanes` of
    `communication_layer`: a window's events take the lanes of the whole export)."""
    ops, steps = comm.ops, comm.steps
    groups = sorted(str(g) for g in ops["group"].unique()) if len(ops) else []
    planes = sorted(int(p) for p in steps["plane_id"].unique()) if len(steps) else []
    if comm.analysis:  # the analysis's plane lanes follow the group lanes (tid 1, ...)
        return groups, planes, len(groups)
    return groups, planes


def comm_meta(device_id: int, app_pid: int, lanes: tuple[list[str], list[int]]
              ) -> list[str]:
    """Metadata of the Communication process with `lanes` (groups, planes)."""
    groups, planes = lanes[0], lanes[1]
    base = lanes[2] if len(lanes) > 2 else PLANE_TID_BASE
    threads = [(i, f"Group {g} Communication", i) for i, g in enumerate(groups)] + \
        [(base + p, f"Plane {p}", base + p) for p in planes]
    return process_meta(pid_of(app_pid, SORT_COMMUNICATION, device_id), "Communication",
                        f"NPU {device_id}", SORT_COMMUNICATION, threads)


def communication_layer(dev: DeviceData, comm: CommData | None, app_pid: int,
                        lanes: tuple[list[str], list[int]] | None = None) -> Layer:
    """Process ``Communication`` (label NPU n, sort 17): per communication group a lane
    ``Group {group} Communication`` (tid 0, 1, … by group name) with one X per HCCL op
    execution, and per plane a lane ``Plane {id}`` (tid 1000 + plane) with one X per
    hccl_info task step (the steps of hccl json).  Project choice of names and tids."""
    if comm is None or len(comm) == 0:
        return Layer()
    pid = pid_of(app_pid, SORT_COMMUNICATION, dev.device_id)
    ops, steps = comm.ops, comm.steps
    lanes = lanes if lanes is not None else comm_lanes(comm)
    groups = lanes[0]
    m = comm_meta(dev.device_id, app_pid, lanes)
    head = '{"name": %s, "pid": ' + str(pid) + ', "tid": %d, "ts": "%d.%03d", "dur": %s, '
    ev: list[np.ndarray] = []
    keys: list[np.ndarray] = []
    if comm.analysis:
        return _analysis_comm_layer(m, pid, head, comm, groups,
                                    lanes[2] if len(lanes) > 2 else len(groups))
    if len(ops):
        gid = {g: i for i, g in enumerate(groups)}
        tmpl = head + ('"args": {"Op Type": %s, "Group Name": %s, "Local Rank": %d, '
                       '"Rank Size": %d}, "ph": "X"}')
        start = ops["start_local"].to_numpy(np.int64)
        w, f = us_parts(start)
        grp = ops["group"].astype(str).to_numpy(object)
        ev.append(np.array(list(map(tmpl.__mod__, zip(
            jstr(ops["op_name"].to_numpy(object)).tolist(), [gid[g] for g in grp], w, f,
            dur_text(ops["dur_ns"]), jstr(ops["op_type"].to_numpy(object)).tolist(),
            jstr(grp).tolist(), int_list(ops["local_rank"]), int_list(ops["rank_size"])))),
            dtype=object))
        keys.append(ts_sort_key(start))
    if len(steps):
        _step_events(ev, keys, head, comm, PLANE_TID_BASE)
    return Layer(m, np.concatenate(ev) if ev else np.zeros(0, dtype=object),
                 np.concatenate(keys) if keys else np.zeros(0, np.float64))


def _step_events(ev: list[np.ndarray], keys: list[np.ndarray], head: str, comm: CommData,
                 plane_base: int) -> None:
    """The hccl_info steps of `comm` as X events on their plane lanes (`plane_base` + plane)."""
    steps = comm.steps
    tmpl = head + '"args": %s, "ph": "X"}'
    start = steps["start_local"].to_numpy(np.int64)
    w, f = us_parts(start)
    ev.append(np.array(list(map(tmpl.__mod__, zip(
        jstr(steps["name"].to_numpy(object)).tolist(),
        (plane_base + steps["plane_id"].to_numpy(np.int64)).tolist(), w, f,
        dur_text(steps["dur_ns"]), np.asarray(comm.step_args, dtype=object).tolist()))),
        dtype=object))
    keys.append(ts_sort_key(start))


def _analysis_comm_layer(m: list[str], pid: int, head: str, comm: CommData,
                         groups: list[str], plane_base: int) -> Layer:
    """The Communication process as the analysis writes it (viewer/get_hccl_export_data.py
    _format_hccl_data: the steps, then the ops; host_connect_device.add_hccl_end_points:
    an ``f`` per op, id (connection_id << 32) - 1): per step an X named by its task type
    on its plane lane, per collective an X on its group lane with the analysis's args."""
    ops, steps = comm.ops, comm.steps
    ev: list[np.ndarray] = []
    keys: list[np.ndarray] = []
    if len(steps):
        _step_events(ev, keys, head, comm, plane_base)
    if len(ops):
        gid = {g: i for i, g in enumerate(groups)}
        grp = [gid.get(str(g), 0) for g in ops["group"].astype(str).tolist()]
        start = ops["start_local"].to_numpy(np.int64)
        w, f = us_parts(start)
        cid = ops["connection_id"].to_numpy(np.int64).tolist()
        tmpl = head + ('"args": {"rank_size": %d, "connection_id": %d, "model id": %d, '
                       '"data_type": "N/A", "alg_type": "N/A", "count": -1}, "ph": "X"}')
        ev.append(np.array(list(map(tmpl.__mod__, zip(
            jstr(ops["op_name"].to_numpy(object)).tolist(), grp, w, f,
            dur_text(ops["dur_ns"]), int_list(ops["rank_size"]), cid,
            int_list(ops["model_id"])))), dtype=object))
        keys.append(ts_sort_key(start))
        f_tmpl = ('{"name": "HostToDevice%d", "ph": "f", "id": "%d", "ts": "%d.%03d", '
                  '"cat": "HostToDevice", "pid": ' + str(pid) + ', "tid": %d, "bp": "e"}')
        ids = [(c << 32) - 1 for c in cid]
        ev.append(np.array(list(map(f_tmpl.__mod__, zip(ids, ids, w, f, grp))), dtype=object))
        keys.append(ts_sort_key(start))
    return Layer(m, np.concatenate(ev) if ev else np.zeros(0, dtype=object),
                 np.concatenate(keys) if keys else np.zeros(0, np.float64))
