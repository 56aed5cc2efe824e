"""What the db output carries across windows besides its rows: the side tables (SIDE_SCHEMA) a
window's rows go to, how side rows become db rows (SIDE_ROWS), the first-seen texts per
STRING_IDS slot (Slots), and the writing of a side file.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..decode.host import NA
from ..outputs import db_tables as DB

SIDE_SCHEMA = {  # side tables: the db columns (codes for texts) + the device where missing
    "TASK": DB.SCHEMA["TASK"],
    "COMPUTE_TASK_INFO": DB.SCHEMA["COMPUTE_TASK_INFO"] + [("dev", "INTEGER")],
    "TASK_PMU_INFO": DB.SCHEMA["TASK_PMU_INFO"] + [("dev", "INTEGER")],
    "OVERLAP_ANALYSIS": [("deviceId", "INTEGER"), ("startNs", "NUMERIC"),
                         ("endNs", "NUMERIC"), ("type", "INTEGER")],
    "COMMUNICATION_OP": DB.SCHEMA["COMMUNICATION_OP"],
    "CANN_API": DB.SCHEMA["CANN_API"],
}


# How side rows become db rows, for both strategies (SQL copy of side files, numpy insert of
# a held window): per table, the column that tells the device ("dev": its index j, else its
# device id), the columns mapped through a slot's final STRING_IDS, and the column that gets
# the device's numbering base ("tasks": globalTaskId, "ops": opId).
SIDE_ROWS: dict[str, tuple[str, dict[str, str], tuple[str, str]]] = {
    "TASK": ("deviceId", {"taskType": "taskType"}, ("globalTaskId", "tasks")),
    "COMPUTE_TASK_INFO": ("dev", {
        "name": "op_name", "taskType": "task_type", "opType": "op_type",
        "inputFormats": "in_formats", "inputDataTypes": "in_types", "inputShapes": "in_shapes",
        "outputFormats": "out_formats", "outputDataTypes": "out_types",
        "outputShapes": "out_shapes", "opState": "op_state", "hf32Eligible": "hf32"},
        ("globalTaskId", "tasks")),
    "TASK_PMU_INFO": ("dev", {"name": "pmu"}, ("globalTaskId", "tasks")),
    "COMMUNICATION_OP": ("deviceId", {"opName": "comm_name", "opType": "comm_type"},
                         ("opId", "ops")),
}


class Slots:
    """First-seen texts per slot (a column of one device, or CANN_API's names)."""

    def __init__(self) -> None:
        self.slots: dict[tuple, dict[str, int]] = {}

    def column(self, key: tuple, values) -> np.ndarray:
        """Slot-local codes of `values` (as db.StringIds.column: missing -> N/A)."""
        s = pd.Series(np.asarray(values, dtype=object)).fillna(NA)
        if len(s) == 0:
            return np.zeros(0, dtype=np.int64)
        slot = self.slots.setdefault(key, {})
        codes, uniq = pd.factorize(s)
        lut = np.array([slot.setdefault(str(u), len(slot)) for u in uniq], dtype=np.int64)
        return lut[codes]

    def texts(self, key: tuple) -> list[str]:
        return list(self.slots.get(key, {}))


def map_name(key: tuple) -> str:
    return "map_" + "_".join(str(x) for x in key)


def side_file(side: Path, cols: dict[str, list[np.ndarray]]) -> Path:
    conn = DB.connect_new(side)
    try:
        conn.execute("PRAGMA journal_mode=OFF")
        conn.execute("PRAGMA synchronous=OFF")
        conn.execute("BEGIN")
        for table, c in cols.items():
            DB.create_table(conn, table, SIDE_SCHEMA[table])
            DB.insert_rows(conn, table, c)
        conn.execute("COMMIT")
    finally:
        conn.close()
    return side
