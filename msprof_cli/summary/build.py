"""Build a `Summary` from raw data: the export's plan and decode, reduced per window.

The summary reads the same decoded model as `msprof export` (`export.plan`: one window for
most PROF dirs, windows cut at quiet points for big ones), so its numbers are the export's.
A one-window plan of a big PROF dir (every device above ADVICE_MAX_ROWS tasks, where the
summary leaves the advice to `msprof export`) is decoded by the summary's own decode
(summary.decode: the same decoders and joins, only the columns the summary reads).
Each window is reduced to small frames (summary.reduce), which are added up at the end:
memory is bounded by the distinct ops, not by the tasks.  No loop runs per task.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd

from msprof_cli import __version__
from msprof_cli.export.decode.steptrace import step_columns
from msprof_cli.raw import memory_plan as RM
from msprof_cli.raw import profdir, runinfo, sampling

from . import intervals as I
from . import memory as device_memory
from . import model as M
from .reduce import NO_MODEL, PIPE_EVENTS, DeviceAcc, reduce_window

ADVICE_MAX_ROWS = 300_000  # above: no advice in the summary (msprof export writes it)


def stat(values_ns: np.ndarray) -> M.Stat | None:
    v = np.asarray(values_ns, dtype=np.float64)
    v = v[np.isfinite(v)]
    if len(v) == 0:
        return None
    us = v / 1000.0
    return M.Stat(median=_r(np.median(us)), p90=_r(np.percentile(us, 90)), mean=_r(us.mean()),
                  min=_r(us.min()), max=_r(us.max()), count=int(len(us)))


def _r(x: float) -> float:
    """µs to the ns: the summary's numbers are exact for deterministic device times."""
    return round(float(x), 3)


# -- assembling ------------------------------------------------------------------------------
def _ranges(rs: list[list[int]]) -> str:
    return sampling.describe(rs)


def _signature(ops: list[M.OpRow]) -> str:
    seq = "\n".join(o.op_type for o in sorted(ops, key=lambda o: (o.position, o.name)))
    return hashlib.sha1(seq.encode()).hexdigest()[:16] if seq else ""


