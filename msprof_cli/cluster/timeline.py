"""One timeline of every rank: each rank's `msprof` JSON (the mindstudio export)
merged into one Chrome trace that Perfetto opens, ranks as processes.

* **Processes and threads**: rank r is process `r + 1` named "rank r (PROF dir, device d)";
  each (process, thread) lane of its own trace (CANN, Ascend Hardware streams, Communication,
  Overlap Analysis...) becomes one of its threads, named "<layer>: <lane>", in the rank's
  trace order.  Flow ids are made unique per rank.
* **Clocks**: every rank's times are its local times, which the export computed from its own
  sync files (start_info's collectionTimeBegin and the monotonic/cntvct pairs of
  host_start.log / dev_start.log, docs/export.md §3): ranks of one host share that clock.
  Times are written in µs from the earliest event of the job (numbers, as Perfetto wants
  them).  The merge warns, with numbers, when the ranks come from different hosts (their wall
  clocks may differ) and when a rank's events do not overlap the others' at all (its clock is
  off, or it ran at another time): such a rank cannot be aligned to the others and is placed by
  its own clock.
* **Memory**: one rank's trace is in memory at a time; events are streamed to the output,
  which is written atomically.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import orjson

SLICE = re.compile(r"^msprof(?:_slice_(\d+))?_\d{14}\.json$")
FLOW = {"s", "t", "f"}


@dataclass
class RankTrace:
    """The trace files of one PROF dir and the ranks of its devices (device id -> rank): a
    PROF dir of several devices holds them all in one trace (lanes labelled "NPU d"); its
    host lanes go to the rank of its first device."""

    ranks: dict[int, int]
    prof: Path
    files: list[Path]
    host: str = ""
    first_ns: int | None = None
    last_ns: int | None = None

    @property
    def rank(self) -> int:
        return min(self.ranks.values())


@dataclass
class MergeResult:
    path: Path
    events: int = 0
    ranks: int = 0
    warnings: list[str] = field(default_factory=list)


def trace_files(prof: Path) -> list[Path]:
    """The msprof JSON of a PROF dir's mindstudio export (its slices in order); [] if none."""
    out = prof / "mindstudio_profiler_output"
    if not out.is_dir():
        return []
    found = [(int(m.group(1) or 0), p) for p in out.iterdir()
             if (m := SLICE.match(p.name)) and p.is_file() and not p.is_symlink()]
    return [p for _, p in sorted(found)]


def _ns(ts) -> int:
    """A trace timestamp (µs, number or "1700000000001029.500") in integer ns."""
    text = ts if isinstance(ts, str) else repr(float(ts))
    whole, _, frac = text.partition(".")
    return int(whole) * 1000 + int((frac + "000")[:3] or 0)


def _host(prof: Path) -> str:
    for info in sorted(prof.glob("host/info.json")) + sorted(prof.glob("device_*/info.json*")):
        try:
            return str(json.loads(info.read_text(encoding="utf-8").splitlines()[0])
                       .get("hostname", ""))
        except (OSError, ValueError, IndexError, AttributeError):
            continue
    return ""


def _spans(ranks: list[RankTrace]) -> None:
    """First and last event time of every rank (a pass over its files)."""
    for r in ranks:
        for f in r.files:
            for e in orjson.loads(f.read_bytes()):
                if e.get("ph") == "M" or "ts" not in e:
                    continue
                t = _ns(e["ts"])
                end = t + int(round(float(e.get("dur", 0) or 0) * 1000))
                r.first_ns = t if r.first_ns is None else min(r.first_ns, t)
                r.last_ns = end if r.last_ns is None else max(r.last_ns, end)


def check_clocks(ranks: list[RankTrace]) -> list[str]:
    """Warnings (with numbers) about ranks whose clocks cannot be aligned to the others."""
    out = []
    hosts = {r.host for r in ranks if r.host}
    if len(hosts) > 1:
        out.append(f"the ranks ran on {len(hosts)} hosts ({', '.join(sorted(hosts))}): they "
                   "are aligned by each host's wall clock (collectionTimeBegin of their "
                   "sync files); keep the hosts' clocks synchronised (NTP/PTP) or their "
                   "events drift by the clocks' difference")
    timed = [r for r in ranks if r.first_ns is not None]
    for r in timed:
        others = [o for o in timed if o is not r]
        if not others:
            continue
        lo = min(o.first_ns for o in others)
        hi = max(o.last_ns for o in others)
        if r.first_ns > hi or r.last_ns < lo:
            gap = (r.first_ns - hi) if r.first_ns > hi else (lo - r.last_ns)
            where = "after the others end" if r.first_ns > hi else "before the others start"
            out.append(f"rank {r.rank} ({r.prof.name}) cannot be aligned: its events end or "
                       f"start {gap / 1e9:.3f} s {where} (no overlap at all). Its clock is off "
                       f"or it ran at another time; it is placed by its own clock")
    return out


