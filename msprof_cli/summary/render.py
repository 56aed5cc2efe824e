"""Renderers of the summary, diff and check models: text (aligned columns, no colour: CI logs),
Markdown (a GitHub job summary or PR comment) and JSON (scripts).  One small function per
format and model, all reading the same plain data (pyinstrument's renderer pattern)."""
from __future__ import annotations

import json
import re
from dataclasses import asdict
from typing import Callable

from msprof_cli.textsafety import escape_controls

from . import check as C
from . import diff as D
from . import model as M
from .memory import size_text
from .units import pct, share, signed_us, us

TOP = 10

Row = list[str]


def table(header: Row, rows: list[Row], md: bool, right: set[int] | None = None) -> list[str]:
    """Aligned text columns, or a Markdown table.  `right`: right-aligned column indexes."""
    right = right if right is not None else set(range(1, len(header)))
    rows = [[escape_controls(c) for c in r] for r in rows]
    if md:
        sep = ["---:" if i in right else "---" for i in range(len(header))]
        esc = [[c.replace("|", "\\|") for c in r] for r in [header, sep] + rows]
        return ["| " + " | ".join(r) + " |" for r in esc]
    width = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]

    def line(r: Row) -> str:
        return "  ".join(c.rjust(width[i]) if i in right else c.ljust(width[i])
                         for i, c in enumerate(r)).rstrip()

    return [line(header)] + [line(r) for r in rows]


def ratio(v: float | None) -> str:
    return "" if v is None else f"{v:.2f}"


def heading(text: str, level: int, md: bool) -> list[str]:
    if md:
        return ["", "#" * level + " " + text, ""]
    return ["", text, ("=" if level <= 2 else "-") * len(text)]


def shorten(name: str, n: int = 70) -> str:
    return name if len(name) <= n else "..." + name[-(n - 3):]


_LONG_NAME = re.compile(r"[\w.:/-]{48,}")


def shorten_advice(line: str, n: int = 400) -> str:
    """An advice line within `n` characters: the finding (before its first " (") is kept
    whole; long op names lose their leading scopes ("...dense_1/MatMul"), then the evidence
    is cut at its end -- never the finding, so two findings never print the same."""
    if len(line) <= n:
        return line
    head, sep, rest = line.partition(" (")
    rest = _LONG_NAME.sub(lambda m: "..." + m.group(0)[-40:], rest)
    out = head + sep + rest
    if len(out) <= n:
        return out
    keep = max(n - len(head) - len(sep) - 5, 0)
    return head + sep + rest[:keep] + " ...)"


# -- summary ---------------------------------------------------------------------------------
def _stat_rows(m: M.ModelSummary) -> list[Row]:
    rows = []
    for label, s in (("Iteration Time", m.iteration_time), ("Device step (FP to end)",
                     m.device_time), ("FP to BP", m.fp_bp), ("Iteration Refresh", m.refresh),
                     ("Data Aug Bound", m.data_aug_bound)):
        if s is not None:
            rows.append([label, us(s.median), us(s.p90), us(s.min), us(s.max)])
    return rows


def summary_lines(s: M.Summary, md: bool = False, top: int = TOP) -> list[str]:
    c = s.collection
    what = f"emulated by msprof_cli {c.msprof_cli}" if c.emulated else \
        "no msprof_cli run record: a real CANN PROF dir, or collected before msprof_cli 0.1"
    out = [("# " if md else "") + f"msprof summary of {s.source}"]
    out.append("")
    out.append(f"Chip {c.chip or '?'} ({what})"
               + (f"; TensorFlow {c.tensorflow}, Python {c.python}." if c.emulated else "."))
    if c.options:
        out.append("Options: " + ", ".join(f"{k}={v}" for k, v in sorted(c.options.items())))
    if c.emulation:
        out.append("Emulated system: " + ", ".join(f"{k} {v}"
                                                   for k, v in sorted(c.emulation.items())))
    for w in s.warnings:
        out.append(f"Warning: {w}")
    for dev in s.devices:
        busy = f", device busy {share(dev.busy_share)} of its span" \
            if dev.busy_share is not None else ""
        out += heading(f"{dev.prof} device {dev.device_id}"
                       + (f" (rank {dev.rank_id})" if dev.rank_id >= 0 else ""), 2, md)
        out.append(f"{dev.tasks} tasks over {us(dev.span_us)}{busy}.")
        for m in dev.models:
            out += _model_lines(m, md, top)
        if dev.memory is not None:
            out += memory_lines(dev.memory, md, top)
        if dev.advice:
            scope = f", model {dev.advice_model} as in msprof export's prof_rule" \
                if dev.advice_model is not None else ""
            out += heading(f"Advice (top findings{scope})", 3, md)
            out += ["- " + shorten_advice(a, 400) for a in dev.advice]
        elif dev.advice_note:
            out += ["", f"Advice: {dev.advice_note}."]
    return out


