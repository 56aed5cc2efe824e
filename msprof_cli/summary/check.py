"""`msprof check`: a regression gate over a `Diff`.

A threshold is "+5%" (relative), "+20us" / "+1.5ms" / "+0.2s" (absolute), both joined by a
comma ("+5%,+1ms": a regression only when the change exceeds both -- a relative limit with a
noise floor), or "off".  Defaults (docs/summary.md): device-side metrics, which the emulation
makes deterministic, are held to 1 %; host-side ones, which are measured and noisy, are
tolerant.  Values come from the defaults, then a config file (TOML or JSON, a table
`[thresholds]`), then the command line.
"""
from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from . import diff as D
from .limits import DEFAULTS
from .memory import size_text
from .model import SummaryError
from .units import pct, signed_us, us

METRIC_KEYS = tuple(DEFAULTS)
MEMORY_KEY = "peak-memory"
_PART = re.compile(r"^\+?(\d+(?:\.\d*)?|\.\d+)\s*(%|us|ms|s)$")
_UNIT_US = {"us": 1.0, "ms": 1000.0, "s": 1e6}


@dataclass(frozen=True)
class Threshold:
    pct: float | None = None
    abs_us: float | None = None
    off: bool = False

    def exceeded(self, base: float | None, new: float | None) -> bool:
        if self.off or new is None:
            return False
        base = base or 0.0
        delta = new - base
        if delta <= 0:
            return False
        if self.pct is not None and base > 0 and delta / base * 100 <= self.pct:
            return False
        if self.abs_us is not None and delta <= self.abs_us:
            return False
        return True

    def text(self) -> str:
        if self.off:
            return "off"
        parts = [f"+{self.pct:g}%"] if self.pct is not None else []
        if self.abs_us is not None:
            a = self.abs_us
            parts.append(f"+{a / 1e6:g}s" if a >= 1e6 else f"+{a / 1000:g}ms" if a >= 1000
                         else f"+{a:g}us")
        return ",".join(parts)


def parse_threshold(text: str, where: str) -> Threshold:
    t = str(text).strip().lower()
    if t in ("off", "none", ""):
        return Threshold(off=True)
    pct = abs_us = None
    for part in t.split(","):
        m = _PART.match(part.strip())
        if not m:
            raise SummaryError(f"{where}: threshold {text!r} is not understood; write +5% "
                               "(relative), +20us / +1ms / +0.5s (absolute), both joined by "
                               "a comma (+5%,+1ms), or off")
        value, unit = float(m.group(1)), m.group(2)
        if unit == "%":
            pct = value
        else:
            abs_us = value * _UNIT_US[unit]
    return Threshold(pct=pct, abs_us=abs_us)


_MEM_PART = re.compile(r"^(\+?)(\d+(?:\.\d*)?|\.\d+)\s*(%|b|kib|mib|gib|kb|mb|gb)$")
_UNIT_B = {"b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "kb": 1000, "mb": 10**6,
           "gb": 10**9}


@dataclass(frozen=True)
class MemoryLimit:
    """`--max-peak-memory`: `fit` (NEW's predicted peak must fit its chip), a ceiling
    (`24GiB`), a growth against the baseline (`+5%`, `+64MiB`, both: a regression only when
    the growth exceeds both), any of them joined by commas, or `off`."""

    fit: bool = False
    ceiling: int | None = None
    growth: Threshold = Threshold(off=True)
    off: bool = False

    def text(self) -> str:
        if self.off:
            return "off"
        parts = ["fit"] if self.fit else []
        if self.ceiling is not None:
            parts.append(f"{self.ceiling / (1 << 30):g}GiB")
        if not self.growth.off:
            if self.growth.pct is not None:
                parts.append(f"+{self.growth.pct:g}%")
            if self.growth.abs_us is not None:
                parts.append(f"+{self.growth.abs_us / (1 << 20):g}MiB")
        return ",".join(parts)


def parse_memory_limit(text: str, where: str) -> MemoryLimit:
    t = str(text).strip().lower()
    if t in ("off", "none", ""):
        return MemoryLimit(off=True)
    fit, ceiling, pct, grow = False, None, None, None
    for part in t.split(","):
        part = part.strip()
        if part == "fit":
            fit = True
            continue
        m = _MEM_PART.match(part)
        if not m or (m.group(3) == "%" and not m.group(1)):
            raise SummaryError(f"{where}: limit {text!r} is not understood; write fit (the "
                               "peak must fit the chip), a ceiling (24GiB), a growth against "
                               "the baseline (+5%, +64MiB), several joined by commas, or off")
        value = float(m.group(2))
        if m.group(3) == "%":
            pct = value
        elif m.group(1):
            grow = value * _UNIT_B[m.group(3)]
        else:
            ceiling = int(value * _UNIT_B[m.group(3)])
    growth = Threshold(pct=pct, abs_us=grow) if pct is not None or grow is not None \
        else Threshold(off=True)
    return MemoryLimit(fit=fit, ceiling=ceiling, growth=growth)


