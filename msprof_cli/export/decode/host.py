"""Decode the host unified-format records (docs/formats/raw-format.md 4) into tidy pandas tables.

Times stay in host monotonic ns (int64) here; conversion to local time happens in the
dataset assembly.  Vectorised throughout: names are resolved through categorical maps over
the unique hash values, tensor strings are built once per unique tensor description.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from msprof_cli.raw import enums as EN
from msprof_cli.raw import layouts as L

from .rawread import DecodeLog, hash_dict, host_records, type_info_dict

NA = "N/A"


@dataclass
class HostTables:
    """The decoded host record tables of a PROF dir (docs/formats/raw-format.md 4), with the hash
    and
    type dictionaries that name them."""

    apis: pd.DataFrame  # connection_id, level, type, thread_id, begin_ns, end_ns, item_id
    task_track: pd.DataFrame
    node_basic: pd.DataFrame
    tensors: pd.DataFrame
    hashes: dict[int, str]
    types: dict[tuple[int, int], str]
    fusion: pd.DataFrame = field(default_factory=pd.DataFrame)  # fusion_op_info
    graphs: pd.DataFrame = field(default_factory=pd.DataFrame)  # graph_id_map
    hccl: pd.DataFrame = field(default_factory=pd.DataFrame)  # hccl_info
    tx: pd.DataFrame = field(default_factory=pd.DataFrame)  # msproftx
    aging: bool = False  # any record from an aging.* file (dynamic-shape data)

    def name_of(self, hashes: np.ndarray) -> np.ndarray:
        """Resolve u64 hashes via hash_dic; unresolved ones print as the number."""
        return resolve(hashes, self.hashes)


def resolve(values: np.ndarray, table: dict[int, str]) -> np.ndarray:
    codes, names = resolve_codes(values, table)
    return names[codes]


def resolve_codes(values: np.ndarray, table: dict[int, str]) -> tuple[np.ndarray, np.ndarray]:
    """`resolve` as (code per value, name per code): tests on the names are then one per
    distinct name."""
    values = np.asarray(values, dtype=np.uint64)
    if len(values) == 0:
        return np.zeros(0, dtype=np.intp), np.zeros(0, dtype=object)
    inv, uniq = pd.factorize(values)
    names = np.array([table.get(int(u), str(int(u))) for u in uniq], dtype=object)
    return inv, names


def type_names(levels: np.ndarray, types: np.ndarray, table: dict[tuple[int, int], str]
               ) -> np.ndarray:
    """`{level}_{type}` -> name via type_info_dic; unknown pairs print as the type number."""
    codes, names = type_name_codes(levels, types, table)
    return names[codes]


def type_name_codes(levels: np.ndarray, types: np.ndarray,
                    table: dict[tuple[int, int], str]) -> tuple[np.ndarray, np.ndarray]:
    """`type_names` as (code per row, name per code): a test on the names is then one per
    distinct name, not one per row."""
    key = (np.asarray(levels, dtype=np.uint64) << np.uint64(32)) | np.asarray(types, np.uint64)
    if len(key) == 0:
        return np.zeros(0, dtype=np.intp), np.zeros(0, dtype=object)
    inv, uniq = pd.factorize(key)
    names = np.array([table.get((int(u) >> 32, int(u) & 0xFFFFFFFF), str(int(u) & 0xFFFFFFFF))
                      for u in uniq], dtype=object)
    return inv, names


def decode_apis(data_dir: Path, log: DecodeLog, select: np.ndarray | None = None
                ) -> pd.DataFrame:
    """API records plus begin/end event pairs; connection_id = record index in file order
    (`select`: only these records, windows.py)."""
    cols = host_records(data_dir, "api_event",
                        log, ["level", "type", "thread_id", "reserve", "begin_time",
                              "end_time", "item_id"], select)
    aging = cols["_aging"]
    n = len(cols["level"])
    idx = np.arange(n, dtype=np.int64) if select is None else select.astype(np.int64)
    is_event = cols["end_time"] == np.uint64(L.EVENT_RESERVE)
    api = pd.DataFrame({
        "connection_id": idx[~is_event],
        "level": cols["level"][~is_event].astype(np.int64),
        "type": cols["type"][~is_event].astype(np.int64),
        "thread_id": cols["thread_id"][~is_event].astype(np.int64),
        "begin_ns": cols["begin_time"][~is_event].astype(np.int64),
        "end_ns": cols["end_time"][~is_event].astype(np.int64),
        "item_id": cols["item_id"][~is_event],
        "aging": aging[~is_event],
    })
    if is_event.any():
        ev = pd.DataFrame({
            "connection_id": idx[is_event],
            "level": cols["level"][is_event].astype(np.int64),
            "type": cols["type"][is_event].astype(np.int64),
            "thread_id": cols["thread_id"][is_event].astype(np.int64),
            "request_id": cols["reserve"][is_event].astype(np.int64),
            "ts": cols["begin_time"][is_event].astype(np.int64),
            "item_id": cols["item_id"][is_event],
            "aging": aging[is_event],
        })
        key = ["level", "thread_id", "type", "request_id", "item_id"]
        ev["nth"] = ev.groupby(key, sort=False).cumcount()
        ev["pair"] = ev["nth"] // 2
        begins = ev[ev["nth"] % 2 == 0]
        ends = ev[ev["nth"] % 2 == 1][key + ["pair", "ts"]].rename(columns={"ts": "end_ns"})
        paired = begins.merge(ends, on=key + ["pair"], how="left")
        unmatched = int(paired["end_ns"].isna().sum())
        if unmatched:
            log.warn(f"{data_dir}: {unmatched} api events without a matching end event dropped")
        paired = paired.dropna(subset=["end_ns"])
        paired = pd.DataFrame({
            "connection_id": paired["connection_id"].to_numpy(np.int64),
            "level": paired["level"].to_numpy(np.int64),
            "type": paired["type"].to_numpy(np.int64),
            "thread_id": paired["thread_id"].to_numpy(np.int64),
            "begin_ns": paired["ts"].to_numpy(np.int64),
            "end_ns": paired["end_ns"].to_numpy(np.int64),
            "item_id": paired["item_id"].to_numpy(np.uint64),
            "aging": paired["aging"].to_numpy(bool),
        })
        api = pd.concat([api, paired], ignore_index=True)
        api = api.sort_values("connection_id", kind="stable", ignore_index=True)
    # the analysis ignores APIs with begin == end or begin <= 0
    api = api[(api["begin_ns"] > 0) & (api["end_ns"] != api["begin_ns"])].reset_index(drop=True)
    return api


def decode_task_track(data_dir: Path, log: DecodeLog, select: np.ndarray | None = None
                      ) -> pd.DataFrame:
    c = host_records(data_dir, "task_track", log,
                     ["thread_id", "timestamp", "device_id", "stream_id", "task_id", "batch_id",
                      "task_type", "kernel_name", "num_blocks"], select)
    return pd.DataFrame({
        "thread_id": c["thread_id"].astype(np.int64),
        "ts_ns": c["timestamp"].astype(np.int64),
        "device_id": (c["device_id"] & 0x0FFF).astype(np.int64),
        "stream_id": c["stream_id"].astype(np.int64),
        "task_id": c["task_id"].astype(np.int64),
        "batch_id": c["batch_id"].astype(np.int64),
        "rt_type": c["task_type"].astype(np.int64),
        "kernel_name": c["kernel_name"],
        "num_blocks": c["num_blocks"].astype(np.int64),
    })


def decode_node_basic(data_dir: Path, log: DecodeLog, select: np.ndarray | None = None
                      ) -> pd.DataFrame:
    c = host_records(data_dir, "node_basic_info", log,
                     ["thread_id", "timestamp", "op_name", "task_type", "op_type", "block_num",
                      "op_flag"], select)
    return pd.DataFrame({
        "thread_id": c["thread_id"].astype(np.int64),
        "ts_ns": c["timestamp"].astype(np.int64),
        "op_name_hash": c["op_name"],
        "ge_type": c["task_type"].astype(np.int64),
        "op_type_hash": c["op_type"],
        "block_dim": (c["block_num"] & 0xFFFF).astype(np.int64),
        # a MIX kernel's vector blocks: blockNum x the mix ratio in its high 16 bits
        # (docs/formats/ascend910b.md 1.5)
        "mix_block_dim": ((c["block_num"] & 0xFFFF) * (c["block_num"] >> 16)).astype(np.int64),
        "hf32": c["op_flag"] != 0,
        "aging": c["_aging"],
    })


_HASH_MULT = np.random.default_rng(0x5EED).integers(1, 2**63, size=4096, dtype=np.uint64) | 1


def _row_hash(a: np.ndarray) -> np.ndarray:
    """A 64-bit hash per row of a 2-D integer array: wrapping dot product of the row with
    fixed odd constants, then mixed; equal rows hash equal (collisions are verified)."""
    a = np.ascontiguousarray(a)
    a = a.view(np.uint64) if a.dtype.itemsize == 8 else a.astype(np.uint64)
    mult = np.resize(_HASH_MULT, a.shape[1]) | np.uint64(1)
    with np.errstate(over="ignore"):
        h = a @ mult
        h ^= h >> np.uint64(31)
        h *= np.uint64(0x9E3779B97F4A7C15)
    return h


def unique_rows(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row codes, unique rows) of a 2-D int array, codes numbered by first appearance.

    O(n): rows are hashed to one u64 and factorized; the result is verified exactly (every
    row equals its group's first row), with a sort-based fallback on a hash collision."""
    if len(a) == 0:
        return np.zeros(0, dtype=np.int64), a[:0]
    codes, _ = pd.factorize(_row_hash(a))
    first = np.zeros(codes.max() + 1, dtype=np.int64)
    first[codes[::-1]] = np.arange(len(codes))[::-1]
    same = True
    for lo in range(0, len(a), 1 << 16):  # exact check in blocks (bounded temporaries)
        blk = a[lo:lo + (1 << 16)]
        if not (a[first[codes[lo:lo + (1 << 16)]]] == blk).all():
            same = False
            break
    if not same:  # pragma: no cover - 64-bit hash collision
        codes = pd.DataFrame(a).groupby(list(range(a.shape[1])), sort=False).ngroup() \
            .to_numpy()
        first = np.zeros(codes.max() + 1, dtype=np.int64)
        first[codes[::-1]] = np.arange(len(codes))[::-1]
    return codes.astype(np.int64), a[first]


