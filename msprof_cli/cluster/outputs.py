"""The files of `msprof cluster` in `cluster_analysis_output/` (the names and columns
msprof-analyze's cluster analysis writes, which MindStudio Insight's cluster view reads;
docs/cluster.md), our own verdict file, the merged timeline, and the console text."""
from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict
from pathlib import Path

from msprof_cli.raw.control import write_text_atomic
from msprof_cli.summary.render import table

from . import timeline as TL
from .analysis import ClusterResult, ranks_of

STEP_TRACE_HEADER = ["Step", "Type", "Index", "Computing", "Communication(Not Overlapped)",
                     "Overlapped", "Communication", "Free", "Stage", "Bubble",
                     "Communication(Not Overlapped and Exclude Receive)", "Preparing"]


def _num(v: float | None) -> str:
    return "" if v is None else repr(round(float(v), 3))


GROUP_NAME = "hccl_world_group"  # the one collective group of a data-parallel TF job


def step_trace_csv(res: ClusterResult) -> str:
    """cluster_step_trace_time.csv: a row per rank and step (Type "rank", Index = the rank),
    in µs, CRLF line ends as msprof-analyze writes it.  msprof-analyze's formulas: Overlapped
    = Communication - Communication(Not Overlapped); Bubble = the receive ops' time (none in
    a data-parallel TensorFlow job: 0); Stage = Free + Computing + Communication(Not
    Overlapped) - Bubble; the last but one column = Communication(Not Overlapped) - Bubble;
    Preparing = 0.  It writes one row per rank for a whole msprof collection (empty Step);
    ours has a row per step (Step = the iteration), as it does for PyTorch data, and no
    "stage" rows (those come with pipeline-parallel groups only)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n")
    w.writerow(STEP_TRACE_HEADER)
    for s in sorted(res.steps, key=lambda s: (s.step, s.rank)):
        bubble = 0.0
        stage = s.free + s.computing + s.comm_not_overlapped - bubble
        w.writerow([s.step, "rank", s.rank, _num(s.computing), _num(s.comm_not_overlapped),
                    _num(s.overlapped), _num(s.communication), _num(s.free), _num(stage),
                    _num(bubble), _num(s.comm_not_overlapped - bubble), "0"])
    return buf.getvalue()


def _group(res: ClusterResult) -> tuple[str, list[int]]:
    ranks = sorted({r.rank for r in res.ranks} | {ln.src for ln in res.links}
                   | {ln.dst for ln in res.links})
    return "(" + ", ".join(map(str, ranks)) + ")", ranks


def _op_type(name: str) -> str:
    """The collective of an op name, as msprof-analyze keys its matrix ("allreduce"...)."""
    low = name.lower().replace("_", "")
    if "bcast" in low or "broadcast" in low:  # TF's CollectiveBcastSend/Recv, HcomBroadcast
        return "broadcast"
    if "collectivereduce" in low or "allreduce" in low:
        return "allreduce"
    if "collectivegather" in low or "allgather" in low:
        return "allgather"
    for t in ("reducescatter", "alltoall", "send", "receive", "reduce"):
        if t in low:
            return t
    return "other"


def _transport(t: str) -> str:
    return {"SDMA": "HCCS"}.get(t, t)


def _link(transport: str, nbytes: int, time_us: float, op: str) -> dict:
    size_mb = nbytes / 1e6
    time_ms = time_us / 1000
    return {"Transport Type": _transport(transport), "Transit Time(ms)": round(time_ms, 4),
            "Transit Size(MB)": round(size_mb, 4), "Op Name": op,
            "Bandwidth(GB/s)": round(size_mb / time_ms, 4) if time_ms else 0}


def communication_matrix(res: ClusterResult) -> dict:
    """cluster_communication_matrix.json: {group: {"step": {"<type>-total@<group name>" and
    "Total Op Info@<group name>": {"src-dst": link}}}}, Bandwidth = MB / ms; every rank's
    self-link ("i-i", LOCAL) is listed, as msprof-analyze does."""
    group, ranks = _group(res)
    ops: dict[str, dict] = {}
    total: dict[str, dict] = {}
    for _, ln in res.per_op_links:
        key = f"{_op_type(ln.op_name)}-total@{GROUP_NAME}"
        link = f"{ln.src_rank}-{ln.dst_rank}"
        for table, name in ((ops.setdefault(key, {}), ""), (total, "")):
            got = table.get(link)
            size = ln.bytes + (round(got["Transit Size(MB)"] * 1e6) if got else 0)
            time = ln.time_us + (got["Transit Time(ms)"] * 1000 if got else 0.0)
            table[link] = _link(ln.transport, size, time, name)
    for table in [*ops.values(), total]:
        for r in ranks:
            table.setdefault(f"{r}-{r}", _link("LOCAL", 0, 0.0, ""))
    ops[f"Total Op Info@{GROUP_NAME}"] = total
    return {group: {"step": ops}}


def communication_json(res: ClusterResult) -> dict:
    """cluster_communication.json: {group: {"step": {"<op>@<group name>": {rank: {
    "Communication Time Info": ..., "Communication Bandwidth Info": {transport: ...}}}}}}
    from each rank's sends (the emulated ring has no wait: Wait/Synchronization/Idle 0)."""
    group, _ = _group(res)
    ops: dict[str, dict] = {}

    def add(op: str, rank: int, ln) -> None:
        entry = ops.setdefault(op, {}).setdefault(str(rank), {
            "Communication Time Info": {"Start Timestamp(us)": 0, "Elapse Time(ms)": 0.0,
                                        "Transit Time(ms)": 0.0, "Wait Time(ms)": 0.0,
                                        "Synchronization Time(ms)": 0.0, "Idle Time(ms)": 0.0,
                                        "Wait Time Ratio": 0.0,
                                        "Synchronization Time Ratio": 0.0},
            "Communication Bandwidth Info": {k: {"Transit Size(MB)": 0.0,
                                                 "Transit Time(ms)": 0.0,
                                                 "Bandwidth(GB/s)": 0.0,
                                                 "Large Packet Ratio": 0.0,
                                                 "Size Distribution": {}}
                                             for k in ("RDMA", "HCCS", "PCIE", "SDMA", "SIO")}})
        t = entry["Communication Time Info"]
        for k in ("Elapse Time(ms)", "Transit Time(ms)"):
            t[k] = round(t[k] + ln.time_us / 1000, 4)
        b = entry["Communication Bandwidth Info"].setdefault(_transport(ln.transport), {})
        b["Transit Size(MB)"] = round(b["Transit Size(MB)"] + ln.bytes / 1e6, 4)
        b["Transit Time(ms)"] = round(b["Transit Time(ms)"] + ln.time_us / 1000, 4)
        b["Bandwidth(GB/s)"] = round(b["Transit Size(MB)"] / b["Transit Time(ms)"], 4) \
            if b["Transit Time(ms)"] else 0

    for _, ln in res.per_op_links:
        add(f"{ln.op_name}@{GROUP_NAME}", ln.src_rank, ln)
        add(f"Total Op Info@{GROUP_NAME}", ln.src_rank, ln)
    return {group: {"step": ops}}