def load_config(path: Path) -> dict[str, str]:
    """The `[thresholds]` table of a TOML or JSON file (keys: the metric names)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SummaryError(f"{path}: cannot read the check config ({exc.strerror})") from None
    try:
        data = json.loads(raw) if path.suffix.lower() == ".json" else tomllib.loads(
            raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise SummaryError(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'TOML'}"
                           f" ({str(exc)[:120]})") from None
    table = data.get("thresholds", data) if isinstance(data, dict) else None
    if not isinstance(table, dict):
        raise SummaryError(f"{path}: expected a [thresholds] table of metric = \"+5%\" lines")
    out = {}
    for k, v in table.items():
        if k not in DEFAULTS:
            raise SummaryError(f"{path}: unknown metric {k!r}; known: {', '.join(METRIC_KEYS)}")
        out[k] = str(v)
    return out


def thresholds(config: Path | None, cli: dict[str, str | None]) -> dict[str, Threshold]:
    texts = dict(DEFAULTS)
    if config is not None:
        texts.update(load_config(config))
    texts.update({k: v for k, v in cli.items() if v is not None})
    return {k: parse_memory_limit(v, f"--max-{k}") if k == MEMORY_KEY else
            parse_threshold(v, f"--max-{k}") for k, v in texts.items()}


@dataclass
class Finding:
    where: str  # device / model
    metric: str
    side: str
    base: float | None
    new: float | None
    delta: float | None
    pct: float | None
    limit: str
    because: list[str] = field(default_factory=list)  # the ops that explain a device change


@dataclass
class CheckResult:
    passed: bool
    regressions: list[Finding] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    diff: D.Diff | None = None
    limits: dict[str, str] = field(default_factory=dict)
    compared: int = 0  # model pairs compared
    memory: list[Finding] = field(default_factory=list)  # peak memory findings (bytes)


def _because(md: D.ModelDiff, n: int = 3) -> list[str]:
    out = []
    for o in md.ops[:n]:
        if o.status in ("added", "removed"):
            what = f"{o.status} ({us(abs(o.delta_us))}/step)"
        else:
            what = signed_us(o.delta_us)
        share = f", {o.share * 100:.0f} % of the change" if o.share is not None else ""
        shape = f", shape {o.base_shapes or '-'} -> {o.new_shapes or '-'}" \
            if o.base_shapes != o.new_shapes and o.status not in ("added", "removed") else ""
        out.append(f"{o.name} [{o.op_type}] {what}{share}{shape}")
    return out


def _split(md: D.ModelDiff) -> list[str]:
    """A mixed metric (Iteration Time) split into its host and device sides."""
    m = {x.key: x for x in md.metrics}
    out = []
    for key, what in (("data-aug-bound", "host side, measured: Data Aug Bound (input "
                                          "pipeline)"),
                      ("device-time", "device side, emulated: FP start to iteration end")):
        x = m[key]
        if x.delta is not None:
            out.append(f"{what} {signed_us(x.delta) or '0'}"
                       + (f" ({pct(x.pct)})" if x.pct is not None else ""))
    return out


def check(d: D.Diff, limits: dict[str, Threshold]) -> CheckResult:
    res = CheckResult(passed=True, diff=d, missing=list(d.missing),
                      limits={k: v.text() for k, v in limits.items()}, compared=len(d.models))
    # the models first, the tasks outside models (initialisation, eager ops) after them
    for md in sorted(d.models, key=lambda m: m.new_model is None):
        outside = md.new_model is None
        where = f"device {md.device_id} " + ("tasks outside models" if outside
                                             else f"model {md.new_model}"
                                             + (f' "{md.name}"' if md.name else ""))
        per = "total" if outside else "per step"
        explained = False
        # the work outside models is driven by the script's threads (which eager ops run
        # there varies run to run): its numbers get the outside-models limit, not the
        # device side's exact ones (docs/summary.md)
        loose = limits.get("outside-models") if outside else None
        for m in md.metrics:
            lim = loose if outside else limits.get(m.key)
            if lim is None or not lim.exceeded(m.base, m.new):
                continue
            because: list[str] = []
            if m.side == D.DEVICE and not explained:
                because, explained = _because(md), True
            elif m.side == D.MIXED:
                because = _split(md)
            label = m.label.replace("per step", per)
            res.regressions.append(Finding(where, label, m.side, m.base, m.new, m.delta,
                                           m.pct, lim.text(), because))
        lim = loose if outside else limits["op-type"]
        for t in (md.types if lim is not None else ()):
            if lim.exceeded(t.base_us, t.new_us):
                res.regressions.append(Finding(
                    where, f"op type {t.op_type} ({t.task_type}) {per}", D.DEVICE,
                    t.base_us, t.new_us, t.delta_us, t.pct, lim.text(),
                    [] if explained else _because(_only_type(md, t.op_type))))
    mem = limits.get(MEMORY_KEY)
    if isinstance(mem, MemoryLimit) and not mem.off:
        for m in d.memory:
            res.memory += _memory_findings(m, mem)
    res.passed = not res.regressions and not res.missing and not res.memory
    return res


def _memory_findings(m: D.MemoryDelta, lim: MemoryLimit) -> list[Finding]:
    where = f"device {m.device_id}"
    out = []
    if m.new_peak is None:
        return out
    if lim.fit and m.new_fits is False:
        out.append(Finding(where, "predicted peak memory does not fit the chip", D.DEVICE,
                           m.base_peak, m.new_peak, m.delta, None,
                           "fit (GE's pools, the chip's usable HBM)", m.grown))
    if lim.ceiling is not None and m.new_peak > lim.ceiling:
        out.append(Finding(where, "predicted peak memory above the ceiling", D.DEVICE,
                           m.base_peak, m.new_peak, m.delta, None, size_text(lim.ceiling),
                           m.grown))
    if m.base_peak is not None and lim.growth.exceeded(m.base_peak, m.new_peak):
        out.append(Finding(where, "predicted peak memory grew", D.DEVICE, m.base_peak,
                           m.new_peak, m.delta, _pct(m.base_peak, m.new_peak), lim.text(),
                           m.grown))
    return out


def _pct(base: float, new: float) -> float | None:
    return (new - base) / base * 100 if base else None


def _only_type(md: D.ModelDiff, op_type: str) -> D.ModelDiff:
    sub = D.ModelDiff(md.device_id, md.base_model, md.new_model, md.name, md.matched_by)
    sub.ops = [o for o in md.ops if o.op_type == op_type]
    return sub