def memory_lines(mem: M.DeviceMemory, md: bool, top: int) -> list[str]:
    """The device memory section: the peak against the chip, its split, and per model the
    planned feature map with the tensors live at its peak."""
    if mem.measured:
        out = heading("Device memory (measured: npu_mem samples)", 3, md)
        of = f" of {size_text(mem.usable)} usable ({size_text(mem.capacity)} HBM)" \
            if mem.usable else ""
        out.append(f"Peak {size_text(mem.peak)}{of}: the application's HBM and DDR, "
                   f"{mem.samples} samples (what fills it is not in the samples).")
        return out
    out = heading("Device memory (emulated: GE's plan of the captured graphs)", 3, md)
    verdict = f"fits, {size_text(max(mem.usable - mem.peak, 0))} free" if mem.fits \
        else "DOES NOT FIT"
    out.append(f"Predicted peak {size_text(mem.peak)} of {size_text(mem.usable)} usable "
               f"({size_text(mem.capacity)} HBM): {verdict}. GE's pools: variables "
               f"{size_text(mem.variable_bytes)} of {size_text(mem.variable_limit)}, graphs "
               f"{size_text(mem.graph_bytes)} of {size_text(mem.graph_limit)}.")
    for p in mem.problems:
        out.append(f"GE: {p}")
    if mem.advice:
        out.append(f"What dominates: {mem.advice}.")
    rows = [[k, size_text(v), share(v / mem.peak) if mem.peak else "-"]
            for k, v in mem.parts.items()]
    out += [""] + table(["Category", "bytes", "share"], rows, md, {1, 2})
    for mm in mem.models:
        out.append("")
        out.append(f"Model {mm.model_id} \"{mm.name}\": feature map {size_text(mm.feature_map)} "
                   f"planned (live peak {size_text(mm.live_peak)}; at it activations "
                   f"{size_text(mm.activations)}, gradients {size_text(mm.gradients)}, "
                   f"optimizer temporaries {size_text(mm.updates)}); buffers "
                   f"{size_text(mm.io)}; constants {size_text(mm.constants)}.")
        if mm.top:
            rows = [[shorten(t.op), size_text(t.bytes), t.kind,
                     f"{t.first_node}-{t.last_node}"] for t in mm.top[:top]]
            out += table(["Live at the peak", "bytes", "kind", "nodes"], rows, md, {1})
    return out


def _model_lines(m: M.ModelSummary, md: bool, top: int) -> list[str]:
    if m.model_id is None:
        title = "Tasks outside models (eager ops, initialisation): totals"
    else:
        title = f"Model {m.model_id}" + (f' "{m.name}"' if m.name else "") + \
            f": {m.iterations} iterations"
        if m.replayed:
            title += f" (measured {m.measured}, replayed {m.replayed})"
        if m.warmup_iterations:
            title += (f"; {m.warmup_iterations} warm-up step{'s' * (m.warmup_iterations != 1)}"
                      " (graph tracing) left out of the statistics")
    out = heading(title, 3, md)
    if m.model_id is not None:
        facts = [f"op time {us(m.op_us_per_step)}/step"]
        if m.busy_share is not None:
            facts.append(f"device busy {share(m.busy_share)} of Iteration Time")
        if m.communication_us_per_step:
            facts.append(f"communication {us(m.communication_us_per_step)}/step")
        if m.memcpy_us_per_step:
            facts.append(f"memcpy {us(m.memcpy_us_per_step)}/step")
        out.append(", ".join(facts) + ".")
        rows = _stat_rows(m)
        if rows:
            out.append("")
            out += table(["Step", "median", "p90", "min", "max"], rows, md)
    per = "per step" if m.model_id is not None else "total"
    if m.op_types:
        out.append("")
        out += table(["Top op types", "Task Type", f"tasks {per}", f"time {per}", "share"],
                     [[t.op_type, t.task_type, f"{t.per_step_count:g}", us(t.per_step_us),
                       share(t.share)] for t in m.op_types[:top]], md, right={2, 3, 4})
    if m.ops:
        out.append("")
        out += table(["Top ops", "OP Type", f"tasks {per}", f"time {per}"],
                     [[shorten(o.name), o.op_type, f"{o.per_step_count:g}",
                       us(o.per_step_us)] for o in m.ops[:top]], md, right={2, 3})
    if m.pipes:
        out.append("")
        out += table(["AI Core pipes", f"time {per}", "cube", "vector", "scalar", "mte1",
                      "mte2", "mte3"],
                     [[p.op_type, us(p.per_step_us), ratio(p.cube), ratio(p.vector),
                       ratio(p.scalar), ratio(p.mte1), ratio(p.mte2), ratio(p.mte3)]
                      for p in m.pipes[:top]], md)
    return out