def _format_name(fmt: int) -> str:
    if fmt == EN.FORMAT_UNDEFINED:
        return "UNDEFINED"
    base, sub = fmt & 0xFF, (fmt >> 8) & 0xFFFF
    name = EN.FORMATS.get(base, str(base))
    return f"{name}:{sub}" if sub else name


def _tensor_text(slots: np.ndarray, num: int) -> tuple[str, str, str, str, str, str]:
    """The 6 printed columns of one record's tensor slots (in/out shapes, types, formats)."""
    ins: list[tuple[str, str, str]] = []
    outs: list[tuple[str, str, str]] = []
    for k in range(min(num, L.MAX_TENSORS_PER_RECORD)):
        t = slots[k]
        kind = int(t["tensor_type"])
        if kind not in (0, 1):
            continue
        dt = int(t["data_type"])
        desc = (",".join(str(int(d)) for d in t["shape"] if d != 0),
                EN.DATA_TYPES.get(dt, str(dt)), _format_name(int(t["format"])))
        (ins if kind == 0 else outs).append(desc)
    return (";".join(d[0] for d in ins), ";".join(d[1] for d in ins),
            ";".join(d[2] for d in ins), ";".join(d[0] for d in outs),
            ";".join(d[1] for d in outs), ";".join(d[2] for d in outs))