def merge(ranks: list[RankTrace], out: Path) -> MergeResult:
    from msprof_cli.raw.control import FILE_MODE

    ranks = sorted(ranks, key=lambda r: r.rank)
    for r in ranks:
        r.host = _host(r.prof)
    _spans(ranks)
    res = MergeResult(path=out, ranks=sum(len(r.ranks) for r in ranks),
                      warnings=check_clocks(ranks))
    starts = [r.first_ns for r in ranks if r.first_ns is not None]
    t0 = min(starts) if starts else 0
    tmp = out.with_name(f".{out.name}.tmp{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(b'{"displayTimeUnit":"ns","otherData":')
            fh.write(orjson.dumps({"msprof_cli": "merged timeline of the ranks of a job",
                                  "time_zero_local_us": f"{t0 // 1000}.{t0 % 1000:03d}",
                                  "ranks": [{"rank": k, "prof": r.prof.name, "device": d,
                                             "host": r.host}
                                            for r in ranks for d, k in sorted(r.ranks.items())]
                                  }))
            fh.write(b',"traceEvents":[\n')
            first = True
            for r in ranks:
                for part in _rank_events(r, t0):
                    if not first:
                        fh.write(b",\n")
                    fh.write(part)
                    first = False
                    res.events += getattr(part, "n_events", 1)
            fh.write(b"\n]}\n")
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return res


def _device_of(label: str) -> int | None:
    m = re.fullmatch(r"NPU (\d+)", label.strip())
    return int(m.group(1)) if m else None


def _rank_events(r: RankTrace, t0: int):
    """The events of one PROF dir, re-homed in its ranks' processes (JSON lines)."""
    first_dev = min(r.ranks)
    named: set[int] = set()

    def process(rank: int, device: int):
        pid = rank + 1
        if pid not in named:
            named.add(pid)
            yield orjson.dumps({"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                                "args": {"name": f"rank {rank} ({r.prof.name}, device "
                                                 f"{device})"}})
            yield orjson.dumps({"name": "process_sort_index", "ph": "M", "pid": pid,
                                "tid": 0, "args": {"sort_index": rank}})

    lanes: dict[tuple, tuple[int, int]] = {}
    pname: dict[object, str] = {}
    pdev: dict[object, int] = {}
    tname: dict[tuple, str] = {}
    psort: dict[object, int] = {}
    tsort: dict[tuple, int] = {}
    for f in r.files:
        events = orjson.loads(f.read_bytes())
        for e in events:  # metadata first: names of the lanes, the device of each process
            if e.get("ph") != "M":
                continue
            key, name, args = (e.get("pid"), e.get("tid")), e.get("name"), e.get("args", {})
            if name == "process_name":
                pname[e.get("pid")] = str(args.get("name", ""))
            elif name == "process_labels":
                dev = _device_of(str(args.get("labels", "")))
                if dev is not None:
                    pdev[e.get("pid")] = dev
            elif name == "process_sort_index":
                psort[e.get("pid")] = int(args.get("sort_index", 0) or 0)
            elif name == "thread_name":
                tname[key] = str(args.get("name", ""))
            elif name == "thread_sort_index":
                tsort[key] = int(args.get("sort_index", 0) or 0)
        out = []  # this file's events, re-homed in place, dumped in one call
        flow_tag = r.prof.name[-16:]
        for e in events:
            if e.get("ph") == "M":
                continue
            key = (e.get("pid"), e.get("tid"))
            lane = lanes.get(key)
            if lane is None:
                dev = pdev.get(key[0], first_dev)
                rank = r.ranks.get(dev, r.ranks[first_dev])
                yield from process(rank, dev)
                pid = rank + 1
                tid = 1 + sum(1 for p, _ in lanes.values() if p == pid)
                lane = lanes[key] = (pid, tid)
                label = pname.get(key[0], str(key[0]))
                yield orjson.dumps({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                                    "args": {"name": f"{label}: "
                                                     f"{tname.get(key, f'thread {key[1]}')}"}})
                yield orjson.dumps({"name": "thread_sort_index", "ph": "M", "pid": pid,
                                    "tid": tid, "args": {"sort_index": psort.get(key[0], 0)
                                                         * 100000 + tsort.get(key, tid)}})
            e["pid"], e["tid"] = lane
            if "ts" in e:
                e["ts"] = round((_ns(e["ts"]) - t0) / 1000, 3)
            if "dur" in e:
                e["dur"] = float(e["dur"])
            if e.get("ph") in FLOW and "id" in e:
                e["id"] = f"{flow_tag}-{e['id']}"
            out.append(e)
        if out:
            yield Chunk(orjson.dumps(out)[1:-1], len(out))
        del events, out


class Chunk(bytes):
    """Several events' JSON text (comma-separated, no brackets) and how many they are."""

    def __new__(cls, data: bytes, count: int) -> "Chunk":
        obj = super().__new__(cls, data)
        obj.n_events = count
        return obj