# -- diff ------------------------------------------------------------------------------------
def diff_lines(d: D.Diff, md: bool = False, top: int = TOP) -> list[str]:
    out = [("# " if md else "") + f"msprof diff {d.base} -> {d.new}"]
    for c in d.collection:
        out.append(f"Collection changed: {c}")
    for n in d.notes:
        out.append(f"Note: {n}")
    for x in d.missing:
        out.append(f"Missing in NEW: {x}")
    for x in d.extra:
        out.append(f"New in NEW: {x}")
    for m in d.memory:
        out += _memory_diff_lines(m, md)
    for m in d.models:
        out += _model_diff_lines(m, md, top)
    if not d.models:
        out.append("No model of BASE matched one of NEW: nothing to compare.")
    return out


def _bytes_or_dash(b: int | None) -> str:
    return "-" if b is None else size_text(b)


def _signed_bytes(b: int | None) -> str:
    if not b:
        return "0" if b == 0 else "-"
    return ("+" if b > 0 else "-") + size_text(abs(b))


def _memory_diff_lines(m: D.MemoryDelta, md: bool) -> list[str]:
    out = heading(f"device {m.device_id} memory (emulated)", 2, md)
    fit = "" if m.new_fits is None else (" NEW fits its chip." if m.new_fits else
                                         " NEW DOES NOT FIT its chip.")
    out.append(f"Predicted peak {_bytes_or_dash(m.base_peak)} -> {_bytes_or_dash(m.new_peak)}"
               f" ({_signed_bytes(m.delta)}).{fit}")
    if m.parts:
        out += [""] + table(["Category", "base", "new", "change"],
                            [[k, size_text(b), size_text(n), _signed_bytes(n - b)]
                             for k, b, n in m.parts], md, {1, 2, 3})
    if m.grown:
        out += ["", "Tensors at the peak that grew:"] + [f"- {g}" for g in m.grown]
    return out


def explain(m: D.ModelDiff) -> str:
    """One sentence: the device step change and what explains it."""
    dev = {x.key: x for x in m.metrics}
    step = dev["device-time"] if dev["device-time"].delta is not None else dev["op-time"]
    host = dev["data-aug-bound"]
    parts = []
    if step.delta:
        why = "; ".join(f"{t.op_type} {signed_us(t.delta_us)}"
                        + (f" ({share(t.share)})" if t.share is not None else "")
                        for t in m.types[:3])
        parts.append(f"device step {signed_us(step.delta)} ({pct(step.pct)})"
                     + (f": {why}" if why else ""))
    else:
        parts.append("device step unchanged")
    if host.delta:
        parts.append(f"host input pipeline (Data Aug Bound, measured) {signed_us(host.delta)} "
                     f"({pct(host.pct)})")
    return "; ".join(parts) + "."