TENSOR_BLOCK = 1 << 17  # records keyed and hashed at a time (bounded temporaries)


def _tensor_keys(t: np.ndarray, num: np.ndarray) -> np.ndarray:
    """The key of each record: its tensor slots as 32-bit words, unused slots (beyond
    tensor_num) and slots that are neither input nor output blanked to all-ones (they print
    nothing whatever they hold); padded to an even width so rows hash as u64 words."""
    n = len(t)
    words = t.view(np.uint32).reshape(n, L.MAX_TENSORS_PER_RECORD, -1).copy()
    unused = np.arange(L.MAX_TENSORS_PER_RECORD)[None, :] >= num[:, None]
    words[unused] = 0xFFFFFFFF
    words[~unused & (words[:, :, 0] > 1)] = 0xFFFFFFFF
    nw = words.shape[1] * words.shape[2]
    key = np.zeros((n, nw + nw % 2), dtype=np.uint32)
    key[:, :nw] = words.reshape(n, nw)
    return key


def _tensor_combos(t: np.ndarray, num: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(combo code per record, key words (u32, unpadded) per distinct combo), combos numbered
    by first appearance -- `unique_rows` of all keys, computed TENSOR_BLOCK records at a
    time: each block's rows are hashed, new hashes get the next codes and keep their row as
    the representative, and every row is checked against its representative (exact; the
    whole-table method runs on a 64-bit hash collision)."""
    n = len(t)
    nw = t.view(np.uint32).reshape(n, -1).shape[1] if n else 0
    codes = np.empty(n, dtype=np.int64)
    known = pd.Index(np.zeros(0, dtype=np.uint64))
    reps: list[np.ndarray] = []
    rep_all = np.zeros((0, nw + nw % 2), dtype=np.uint32)
    for lo in range(0, n, TENSOR_BLOCK):
        key = _tensor_keys(t[lo:lo + TENSOR_BLOCK], num[lo:lo + TENSOR_BLOCK])
        h = _row_hash(key.view(np.uint64))
        bcode, buniq = pd.factorize(h)
        gid = known.get_indexer(buniq)
        new = np.flatnonzero(gid < 0)
        if len(new):
            gid[new] = len(known) + np.arange(len(new))
            first = np.zeros(len(buniq), dtype=np.int64)
            first[bcode[::-1]] = np.arange(len(bcode))[::-1]
            known = known.append(pd.Index(np.asarray(buniq)[new]))
            reps.append(key[first[new]])
            rep_all = np.concatenate(reps)
        row_gid = gid[bcode]
        if not (rep_all[row_gid] == key).all():  # pragma: no cover - 64-bit hash collision
            cinv, cu = unique_rows(_tensor_keys(t, num).view(np.uint64))
            return cinv, np.ascontiguousarray(cu).view(np.uint32)[:, :nw]
        codes[lo:lo + TENSOR_BLOCK] = row_gid
    return codes, rep_all[:, :nw]


TENSOR_KIND_FORMAT = {"in_shapes": "in_formats", "in_types": "in_formats",
                      "in_formats": "in_formats", "out_shapes": "out_formats",
                      "out_types": "out_formats", "out_formats": "out_formats"}
TENSOR_OUT_COLS = ["in_shapes", "in_types", "in_formats", "out_shapes", "out_types",
                   "out_formats"]


def decode_tensors_empty() -> pd.DataFrame:
    return pd.DataFrame({"thread_id": [], "ts_ns": [], "op_name_hash": [],
                         **{k: [] for k in TENSOR_OUT_COLS}})


def pack_frame(df: pd.DataFrame) -> dict:
    """A frame to send from a forked worker: the text columns as (int32 codes, distinct
    strings), a fraction of the pickled size of the object columns."""
    out: dict = {}
    for name in df.columns:
        col = df[name].to_numpy()
        if col.dtype == object:
            codes, uniq = pd.factorize(col)
            out[name] = ("codes", codes.astype(np.int32), list(uniq))
        else:
            out[name] = ("array", col)
    return out


def decode_tensors(data_dir: Path, log: DecodeLog, select: np.ndarray | None = None
                   ) -> pd.DataFrame:
    """One row per (timestamp, thread, opName) with the 6 printed tensor columns.

    Strings are built once per distinct record content: the key of a record is its tensor
    slots as 32-bit words with the unused slots (beyond tensor_num) blanked, so records that
    print the same share one Python-built string tuple."""
    c = host_records(data_dir, "tensor_info", log,
                     ["thread_id", "timestamp", "op_name", "tensor_num", "tensors"], select)
    n = len(c["thread_id"])
    out_cols = ["in_shapes", "in_types", "in_formats", "out_shapes", "out_types", "out_formats"]
    if n == 0:
        return decode_tensors_empty()
    t = np.ascontiguousarray(c["tensors"])  # (n, 5) structured, 44 B per slot
    num = np.minimum(c["tensor_num"].astype(np.int64), L.MAX_TENSORS_PER_RECORD)
    cinv, cu = _tensor_combos(t, num)
    del t
    c.pop("tensors")  # the raw slots (44 B x 5 per record) are not needed any more
    slot_view = cu.reshape(len(cu), L.MAX_TENSORS_PER_RECORD, -1).copy().view(L.TENSOR)
    texts = [_tensor_text(slot_view[i].reshape(-1), L.MAX_TENSORS_PER_RECORD)
             for i in range(len(cu))]
    res = {k: [tx[j] for tx in texts] for j, k in enumerate(out_cols)}
    # a record "has" inputs (outputs) when it holds at least one such tensor: its format list
    # is then non-empty (every format prints a name).  Columns of a kind no record has are N/A
    # (the analysis's TensorAddInfoParser._assemble_tensor_data), not "".
    has = {k: [bool(f) for f in res[TENSOR_KIND_FORMAT[k]]] for k in out_cols}
    df = pd.DataFrame({
        "thread_id": c["thread_id"].astype(np.int64),
        "ts_ns": c["timestamp"].astype(np.int64),
        "op_name_hash": c["op_name"],
        **{k: np.array([x if h else NA for x, h in zip(v, has[k])], dtype=object)[cinv]
           for k, v in res.items()},
    })
    key3 = np.stack([df["ts_ns"].to_numpy(), df["thread_id"].to_numpy(),
                     df["op_name_hash"].to_numpy().view(np.int64)], axis=1)
    gid, _ = unique_rows(key3)  # numbered by first appearance
    del key3
    in_multi = np.bincount(gid)[gid] > 1
    if in_multi.any():  # > 5 tensors: several records with identical keys, concatenated in order
        df = pd.concat([df[~in_multi], _merge_multi(df, gid, in_multi, cinv, res, has)],
                       ignore_index=True)
    return df


def _merge_multi(df: pd.DataFrame, gid: np.ndarray, in_multi: np.ndarray, combo: np.ndarray,
                 res: dict[str, list[str]], has: dict[str, list[bool]]) -> pd.DataFrame:
    """One row per multi-record tensor_info group (groups in first-appearance order): each
    input (output) column = the strings of the records holding inputs (outputs) joined with
    ``;`` -- an empty shape string of such a record (scalars) included -- and N/A when no
    record holds any (TensorAddInfoParser._update_hash_dict_data / _assemble_tensor_data).
    Strings are built once per distinct sequence of per-record tensor combos, never per
    record."""
    rows = np.flatnonzero(in_multi)
    g = gid[rows]
    order = np.argsort(g, kind="stable")
    rows, g = rows[order], g[order]
    new = np.r_[True, g[1:] != g[:-1]]
    grp = np.cumsum(new) - 1
    starts = np.flatnonzero(new)
    rank = np.arange(len(g)) - starts[grp]
    seq = np.full((len(starts), int(rank.max()) + 1), -1, dtype=np.int64)
    seq[grp, rank] = combo[rows]
    sinv, su = unique_rows(seq)
    first = rows[starts]
    out = {"ts_ns": df["ts_ns"].to_numpy()[first], "thread_id": df["thread_id"].to_numpy()[first],
           "op_name_hash": df["op_name_hash"].to_numpy()[first]}
    for k, strings in res.items():
        hk = has[k]
        parts = [[strings[c] for c in row if c >= 0 and hk[c]] for row in su]
        joined = [";".join(p) if p else NA for p in parts]
        out[k] = np.array(joined, dtype=object)[sinv]
    return pd.DataFrame(out)


def decode_fusion(data_dir: Path, log: DecodeLog) -> pd.DataFrame:
    """fusion_op_info: one row per record; `fused` = the fusionOpNum original-op hashes."""
    c = host_records(data_dir, "fusion_op_info", log,
                     ["thread_id", "timestamp", "op_name", "fusion_op_num", "input_mem_size",
                      "output_mem_size", "weight_mem_size", "workspace_mem_size",
                      "total_mem_size", "fusion_op_id"])
    num = np.minimum(c["fusion_op_num"].astype(np.int64), c["fusion_op_id"].shape[1]
                     if c["fusion_op_id"].ndim == 2 else 8)
    return pd.DataFrame({
        "thread_id": c["thread_id"].astype(np.int64),
        "ts_ns": c["timestamp"].astype(np.int64),
        "op_name_hash": c["op_name"],
        "fused_num": num,
        "fused": list(c["fusion_op_id"]) if len(num) else [],
        "input_bytes": c["input_mem_size"].astype(np.int64),
        "output_bytes": c["output_mem_size"].astype(np.int64),
        "weight_bytes": c["weight_mem_size"].astype(np.int64),
        "workspace_bytes": c["workspace_mem_size"].astype(np.int64),
        "total_bytes": c["total_mem_size"].astype(np.int64),
    })


def decode_graphs(data_dir: Path, log: DecodeLog) -> pd.DataFrame:
    c = host_records(data_dir, "graph_id_map", log, ["model_name", "graph_id", "model_id"])
    return pd.DataFrame({"model_id": c["model_id"].astype(np.int64),
                         "graph_id": c["graph_id"].astype(np.int64),
                         "model_name_hash": c["model_name"]})


def decode_hccl(data_dir: Path, log: DecodeLog) -> pd.DataFrame:
    fields = ["thread_id", "timestamp", "item_id", "ccl_tag", "group_name", "local_rank",
              "remote_rank", "rank_size", "plane_id", "stage", "role", "duration_estimated",
              "data_size", "op_type", "data_type", "link_type", "transport_type", "notify_id"]
    c = host_records(data_dir, "hccl_info", log, fields)
    c["timestamp"] = c["timestamp"].astype(np.int64)
    return pd.DataFrame({"ts_ns" if k == "timestamp" else k: c[k] for k in fields})


def decode_tx(data_dir: Path, log: DecodeLog) -> pd.DataFrame:
    fields = ["info_type", "process_id", "tx_thread_id", "category", "event_type",
              "payload_type", "payload_value", "start_time", "end_time", "mark_id", "domain",
              "message_type", "message"]
    c = host_records(data_dir, "msproftx", log, fields)
    msg = c["message"]
    if len(msg):
        inv, uniq = pd.factorize(msg)
        text = np.array([bytes(u).split(b"\0", 1)[0].decode("utf-8", "replace") for u in uniq],
                        dtype=object)[inv]
    else:
        text = np.zeros(0, dtype=object)
    c["message"] = text
    for k in ("start_time", "end_time"):
        c[k] = c[k].astype(np.int64)
    return pd.DataFrame({k: c[k] for k in fields})  # one frame, no column set after it


def decode_host(data_dir: Path, log: DecodeLog, post_log: DecodeLog | None = None,
                tensors: bool = True, select: dict[str, np.ndarray] | None = None
                ) -> HostTables:
    """All host tables.  `tensors=False`: tensor_info is decoded elsewhere (a worker, see
    dataset.load_prof) and `tensors` is left empty; `post_log` then receives the warnings of
    the kinds decoded after tensor_info, so the caller can keep the serial order.
    `select` (windowed export): per record kind, the records to decode (windows.py)."""
    sel = select or {}
    apis = decode_apis(data_dir, log, sel.get("api_event"))
    node_basic = decode_node_basic(data_dir, log, sel.get("node_basic_info"))
    task_track = decode_task_track(data_dir, log, sel.get("task_track"))
    tens = decode_tensors(data_dir, log, sel.get("tensor_info")) if tensors \
        else decode_tensors_empty()
    post = log if post_log is None else post_log
    return HostTables(
        apis=apis,
        task_track=task_track,
        node_basic=node_basic,
        tensors=tens,
        hashes=hash_dict(data_dir),
        types=type_info_dict(data_dir),
        fusion=decode_fusion(data_dir, post),
        graphs=decode_graphs(data_dir, post),
        hccl=decode_hccl(data_dir, post),
        tx=decode_tx(data_dir, post),
        aging=bool(apis["aging"].any() or node_basic["aging"].any()) if len(apis) or
        len(node_basic) else False,
    )
