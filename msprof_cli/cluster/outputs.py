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


def step_trace_csv(res: ClusterResult) -> str:
    """cluster_step_trace_time.csv: a row per rank and step (Type "rank", Index = rank id),
    then a row per step for the whole data-parallel stage (Type "stage", the slowest rank's
    numbers); µs.  Stage = Iteration Time; Bubble and Preparing are 0 (no pipeline stages,
    no preparing phase in a TensorFlow step); without receive ops the last column equals
    Communication(Not Overlapped)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(STEP_TRACE_HEADER)
    rows = sorted(res.steps, key=lambda s: (s.step, s.rank))
    for s in rows:
        w.writerow([s.step, "rank", s.rank, _num(s.computing), _num(s.comm_not_overlapped),
                     _num(s.overlapped), _num(s.communication), _num(s.free),
                     _num(s.iteration_time), "0", _num(s.comm_not_overlapped), "0"])
    ranks = sorted({s.rank for s in rows})
    by_step: dict[int, list] = {}
    for s in rows:
        by_step.setdefault(s.step, []).append(s)
    for step, ss in sorted(by_step.items()):
        worst = max(ss, key=lambda s: s.iteration_time)
        w.writerow([step, "stage", "(" + ", ".join(map(str, ranks)) + ")",
                    _num(worst.computing), _num(worst.comm_not_overlapped),
                    _num(worst.overlapped), _num(worst.communication), _num(worst.free),
                    _num(worst.iteration_time), "0", _num(worst.comm_not_overlapped), "0"])
    return buf.getvalue()


def communication_matrix(res: ClusterResult) -> dict:
    """cluster_communication_matrix.json: {group: {step: {op name: {"src-dst": link info}}}}
    with the group the tuple of the job's ranks and the step "step" (the collection's
    totals: hccl_info steps are not cut by iteration); "Total Op Info" sums every op."""
    ranks = sorted({r.rank for r in res.ranks} | {ln.src for ln in res.links}
                   | {ln.dst for ln in res.links})
    group = "(" + ", ".join(map(str, ranks)) + ")"
    ops: dict[str, dict] = {}
    for _, ln in res.per_op_links:
        key = f"{ln.src_rank}-{ln.dst_rank}"
        ops.setdefault(ln.op_name, {})[key] = _link_info(ln.transport, ln.bytes, ln.time_us,
                                                        ln.op_name)
    ops["Total Op Info"] = {f"{ln.src}-{ln.dst}": _link_info(ln.transport, ln.bytes,
                                                             ln.time_us, "Total Op Info")
                            for ln in res.links}
    return {group: {"step": ops}}


def _link_info(transport: str, nbytes: int, time_us: float, op: str) -> dict:
    size_mb = nbytes / 1024 / 1024
    time_ms = time_us / 1000
    return {"Transport Type": {"SDMA": "HCCS", "RDMA": "RDMA"}.get(transport, transport),
            "Transit Size(MB)": round(size_mb, 4), "Transit Time(ms)": round(time_ms, 4),
            "Bandwidth(GB/s)": round(size_mb / 1024 / (time_ms / 1000), 4) if time_ms else 0,
            "Op Name": op}


def communication_json(res: ClusterResult) -> dict:
    """cluster_communication.json: {group: {"step": {op: {rank: {"Communication Time Info":
    ..., "Communication Bandwidth Info": ...}}}}} from each rank's sends."""
    ranks = sorted({r.rank for r in res.ranks})
    group = "(" + ", ".join(map(str, ranks)) + ")"
    ops: dict[str, dict] = {}
    for _, ln in res.per_op_links:
        rank = ops.setdefault(ln.op_name, {}).setdefault(str(ln.src_rank), {
            "Communication Time Info": {"Elapse Time(ms)": 0.0, "Transit Time(ms)": 0.0},
            "Communication Bandwidth Info": {}})
        t = rank["Communication Time Info"]
        t["Elapse Time(ms)"] = round(t["Elapse Time(ms)"] + ln.time_us / 1000, 4)
        t["Transit Time(ms)"] = round(t["Transit Time(ms)"] + ln.time_us / 1000, 4)
        kind = {"SDMA": "HCCS", "RDMA": "RDMA"}.get(ln.transport, ln.transport)
        b = rank["Communication Bandwidth Info"].setdefault(kind, {
            "Transit Time(ms)": 0.0, "Transit Size(MB)": 0.0, "Bandwidth(GB/s)": 0.0})
        b["Transit Time(ms)"] = round(b["Transit Time(ms)"] + ln.time_us / 1000, 4)
        b["Transit Size(MB)"] = round(b["Transit Size(MB)"] + ln.bytes / 1024 / 1024, 4)
        b["Bandwidth(GB/s)"] = round(b["Transit Size(MB)"] / 1024
                                     / (b["Transit Time(ms)"] / 1000), 4) \
            if b["Transit Time(ms)"] else 0
    return {group: {"step": ops}}


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
    if res.links:
        put("cluster_communication_matrix.json",
            json.dumps(communication_matrix(res), indent=4))
        put("cluster_communication.json", json.dumps(communication_json(res), indent=4))
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