def _model_diff_lines(m: D.ModelDiff, md: bool, top: int) -> list[str]:
    title = (f"device {m.device_id} " + ("tasks outside models" if m.new_model is None else
             f"model {m.base_model} -> {m.new_model}" + (f' "{m.name}"' if m.name else "")))
    out = heading(title, 2, md)
    out.append(f"Matched by {m.matched_by}. {explain(m)}")
    out.append("")
    out += table(["Metric", "side", "base", "new", "change", "%"],
                 [[x.label, x.side, us(x.base), us(x.new), signed_us(x.delta), pct(x.pct)]
                  for x in m.metrics if x.base is not None or x.new is not None], md,
                 right={2, 3, 4, 5})
    if m.types:
        out.append("")
        out += table(["Op type", "Task Type", "base/step", "new/step", "change",
                      "of step change", "tasks/step"],
                     [[t.op_type, t.task_type, us(t.base_us), us(t.new_us), signed_us(t.delta_us),
                       share(t.share), f"{t.base_count:g} -> {t.new_count:g}"
                       if t.base_count != t.new_count else f"{t.new_count:g}"]
                      for t in m.types[:top]], md, right={2, 3, 4, 5, 6})
    if m.ops:
        out.append("")
        out += table(["Op", "OP Type", "status", "base/step", "new/step", "change",
                      "of step change"],
                     [[shorten(o.name) + (f" (was {shorten(o.base_name, 40)})"
                                          if o.base_name and o.base_name != o.name else ""),
                       o.op_type, o.status, us(o.base_us), us(o.new_us), signed_us(o.delta_us),
                       share(o.share)] for o in m.ops[:top]], md, right={3, 4, 5, 6})
        if len(m.ops) > top:
            out.append(f"... {len(m.ops) - top} more changed ops (--format json lists all).")
    if m.shape_changes:
        out.append("")
        out += table(["Shape changed", "base input shapes", "new input shapes"],
                     [[shorten(o.name, 50), o.base_shapes, o.new_shapes]
                      for o in m.shape_changes[:top]], md, right=set())
    return out


# -- check -----------------------------------------------------------------------------------
def check_lines(r: C.CheckResult, md: bool = False) -> list[str]:
    verdict = "PASSED" if r.passed else "FAILED"
    d = r.diff
    out = [("# " if md else "") + f"msprof check {verdict}: {d.new if d else ''} against "
           f"baseline {d.base if d else ''}"]
    out.append(f"{r.compared} model(s) compared; {len(r.regressions) + len(r.memory)} "
               "regression(s)"
               + (f", {len(r.missing)} model(s) missing" if r.missing else "") + ".")
    for x in r.missing:
        out.append(f"- missing in NEW: {x}")
    if r.regressions:
        out.append("")
        out += table(["Where", "Metric", "side", "base", "new", "change", "%", "limit"],
                     [[f.where, f.metric, f.side, us(f.base), us(f.new), signed_us(f.delta),
                       pct(f.pct), f.limit] for f in r.regressions], md,
                     right={3, 4, 5, 6})
        for f in r.regressions:
            if f.because:
                out += ["", f"{f.where}, {f.metric} {signed_us(f.delta)}:"]
                out += [f"- {b}" for b in f.because]
    if r.memory:
        out.append("")
        out += table(["Where", "Memory", "base", "new", "change", "limit"],
                     [[f.where, f.metric, _bytes_or_dash(f.base), _bytes_or_dash(f.new),
                       _signed_bytes(f.delta), f.limit] for f in r.memory], md, {2, 3, 4})
        for f in r.memory:
            if f.because:
                out += ["", f"{f.where}, {f.metric}; tensors at the peak that grew:"]
                out += [f"- {b}" for b in f.because]
    if d is not None:
        hosts = [x for m in d.models for x in m.metrics if x.side == D.HOST and x.delta]
        if hosts and all(f.side != D.HOST for f in r.regressions):
            out += ["", "Host-side (measured) changes that passed (a limit such as +100%,+1ms "
                    "fails only when the change exceeds both parts): " + "; ".join(
                        f"{x.label} {signed_us(x.delta)} ({pct(x.pct)})" for x in hosts)]
        unmatched = [m for m in d.models if m.matched_by not in ("signature", "outside")]
        if unmatched:
            out += ["", "Graphs differ: " + "; ".join(
                f"model {m.new_model} was matched to baseline model {m.base_model} by "
                f"{m.matched_by}, not by its op sequence" for m in unmatched)
                + " (a different program, or this one changed its graph)."]
        for c in d.collection:
            out.append(f"Collection changed: {c}")
    out += ["", "Limits: " + ", ".join(f"{k} {v}" for k, v in r.limits.items())]
    return out


def render(obj, fmt: str) -> str:
    """`obj`: a Summary, Diff or CheckResult; fmt: text | md | json."""
    if fmt == "json":
        if isinstance(obj, M.Summary):
            return M.to_json(obj)
        kind = "msprof_cli.diff" if isinstance(obj, D.Diff) else "msprof_cli.check"
        data = {"kind": kind, "schema_version": M.SCHEMA_VERSION, **asdict(obj)}
        return json.dumps(M.clean_json(data), indent=1, ensure_ascii=False) + "\n"
    fn: Callable[..., list[str]] = {M.Summary: summary_lines, D.Diff: diff_lines,
                                    C.CheckResult: check_lines}[type(obj)]
    return "\n".join(fn(obj, md=fmt == "md")) + "\n"
