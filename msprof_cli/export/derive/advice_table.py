"""The op_summary rows as the advice rules read them (OpTable): rule field names from the
op_summary header, numbers parsed once per distinct cell, task start times in exact ns.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from msprof_cli.raw import layouts as L


def field_name(header: str) -> str:
    """op_summary header -> rule field: lower case, unit dropped, spaces -> `_`."""
    base = header.split("(")[0].strip().lower()
    return base.replace(" ", "_")


TEXT_FIELDS = ("op_name", "op_type", "task_type", "input_data_types", "op_state")
NUMERIC_FIELDS = ("task_start_time", "task_duration", "task_wait_time", "block_dim",
                  "memory_bound", "vector_bound", "vec_ratio", "mac_ratio", "scalar_ratio",
                  "mte1_ratio", "mte2_ratio", "mte3_ratio", "vec_bankgroup_cflt_ratio",
                  "vec_bank_cflt_ratio", "memory_workspace")


def _to_number(col: pd.Series) -> np.ndarray:
    """Numeric column (N/A and other text -> NaN; the TAB of time stamps stripped).

    op_summary repeats its values every iteration (durations, ratios, block dims): such a
    column is parsed once per distinct string; a column of mostly distinct values (time
    stamps, judged on its first rows) cell by cell."""
    vals = col.to_numpy(dtype=object)
    if len(vals) > 4096 and len(pd.unique(vals[:2048])) > 1024:
        return _parse(vals)
    codes, uniq = pd.factorize(vals, use_na_sentinel=True)
    parsed = _parse(np.asarray(uniq, dtype=object))
    out = np.full(len(codes), np.nan)
    ok = codes >= 0
    out[ok] = parsed[codes[ok]]
    return out


def _parse(vals: np.ndarray) -> np.ndarray:
    """float of each cell as `_to_number` defines it (missing cells -> NaN)."""
    try:  # all numbers (time stamps, durations): float() per cell, whitespace allowed
        out = vals.astype(np.float64)
    except (TypeError, ValueError):
        pass
    else:  # float() also reads "1_0" and "nan", which to_numeric does not: the slow path
        if not np.isnan(out).any() and "_" not in "".join(map(str, vals)):
            return out
    codes, uniq = pd.factorize(vals, use_na_sentinel=True)
    text = pd.Series(uniq, dtype=object).map(lambda v: v.strip() if isinstance(v, str) else v)
    values = pd.to_numeric(text, errors="coerce").to_numpy(dtype=np.float64)
    out = np.full(len(codes), np.nan)
    ok = codes >= 0
    out[ok] = values[codes[ok]]
    return out


@dataclass
class OpTable:
    """op_summary rows with rule field names; numeric columns coerced (N/A -> NaN).

    `start_ns`: the rows' task start times in exact ns (None: parsed from the
    ``Task Start Time(us)`` text; a float of µs since the epoch is 0.25 µs coarse)."""

    df: pd.DataFrame
    core_num: int
    start_ns: np.ndarray | None = None

    @classmethod
    def from_summary(cls, summary: pd.DataFrame, core_num: int,
                     start_ns: np.ndarray | None = None) -> "OpTable":
        """Only the columns the rules read are kept; numbers are parsed once per distinct
        string (op_summary repeats the same values every iteration)."""
        # one frame of the kept columns (the first of a field name), built once: a rename,
        # a copy and a column set per number were ~5 ms of a small export
        cols: dict[str, object] = {}
        for header, s in summary.items():
            name = field_name(str(header))
            if name in cols or not (name in TEXT_FIELDS or name in NUMERIC_FIELDS):
                continue
            if name == "task_start_time":
                if start_ns is None:
                    start_ns = _stamp_ns(s.to_numpy(object))
                cols[name] = np.zeros(len(s))  # the rules read start_ns
            elif name in NUMERIC_FIELDS:
                cols[name] = _to_number(s)
            else:  # text: the column's own values and dtype
                cols[name] = s.reset_index(drop=True)
        df = pd.DataFrame(cols, index=pd.RangeIndex(len(summary)))
        return cls(df=df, core_num=core_num,
                   start_ns=None if start_ns is None else np.asarray(start_ns, np.int64))

    def has(self, *cols: str) -> bool:
        return all(c in self.df for c in cols)

    def col(self, name: str) -> pd.Series:
        return self.df[name]

    def name_codes(self) -> tuple[np.ndarray, np.ndarray]:
        """(code per row, op names by code) of the op_name column, factorized once."""
        if "_name_codes" not in self.__dict__:
            codes, uniques = pd.factorize(self.df["op_name"].to_numpy(dtype=object))
            self.__dict__["_name_codes"] = codes
            self.__dict__["_name_uniques"] = np.asarray(uniques, dtype=object)
        return self.__dict__["_name_codes"], self.__dict__["_name_uniques"]

    def names(self, mask: pd.Series | np.ndarray) -> list[str]:
        """Op names of the masked rows, unique, in first-appearance order (via the op-name
        codes: iterating a pandas string column row by row is slow)."""
        all_codes, uniques = self.name_codes()
        codes = all_codes[np.asarray(mask, dtype=bool)]
        first = pd.unique(codes[codes >= 0])
        return [str(n) for n in uniques[first]]

    def task_type_is(self, name: str) -> np.ndarray:
        """Rows whose Task Type is `name` (the column factorized once)."""
        if "_type_codes" not in self.__dict__:
            codes, uniques = pd.factorize(self.df["task_type"].to_numpy(dtype=object))
            self.__dict__["_type_codes"] = codes
            self.__dict__["_type_uniques"] = [str(u) for u in uniques]
        uniques = self.__dict__["_type_uniques"]
        if name not in uniques:
            return np.zeros(len(self.df), dtype=bool)
        return self.__dict__["_type_codes"] == uniques.index(name)


NA_NS = np.iinfo(np.int64).min  # a start time that is not a number


def _stamp_ns(vals: np.ndarray) -> np.ndarray:
    """``µs.fff`` time stamp texts (TAB allowed) -> exact int ns; NA_NS where not a number."""
    out = np.full(len(vals), NA_NS, dtype=np.int64)
    for i, v in enumerate(vals):
        if isinstance(v, (int, float, np.integer, np.floating)):
            if np.isfinite(v):
                out[i] = int(round(float(v) * 1000))
            continue
        s = str(v).strip()
        neg = s.startswith("-")
        whole, _, frac = s.lstrip("+-").partition(".")
        if not (whole or frac) or not (whole or "0").isdigit() or not (frac or "0").isdigit():
            continue
        ns = int(whole or 0) * 1000 + int((frac + "000")[:3])
        out[i] = -ns if neg else ns
    return out


def us_to_ns(us: pd.Series | np.ndarray) -> np.ndarray:
    """µs values with at most 3 decimals (as op_summary prints them) -> exact int ns, NaN -> 0."""
    v = np.asarray(us, dtype=np.float64)
    return np.where(np.isnan(v), 0, np.rint(np.nan_to_num(v) * 1000)).astype(np.int64)


def model_spans(apis: pd.DataFrame | None) -> np.ndarray | None:
    """The ModelExecute spans of host API rows, (begin, end) local ns by begin, for
    `RuleState.model_spans`; None without host API data (device-only data: every wait
    counts, as in the real analysis)."""
    if apis is None or len(apis) == 0 or "begin_local" not in apis:
        return None
    me = ((apis["level"].to_numpy() == L.LEVEL_MODEL)
          & (apis["type"].to_numpy() == L.MODEL_EXECUTE))
    b = apis["begin_local"].to_numpy(np.int64)[me]
    e = apis["end_local"].to_numpy(np.int64)[me]
    order = np.argsort(b, kind="stable")
    return np.column_stack([b[order], e[order]])


def device_waits(start_ns: np.ndarray, wait_us: pd.Series, spans: np.ndarray) -> pd.Series:
    """Per op_summary row: its wait (the gap since the previous task) lies inside one model
    execution of `spans` (`model_spans`): a scheduling wait of the device, not host time
    between separate calls (docs/export.md, advice)."""
    prev_end = start_ns - us_to_ns(wait_us.fillna(0.0).to_numpy(np.float64))
    k = np.searchsorted(spans[:, 0], prev_end, side="right") - 1
    inside = (k >= 0) & (start_ns != NA_NS)
    if len(spans):
        inside &= start_ns <= spans[np.maximum(k, 0), 1]
    return pd.Series(inside, index=wait_us.index)
