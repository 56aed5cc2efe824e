"""Text that reaches a terminal or a spreadsheet: one rule for every output.

* **Control characters** (C0 but TAB/LF/CR, DEL, C1) come from names the profiled program
  chose (op names in hash_dic, msproftx messages, job info): an ESC or OSC sequence would
  drive the reader's terminal.  They are shown escaped (``\\x1b``), never raw.
* **Spreadsheet formulas** (OWASP CSV injection): a cell that starts with ``=`` ``+`` ``-``
  ``@`` or with TAB / CR gets a leading ``'`` so that a spreadsheet shows it as text;
  numbers (``-1``, ``-0.5``, ``1e-05``, a time with its trailing TAB) are left as they are.

Only the standard library: the query and the console use it without pandas.
"""
from __future__ import annotations

import re

CONTROL_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
FORMULA_LEADS = ("=", "+", "-", "@", "\t", "\r")
NUMBER_RE = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\t?|[+-]?(?:inf|nan)"
_NUMBER = re.compile(NUMBER_RE)


def _escape(m: re.Match) -> str:
    return f"\\x{ord(m.group()):02x}"


def escape_controls(text: str) -> str:
    """`text` with its control characters (not TAB, LF, CR) written as ``\\xNN``."""
    return CONTROL_RE.sub(_escape, text) if CONTROL_RE.search(text) else text


def safe_cell(value: str) -> str:
    """One CSV cell as it may be written: controls escaped, a formula lead neutralised."""
    value = escape_controls(value)
    if value.startswith(FORMULA_LEADS) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value
