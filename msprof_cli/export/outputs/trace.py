"""The Chrome-trace core of the timeline JSON files (docs/formats/timeline.md): layers of
pre-rendered or
lazily rendered events, their stable sort by float(ts) (the real tool's, ties included), the
JSON text helpers, and the msprof json layer order and --reports switches.

Events are rendered to JSON text per column with fixed templates in the exact key order and
separators of the real tool (Python ``json.dumps`` defaults: ``", "`` and ``": "``), because
orjson cannot emit those separators."""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..fmt import float_str

SORT_CANN, SORT_HARDWARE, SORT_OVERLAP = 7, 14, 20
HOST_SLOT = 31
STEP_TID_BASE = 70000
LAYERS = ("ascend", "cann", "step_trace", "overlap_analyse", "msproftx", "communication",
          "npu_mem")


@dataclass
class Layer:
    """Metadata, sort keys and events of one timeline layer.

    Big layers (one event per task or API) are lazy: `render(idx)` returns the event strings
    of rows `idx` (any order), so a file is written in sorted chunks and the strings of all
    events never exist at once (memory bounded by the chunk, not the task count)."""

    meta: list[str] = field(default_factory=list)
    events: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))
    keys: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float64))
    render: Callable[[np.ndarray], list[str]] | None = None
    n: int = -1  # the row count once `keys` are dropped (EventStream keeps no sort keys)

    def __len__(self) -> int:
        if self.n >= 0:
            return self.n
        return len(self.keys) if self.render is not None else len(self.events)

    def take(self, idx: np.ndarray) -> list[str]:
        if self.render is not None:
            return self.render(idx)
        return self.events[idx].tolist()


KEY_STEP = 1024


