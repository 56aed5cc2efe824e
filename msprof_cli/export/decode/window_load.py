"""The decode of one window of a windowed plan (windows.py): the records of [cuts[k], cuts[k+1]) of
every file, the FLIP records and step trace read whole, the PMU match through the plan's
PmuIndex; and the l2_cache records, read in chunks at the end.
"""
from __future__ import annotations

import numpy as np

from .device import decode_device
from .host import decode_host
from .rawread import DecodeLog, device_records
from .windows import NotWindowable, WindowPlan


def load_window(plan: WindowPlan | list[WindowPlan], k: int):
    """ProfData of window k: the rows of the whole decode whose start lies in the window
    (host API rows by begin, device tasks by start), all step-trace iterations.  With the
    plans of several devices (plan_all_devices, same cuts): every device of the window."""
    from .data import HostData, ProfData
    from .dataset import attach_pmu, build_device, host_task_info, named_apis

    plans = plan if isinstance(plan, list) else [plan]
    first = plans[0]
    lo, hi = first.bounds(k)
    log = DecodeLog()
    hsel = {kind: ix.select(lo, hi, first.host_rd) for kind, ix in first.host_index.items()}
    tables = decode_host(first.host_rd.data_dir, log, select=hsel)
    del hsel
    apis = named_apis(tables, first.host_rd)
    apis = apis[apis["begin_local"] >= first.host_rd.begin_local_ns].reset_index(drop=True)
    host = HostData(rd=first.host_rd, tables=tables, apis=apis)
    host_info = None
    if len(plans) > 1 and len(tables.task_track) and tables.types:
        host_info = host_task_info(tables)  # once for every device (as load_prof)
    devices = []
    for p in plans:
        # the step-trace records are read by the first window only: every window has the
        # iterations of the whole collection, decoded once
        known = p.iterations is not None
        dsel = {kind: ix.select(lo, hi, p.dev_rd,
                                p.ts_flips if known and kind == "ts_track" else None)
                for kind, ix in p.dev_index.items()}
        dsel["l2_cache"] = np.zeros(0, np.int64)  # read at the end (l2_records)
        dev = decode_device(p.dev_rd, log, select=dsel)
        del dsel
        d = build_device(p.dev_rd, dev, host, log, host_info)
        del dev
        # a window without host launch or node records still exports as the whole does
        d.has_host_ops, d.has_node_info = p.host_ops, p.node_info
        if known:
            d.iterations = p.iterations
        else:
            p.iterations = d.iterations
        if p.pmu is not None:
            attach_pmu(d, p.pmu)
        devices.append(d)
    if log.warnings or log.bad_records or log.lost_records:
        raise NotWindowable("; ".join(log.warnings) or "damaged records")
    tables.tensors = tables.tensors.iloc[:0]
    tables.apis = tables.apis.iloc[:0]
    return ProfData(prof=first.prof, host=host, devices=devices, log=log,
                    rank_ids=first.rank_ids)


def l2_rows(plan: WindowPlan, chunk: int):
    """The device's l2_cache records as frames (device.l2_frame) of `chunk` records, in
    file order."""
    from .device import l2_frame

    for lo in range(0, plan.l2_records, chunk):
        sel = np.arange(lo, min(lo + chunk, plan.l2_records), dtype=np.int64)
        yield l2_frame(device_records(plan.dev_rd.data_dir, "l2_cache", DecodeLog(),
                                      select=sel))
