"""decode/launch.py: launch_info's numpy join gives the table of the pandas steps it replaced
(values and dtypes), on random host tables with the cases the merge treats apart: launches
without op info, records outside every span, several records in one launch, flips,
maintenance records, duplicate or unsorted connection ids, empty tables."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from msprof_cli.export.decode.enclose import enclose
from msprof_cli.export.decode.host import HostTables, type_names
from msprof_cli.export.decode.data import TENSOR_COLS
from msprof_cli.export.decode.launch import host_batches, host_task_info, launch_info
from msprof_cli.raw import layouts as L

TYPES = {(L.LEVEL_RUNTIME, 1): "KERNEL_AICORE", (L.LEVEL_RUNTIME, 2): "FLIP_TASK",
         (L.LEVEL_RUNTIME, 3): "MAINTENANCE", (L.LEVEL_MODEL, L.MODEL_EXECUTE): "ModelExecute"}


def _old_launch_info(host: HostTables) -> pd.DataFrame:
    """launch_info as it was (pandas frames, enclose, merge)."""
    tt = host.task_track.copy()
    tt["rt_name"] = type_names(np.full(len(tt), L.LEVEL_RUNTIME), tt["rt_type"].to_numpy(),
                               host.types)
    is_flip = tt["rt_name"] == "FLIP_TASK"
    flips = tt[is_flip][["ts_ns", "stream_id", "task_id", "device_id"]]
    tt = tt[~is_flip & (tt["rt_name"] != "MAINTENANCE")].reset_index(drop=True)
    apis = host.apis
    nodes = apis[apis["level"] == L.LEVEL_NODE]
    models = apis[(apis["level"] == L.LEVEL_MODEL) & (apis["type"] == L.MODEL_EXECUTE)].copy()
    models["model_id"] = models["item_id"].astype(np.int64)
    tt["launch_cid"] = enclose(tt, nodes, "ts_ns", ["connection_id"])["connection_id"]
    tt["model_id"] = enclose(tt, models, "ts_ns", ["model_id"])["model_id"]
    nb = host.node_basic.copy()
    nb["launch_cid"] = enclose(nb, nodes, "ts_ns", ["connection_id"])["connection_id"]
    nb = nb.dropna(subset=["launch_cid"]).drop_duplicates("launch_cid", keep="last")
    nb = nb.astype({"op_name_hash": "UInt64", "op_type_hash": "UInt64"})
    tt = tt.merge(nb[["launch_cid", "op_name_hash", "ge_type", "op_type_hash", "block_dim",
                      "hf32", "aging"]], on="launch_cid", how="left")
    tt["batch_id"] = host_batches(tt, flips)
    return tt


def _host(rng: np.random.Generator, n_api: int, n_tt: int, n_nb: int, cid: str) -> HostTables:
    threads = np.array([7, 8, 9])
    level = rng.choice([L.LEVEL_NODE, L.LEVEL_NODE, L.LEVEL_MODEL], n_api)
    begin = np.sort(rng.integers(1, 10_000, n_api))
    conn = np.arange(n_api, dtype=np.int64) * 3
    if cid == "shuffled":
        conn = rng.permutation(conn)
    elif cid == "repeated" and n_api > 3:
        conn[1::3] = conn[::3][: len(conn[1::3])]
    apis = pd.DataFrame({
        "connection_id": conn, "level": level.astype(np.int64),
        "type": np.where(level == L.LEVEL_MODEL, L.MODEL_EXECUTE, 0).astype(np.int64),
        "thread_id": rng.choice(threads, n_api).astype(np.int64), "begin_ns": begin,
        "end_ns": begin + rng.integers(1, 400, n_api),
        "item_id": rng.integers(0, 2**63, n_api, dtype=np.uint64) * np.uint64(2) + np.uint64(1),
        "aging": np.zeros(n_api, bool)})
    task_track = pd.DataFrame({
        "thread_id": rng.choice(threads, n_tt).astype(np.int64),
        "ts_ns": rng.integers(0, 10_500, n_tt), "device_id": rng.integers(0, 2, n_tt),
        "stream_id": rng.integers(0, 3, n_tt), "task_id": rng.integers(0, 20, n_tt),
        "batch_id": np.zeros(n_tt, np.int64), "rt_type": rng.choice([1, 1, 1, 2, 3, 4], n_tt),
        "kernel_name": rng.integers(0, 2**64 - 1, n_tt, dtype=np.uint64),
        "num_blocks": rng.integers(0, 9, n_tt)})
    node_basic = pd.DataFrame({
        "thread_id": rng.choice(threads, n_nb).astype(np.int64),
        "ts_ns": rng.integers(0, 10_500, n_nb),
        "op_name_hash": rng.integers(0, 2**64 - 1, n_nb, dtype=np.uint64),
        "ge_type": rng.integers(0, 5, n_nb), "op_type_hash": rng.integers(
            2**63, 2**64 - 1, n_nb, dtype=np.uint64),
        "block_dim": rng.integers(0, 64, n_nb), "hf32": rng.random(n_nb) < 0.5,
        "aging": rng.random(n_nb) < 0.5})
    return HostTables(apis=apis, task_track=task_track, node_basic=node_basic,
                      tensors=pd.DataFrame(), hashes={}, types=TYPES)


@pytest.mark.parametrize("seed", range(30))
def test_launch_info_is_the_pandas_join(seed: int) -> None:
    rng = np.random.default_rng(seed)
    sizes = [(40, 60, 50), (0, 30, 10), (30, 0, 10), (30, 40, 0), (200, 300, 400),
             (5, 50, 3)][seed % 6]
    cid = ["sorted", "shuffled", "repeated"][seed % 3]
    host = _host(rng, *sizes, cid)
    want, got = _old_launch_info(host), launch_info(host)
    assert list(got.columns) == list(want.columns)
    assert list(map(str, got.dtypes)) == list(map(str, want.dtypes))
    pd.testing.assert_frame_equal(got, want, check_exact=True)


def _old_host_task_info(host: HostTables, tensors: pd.DataFrame) -> pd.DataFrame:
    """tensors_by_launch + with_tensors as they were (enclose, dropna, drop_duplicates,
    left merge)."""
    nodes = host.apis[host.apis["level"] == L.LEVEL_NODE]
    tt = launch_info(host)
    tens = tensors.copy()
    if len(tens):
        tens["launch_cid"] = enclose(tens, nodes, "ts_ns", ["connection_id"])["connection_id"]
        tens = tens.dropna(subset=["launch_cid"]).drop_duplicates("launch_cid", keep="last")
        tens = tens[["launch_cid"] + TENSOR_COLS].reset_index(drop=True)
    if len(tens):
        batch = tt.pop("batch_id")
        tt = tt.merge(tens, on="launch_cid", how="left")
        tt["batch_id"] = batch.to_numpy()
        return tt
    batch = tt.pop("batch_id")
    for c in TENSOR_COLS:
        tt[c] = np.nan
    tt["batch_id"] = batch.to_numpy()
    return tt


def _tensors(rng: np.random.Generator, n: int, text: str) -> pd.DataFrame:
    words = np.array(["1,2", "3", "", "N/A", "4;5"], dtype=object)
    cols = {c: words[rng.integers(0, len(words), n)] for c in TENSOR_COLS}
    df = pd.DataFrame({"thread_id": rng.choice([7, 8, 9], n).astype(np.int64),
                       "ts_ns": rng.integers(0, 10_500, n),
                       "op_name_hash": rng.integers(0, 2**64 - 1, n, dtype=np.uint64), **cols})
    return df.astype({c: "object" for c in TENSOR_COLS}) if text == "object" else df


@pytest.mark.parametrize("seed", range(24))
def test_tensor_join_is_the_pandas_join(seed: int) -> None:
    """tensors_by_launch + with_tensors (searchsorted) give the table of the pandas steps:
    records outside every launch, several in one launch (the last wins), no tensors."""
    rng = np.random.default_rng(100 + seed)
    sizes = [(40, 60, 50), (0, 30, 10), (30, 0, 10), (200, 300, 400), (5, 50, 3),
             (60, 80, 0)][seed % 6]
    host = _host(rng, sizes[0], sizes[1], 20, ["sorted", "shuffled", "repeated"][seed % 3])
    tensors = _tensors(rng, sizes[2], ["str", "object"][seed % 2])
    host = HostTables(apis=host.apis, task_track=host.task_track, node_basic=host.node_basic,
                      tensors=tensors, hashes={}, types=TYPES)
    want = _old_host_task_info(host, tensors)
    got = host_task_info(host)
    assert list(got.columns) == list(want.columns)
    for c in got.columns:  # values equal, N/A where the merge has none (str or object)
        a, b = got[c].to_numpy(object), want[c].to_numpy(object)
        assert (pd.isna(a) == pd.isna(b)).all(), c
        assert (a[~pd.isna(a)] == b[~pd.isna(b)]).all(), c
