"""A per-task summary (task_time, op_summary, aicpu, l2_cache) of every device of an export,
appended window by window and written device-major -- the one sink behind both layouts:

* ``single`` (legacy: a file per device): one CSV or json-rows stream, no Device_id;
* ``merged`` (mindstudio CSV): one file, ``Device_id`` first; the rows of the devices after
  the first are kept (streams.DeferredRows) and appended after the first's at the end, as the
  analysis merges its per-device files;
* ``per_device`` (mindstudio ``--summary-format json``): a file per device without
  Device_id, ``{stem}_device_{id}_{ts}.json``, or ``{stem}_{ts}.json`` when only one device
  has rows (layouts.mindstudio.json_per_device names the whole-table ones the same way).

`extra` keeps rows of a device to be written after all its own (the analysis's ts memcpy
rows of task_time).  Streams are made by `ensure` in the export process (their temporary
names carry its pid); writes may come from a forked worker (the object pickles).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from .files import SliceNamer
from .streams import CsvStream, DeferredRows, JsonRowsStream, summary_stream

SINGLE, MERGED, PER_DEVICE = "single", "merged", "per_device"


class DeviceRows:
    """See the module doc.  `names[j]`: device j's own names (per_device: its json file;
    merged: its deferred rows); `name`: the file's name (single, merged) or the name of
    the one-device file (per_device)."""

    def __init__(self, mode: str, name: SliceNamer, header: list[str], dev_ids: list[int],
                 slice_rows: int, summary_format: str = "csv",
                 names: list[SliceNamer] | None = None,
                 extra_names: list[SliceNamer] | None = None) -> None:
        self.mode, self.name, self.header = mode, name, header
        self.dev_ids, self.slice_rows = dev_ids, slice_rows
        self.summary_format = summary_format
        self.names = names or []
        self.extra_names = extra_names or []
        self.streams: dict[int, CsvStream | JsonRowsStream | DeferredRows] = {}
        self.extra: dict[int, DeferredRows] = {}

    @property
    def opened(self) -> bool:
        return bool(self.streams)

    def ensure(self, j: int = 0) -> None:
        """Open the streams device j writes to (export process)."""
        if self.mode == SINGLE:
            if 0 not in self.streams:
                self.streams[0] = summary_stream(self.summary_format, self.name, self.header,
                                                 self.slice_rows)
            return
        if self.mode == PER_DEVICE:
            for jj in {0, j}:
                if jj not in self.streams:
                    self.streams[jj] = JsonRowsStream(self.names[jj], self.header,
                                                      fill_na=True)
            return
        if 0 not in self.streams:
            self.streams[0] = CsvStream(self.name, ["Device_id"] + self.header,
                                        self.slice_rows)
        if j and j not in self.streams:
            self.streams[j] = DeferredRows(self.names[j])

    def ensure_extra(self, j: int) -> None:
        if j not in self.extra:
            self.extra[j] = DeferredRows(self.extra_names[j])

    def write(self, j: int, df: pd.DataFrame, extra: bool = False) -> None:
        """Device j's rows (a Device_id column is added in the merged mode)."""
        if self.mode == MERGED:
            df.insert(0, "Device_id", str(self.dev_ids[j]))
        if extra and j in self.extra:
            self.extra[j].write(df)
        else:
            self.streams[0 if self.mode == SINGLE else j].write(df)

    def close(self, empty_file: bool = False) -> list[Path]:
        """The final file(s); `empty_file`: a file even without rows."""
        if not self.streams:
            return []
        if self.mode == SINGLE:
            return self.streams.pop(0).close(empty_file=empty_file)
        if self.mode == MERGED:
            out = self.streams[0]
            for j in range(len(self.dev_ids)):
                if j and j in self.streams:
                    self.streams.pop(j).replay(out)
                if j in self.extra:  # its kept rows after its own
                    self.extra.pop(j).replay(out)
            return self.streams.pop(0).close(empty_file=empty_file)
        streams = []
        for j in range(len(self.dev_ids)):
            if j in self.streams:
                streams.append(self.streams.pop(j))
                if j in self.extra:
                    self.extra.pop(j).replay(streams[-1])
        return close_json_devices(streams, self.name, empty_file)

    def discard(self) -> None:
        for st in (*self.streams.values(), *self.extra.values()):
            st.discard()
        self.streams, self.extra = {}, {}


def close_json_devices(streams: list[JsonRowsStream], one: SliceNamer,
                       empty_file: bool = False) -> list[Path]:
    """The json files of one summary, per device: a file per device with rows, `one`'s
    name when only one has (or none, with `empty_file`: ``[]``)."""
    has = [k for k, st in enumerate(streams) if st.total]
    if len(has) > 1:
        return [p for st in streams for p in st.close()]
    out: list[Path] = []
    for k, st in enumerate(streams):
        if k == (has[0] if has else 0):
            out += st.close(empty_file, one.single())
        else:
            st.discard()
    return out