def _model(acc: DeviceAcc, m: int, ops: pd.DataFrame, its: pd.DataFrame, busy: pd.DataFrame,
           pipes: pd.DataFrame | None, names: dict[int, str], samp: dict,
           comm: pd.DataFrame) -> M.ModelSummary:
    outside = m == NO_MODEL
    mi = its[its["model_id"] == m] if not outside else its.iloc[0:0]
    n = len(mi)
    per = float(max(n, 1))
    mo = ops[ops["model_id"] == m]
    op = mo[mo["kind"] == "op"]
    rows = [M.OpRow(name=str(r.op_name), op_type=str(r.op_type), task_type=str(r.task_type),
                    position=int(r.pos), count=int(r.count),
                    per_step_count=_r(r.count / per), per_step_us=_r(r.dur / per / 1000),
                    input_shapes=str(r.in_shapes), output_shapes=str(r.out_shapes))
            for r in op.sort_values(["dur", "op_name"], ascending=[False, True])
            .itertuples(index=False)]  # a loop over distinct ops
    total_op = float(op["dur"].sum())
    types = op.groupby(["op_type", "task_type"], sort=False).agg(
        count=("count", "sum"), dur=("dur", "sum")).reset_index() \
        .sort_values(["dur", "op_type"], ascending=[False, True])
    type_rows = [M.OpTypeRow(op_type=str(r.op_type), task_type=str(r.task_type),
                             count=int(r.count), per_step_count=_r(r.count / per),
                             per_step_us=_r(r.dur / per / 1000),
                             share=round(r.dur / total_op, 6) if total_op else 0.0)
                 for r in types.itertuples(index=False)]
    pipe_rows = None
    if pipes is not None:
        pm = pipes[pipes["model_id"] == m]
        if len(pm):
            pm = pm.groupby("op_type", sort=False).sum(numeric_only=True).reset_index() \
                .sort_values(["dur", "op_type"], ascending=[False, True])
            cyc = pm["cycles"].to_numpy(np.float64)

            def ratio(e: int) -> list[float | None]:
                col = f"e{e}"
                if col not in pm:
                    return [None] * len(pm)
                v = pm[col].to_numpy(np.float64)
                return [round(float(x / c), 4) if c > 0 else 0.0 for x, c in zip(v, cyc)]

            rs = {k: ratio(e) for k, e in PIPE_EVENTS.items()}
            pipe_rows = [M.PipeRow(op_type=str(t), per_step_us=_r(d / per / 1000),
                                   **{k: rs[k][i] for k in PIPE_EVENTS})
                         for i, (t, d) in enumerate(zip(pm["op_type"], pm["dur"]))]
    info = samp.get(m, {})
    bm = busy[busy["model_id"] == m] if len(busy) else busy
    steps = _steps(mi, bm, acc.max_steps) if n else None
    # the statistics leave the warm-up steps out (graph tracing, the first step); the step
    # series keeps them (docs/summary.md)
    warm = _in_ranges(mi["iteration_id"].to_numpy(np.int64), info.get("warmup", [])) \
        if n else np.zeros(0, bool)
    if warm.all():
        warm = np.zeros(n, bool)  # nothing but warm-up: its numbers are all there is
    if warm.any():
        warm_ids = set(mi["iteration_id"].to_numpy(np.int64)[warm].tolist())
        mi = mi[~warm]
        if len(bm):
            bm = bm[~bm["iteration_id"].isin(list(warm_ids))]
    start, end, fp, bp, aug, has_fp, has_bp = step_columns(mi)
    both = has_fp & has_bp
    step_len = float((end - start).sum())
    kinds = mo.groupby("kind")["dur"].sum()
    return M.ModelSummary(
        model_id=None if outside else int(m),
        name="(outside models)" if outside else names.get(int(m), ""),
        signature=_signature(rows), iterations=n,
        measured=_ranges(info.get("measured", [])), replayed=_ranges(info.get("replayed", [])),
        iteration_time=stat(end - start) if n else None,
        device_time=stat((end - fp)[has_fp]) if has_fp.any() else None,
        fp_bp=stat((bp - fp)[both]) if both.any() else None,
        refresh=stat((end - bp)[has_bp]) if has_bp.any() else None,
        data_aug_bound=stat(aug[aug >= 0]) if (aug >= 0).any() else None,
        busy_share=round(float(bm["busy_ns"].sum()) / step_len, 6) if n and step_len else None,
        op_us_per_step=_r(total_op / per / 1000),
        communication_us_per_step=_r(float(comm.loc[comm["model_id"] == m, "dur"].sum())
                                     / per / 1000),
        memcpy_us_per_step=_r(float(kinds.get("memcpy", 0)) / per / 1000),
        tasks=int(mo["count"].sum()), op_types=type_rows, ops=rows, pipes=pipe_rows,
        steps=steps, warmup_iterations=int(warm.sum()),
        drifted=_ranges(info.get("drifted", [])))


def _in_ranges(ids: np.ndarray, ranges: list[list[int]]) -> np.ndarray:
    """Per id: inside one of the inclusive [first, last] ranges."""
    out = np.zeros(len(ids), bool)
    for a, b in ranges:  # a few ranges per model
        out |= (ids >= a) & (ids <= b)
    return out


def _us_list(ns: np.ndarray, ok: np.ndarray | None = None) -> list:
    vals = np.round(ns.astype(np.float64) / 1000, 3).tolist()
    return vals if ok is None else [v if k else None for v, k in zip(vals, ok.tolist())]