def communication_group(res: ClusterResult) -> dict:
    """communication_group.json: the one collective group of the job's ranks."""
    _, ranks = _group(res)
    return {"collective": [ranks], "p2p": [],
            "comm_group_parallel_info": [{"type": "collective", "rank_set": ranks,
                                          "group_name": GROUP_NAME, "group_id": "",
                                          "pg_name": ""}]}


def verdict_json(run) -> dict:
    res = run.result
    return {"kind": "msprof_cli.cluster", "schema_version": 1, "job": str(run.job),
            "verdict": res.verdict, "slow_ranks": res.slow_ranks,
            "slow_steps": [{"step": s, "rank": r, "iteration_time_us": t}
                           for s, r, t in res.slow_steps],
            "ranks": [asdict(r) for r in res.ranks],
            "links": [asdict(ln) for ln in res.links],
            "warnings": res.warnings, "failed": run.failed}


def write_files(run, profs: list[Path], timeline: bool) -> list[Path]:
    out = run.out
    out.mkdir(parents=True, exist_ok=True)
    res = run.result
    files = []

    def put(name: str, text: str) -> None:
        write_text_atomic(out / name, text)
        files.append(out / name)

    put("cluster_step_trace_time.csv", step_trace_csv(res))
    if res.links:  # compact JSON, as msprof-analyze writes them
        put("cluster_communication_matrix.json", json.dumps(communication_matrix(res)))
        put("cluster_communication.json", json.dumps(communication_json(res)))
        put("communication_group.json", json.dumps(communication_group(res)))
    put("msprof_cli_cluster.json", json.dumps(verdict_json(run), indent=1))
    if timeline:
        ranks, missing = [], []
        for prof in profs:
            got = TL.trace_files(prof)
            if not got:
                missing.append(prof.name)
        if missing:
            res.warnings.append(f"no merged timeline: {len(missing)} rank(s) have no mindstudio "
                                f"export ({', '.join(missing[:4])}...): run msprof export "
                                f"--layout mindstudio --output {run.job} first")
        else:
            by_prof = {p.name: p for p in profs}
            per_prof: dict[str, dict[int, int]] = {}
            for rank, dev in ranks_of(run.summaries)[0]:
                per_prof.setdefault(dev.prof, {})[dev.device_id] = rank
            uniq = [TL.RankTrace(devs, by_prof[name], TL.trace_files(by_prof[name]))
                    for name, devs in per_prof.items() if name in by_prof]
            merged = TL.merge(uniq, out / "cluster_timeline.json")
            res.warnings += merged.warnings
            files.append(merged.path)
    return files


def console(run, md: bool = False) -> str:
    res = run.result
    lines = [("# " if md else "") + f"msprof cluster {run.job}: {len(res.ranks)} ranks "
             f"({run.where})", ""]
    lines += [f"- {v}" for v in res.verdict]
    lines.append("")
    lines += table(["Rank", "PROF dir", "device", "steps", "Iteration Time", "working",
                    "Computing", "Comm. not overlapped", "Free", "Data Aug Bound"],
                   [[str(r.rank), r.prof, str(r.device_id), str(r.steps),
                     _ms(r.iteration_time), _ms(r.working), _ms(r.computing),
                     _ms(r.comm_not_overlapped), _ms(r.free), _ms(r.data_aug_bound)]
                    for r in res.ranks], md, right={2, 3, 4, 5, 6, 7, 8, 9})
    if res.links:
        lines.append("")
        lines += table(["Link", "transport", "steps", "MB", "time", "GB/s", ""],
                       [[f"{ln.src} -> {ln.dst}", f"{ln.transport}/{ln.link}", str(ln.count),
                         f"{ln.bytes / 1e6:.3f}", _ms(ln.time_us),
                         f"{ln.bandwidth_gbs:.2f}" if ln.bandwidth_gbs else "",
                         "SLOW" if ln.slow else ""] for ln in res.links], md,
                       right={2, 3, 4, 5})
    for w in res.warnings:
        lines.append(f"Warning: {w}")
    for f in run.failed:
        lines.append(f"Failed rank: {f}")
    lines.append("")
    lines.append(f"Written to {run.out}: " + ", ".join(p.name for p in run.files))
    return "\n".join(lines) + "\n"


def _ms(us: float | None) -> str:
    return "" if us is None else f"{us / 1000:.3f} ms"
