"""The tuning advice as text: the console summary (one line per finding, the Computation rules as
one statement naming each op's bottleneck pipe) and the real tool's Performance Summary Report
(docs/formats/step-trace-and-advice.md 5.4), both from a prof_rule JSON and its RuleState.
"""
from __future__ import annotations

from collections.abc import Callable

import re

import numpy as np
import pandas as pd

from .advice import EVIDENCE_SCALE, PIPE_FIELDS, RuleState, num_text

_PIPE_NAMES = ("cube", "vector", "scalar", "MTE1", "MTE2", "MTE3")
COMPUTATION = "Computation"


def _op_pipes(st: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """Per op name (rows of `st`): mean ratio of every pipe, its bottleneck pipe (the busiest)
    and total task time (us)."""
    at = {n: i for i, n in enumerate(st.index.tolist())}
    rows = np.array([at[n] for n in names if n in at], dtype=np.int64)
    cols: dict[str, np.ndarray] = {}  # the frame's columns, built once
    for f in PIPE_FIELDS:
        if f in st and "#" + f in st:
            cnt = st["#" + f].to_numpy(np.float64)[rows]
            with np.errstate(invalid="ignore", divide="ignore"):
                cols[f] = np.where(cnt > 0, st[f].to_numpy(np.float64)[rows] / cnt
                                   / EVIDENCE_SCALE.get(f, 10**6), np.nan)
    cols["time_us"] = st["_dur"].to_numpy(np.float64)[rows] / 1000
    pipes = [f for f in PIPE_FIELDS if f in cols]
    if pipes:
        vals = np.column_stack([cols[f] for f in pipes])
        ok = ~np.isnan(vals).all(axis=1)
        best = np.where(ok, np.nanargmax(np.where(np.isnan(vals), -1, vals), axis=1), -1)
        cols["pipe"] = np.array([_PIPE_NAMES[PIPE_FIELDS.index(pipes[b])] if b >= 0 else ""
                                 for b in best.tolist()], dtype=object)
        cols["ratio"] = np.where(ok, vals.max(axis=1, initial=0, where=~np.isnan(vals)),
                                 np.nan)
    return pd.DataFrame(cols, index=st.index[rows])


def pipe_time_text(data: dict) -> str:
    """The Model Bottleneck tuning data for the console: its four "... Utilization" values
    are AI Core time in µs grouped by each op's dominant pipe (the real tool's names; its
    report prints the shares), so say what they are: time and share per pipe."""
    total = sum(float(v) for v in data.values())
    parts = []
    for key, v in data.items():
        pipe = key.replace(" Utilization", "").lower().replace("mte", "MTE")
        share = f" ({100 * float(v) / total:.0f} %)" if total else ""
        parts.append(f"{pipe} {num_text(float(v))} us{share}")
    return "AI Core time by dominant pipe: " + ", ".join(parts)


def brief(rule_json: dict, state: RuleState, max_ops: int = 3) -> list[str]:
    """The console summary of the advice: one line per rule group with findings, heaviest
    ops first.  The Computation rules (high scalar / low vector / low cube usage) flag mostly
    the same ops from three sides, so they become one statement naming each op's bottleneck
    pipe (its busiest pipe); prof_rule JSON keeps every finding as the real tool writes it."""
    st = state.stats
    evidence = state.evidence(rule_json)
    lines: list[str] = []
    for groups in rule_json["data"].values():
        for group in groups:
            results = group["result"]
            if not results:
                continue
            rtype = group["Rule Type"]
            if rtype == COMPUTATION and st is not None:
                names: list[str] = []
                seen: set[str] = set()
                for res in results:
                    if isinstance(res["Tuning Data"], list):
                        for n in res["Tuning Data"]:
                            if n not in seen:
                                seen.add(n)
                                names.append(n)
                ops = _op_pipes(st, names)
                if "pipe" in ops and len(ops):
                    by_pipe = ops.groupby("pipe")["time_us"].agg(["size", "sum"]) \
                        .sort_values("sum", ascending=False)
                    total = float(by_pipe["sum"].sum()) or 1.0
                    parts = [f"{p or 'unknown'} {int(r['size'])} ops "
                             f"({100 * r['sum'] / total:.0f} %)" for p, r in by_pipe.iterrows()]
                    top = ops.sort_values("time_us", ascending=False).head(max_ops)
                    heavy = "; ".join(f"{n} ({r['pipe']} {r['ratio']:.2f}, "
                                      f"{num_text(r['time_us'])} us)" for n, r in top.iterrows())
                    lines.append(f"{rtype}: {len(ops)} AI Core ops below the pipe targets, by "
                                 f"bottleneck pipe (share of their time): {', '.join(parts)}. "
                                 f"Heaviest: {heavy}")
                    continue
            for res in results:
                data = res["Tuning Data"]
                text = f"{rtype}: {res['Rule Suggestion']}"
                if isinstance(data, list):
                    items = sorted(evidence.get(res["Rule Suggestion"], []),
                                   key=lambda it: -it[0])[:max_ops]
                    text += f" ({len(data)} ops"
                    text += "; heaviest: " + "; ".join(t for _, t in items) + ")" if items \
                        else ")"
                    if "AI CPU" in res["Rule Suggestion"]:
                        text += _dropout_text(st, data)
                elif isinstance(data, dict) and "Cube Utilization" in data:
                    text += " (" + pipe_time_text(data) + ")"
                elif isinstance(data, dict):
                    text += " (" + ", ".join(f"{k} {num_text(v)}" for k, v in data.items()) + ")"
                lines.append(text)
    for extra in (decomposed_batchnorm(st), decomposed_layernorm(st), boundary_tasks(st)):
        if extra:
            lines.append(extra)
    return lines


# GE's inserted conversion nodes (docs/device-model.md 3.4): `trans_Cast_<n>` /
# `trans_TransData_<n>`, a Cast also as the head of a UB-fused chain's name
_TRANS = re.compile(r"^trans_(Cast|TransData)_\d+")
BOUNDARY_SHARE = 0.03  # said when the conversions take at least this share of task time


def boundary_tasks(st: pd.DataFrame | None) -> str:
    """An advice line when GE's TransData / Cast nodes take a visible share of the task time:
    how many a step and their time, and what removes most of the Casts."""
    if st is None or "_n" not in st or "_dur" not in st or not len(st):
        return ""
    kind = pd.Series(st.index.astype(str), index=st.index).str.extract(_TRANS, expand=False)
    mine = kind.notna().to_numpy()
    if not mine.any():
        return ""
    dur = st["_dur"].to_numpy(np.float64)
    n = st["_n"].to_numpy(np.int64)
    total = float(dur.sum()) or 1.0
    if dur[mine].sum() / total < BOUNDARY_SHARE:
        return ""
    steps = int(pd.Series(n[mine]).mode().iloc[0]) or 1
    parts = []
    for k in ("Cast", "TransData"):
        at = (kind == k).to_numpy()
        if at.any():
            parts.append(f"{int(n[at].sum()) // steps} {k} tasks a step, "
                         f"{num_text(float(dur[at].sum()) / 1000 / steps)} us")
    return (f"Conversions: GE inserts {' and '.join(parts)} ({100 * dur[mine].sum() / total:.0f} "
            "% of the task time) where a tensor changes precision or layout. The Casts "
            "surround the cube ops when only they run in fp16 (precision_mode "
            "allow_fp32_to_fp16, the default); allow_mix_precision keeps the ops between them "
            "in fp16 (`msprof collect --precision-mode allow_mix_precision`, or the script's "
            "NPU session config). TransData: the fed batch, a reshape or a matmul-conv "
            "boundary (docs/device-model.md 3.4)")


# Keras 3 writes BatchNormalization as moments and element-wise arithmetic (`.../moments/...`,
# `.../batchnorm/...` ops, their gradients under `gradient_tape/`); TensorFlow's fused kernel
# (Keras 2 / tf_keras `fused=True`: FusedBatchNormV3 and its gradient) is what GE maps to
# BNTrainingReduce / BNTrainingUpdate and their gradients: 4 tasks a layer a training step
_BN_PART = re.compile(r"([^/]+)/(?:moments|batchnorm)/")
FUSED_BN_TASKS = 4
# A layer norm's ops sit under its layer's scope (Keras `layer_normalization`, BERT's
# `LayerNorm`, `..._layer_norm`); its moments look like a BatchNorm's, so it is told apart
# by the scope.  Fused, GE runs LayerNorm + LayerNormGrad, the gradient split into
# LayerNormXBackpropV2 + LayerNormBetaGammaBackpropV2: 3 tasks a layer (docs/device-model.md 3.5)
_LN_SCOPE = re.compile(r"^(.*?(?:^|/)(?!update_)[^/]*layer_?norm[^/]*)/", re.IGNORECASE)
FUSED_LN_TASKS = 3


def _layer_of(st: pd.DataFrame, pattern: re.Pattern) -> pd.Series:
    """The layer each op row belongs to, forward and gradient ops together (NaN: none)."""
    # gradients sit under `gradient_tape/` (TF 2) or `gradients/` (TF 1's tf.gradients); an
    # optimizer's `update_<variable>` scopes are not layers
    names = pd.Series(st.index.astype(str), index=st.index).str.replace(
        r"(^|/)(?:gradient_tape|gradients)/", r"\1", n=1, regex=True)
    return names.str.extract(pattern, expand=False)


def _decomposed(st: pd.DataFrame | None, layer: Callable[[pd.DataFrame], pd.Series],
                fused_tasks: int) -> tuple[int, float, float, float] | None:
    """(layers, tasks a layer a step, us a step, share of the task time) of the op rows
    `layer` assigns to a layer, when a layer runs more tasks than `fused_tasks`."""
    if st is None or "_n" not in st or "_dur" not in st or not len(st):
        return None
    of = layer(st)
    mine = of.notna().to_numpy()
    if not mine.any():
        return None
    n = st["_n"].to_numpy(np.int64)[mine]
    steps = int(pd.Series(n).mode().iloc[0]) or 1  # every op of a layer runs once a step
    layers = int(of[mine].nunique())
    spent = float(st["_dur"].to_numpy(np.float64)[mine].sum()) / 1000
    total = float(st["_dur"].to_numpy(np.float64).sum()) / 1000 or 1.0
    per_layer = int(n.sum()) / steps / layers
    if per_layer <= fused_tasks:
        return None
    return layers, per_layer, spent / steps, spent / total


def decomposed_batchnorm(st: pd.DataFrame | None) -> str:
    """An advice line when the model's BatchNormalization layers run decomposed: how many
    layers, tasks a layer a step and time, against the fused kernels' tasks
    (docs/device-model.md 9)."""
    got = _decomposed(st, lambda t: _layer_of(t, _BN_PART).where(_layer_of(t, _LN_SCOPE).isna()),
                      FUSED_BN_TASKS)
    if got is None:
        return ""
    layers, per_layer, spent, share = got
    return (f"BatchNorm: {layers} BatchNormalization layers run decomposed into moments and "
            f"element-wise ops (Keras 3): {per_layer:.0f} tasks a layer a step, "
            f"{num_text(spent)} us a step ({100 * share:.0f} % of the task "
            f"time). TensorFlow's fused kernel (tf_keras / Keras 2 `fused=True`) is "
            f"{FUSED_BN_TASKS} tasks a layer (GE's BNTrainingReduce / BNTrainingUpdate and "
            "their gradients), each reading the feature map once or twice: "
            "run the model with tf_keras (TF_USE_LEGACY_KERAS=1) to compare")


def decomposed_layernorm(st: pd.DataFrame | None) -> str:
    """An advice line when the model's layer norms run as their ops: how many layers, tasks
    a layer a step and time, against GE's fused kernels, and when GE fuses them
    (docs/device-model.md 3.5)."""
    got = _decomposed(st, lambda t: _layer_of(t, _LN_SCOPE), FUSED_LN_TASKS)
    if got is None:
        return ""
    layers, per_layer, spent, share = got
    return (f"LayerNorm: {layers} layer norms run as their moments and element-wise ops: "
            f"{per_layer:.0f} tasks a layer a step, {num_text(spent)} us a step "
            f"({100 * share:.0f} % of the task time). GE's fused kernels are "
            f"{FUSED_LN_TASKS} tasks a layer (LayerNorm, LayerNormXBackpropV2, "
            "LayerNormBetaGammaBackpropV2), but its LayerNormTrainingFusionPass matches only "
            "tf.nn.moments + tf.nn.batch_normalization (tf_keras' LayerNormalization with a "
            "small epsilon, tf.contrib's layer_norm) whose gradient sums its terms in the order "
            "TF 1's tf.gradients does; Keras 3's LayerNormalization never matches: run the "
            "model with tf_keras (TF_USE_LEGACY_KERAS=1) to compare (docs/device-model.md 3.5)")


def _dropout_text(st: pd.DataFrame | None, names: list) -> str:
    """What the Ascend migration of dropout would change, when AI CPU ops are a dropout's
    random draws (docs/device-model.md 3.3)."""
    from msprof_cli.dropout_scope import in_dropout

    mine = [n for n in names if isinstance(n, str) and in_dropout(n)]
    if not mine:
        return ""
    spent = ""
    if st is not None and "_dur" in st:
        at = st.index.isin(mine)
        spent = f", {num_text(float(st['_dur'].to_numpy(np.float64)[at].sum()) / 1000)} us"
    return (f". Dropout: {len(mine)} of them are its random draws and seeds{spent} of AI CPU "
            "time; the Ascend migration's npu_ops.dropout makes the masks on the AI Core "
            "(DropOutGenMask / DropOutDoMask): `msprof collect --dropout npu` emulates it")


def _evidence_lines(items: list[tuple[float, str]], indent: str, max_ops: int,
                    more_hint: str) -> list[str]:
    top = sorted(items, key=lambda x: -x[0])
    lines = [f"{indent}- {text}" for _, text in top[:max_ops]]
    if len(top) > max_ops:
        lines.append(f"{indent}- ... {len(top) - max_ops} more ops{more_hint}")
    return lines


def _data_text(data, max_names: int | None = None) -> str:
    if isinstance(data, list):
        if max_names is not None and len(data) > max_names:
            # console only: a long op list is cut; the prof_rule JSON keeps every name
            shown = ",".join(str(x) for x in data[:max_names])
            return f"[{shown},... +{len(data) - max_names} more]"
        return "[" + ",".join(str(x) for x in data) + "]"
    if isinstance(data, dict) and "AI CPU Execution Time(us)" in data:
        total = sum(data.values())
        share = data["AI CPU Execution Time(us)"] / total if total else 0.0
        return (f"Percentage of AI CPU Execution Time is {share:.2%}, Exceed the experience "
                "threshold 5%.")
    if isinstance(data, dict) and "Cube Utilization" in data:
        total = sum(data.values())
        if total == 0:
            return "Total Duration Time equals to 0. Please check Aicore operators."
        names = ["Cube", "Vector", "Scalar", "MTE"]
        keys = ["Cube Utilization", "Vector Utilization", "Scalar Utilization",
                "MTE Utilization"]
        lines = [f"\n\t\t{letter}. {n} utilization rate in the model is "
                 f"{round(data[k] / total, 3)}. "
                 for letter, n, k in zip("abcd", names, keys)]
        return "".join(lines)
    return str(data)


def render(rule_json: dict, evidence: dict[str, list[tuple[float, str]]] | None = None,
           max_ops: int = 5, more_hint: str = "", max_names: int | None = None) -> str:
    """The console report (section 5.4).  With `evidence` (see evidence()), every op-list
    finding is followed by indented lines naming its heaviest ops (at most `max_ops`) with
    their numbers.  `max_names` cuts long op lists (the real tool prints them whole, which
    buries the report on real models); None keeps the section 5.4 text exactly."""
    lines = ["", "Performance Summary Report:"]

    def details(res: dict, indent: str) -> None:
        if evidence and res["Rule Suggestion"] in evidence and \
                isinstance(res["Tuning Data"], list):
            lines.extend(_evidence_lines(evidence[res["Rule Suggestion"]], indent, max_ops,
                                         more_hint))
    number = 0
    for groups in rule_json["data"].values():
        for group in groups:
            number += 1
            lines.append(f"{number}. {group['Rule Type']}:")
            results = group["result"]
            if not results:
                lines.append("\tN/A")
                continue
            j = 0
            by_subtype: dict[str, list[dict]] = {}
            order: list[str] = []
            for res in results:
                key = res["Rule Subtype"]
                if key not in by_subtype:
                    order.append(key)
                    by_subtype[key] = []
                by_subtype[key].append(res)
            for key in order:
                if key == "":
                    for res in by_subtype[key]:
                        j += 1
                        lines.append(f"\t{j}){res['Rule Suggestion']}: "
                                     f"{_data_text(res['Tuning Data'], max_names)}")
                        details(res, "\t\t")
                else:
                    j += 1
                    lines.append(f"\t{j}){key}:")
                    for k, res in enumerate(by_subtype[key], 1):
                        lines.append(f"\t\t{k}){res['Rule Suggestion']}: "
                                     f"{_data_text(res['Tuning Data'], max_names)}")
                        details(res, "\t\t\t")
    lines.append("")
    return "\n".join(lines)
