"""Will the model fit, and what fills the device memory: the verdict over a collection's
`msprof_cli_memory.json` (raw/memory_plan.py), shared by collect's closing line, `msprof
summary`, `diff` and `check` (docs/summary.md "Device memory").  Standard library only:
collect imports it in the profiled process.

The limits are GE's (docs/device-model.md 12): the variables must fit the variable memory
(`variable_memory_max_size`, 5/32 of the HBM), each device's loaded graphs the graph memory
(`graph_memory_max_size`, 26/32), and both together what the device's system leaves.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from msprof_cli.raw import memory_plan as RM
from msprof_cli.summary import model as M

MIB = 1 << 20
GIB = 1 << 30


def size_text(b: int) -> str:
    """Bytes as people read them: 1.23 GiB, 45.6 MiB, 789 KiB."""
    if b >= GIB:
        return f"{b / GIB:.2f} GiB"
    if b >= MIB:
        return f"{b / MIB:.1f} MiB"
    if b >= 1024:
        return f"{b / 1024:.0f} KiB"
    return f"{b} B"


@dataclass
class DeviceVerdict:
    device: int
    peak: int
    parts: dict[str, int]  # category -> bytes at the peak (they sum to `peak`)
    fits: bool
    problems: list[str] = field(default_factory=list)  # GE's out-of-memory messages
    dominant: str = ""  # the category that is largest
    top_model: int = -1  # the model with the largest feature map


def categories(dm: RM.DeviceMemory) -> dict[str, int]:
    """The device's peak split: weights / optimizer state / activations / constants /
    workspace / communication buffers (HCCL's, 2 x HCCL_BUFFSIZE on a device that runs
    collectives) / other.  Activations = every loaded graph's feature map (what its steps
    keep for backward, the gradients and temporaries: the planned block); constants = the
    graphs' Const values their tasks read; workspace = the kernels' own scratch memory live
    at each plan's peak (a block of the feature map, docs/device-model.md 12); other = the
    variables' other state and the steps' input/output buffers."""
    work = sum(m.workspace for m in dm.models.values())
    return {"weights": dm.weight, "optimizer state": dm.optimizer,
            "activations": sum(m.feature_map for m in dm.models.values()) - work,
            "constants": sum(m.constants for m in dm.models.values()),
            "workspace": work,
            "communication buffers": dm.hccl,
            "other": dm.pool - dm.weight - dm.optimizer + sum(m.io for m in dm.models.values())}


def verdict(facts: RM.MemoryFacts) -> list[DeviceVerdict]:
    out = []
    for dev, dm in sorted(facts.devices.items()):
        parts = categories(dm)
        peak = dm.peak()
        problems = []
        if dm.pool > facts.variable_limit:
            problems.append(f"Out of memory: current var size[{dm.pool}] exceeds total var "
                            f"size[{facts.variable_limit}]")
        graphs = dm.feature_maps()
        if graphs > facts.graph_limit:
            problems.append(f"Out of memory: current graph size[{graphs}] exceeds total graph "
                            f"size[{facts.graph_limit}]")
        if peak > facts.usable and not problems:
            problems.append(f"Out of memory: {size_text(peak)} needed, "
                            f"{size_text(facts.usable)} usable")
        top = max(dm.models.items(), key=lambda kv: kv[1].feature_map, default=(-1, None))[0]
        out.append(DeviceVerdict(dev, peak, parts, not problems, problems,
                                 max(parts, key=lambda k: parts[k]) if peak else "", top))
    return out


def advice(facts: RM.MemoryFacts, v: DeviceVerdict) -> str:
    """What dominates a device that does not fit, and what would help."""
    dm = facts.devices[v.device]
    share = v.parts.get(v.dominant, 0) / max(v.peak, 1)
    verb = "dominate" if v.dominant.endswith("s") else "dominates"
    text = f"{v.dominant} {verb} ({size_text(v.parts.get(v.dominant, 0))}, {share:.0%})"
    if v.dominant == "activations" and v.top_model in dm.models:
        mm = dm.models[v.top_model]
        text += (f"; model {mm.name} plans {size_text(mm.feature_map)}: a smaller batch "
                 "shrinks it about in proportion, and precision_mode allow_mix_precision "
                 "keeps activations in fp16 (half of fp32)")
    elif v.dominant in ("weights", "optimizer state"):
        text += ("; the variables are kept at their own dtype (fp32) whatever the precision "
                 "mode: a smaller model, or an optimizer with fewer slots (SGD with momentum "
                 "keeps one a weight, Adam two), reduces them")
    return text


def one_line(prof_dir: Path) -> str | None:
    """collect's closing line: the predicted peak and whether it fits the chip (None: the
    collection has no memory facts)."""
    facts = RM.read(prof_dir)
    if facts is None or not facts.devices:
        return None
    vs = verdict(facts)
    worst = max(vs, key=lambda v: v.peak)
    where = f" (device {worst.device})" if len(vs) > 1 else ""
    if all(v.fits for v in vs):
        return (f"Device memory: predicted peak {size_text(worst.peak)}{where} of "
                f"{size_text(facts.usable)} usable on {facts.chip}: fits "
                f"({size_text(facts.usable - worst.peak)} free). `msprof summary` "
                "shows what fills it.")
    bad = next(v for v in vs if not v.fits)
    return (f"Device memory: the model does not fit {facts.chip}{where}: predicted peak "
            f"{size_text(bad.peak)} of {size_text(facts.usable)} usable; GE would stop with "
            f"\"{bad.problems[0]}\". {advice(facts, bad)}.")


def device_summary(facts: RM.MemoryFacts, device: int) -> M.DeviceMemory | None:
    """The summary's memory section of one device (None: nothing planned on it)."""
    dm = facts.devices.get(device)
    if dm is None:
        return None
    v = next(x for x in verdict(facts) if x.device == device)
    rows = [M.ModelMemoryRow(
        model_id=mid, name=mm.name, feature_map=mm.feature_map, live_peak=mm.live_peak,
        io=mm.io, constants=mm.constants, activations=mm.activations, gradients=mm.gradients, updates=mm.updates,
        top=[M.TensorRow(op, int(b), int(s), int(e), str(k)) for op, b, s, e, k in mm.top],
        curve=mm.curve)
        for mid, mm in sorted(dm.models.items())]
    return M.DeviceMemory(peak=v.peak, usable=facts.usable, capacity=facts.capacity,
                          fits=v.fits, parts=v.parts, problems=v.problems,
                          advice="" if v.fits else advice(facts, v), variables=dm.count,
                          variable_limit=facts.variable_limit, graph_limit=facts.graph_limit,
                          variable_bytes=dm.pool, graph_bytes=dm.feature_maps(), models=rows)