def _steps(mi: pd.DataFrame, bm: pd.DataFrame, max_steps: int) -> M.StepSeries:
    """The model's iterations as columns (every k-th above `max_steps`)."""
    mi = mi.sort_values("iteration_id")
    stride = max(1, -(-len(mi) // max_steps))
    mi = mi.iloc[::stride]
    per = mi[["iteration_id"]].merge(bm, on="iteration_id", how="left").fillna(0)
    start, end = mi["step_start_ns"].to_numpy(np.int64), mi["step_end_ns"].to_numpy(np.int64)
    fp, bp = mi["fp_ns"].to_numpy(np.int64), mi["bp_ns"].to_numpy(np.int64)
    aug = mi["data_aug_ns"].to_numpy(np.int64)
    return M.StepSeries(
        stride=stride, iteration_id=mi["iteration_id"].astype(int).tolist(),
        iteration_time=_us_list(end - start), fp_bp=_us_list(bp - fp, (fp >= 0) & (bp >= 0)),
        refresh=_us_list(end - bp, bp >= 0), data_aug_bound=_us_list(aug, aug >= 0),
        compute=_us_list(per["compute_ns"].to_numpy(np.int64)),
        communication=_us_list(per["comm_ns"].to_numpy(np.int64)),
        comm_not_overlapped=_us_list(per["exposed_ns"].to_numpy(np.int64)))


def _link_rows(acc: DeviceAcc) -> list[M.LinkRow]:
    if not acc.links:
        return []
    f = pd.concat(acc.links, ignore_index=True).groupby(
        ["op_name", "src", "dst", "transport", "link"], sort=False).sum().reset_index()
    return [M.LinkRow(str(r.op_name), int(r.src), int(r.dst), str(r.transport), str(r.link),
                      int(r.count), int(r.bytes), _r(r.dur / 1000))
            for r in f.itertuples(index=False)]  # a loop over links


def _minimap(acc: DeviceAcc) -> M.Activity | None:
    if acc.first is None or acc.last is None or not acc.activity:
        return None
    streams = sorted(acc.activity)
    busy = []
    for sid in streams:
        parts = acc.activity[sid]
        idx = np.concatenate([p[0] for p in parts])
        val = np.concatenate([p[1] for p in parts])
        busy.append(I.rebin(idx, val, acc.bin_ns, acc.first, acc.last,
                            M.ACTIVITY_BINS).tolist())
    return M.Activity(start_us=_r(acc.first / 1000), end_us=_r(acc.last / 1000),
                      bins=M.ACTIVITY_BINS, streams=streams, busy=busy)


def assemble(acc: DeviceAcc, names: dict[int, str], samp: dict) -> M.DeviceSummary:
    ops = pd.concat(acc.ops, ignore_index=True) if acc.ops else pd.DataFrame(
        columns=["model_id", "op_name", "op_type", "task_type", "kind", "count", "dur", "pos",
                 "in_shapes", "out_shapes"])
    if len(acc.ops) > 1:  # windows: add the parts of the same op up
        ops = ops.groupby(["model_id", "op_name", "op_type", "task_type", "kind"], sort=False,
                          dropna=False).agg(count=("count", "sum"), dur=("dur", "sum"),
                                            pos=("pos", "min"), in_shapes=("in_shapes", "first"),
                                            out_shapes=("out_shapes", "first")).reset_index()
    its = pd.concat(acc.iterations, ignore_index=True).drop_duplicates(
        ["model_id", "iteration_id"]) if acc.iterations else pd.DataFrame(
        columns=["model_id", "iteration_id", "step_start_ns", "step_end_ns", "fp_ns", "bp_ns",
                 "data_aug_ns"])
    busy_cols = ["busy_ns", "compute_ns", "comm_ns", "exposed_ns"]
    busy = pd.concat(acc.busy, ignore_index=True).groupby(
        ["model_id", "iteration_id"], sort=False)[busy_cols].sum().reset_index() \
        if acc.busy else pd.DataFrame(columns=["model_id", "iteration_id", *busy_cols])
    pipes = pd.concat(acc.pipes, ignore_index=True) if acc.pipes else None
    comm = pd.concat(acc.comm, ignore_index=True) if acc.comm else pd.DataFrame(
        {"model_id": np.zeros(0, np.int64), "dur": np.zeros(0, np.int64)})
    model_ids = sorted({int(m) for m in its["model_id"]} | {int(m) for m in ops["model_id"]}
                       | {int(m) for m in comm["model_id"]})
    models = [_model(acc, m, ops, its, busy, pipes, names, samp, comm) for m in model_ids
              if m != NO_MODEL]
    if NO_MODEL in model_ids:
        models.append(_model(acc, NO_MODEL, ops, its, busy, pipes, names, samp, comm))
    span = (acc.last - acc.first) if acc.first is not None and acc.last is not None else 0
    return M.DeviceSummary(prof=acc.prof, device_id=acc.device_id, rank_id=acc.rank_id,
                           tasks=acc.tasks, span_us=_r(span / 1000),
                           busy_share=round(acc.busy_total / span, 6) if span else None,
                           models=models, advice=acc.advice, advice_note=acc.advice_note,
                           advice_model=acc.advice_model,
                           overlap=M.Overlap(*(_r(v / 1000) for v in acc.overlap))
                           if acc.tasks else None, activity=_minimap(acc),
                           links=_link_rows(acc))


def _note(dev, rows: int) -> str | None:
    """Why a one-window summary of a device with `rows` op_summary rows has no advice (None:
    it has one)."""
    if not len(dev.tasks):
        return "no TensorFlow op ran on the device (no device task was collected)"
    if not dev.has_host_ops or rows == 0:
        return "no op_summary rows (no host task data)"
    if rows > ADVICE_MAX_ROWS:
        return (f"{rows} op rows: the advice is left to msprof export "
                f"(prof_rule_{dev.device_id}.json)")
    return None


def _advice(acc: DeviceAcc, dev, data, prof: Path) -> None:
    """The export's brief advice over the op_summary rows of the model a default `msprof
    export` chooses (its prof_rule holds that model's rows: the same findings and counts);
    one-window plans up to ADVICE_MAX_ROWS rows: the rules read the op_summary text."""
    from msprof_cli.export.derive import advice as A
    from msprof_cli.export.derive import advice_table as OT
    from msprof_cli.export.derive import advice_text as AT
    from msprof_cli.export.layouts.legacy import default_rows
    from msprof_cli.export.outputs import summaries as S

    rows = S.op_rows(dev)
    note = _note(dev, len(rows))
    if note is not None:
        acc.advice_note = note
        return
    acc.advice_model, tasks = default_rows(prof, dev)
    if tasks is not dev.tasks:
        rows = S.op_rows(dev, tasks)
    state = A.RuleState(dev.rd.ai_core_num)
    state.model_spans = A.model_spans(data.host.apis)
    start = rows["start_local"].to_numpy(np.int64)
    state.add(OT.OpTable.from_summary(S.op_summary(dev, rows)[1], dev.rd.ai_core_num, start))
    metrics = (dev.rd.ai_core_metrics or "") if dev.pmu_events else ""
    acc.advice = AT.brief(state.rule_json(metrics), state)


def _soc_of(prof: Path, rd) -> str | None:
    """The CANN soc_version of a collection: the emulated one, or the 910's for a real
    platform-1 collection (an Atlas A2's SKU is not in its raw data: None)."""
    run = runinfo.read(prof)
    soc = run.get("emulation", {}).get("soc_version") if isinstance(run, dict) else None
    plat = str(rd.info.get("platform_version", "")) if rd is not None else ""
    return soc or ("Ascend910A" if plat == "1" else None)


def _collection(prof: Path, rd) -> M.Collection:
    run = runinfo.read(prof)
    opts = rd.sample.get("profiling_options", "") if rd is not None else ""
    try:
        import json
        options = json.loads(opts) if isinstance(opts, str) and opts else {}
    except ValueError:
        options = {"profiling_options": opts}
    options.pop("output", None)  # a path of the machine that collected: not a setting
    plat = str(rd.info.get("platform_version", "")) if rd is not None else ""
    soc = run.get("emulation", {}).get("soc_version") if isinstance(run, dict) else None
    chip = {"1": "Ascend910", "5": f"{soc or 'Ascend910B'} (Atlas A2)"}.get(
        plat, f"platform_version {plat}")
    return M.Collection(chip=chip,
                        emulated=bool(run), msprof_cli=run.get("msprof_cli", ""),
                        tensorflow=run.get("tensorflow", ""), python=run.get("python", ""),
                        emulation=run.get("emulation", {}),
                        options=options if isinstance(options, dict) else {})


def _acc(accs: dict[int, DeviceAcc], prof: Path, dev, max_steps: int) -> DeviceAcc:
    acc = accs.get(dev.device_id)
    if acc is None:
        rank = dev.rd.info.get("rank_id", -1)
        rank = rank if isinstance(rank, int) else -1
        acc = accs[dev.device_id] = DeviceAcc(prof.name, dev.device_id, rank,
                                              max_steps=max_steps)
    return acc


Reduced = tuple[dict[int, DeviceAcc], dict[int, str], object, list[str]]


def _reduce_plan(prof: Path, plan, max_steps: int) -> Reduced:
    """The devices of `prof` reduced window by window from the export's decode: (per device
    its accumulator, the model names, the first device's result dir, the warnings)."""
    from msprof_cli.export.derive.stack import model_names

    accs: dict[int, DeviceAcc] = {}
    names: dict[int, str] = {}
    rd0 = None
    for k in range(len(plan)):
        data = plan.load(k)
        if k == 0:
            names = model_names(data)
            rd0 = data.host.rd
        for dev in data.devices:
            if k == 0 and dev is data.devices[0]:
                rd0 = dev.rd  # the chip and options of the first device
            acc = _acc(accs, prof, dev, max_steps)
            reduce_window(acc, dev, data)
            if plan.whole:
                _advice(acc, dev, data, prof)
            elif k == 0:
                acc.advice_note = "windowed export: the advice is left to msprof export"
    return accs, names, rd0, plan.warnings()


def _reduce_own(prof: Path, max_steps: int, force: bool = False) -> Reduced | None:
    """The devices of `prof` reduced from the summary's own decode (summary.decode), as
    `_reduce_plan` does from the export's one window; None when a device has an advice to
    compute (it reads the export's whole task table), unless `force` (tests: the advice is
    then left out)."""
    from msprof_cli.export.derive.stack import model_names

    from . import decode as D

    data, shapes = D.load(prof)
    accs: dict[int, DeviceAcc] = {}
    for dev in data.devices:
        note = _note(dev, D.op_row_count(dev))
        if note is None and not force:
            return None
        acc = _acc(accs, prof, dev, max_steps)
        conn = dev.tasks["connection_id"].to_numpy(np.int64)
        reduce_window(acc, dev, data, lambda rows: shapes.of(conn[rows]))
        acc.advice_note = note or "the advice needs the export's decode"
    rd0 = data.devices[0].rd if data.devices else data.host.rd
    return accs, model_names(data), rd0, list(data.log.warnings)


def build(path: Path, max_steps: int = M.MAX_STEPS, *, decode: str = "auto") -> M.Summary:
    """The summary of a PROF dir, or of every PROF dir under a job dir (`max_steps`: the
    per-iteration series kept per model; the cluster analysis keeps every step).
    `decode` of a one-window plan: "auto" (the summary's own above ADVICE_MAX_ROWS tasks a
    device), "export" (always the export's), "summary" (the summary's whenever the PROF dir
    has a host and a device dir, without advice: tests compare the two)."""
    from msprof_cli.export.plan import plan_export

    from .decode import light_decodable

    profs = profdir.locate(Path(path))
    summary = M.Summary(source=str(path), made_by=__version__,
                        collection=M.Collection("", False, "", "", ""))
    for prof in profs:
        profdir.check_no_links(prof)
        profdir.check_has_result_dirs(prof)
        plan = plan_export(prof)
        reduced = None
        if plan.whole and decode != "export" and light_decodable(
                prof, -1 if decode == "summary" else ADVICE_MAX_ROWS):
            reduced = _reduce_own(prof, max_steps, force=decode == "summary")
        if reduced is None:
            reduced = _reduce_plan(prof, plan, max_steps)
        accs, names, rd0, warnings = reduced
        del reduced
        summary.warnings += [f"{prof.name}: {w}" for w in warnings]
        samp = sampling.read(prof)
        if not summary.collection.chip:
            summary.collection = _collection(prof, rd0)
        mem = RM.read(prof)
        for d in sorted(accs):
            dev = assemble(accs[d], names, samp)
            if mem is not None:
                dev.memory = device_memory.device_summary(mem, d)
            else:  # a real collection: its own npu_mem samples, if any
                dev.memory = device_memory.measured(prof / f"device_{d}",
                                                    _soc_of(prof, rd0))
            summary.devices.append(dev)
        plan.release()
    if not summary.devices:
        summary.warnings.append("no device data: nothing ran on the (emulated) NPU")
    return summary
