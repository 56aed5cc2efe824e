"""Atomic, permission-safe CSV / JSON writers with slicing (docs/formats/export-files.md 2.3, 5).

Every output goes to a unique temporary name in the target directory (``.{name}.tmp{pid}.{hex}``,
created exclusively, never through a link) and is renamed with ``os.replace`` only when
complete, so a crash, a kill or a full disk never leaves a half-written file under the final
name, and two exports of one PROF dir at once never interleave (each final file is one
export's complete file).  Temporary files of dead processes are removed on the next export.

Security (docs/troubleshooting.md): files are 0640 and created directories 0750 whatever the
umask (modes are set explicitly); an output directory that is a symbolic link, or that belongs
to another user (root excepted), is refused; CSV text cells that a spreadsheet would run as a
formula (``=``, ``+``, ``-``, ``@``) get a leading ``'``, numbers (``-1``, ``-0.5``) never change.

CSV text is produced by pandas' C writer in chunks (minimal quoting, LF line ends); JSON text
is assembled from pre-rendered event strings (see outputs/trace.py).
"""
from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from msprof_cli.textsafety import CONTROL_RE, FORMULA_LEADS, NUMBER_RE, escape_controls

from .files import AtomicFile, SliceNamer

CSV_SLICE_ROWS = 1_000_000
JSON_SLICE_EVENTS = 699_050
CHUNK_ROWS = 50_000  # rows rendered at a time (text below the 32 MiB mmap threshold)


# --- CSV formula injection ---------------------------------------------------------------
# the rule is textsafety's (one for every output); here it is applied to whole columns
FORMULA_CHARS = FORMULA_LEADS
_NUMBER_RE = NUMBER_RE
_CELL_LEADS = tuple(FORMULA_CHARS) + tuple('"' + ch for ch in FORMULA_CHARS)


def maybe_formula(text: str) -> bool:
    """Some cell of CSV `text` may start with a formula lead, optionally after its opening
    quote (the regex ``(?:^|,)"?[lead]`` in multiline mode), found by substring scans: they
    are memchr-fast, the regex scanned per character (0.19 s on the 15 MB op_summary of 50k
    tasks, these 0.04 s; a lead absent from the text costs one scan)."""
    if text.startswith(_CELL_LEADS):
        return True
    return any(ch in text and ("," + ch in text or "\n" + ch in text or ',"' + ch in text
                               or '\n"' + ch in text) for ch in FORMULA_CHARS)


_LEAD_BYTES = tuple(ord(ch) for ch in FORMULA_CHARS)
_COMMA, _LF, _QUOTE = (ord(c) for c in ',\n"')
# the bytes of ASCII text that are not control characters (printable, TAB, LF, CR)
_NOT_CONTROL = bytes(range(0x20, 0x7F)) + b"\t\n\r"


def scan_csv(text: str) -> tuple[bool, bool]:
    """(`maybe_formula(text)`, whether `text` may hold a control character that
    `escape_controls` rewrites), by a few vectorised passes over the UTF-8 bytes: each
    formula lead present is looked up by memchr, its positions checked for a cell start
    (after ``,`` or LF, optionally behind the cell's opening quote: UTF-8 keeps every ASCII
    byte an ASCII character); ASCII text holds a control byte iff it has more bytes below
    0x20 than TAB / LF / CR, or a DEL, i.e. iff deleting every other byte leaves one
    (`bytes.translate`: one C pass, 2x faster than comparing and counting with numpy).  The
    regex scan and the substring scans it replaces took ~0.2 s on the 15 MB op_summary of
    50k tasks; these ~0.02 s."""
    try:
        b = text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: the character-wise scans
        return maybe_formula(text), CONTROL_RE.search(text) is not None
    a = np.frombuffer(b, np.uint8)
    formula = False
    for lead in _LEAD_BYTES:
        if b.find(lead) < 0:
            continue
        pos = np.flatnonzero(a == lead)
        prev = np.where(pos >= 1, a[pos - 1], _LF)  # the text's start is a cell start
        start = (prev == _COMMA) | (prev == _LF)
        quoted = pos[prev == _QUOTE]  # a quoted cell: the byte before its quote
        before = np.where(quoted >= 2, a[quoted - 2], _LF)
        if start.any() or ((before == _COMMA) | (before == _LF)).any():
            formula = True
            break
    if text.isascii():  # O(1): C1 controls (U+0080..U+009F) cannot occur
        control = len(b.translate(None, _NOT_CONTROL)) > 0
    else:
        control = CONTROL_RE.search(text) is not None
    return formula, control


def neutralise_formulas(df: pd.DataFrame) -> pd.DataFrame:
    """Prefix ``'`` to text cells starting with = + - @ TAB CR (textsafety) so that a
    spreadsheet shows them as text; cells that are numbers (``-1``, ``-0.5``, ``-1e-05``, a
    time with its TAB) are left exactly as they are.  Vectorised per column."""
    out = None
    for col in df.columns:
        s = df[col]
        if s.dtype.kind not in "OSUT" and str(s.dtype) not in ("string", "str"):
            continue
        text = s.astype(str)
        risky = text.str.startswith(FORMULA_CHARS) & ~text.str.fullmatch(_NUMBER_RE)
        if risky.any():
            if out is None:
                out = df.copy()
            out[col] = s.where(~risky, "'" + text)  # other cells keep their exact value
    return df if out is None else out