def measured(device_dir: Path, chip: str | None) -> M.DeviceMemory | None:
    """The peak of a collection's own npu_mem samples (the application's HBM + DDR, event 0:
    docs/formats/device-memory.md 1), for a PROF dir without an emulated plan (a real
    CANN collection with --sys-hardware-mem); None without samples.  `chip`: a CANN
    soc_version name whose HBM the verdict uses (None: no verdict)."""
    import numpy as np

    from msprof_cli.export.decode.rawread import DecodeLog, device_records
    from msprof_cli.raw import memory_layouts as ML

    parts = [device_records(device_dir / "data", kind, DecodeLog(), ["event", "ddr", "hbm"])
             for kind in ("npu_mem", "npu_mem_app")]
    app = {k: np.concatenate([p[k] for p in parts]) for k in ("event", "ddr", "hbm")}
    mine = app["event"] == ML.NPU_MEM_APP
    app = {k: v[mine] for k, v in app.items()}
    if not len(app["event"]):
        return None
    peak = int((app["hbm"].astype(np.int64) + app["ddr"].astype(np.int64)).max())
    capacity = usable = 0
    if chip:
        from msprof_cli.device.chip import get_chip
        from msprof_cli.errors import OptionsError

        try:
            spec = get_chip(chip)
            capacity, usable = spec.hbm_capacity_bytes, \
                spec.hbm_capacity_bytes - spec.hbm_reserved_bytes
        except OptionsError:
            pass
    return M.DeviceMemory(peak=peak, usable=usable, capacity=capacity,
                          fits=not usable or peak <= usable,
                          parts={"application (measured)": peak}, measured=True,
                          samples=len(app["event"]))
