"""Export of a job dir of many ranks: serial vs the fork job pool vs Dask.

    python benchmarks/cluster_bench.py [--ranks 16] [--tasks 100000] [--work DIR]

The job dir holds `--ranks` copies of one generated PROF dir (gen_prof.py, `--tasks` device
tasks), each with its own name and rank id.  Three runs of `msprof export --output JOB`:

* serial:    `--distributed off`, MSPROF_EXPORT_WORKERS=1 (one PROF dir after the other, one core)
* job pool:  `--distributed off` (one PROF dir after the other, each with the fork job pool)
* dask:      `--distributed local` (a LocalCluster, one single-threaded worker per core)

and `msprof cluster JOB` on the exported job (its merged timeline included).  Printed: wall
time, the peak RSS of the largest process of the run (for Dask: the largest worker) and the
peak of the summed RSS of the process tree, sampled every 0.2 s from /proc."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from _common import MSPROF, ROOT, write_results


def _children(pid: int) -> list[int]:
    """Every descendant (children of any thread: Dask's nanny starts its worker from one)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        kids: list[int] = []
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                try:
                    with open(f"/proc/{p}/task/{tid}/children", encoding="ascii") as fh:
                        kids += [int(x) for x in fh.read().split()]
                except OSError:
                    pass
        except OSError:
            pass
        out += kids
        todo += kids
    return out


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def run(cmd: list[str], env: dict[str, str]) -> dict:
    peak_one = peak_tree = 0
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    done = threading.Event()

    def sample() -> None:
        nonlocal peak_one, peak_tree
        while not done.is_set():
            pids = [proc.pid, *_children(proc.pid)]
            rss = [_rss_kb(p) for p in pids]
            peak_one = max(peak_one, max(rss, default=0))
            peak_tree = max(peak_tree, sum(rss))
            time.sleep(0.2)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    err = proc.stderr.read().decode("utf-8", "replace")
    proc.wait()
    done.set()
    th.join()
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd} failed: {err[-2000:]}")
    return {"wall_s": round(time.perf_counter() - t0, 2), "peak_process_mb": peak_one // 1024,
            "peak_tree_mb": peak_tree // 1024}


def make_job(work: Path, ranks: int, tasks: int) -> Path:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gen_prof

    src_root = work / "src"
    src = src_root / gen_prof.PROF_NAME
    if not src.is_dir():
        gen_prof.generate(tasks, src_root, quiet=True)
    job = work / "job"
    if job.is_dir():
        shutil.rmtree(job)
    for r in range(ranks):
        dest = job / gen_prof.PROF_NAME.replace("PROF_000001_", f"PROF_{r + 1:06d}_")
        shutil.copytree(src, dest)
        for info in dest.glob("device_*/info.json*"):  # each copy its own rank
            data = json.loads(info.read_text())
            data["rank_id"] = r
            info.write_text(json.dumps(data))
    return job


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=16)
    ap.add_argument("--tasks", type=int, default=100_000)
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--modes", default="serial,job pool,dask",
                    help="which of: serial, job pool, dask (comma separated)")
    a = ap.parse_args(argv)
    modes = {m.strip() for m in a.modes.split(",")}
    work = a.work or Path(tempfile.gettempdir()) / f"msprof_cluster_bench_{a.ranks}x{a.tasks}"
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, flags, extra in (("serial", ["--distributed", "off"],
                                {"MSPROF_EXPORT_WORKERS": "1"}),
                               ("job pool", ["--distributed", "off"], {}),
                               ("dask", ["--distributed", "local"], {})):
        if name not in modes:
            continue
        job = make_job(work, a.ranks, a.tasks)
        os.sync()
        env = {**os.environ, **extra}
        r = run([*MSPROF, "export", "--output", str(job), "--layout", "mindstudio", *flags],
                env)
        row = {"case": f"export {a.ranks} ranks x {a.tasks} tasks, {name}", **r}
        rows.append(row)
        print(f"cluster  {row['case']}: {r['wall_s']} s, largest process "
              f"{r['peak_process_mb']} MB, tree {r['peak_tree_mb']} MB", flush=True)
    r = run([*MSPROF, "cluster", str(job), "--distributed", "local"], dict(os.environ))
    rows.append({"case": f"cluster {a.ranks} ranks x {a.tasks} tasks (dask)", **r})
    print(f"cluster  msprof cluster: {r['wall_s']} s, largest process {r['peak_process_mb']} "
          f"MB, tree {r['peak_tree_mb']} MB")
    write_results("cluster", rows)
    return rows


if __name__ == "__main__":
    main()