_CSV_SPECIAL = re.compile(r'[,"\r\n]')


def _has_special(text: str) -> bool:
    """`_CSV_SPECIAL.search(text)` by substring scans (memchr-fast; the regex scans per char)."""
    return "," in text or '"' in text or "\n" in text or "\r" in text


def _quote_cells(values: list[str]) -> list[str]:
    """csv QUOTE_MINIMAL of each distinct value of a column (the stdlib csv writer's rule,
    which pandas' to_csv uses): quoted when it holds ``,`` ``"`` CR or LF, ``"`` doubled."""
    return [f'"{v.replace(chr(34), chr(34) * 2)}"' if _CSV_SPECIAL.search(v) else v
            for v in values]


def _str_column(s: pd.Series) -> list[str] | None:
    """The column as a list of str cells exactly as ``to_csv`` prints them, or None when a
    cell is not text/int (floats, missing values: pandas' own formatting is kept)."""
    if s.dtype.kind in "iu":
        return s.to_numpy().astype(str).tolist()
    if s.dtype.kind not in "OSUT" and str(s.dtype) not in ("string", "str"):
        return None
    vals = s.to_numpy(dtype=object)
    try:
        # proves every cell is a str: a missing value (NaN/None/NA) raises TypeError
        joined = "".join(vals)
    except TypeError:
        return None
    if not _has_special(joined):  # the common case: nothing to quote
        return vals.tolist()
    codes, uniq = pd.factorize(vals)
    if len(uniq) and pd.api.types.infer_dtype(uniq, skipna=False) != "string":
        return None
    quoted = _quote_cells(uniq.tolist())
    if len(uniq) * 2 > len(vals):  # mostly distinct: no point in the lookup table
        return _quote_cells(vals.tolist()) if quoted != uniq.tolist() else vals.tolist()
    return np.asarray(quoted, dtype=object)[codes].tolist()


def _csv_text(df: pd.DataFrame, fill_na: bool = False) -> str:
    """``df.to_csv(header=False, index=False, lineterminator="\\n")``, byte for byte, built in
    bulk: each column is turned into str cells once (quoted per distinct value) and the rows
    are joined by C-level ``map``/``zip`` -- about 10x faster than pandas' writer on wide
    text frames.  Frames with other cell types use pandas itself."""
    if len(df) == 0 or df.shape[1] == 0:
        return df.to_csv(header=False, index=False, lineterminator="\n")
    cols = []
    for _, s in df.items():  # by position (items: without iloc's indexer, ~3x cheaper)
        c = _str_column(s)
        if c is None and fill_na and s.isna().any():  # = df.fillna("N/A"), cell-wise
            c = _str_column(s.fillna("N/A"))
        if c is None:
            if fill_na and df.isna().to_numpy().any():
                df = df.fillna("N/A")
            return df.to_csv(header=False, index=False, lineterminator="\n")
        cols.append(c)
    if len(cols) == 1:  # the csv module quotes a lone empty cell
        return "".join(('""' if v == "" else v) + "\n" for v in cols[0])
    return "\n".join(map(",".join, zip(*cols))) + "\n"


def render_csv(df: pd.DataFrame, fill_na: bool = False) -> str:
    """CSV rows of `df`; `fill_na`: missing cells print ``N/A`` (as after ``fillna``)."""
    text = _csv_text(df, fill_na)
    formula, control = scan_csv(text)
    # fast path: no formula character at all, or none at the start of a cell
    if formula:
        if fill_na and df.isna().to_numpy().any():
            df = df.fillna("N/A")
        safe = neutralise_formulas(df)
        if safe is not df:
            text = _csv_text(safe)  # the same cells, some behind a ': the same controls
    # names chosen by the profiled program never drive the reader's terminal
    return escape_controls(text) if control else text