class EventStream:
    """The events of several layers stably sorted by key (float(ts)), rendered on demand.

    Only the sort order (one int64 per event) is held; `chunks(lo, hi, size)` yields the
    event strings of sorted positions [lo, hi) in lists of at most `size`."""

    def __init__(self, layers: list[Layer]) -> None:
        layers = [lay for lay in layers if len(lay)]
        sizes = [len(lay) for lay in layers]
        self.starts = np.cumsum([0] + sizes)[:-1].astype(np.int64)
        keys = np.concatenate([lay.keys for lay in layers]) if layers \
            else np.zeros(0, np.float64)
        order = np.argsort(keys, kind="stable")
        # every `key_step`-th sorted key (µs): enough to say which times a slice of the stream
        # covers (the slice index); at most ~8k keys (64 KB)
        self.key_step = max(1, min(KEY_STEP, len(order) // 8192))
        self.sampled = keys[order[::self.key_step]] if len(order) else np.zeros(0, np.float64)
        self.last_key = float(keys[order[-1]]) if len(order) else 0.0
        del keys
        # int32 positions and no sort keys kept (the callers' layers keep theirs): at 1M
        # tasks ~6M events, 72 MB less for the whole export
        self.order = order.astype(np.int32) if len(order) < 2**31 else order
        del order
        self.layers = [Layer(events=lay.events, render=lay.render, n=n)
                       for lay, n in zip(layers, sizes)]

    def __len__(self) -> int:
        return len(self.order)

    def key_range(self, lo: int, hi: int) -> tuple[float, float]:
        """Times (µs) bracketing sorted events [lo, hi): a lower bound of the first one's
        and an upper bound of the last one's (within `key_step` events)."""
        s, step = self.sampled, self.key_step
        first = float(s[min(lo // step, len(s) - 1)])
        k = (hi - 1) // step + 1
        last = float(s[k]) if k < len(s) else self.last_key
        return first, last

    def __iter__(self):
        for chunk in self.chunks(0, len(self), 100_000):
            yield from chunk

    def chunks(self, lo: int, hi: int, size: int):
        for a in range(lo, hi, size):
            pos = self.order[a:min(a + size, hi)]
            if len(self.layers) == 1:
                yield self.layers[0].take(pos)
                continue
            which = np.searchsorted(self.starts, pos, side="right") - 1
            out = np.empty(len(pos), dtype=object)
            for k, lay in enumerate(self.layers):
                sel = np.flatnonzero(which == k)
                if len(sel):
                    out[sel] = lay.take(pos[sel] - self.starts[k])
            yield out.tolist()


def pid_of(app_pid: int, sort_index: int, slot: int) -> int:
    return (app_pid << 10) | (sort_index << 5) | slot


def jstr(values: np.ndarray) -> np.ndarray:
    """JSON string literals of an object array (json.dumps per unique value)."""
    values = np.asarray(values, dtype=object)
    if len(values) == 0:
        return values
    inv, uniq = pd.factorize(values)
    return np.array([json.dumps(str(u)) for u in uniq], dtype=object)[inv]


class JCol:
    """A text column kept as (codes, JSON literal per distinct value): factorized and
    json-encoded once when the layer is built; each rendered chunk only gathers."""

    def __init__(self, values: np.ndarray) -> None:
        values = np.asarray(values, dtype=object)
        if len(values):
            self.codes, uniq = pd.factorize(values)
            self.table = np.array([json.dumps(str(u)) for u in uniq], dtype=object)
        else:
            self.codes, self.table = np.zeros(0, np.intp), np.zeros(0, dtype=object)

    def take(self, idx: np.ndarray) -> list[str]:
        return self.table[self.codes[idx]].tolist()


def meta(name: str, pid: int, tid: int, args: dict) -> str:
    return json.dumps({"name": name, "pid": pid, "tid": tid, "args": args, "ph": "M"})


def process_meta(pid: int, name: str, labels: str, sort_index: int,
                 threads: list[tuple[int, str, int | None]]) -> list[str]:
    out = [meta("process_name", pid, 0, {"name": name})]
    for tid, tname, tsort in threads:
        out.append(meta("thread_name", pid, tid, {"name": tname}))
        if tsort is not None:
            out.append(meta("thread_sort_index", pid, tid, {"sort_index": tsort}))
    out.append(meta("process_labels", pid, 0, {"labels": labels}))
    out.append(meta("process_sort_index", pid, 0, {"sort_index": sort_index}))
    return out


def obj_array(v) -> np.ndarray:
    return np.asarray(v, dtype=object)


def dur_json(ns: np.ndarray) -> np.ndarray:
    return float_str(np.asarray(ns, dtype=np.int64) / 1000.0)


def int_list(a: np.ndarray) -> list[int]:
    return np.asarray(a).astype(np.int64).tolist()


def us_parts(ns: np.ndarray) -> tuple[list[int], list[int]]:
    """(whole µs, ns remainder) of local ns, printed as ``%d.%03d`` = fmt.us_str exactly."""
    ns = np.asarray(ns, dtype=np.int64)
    whole = np.floor_divide(ns, 1000)
    return whole.tolist(), (ns - whole * 1000).tolist()


def dur_text(ns: np.ndarray) -> list[str]:
    """Durations ns -> the ``repr`` of their µs floats (= fmt.float_str), printed with ``%s``.

    Durations repeat (the same ops every iteration): the float repr -- a third of the cost
    of a whole event's ``%`` format -- is made once per distinct value and gathered."""
    ns = np.asarray(ns, dtype=np.int64)
    if len(ns) >= 64:
        codes, uniq = pd.factorize(ns)
        if len(uniq) * 2 <= len(ns):
            table = np.array(list(map(repr, (np.asarray(uniq) / 1000.0).tolist())),
                             dtype=object)
            return table[codes].tolist()
    return list(map(repr, (ns / 1000.0).tolist()))


def assemble(layers: list[Layer]) -> tuple[list[str], list[str]]:
    """Metadata in layer order, then every event stably sorted by float(ts) (as a list)."""
    meta_out, stream = assemble_stream(layers)
    return meta_out, list(stream) if len(stream) else []


def assemble_stream(layers: list[Layer]) -> tuple[list[str], EventStream]:
    """As `assemble`, the events as a lazy sorted EventStream (writers.write_events writes
    it chunk by chunk)."""
    meta_out: list[str] = []
    for lay in layers:
        meta_out.extend(lay.meta)
    return meta_out, EventStream(layers)


def read_reports(path) -> dict[str, bool]:
    """--reports layer switches (docs/formats/timeline.md 8); invalid content -> every layer on."""
    on = {k: True for k in LAYERS}
    if path is None:
        return on
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        proc = data["json_process"]
        if not isinstance(proc, dict):
            raise ValueError
    except (OSError, ValueError, KeyError, TypeError):
        return on
    for k in LAYERS:
        if isinstance(proc.get(k), bool):
            on[k] = proc[k]
    return on


# The msprof json layers, in their order (defined once: the whole export, the windows'
# fixed positions and the windowed metadata all follow it): (kind, one layer per device,
# the --reports switches that must all be on).  msproftx last: project choice.
MSPROF_LAYER_ORDER: tuple[tuple[str, bool, tuple[str, ...]], ...] = (
    ("step", True, ("step_trace",)),
    ("cann", False, ("cann",)),
    ("hardware", True, ("ascend",)),
    ("flow", True, ("ascend", "cann")),
    ("comm", True, ("communication",)),
    ("npu_mem", True, ("npu_mem",)),  # device memory samples (memory_files.py)
    ("freq", True, ("ascend",)),  # the Atlas A2's AI Core Freq lane (freq_layer.py)
    ("overlap", True, ("overlap_analyse",)),
    ("tx", False, ("msproftx",)),
)


def layer_on(kind: str, switches: dict[str, bool]) -> bool:
    """Whether the --reports switches keep the msprof json layers of `kind`."""
    need = next(sw for k, _, sw in MSPROF_LAYER_ORDER if k == kind)
    return all(switches.get(name, True) for name in need)


def layer_slots(n: int) -> dict[str, list[int] | int]:
    """Fixed positions of the msprof json layers of `n` devices in MSPROF_LAYER_ORDER: a list
    per per-device kind, an int per global one, `size` = the number of positions."""
    slots: dict[str, list[int] | int] = {}
    at = 0
    for kind, per_device, _ in MSPROF_LAYER_ORDER:
        slots[kind] = list(range(at, at + n)) if per_device else at
        at += n if per_device else 1
    slots["size"] = at
    return slots


def in_layer_order(parts: dict[str, list]) -> list:
    """The items of `parts` (kind -> its layers, or metadata lines) in MSPROF_LAYER_ORDER."""
    return [x for kind, _, _ in MSPROF_LAYER_ORDER for x in parts.get(kind, ())]
