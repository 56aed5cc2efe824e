"""How the summary, diff and check texts print times, changes and shares (µs in the model)."""
from __future__ import annotations


def us(v: float | None) -> str:
    if v is None:
        return ""
    if abs(v) >= 1e6:
        return f"{v / 1e6:.3f} s"
    if abs(v) >= 1000:
        return f"{v / 1000:.3f} ms"
    return f"{v:.3f} us"


def signed_us(v: float | None) -> str:
    return "" if v is None else ("+" if v > 0 else "") + us(v)


def pct(v: float | None, signed: bool = True) -> str:
    if v is None:
        return ""
    return f"{v:+.1f} %" if signed else f"{v:.1f} %"


def share(v: float | None) -> str:
    return "" if v is None else f"{v * 100:.1f} %"
