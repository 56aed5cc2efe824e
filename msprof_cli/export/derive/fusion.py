"""fusion_op summary (docs/formats/export-files.md 3.6) from fusion_op_info + graph_id_map.

One row per fusion_op_info record (GE reports each fused op once per model).  Model ID = the
ModelExecute/ModelLoad API of the record's thread that encloses it (4294967295 outside any);
Model Name = graph_id_map name of that model (``N/A`` without one).
Project choice: **Original Ops are joined with ``;``** (the separator the other list columns
use, e.g. shapes and data types; ``,`` would force CSV quoting; the analysis joins with ``;``
too).  Memory columns = bytes / 1024.0 unrounded, printed as Python floats (the analysis).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from msprof_cli.raw import layouts as L

from ..decode.control_info import NO_MODEL
from ..decode.data import ProfData
from ..decode.enclose import enclose
from ..decode.host import NA, resolve, unique_rows
from ..fmt import float_str, int_str

FUSION_OP = ["Model Name", "Model ID", "Fusion Op", "Original Ops", "Memory Input(KB)",
             "Memory Output(KB)", "Memory Weight(KB)", "Memory Workspace(KB)",
             "Memory Total(KB)"]
ORIGINAL_OPS_SEPARATOR = ";"

Table = tuple[list[str], pd.DataFrame]


def fusion_rows(data: ProfData, model_names: dict[int, str]) -> pd.DataFrame:
    """Decoded fusion records with model id / names resolved (empty frame when none)."""
    ht = data.host.tables
    if ht is None or len(ht.fusion) == 0:
        return pd.DataFrame()
    f = ht.fusion.copy()
    off = data.host.rd.offset_ns if data.host.rd else 0
    f["ts_local"] = f["ts_ns"] + off
    apis = data.host.apis
    models = apis[(apis["level"] == L.LEVEL_MODEL)
                  & apis["type"].isin([L.MODEL_EXECUTE, L.MODEL_LOAD])] if len(apis) else apis
    if len(models):
        spans = pd.DataFrame({"thread_id": models["thread_id"].to_numpy(np.int64),
                              "begin_ns": models["begin_local"].to_numpy(np.int64),
                              "end_ns": models["end_local"].to_numpy(np.int64),
                              "model_id": models["item_id"].to_numpy(np.uint64)
                              .astype(np.int64)})
        got = enclose(f, spans, "ts_local", ["model_id"])["model_id"]
        f["model_id"] = got.fillna(NO_MODEL).to_numpy().astype(np.int64)
    else:
        f["model_id"] = np.int64(NO_MODEL)
    f["model_name"] = np.array([model_names.get(int(m), NA) for m in f["model_id"]],
                               dtype=object) if len(f) else []
    f["fusion_op"] = resolve(f["op_name_hash"].to_numpy(np.uint64), ht.hashes)
    # original op names: one join per distinct id list (not per record)
    ids = np.stack(f["fused"].to_numpy()).astype(np.uint64)
    slot = np.arange(ids.shape[1])[None, :]
    ids = np.where(slot < f["fused_num"].to_numpy()[:, None], ids, np.uint64(0))
    codes, uniq = unique_rows(ids.view(np.int64))
    joined = np.array([ORIGINAL_OPS_SEPARATOR.join(
        resolve(row.view(np.uint64)[row != 0], ht.hashes).tolist()) for row in uniq],
        dtype=object)
    f["original_ops"] = joined[codes]
    return f.drop_duplicates(["model_id", "fusion_op"], keep="first").reset_index(drop=True)


def _kb(b: pd.Series) -> np.ndarray:
    """bytes / 1024.0 unrounded, as the analysis's SQL ``memory_input/1024.0`` (ge_info_report.
    get_ge_model_data) printed by str(float)."""
    return float_str(b.to_numpy(np.int64) / 1024.0)


def fusion_op(rows: pd.DataFrame, model_id: int | None = None) -> Table | None:
    if len(rows) == 0:
        return None
    if model_id is not None:
        rows = rows[rows["model_id"] == model_id]
        if len(rows) == 0:
            return None
    df = pd.DataFrame({
        "Model Name": rows["model_name"].to_numpy(object),
        "Model ID": int_str(rows["model_id"].to_numpy(np.int64)),
        "Fusion Op": rows["fusion_op"].to_numpy(object),
        "Original Ops": rows["original_ops"].to_numpy(object),
        "Memory Input(KB)": _kb(rows["input_bytes"]),
        "Memory Output(KB)": _kb(rows["output_bytes"]),
        "Memory Weight(KB)": _kb(rows["weight_bytes"]),
        "Memory Workspace(KB)": _kb(rows["workspace_bytes"]),
        "Memory Total(KB)": _kb(rows["total_bytes"]),
    })
    return FUSION_OP, df


def workspace_kb(rows: pd.DataFrame) -> pd.Series | None:
    """Fused op name -> workspace KB (advice condition memory_workspace_1)."""
    if len(rows) == 0:
        return None
    s = pd.Series(rows["workspace_bytes"].to_numpy(np.int64) / 1024.0,
                  index=rows["fusion_op"].to_numpy(object))
    return s.groupby(level=0).max()