def csv_line(values: Iterable[str]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(list(values))
    return buf.getvalue()


def _write_rows(fh, df: pd.DataFrame) -> None:
    for lo in range(0, len(df), CHUNK_ROWS):
        fh.write(render_csv(df.iloc[lo:lo + CHUNK_ROWS]))


def write_csv(paths: "SliceNamer", header: list[str], df: pd.DataFrame,
              slice_rows: int = CSV_SLICE_ROWS) -> list[Path]:
    """Write `df` (all str/object columns) under `header`; slice above `slice_rows` rows."""
    head = csv_line(header)
    if len(df) <= slice_rows:
        path = paths.single()
        with AtomicFile(path) as fh:
            fh.write(head)
            _write_rows(fh, df)
        return [path]
    out = []
    for k, lo in enumerate(range(0, len(df), slice_rows)):
        path = paths.slice(k)
        with AtomicFile(path) as fh:
            fh.write(head)
            _write_rows(fh, df.iloc[lo:lo + slice_rows])
        out.append(path)
    return out


RowRender = Callable[[int, int], pd.DataFrame]


def write_json_rows(path: Path, header: list[str], df: pd.DataFrame) -> list[Path]:
    """``--summary-format json``: a list of {header: value} objects (all values strings)."""
    return write_json_parts(path, header, [(len(df), lambda lo, hi: df.iloc[lo:hi])])


def write_json_parts(path: Path, header: list[str], parts: list[tuple[int, RowRender]],
                     fill_na: bool = False) -> list[Path]:
    """`write_json_rows` of a table given as consecutive parts, each ``(rows, render)``
    where ``render(lo, hi)`` returns rows [lo, hi) of that part as str cells: CHUNK_ROWS
    rows of text at a time.  `fill_na`: missing cells print
    ``"N/A"`` (as after ``fillna``)."""
    with AtomicFile(path) as fh:
        fh.write("[")
        first = True
        for n, render in parts:
            for lo in range(0, n, CHUNK_ROWS):
                df = render(lo, min(lo + CHUNK_ROWS, n))
                if fill_na and df.isna().to_numpy().any():
                    df = df.fillna("N/A")
                if len(df):
                    fh.write(("" if first else ", ") + json_objects(header, df))
                    first = False
        fh.write("]")
    return [path]


def json_objects(header: list[str], df: pd.DataFrame) -> str:
    """The rows of `df` as ``json.dumps({header: value})`` joined by ``", "``, built per
    column (each distinct text JSON-encoded once) and joined by C-level map/zip.  As with a
    dict, a repeated header (step_trace's Reduce pairs) is one key, at its first place, with
    the value of its last column."""
    last = {h: i for i, h in enumerate(header)}
    keys = list(last)  # first-appearance order
    tmpl = "{" + ", ".join(json.dumps(k).replace("%", "%%") + ": %s" for k in keys) + "}"
    cols = [_json_values(df.iloc[:, last[k]]) for k in keys]
    return ", ".join(map(tmpl.__mod__, zip(*cols)))


def _json_values(s: pd.Series) -> list[str]:
    """``json.dumps`` of each cell of a column."""
    if s.dtype.kind in "iu":
        return s.to_numpy().astype(str).tolist()
    vals = s.to_numpy(dtype=object)
    codes, uniq = pd.factorize(vals)
    if not len(uniq) or pd.api.types.infer_dtype(uniq, skipna=False) != "string":
        return [json.dumps(v) for v in vals.tolist()]  # other cell types: cell by cell
    out = np.array([json.dumps(u) for u in uniq.tolist()], dtype=object)[codes]
    missing = np.flatnonzero(codes < 0)
    if len(missing):  # NaN / None cells
        out[missing] = [json.dumps(v) for v in vals[missing].tolist()]
    return out.tolist()


EVENT_CHUNK = 20_000  # events rendered and written at a time (tests set it tiny): ~4 MB of
# text, reused heap, not a fresh mapping per chunk (memory.py)


class _ListEvents:
    """A plain list of event strings with the EventStream `chunks` interface."""

    def __init__(self, events: list[str]) -> None:
        self.events = events

    def __len__(self) -> int:
        return len(self.events)

    def chunks(self, lo: int, hi: int, size: int):
        for a in range(lo, hi, size):
            yield self.events[a:min(a + size, hi)]


def write_event_range(fh, events, lo: int, hi: int, first: bool) -> None:
    """Events [lo, hi) of a sorted stream (``chunks(lo, hi, size)``) as array text, EVENT_CHUNK
    at a time, ``, `` between them (and before the first unless `first`)."""
    for chunk in events.chunks(lo, hi, EVENT_CHUNK):
        if chunk:
            if not first:
                fh.write(", ")
            fh.write(", ".join(chunk))  # no second copy of the chunk's text
            first = False


def write_events(paths: "SliceNamer", meta: list[str], events,
                 slice_events: int = JSON_SLICE_EVENTS) -> list[Path]:
    """Write a Chrome-trace array: metadata strings then event strings (already sorted).

    `events`: a list of strings, an iterator of strings, or a lazy sorted stream with
    ``chunks(lo, hi, size)`` (timeline.EventStream), which is rendered and written
    EVENT_CHUNK events at a time so the text of all events never exists at once.  Sliced
    above `slice_events` events; every slice repeats the metadata events."""
    if not hasattr(events, "chunks"):
        events = _ListEvents(list(events))
    total = len(events)

    def write_part(path: Path, lo: int, hi: int) -> Path:
        with AtomicFile(path) as fh:
            fh.write("[" + ", ".join(meta))
            write_event_range(fh, events, lo, hi, not meta)
            fh.write("]")
        return path

    if total <= slice_events:
        return [write_part(paths.single(), 0, total)]
    return [write_part(paths.slice(k), lo, min(lo + slice_events, total))
            for k, lo in enumerate(range(0, total, slice_events))]


