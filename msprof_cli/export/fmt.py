"""Vectorised number/time formatting with the exact semantics of the real analysis.

The real msprof analysis prints values through three different rounding paths; byte-exact
output needs each one reproduced on whole numpy arrays (never a Python loop per row):

* ``py_round(x, 3)`` -- Python's ``round``: correctly rounded, ties half-even on the exact
  binary value.  Emulated with 80-bit long double: ``x * 1000`` is exact there (53 + 10 bits
  < 64), so ``rint`` gives the correctly rounded integer, and ``k / 1000`` in float64 is the
  float nearest to the decimal result, which is what ``round`` returns.
* ``sqlite_round(x, 3)`` -- SQLite's ``round()`` (<= 3.42, used for the PMU columns of
  op_summary): half-up after adding ``x * 3e-16`` (SQLite's own printf fudge), so values a
  few ulps below a tie round up (``12.25 * 0.15`` -> ``1.838``).
* local timestamps -- integer ns, printed as µs with exactly 3 decimals (no float at all:
  16-digit µs values do not fit a float64 with 3 decimals).

``float_str`` renders float64 like Python's ``repr``/``str`` (numpy's ``astype(str)`` uses
the same shortest round-trip algorithm; checked by the tests).
"""
from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

_LONG_EXACT = np.finfo(np.longdouble).nmant >= 63  # x86-64 80-bit long double


def py_round(x: np.ndarray, ndigits: int = 3) -> np.ndarray:
    """Python ``round(x, ndigits)`` element-wise on float64 (NaN stays NaN)."""
    return _on_uniques(_py_round, np.asarray(x, dtype=np.float64), ndigits)


def _py_round(x: np.ndarray, ndigits: int = 3) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    scale = 10 ** ndigits
    if _LONG_EXACT:
        k = np.rint(x.astype(np.longdouble) * scale)
        out = (k / scale).astype(np.float64)
        # k / scale in long double then to float64 rounds twice; redo in float64 where k is
        # exactly representable (|k| < 2**53) so the division is correctly rounded once.
        small = np.abs(k) < 2.0 ** 53
        out[small] = k[small].astype(np.float64) / scale
    else:  # pragma: no cover - platforms without 80-bit long double
        uniq, inv = np.unique(x, return_inverse=True)
        out = np.array([round(float(v), ndigits) for v in uniq])[inv]
    big = np.abs(x) >= 2.0 ** 52 / scale  # already has no digits below 10**-ndigits
    out[big] = x[big]
    return out


def _on_uniques(fn, x: np.ndarray, *args) -> np.ndarray:
    """fn applied to the distinct values of x only (hash factorize, O(n)) when they repeat:
    the long-double rounding costs far more per element than the lookup."""
    import pandas as pd  # lazily: `msprof query` reads control files without pandas

    if len(x) < 1024:
        return fn(x, *args)
    # factorized on the bit patterns: -0.0 / 0.0 and NaNs stay apart, exactly as given
    codes, uniq = pd.factorize(np.ascontiguousarray(x).view(np.int64))
    if len(uniq) * 2 > len(x):
        return fn(x, *args)
    return fn(np.asarray(uniq, dtype=np.int64).view(np.float64), *args)[codes]


def sqlite_round(x: np.ndarray, ndigits: int = 3) -> np.ndarray:
    """SQLite (<= 3.42) ``round(x, ndigits)``: printf('%.Nf') with its 3e-16 fudge, half-up."""
    return _on_uniques(_sqlite_round, np.asarray(x, dtype=np.float64), ndigits)


def sqlite_round_text(x: np.ndarray, ndigits: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """(``sqlite_round(x)``, ``float_str`` of it) with one factorization of `x` (the PMU
    columns: rounded for the rules, printed for op_summary; the values repeat per op)."""
    import pandas as pd  # lazily: `msprof query` reads control files without pandas

    x = np.asarray(x, dtype=np.float64)
    if len(x) >= 1024:
        codes, uniq = pd.factorize(np.ascontiguousarray(x).view(np.int64))
        if len(uniq) * 2 <= len(x):
            r = _sqlite_round(np.asarray(uniq, dtype=np.int64).view(np.float64), ndigits)
            return r[codes], float_str(r)[codes]
    r = sqlite_round(x, ndigits)
    return r, float_str(r)


def _sqlite_round(x: np.ndarray, ndigits: int = 3) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    scale = 10 ** ndigits
    ax = np.abs(x).astype(np.longdouble)
    # SQLite adds value*3e-16 to the rounder when precision + exponent/3 < 15
    _, ex = np.frexp(np.abs(x))
    ex = ex - 1
    fudge = np.where(ndigits + np.trunc(ex / 3) < 15, ax * np.longdouble(3e-16), 0)
    k = np.floor(ax * scale + np.longdouble(0.5) + fudge * scale)
    out = np.where(np.abs(k) < 2.0 ** 53, k.astype(np.float64) / scale, np.abs(x))
    out = np.copysign(out, x)
    huge = np.abs(x) > 4503599627370496.0  # SQLite: no fractional part, nothing to round
    out[huge] = x[huge]
    return out


def _via_uniques(x: np.ndarray) -> np.ndarray:
    """Format only the distinct values (hash factorize, O(n)); most columns repeat a lot."""
    import pandas as pd  # lazily: `msprof query` reads control files without pandas

    if x.dtype == np.float64:  # bit patterns: -0.0 prints apart from 0.0
        codes, uniq = pd.factorize(np.ascontiguousarray(x).view(np.int64))
        uniq = np.asarray(uniq, dtype=np.int64).view(np.float64)
    else:
        codes, uniq = pd.factorize(x)
    if len(uniq) * 2 > len(x):
        return _texts(x)
    return _texts(np.asarray(uniq))[codes]


def _texts(x: np.ndarray) -> np.ndarray:
    """``str`` of each int / float64 as an object array: Python's own ``repr`` through a
    C-level ``map`` (the same text as numpy's ``astype(str)``, tested; 2.5x faster for
    floats, which numpy formats via fixed-width unicode arrays)."""
    out = np.empty(len(x), dtype=object)
    out[:] = list(map(repr if x.dtype.kind == "f" else str, x.tolist()))
    return out


def obj_full(n: int, value) -> np.ndarray:
    """``np.full(n, value, dtype=object)`` sharing one `value` object: numpy's np.full makes
    a new str object per cell (65 ms and a string each for 1M cells, against 2 ms)."""
    out = np.empty(n, dtype=object)
    out[:] = value
    return out


def text_frame(cols: dict) -> "pd.DataFrame":
    """A table of formatted text cells (a str or ``N/A`` each) as one object-dtype
    DataFrame.  pandas 3 would infer its ``str`` dtype per column, checking and copying
    every cell (~4x the cost of the frame: 70 ms for op_summary's 35 columns at 50k rows,
    ~2 ms for any small table); the writers read both dtypes alike (writers._str_column).
    `copy=False`: each column stays its own block -- consolidated, pandas would stack the
    columns into one 2-D array (a copy and a reference count per cell: 0.08 s for a 50k-task
    export's tables) that no writer needs."""
    import pandas as pd  # lazily: `msprof query` reads control files without pandas

    return pd.DataFrame(cols, dtype=object, copy=False)


def float_str(x: np.ndarray) -> np.ndarray:
    """``str(float)`` of every element (``120.0``, ``12.25``, ``1e+16``)."""
    return _via_uniques(np.asarray(x, dtype=np.float64))


def int_str(x: np.ndarray) -> np.ndarray:
    return _via_uniques(np.asarray(x).astype(np.int64))


def us_str(ns: np.ndarray) -> np.ndarray:
    """Local time in integer ns -> ``'1700000000001031.000'`` (exact, 3 decimals)."""
    return np.array(us_list(ns), dtype=object)


_FRACTIONS: dict[str, np.ndarray] = {}  # suffix -> the 1,000 texts ".000{suffix}" ...


def us_list(ns: np.ndarray, suffix: str = "") -> list[str]:
    """`us_str` (plus `suffix`) as a list: ``str`` of the whole µs joined to one of the 1,000
    fraction texts (C-level ``map``; a third faster than a ``%`` format per value)."""
    ns = np.asarray(ns, dtype=np.int64)
    whole = np.floor_divide(ns, 1000)
    fractions = _FRACTIONS.get(suffix)
    if fractions is None:
        fractions = np.array([f".{i:03d}{suffix}" for i in range(1000)], dtype=object)
        _FRACTIONS[suffix] = fractions
    return list(map(str.__add__, map(str, whole.tolist()),
                    fractions[ns - whole * 1000].tolist()))


def ns_to_us_float(ns: np.ndarray) -> np.ndarray:
    """Duration in integer ns -> µs float, equal to Python ``round(ns / 1000, 3)``."""
    return np.asarray(ns, dtype=np.int64) / 1000.0


def ts_sort_key(ns: np.ndarray) -> np.ndarray:
    """``float(ts_string)`` of a printed timestamp: the sort key of the real tool.

    float64 cannot hold 16-digit µs with 3 decimals (ulp 0.25 at 1.7e15), so two different
    printed timestamps may compare equal; the stable sort then keeps the input order, as in
    the real tool.  Computed as the correctly rounded float of ns / 1000.
    """
    ns = np.asarray(ns, dtype=np.int64)
    if _LONG_EXACT:
        return (ns.astype(np.longdouble) / np.longdouble(1000)).astype(np.float64)
    return ns / 1000.0  # pragma: no cover


def mhz_fraction(mhz: str | float | int) -> Fraction:
    """A frequency given as MHz text ("100", "38.4") as an exact fraction."""
    return Fraction(str(mhz))


def ticks_to_ns(ticks: np.ndarray, mhz: Fraction) -> np.ndarray:
    """Device syscnt ticks (relative, int64) -> integer ns, exact rational, half-even."""
    ticks = np.asarray(ticks, dtype=np.int64)
    num = 1000 * mhz.denominator
    den = mhz.numerator
    if den == 0:
        raise ValueError("hwts frequency is 0")
    if num % den == 0:  # 100 MHz -> 10 ns per tick, the common case
        return ticks * (num // den)
    prod = ticks * num
    q, r = np.divmod(prod, den)
    twice = 2 * r
    up = (twice > den) | ((twice == den) & (q % 2 == 1))
    return q + up.astype(np.int64)
