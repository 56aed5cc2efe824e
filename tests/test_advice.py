"""Tuning advice rules on small op_summary frames (docs/formats/step-trace-and-advice.md 5)."""
import numpy as np
import pandas as pd

from msprof_cli.export.derive.advice import _merged, _overlap, evaluate
from msprof_cli.export.derive.advice_text import render


def frame(rows):
    cols = ["Op Name", "OP Type", "Task Type", "Task Start Time(us)", "Task Duration(us)",
            "Task Wait Time(us)", "Block Dim", "Input Data Types", "vec_ratio", "mac_ratio",
            "scalar_ratio", "mte1_ratio", "mte2_ratio", "mte3_ratio", "memory_bound"]
    return pd.DataFrame(rows, columns=cols)


ROWS = [
    ["conv", "Conv2D", "AI_CORE", "100.000\t", 100.0, 0, 32, "FLOAT16", 0.1, 0.9, 0.05, 0.1,
     0.2, 0.1, 0.22],
    ["relu", "Relu", "AI_CORE", "201.000\t", 10.0, 1.0, 8, "FLOAT16", 0.5, 0.0, 0.1, 0.0, 0.9,
     0.3, "N/A"],
    ["uniq", "Unique", "AI_CPU", "300.000\t", 50.0, 89.0, 0, "INT64", "N/A", "N/A", "N/A", "N/A",
     "N/A", "N/A", "N/A"],
]


def groups(result):
    return {g["Rule Type"]: g["result"] for sec in result["data"].values() for g in sec}


def test_structure_and_rules():
    res = evaluate(frame(ROWS), core_num=32, aic_metrics="PipeUtilization")
    assert res["status"] == 0
    assert list(res["data"]) == ["Op Summary", "Op Parallel", "Model Summary"]
    g = groups(res)
    proc = {r["Rule Suggestion"]: r["Tuning Data"] for r in g["Operator Processing"]}
    assert proc["Check and reduce AI CPU operators"] == ["uniq"]
    assert proc["Try to cast the data type to INT32 for AI Core operators"] == ["uniq"]
    comp = {r["Rule Suggestion"]: r["Tuning Data"] for r in g["Computation"]}
    assert comp["Low vector computing usage"] == ["conv", "relu"]
    assert comp["Low cube computing usage"] == ["relu"]
    sched = g["Operator Schedule"][0]
    assert sched["Tuning Data"] == ["uniq"]  # 89 / (160 + 90) > 3 %
    par = g["Operator Parallelism"][0]["Tuning Data"]
    assert par == {"AI Core Execution Time(us)": 110.0, "AI CPU Execution Time(us)": 50.0,
                   "Concurrent AI Core and AI CPU Execution Time(us)": 0.0}
    model = g["Model Bottleneck Analysis"][0]
    assert model["Tuning Data"] == {"Cube Utilization": 100.0, "Vector Utilization": 0.0,
                                    "Scalar Utilization": 0.0, "MTE Utilization": 10.0}
    assert model["Rule Suggestion"].startswith("The Model is Cube Affinity")


def test_block_dim_rule_needs_cube_work():
    rows = [["mm", "MatMul", "AI_CORE", "1.000\t", 30.0, 0, 4, "FLOAT16", 0.2, 0.5, 0.1, 0.1,
             0.1, 0.1, 0.1]]
    g = groups(evaluate(frame(rows), core_num=32))
    assert g["Operator Processing"][0]["Tuning Data"] == ["mm"]
    assert g["Model Bottleneck Analysis"] == []  # only with PipeUtilization


def test_render_format():
    text = render(evaluate(frame(ROWS), core_num=32, aic_metrics="PipeUtilization"))
    lines = text.split("\n")
    assert lines[0] == "" and lines[1] == "Performance Summary Report:"
    assert lines[2] == "1. Computation:"
    assert "\t2)Cube:" in lines and "\t\t1)Low cube computing usage: [relu]" in lines
    assert "2. Memory:" in lines and lines[lines.index("2. Memory:") + 1] == "\tN/A"
    assert any(line.startswith("\t1)View the Timeline View") and
               line.endswith("Percentage of AI CPU Execution Time is 31.25%, Exceed the "
                             "experience threshold 5%.") for line in lines)
    assert "\t\ta. Cube utilization rate in the model is 0.909. " in lines
    assert text.endswith("\n")


def test_interval_helpers():
    iv = _merged(np.array([[5, 7], [1, 3], [2, 4], [7, 8]], dtype=float))
    assert iv.tolist() == [[1, 4], [5, 8]]
    assert _overlap(iv, np.array([[3.5, 6.0]])) == 1.5


def test_console_cuts_long_op_lists_but_json_keeps_them():
    rows = [[f"op{i}", "Relu", "AI_CORE", f"{i * 10}.000\t", 5.0, 0, 32, "FLOAT16", 0.1, 0.0,
             0.1, 0.0, 0.1, 0.1, 0.1] for i in range(15)]
    rule = evaluate(frame(rows), core_num=32)
    names = groups(rule)["Computation"][0]["Tuning Data"]
    assert len(names) == 15
    text = render(rule, max_names=10)
    assert "op9,... +5 more]" in text and "op10" not in text
    assert "op14]" in render(rule)


def test_rule_state_in_chunks_and_merged_equals_one_table():
    """RuleState gives the same rule JSON and evidence for any chunking of the rows (the
    legacy export feeds op_summary chunks; windowed exports merge per-window states), and
    the busy times are exact ns sums (not float µs of epoch time stamps)."""
    from msprof_cli.export.derive.advice import RuleState
    from msprof_cli.export.derive.advice_table import OpTable

    rng = np.random.default_rng(7)
    n = 400
    base = 1_700_000_000_000_000_000  # ns: float µs of these are 0.25 µs coarse
    start = np.sort(base + rng.integers(0, 4_000_000, n))
    start[200:] += 100_000  # a quiet gap: rows [0, 200) end before row 200 starts
    dur = rng.integers(1, 40_000, n)  # overlapping AI Core / AI CPU tasks
    kind = rng.choice(["AI_CORE", "AI_CPU"], n)
    rows = [[f"op{i % 37}", "TransData" if i % 50 == 0 else "Conv2D", k,
             f"{s // 1000}.{s % 1000:03d}\t", d / 1000, float(rng.integers(0, 30)),
             int(rng.integers(1, 40)), "INT64" if i % 3 else "FLOAT", rng.random(), rng.random(),
             rng.random(), rng.random(), rng.random(), rng.random(), rng.random() * 2]
            for i, (s, d, k) in enumerate(zip(start.tolist(), dur.tolist(), kind))]
    df = frame(rows)
    one = RuleState(32)
    one.add(OpTable.from_summary(df, 32))
    rule = one.rule_json("PipeUtilization")
    for size in (1, 7, 130):
        st = RuleState(32)
        for lo in range(0, n, size):
            st.add(OpTable.from_summary(df.iloc[lo:lo + size], 32, start[lo:lo + size]))
        assert st.rule_json("PipeUtilization") == rule
        assert st.evidence(rule) == one.evidence(rule)
    # exact busy time: the union of the intervals, by brute force over ns
    par = groups(rule)["Operator Parallelism"]
    got = one.parallelism() if not par else par[0]["Tuning Data"]

    def busy(k):
        iv = sorted((s, s + d) for s, d, kk in zip(start.tolist(), dur.tolist(), kind) if kk == k)
        total, cur = 0, None
        for a, b in iv:
            if cur and a <= cur[1]:
                cur[1] = max(cur[1], b)
            else:
                total += cur[1] - cur[0] if cur else 0
                cur = [a, b]
        return total + (cur[1] - cur[0] if cur else 0)
    both = round(got["Concurrent AI Core and AI CPU Execution Time(us)"] * 1000)
    assert round(got["AI Core Execution Time(us)"] * 1000) + both == busy("AI_CORE")
    assert round(got["AI CPU Execution Time(us)"] * 1000) + both == busy("AI_CPU")
    assert both > 0
    # two states of consecutive, non-overlapping row ranges merge to the whole
    assert start[200] > (start[:200] + dur[:200]).max()
    a, b = RuleState(32), RuleState(32)
    a.add(OpTable.from_summary(df.iloc[:200], 32))
    b.add(OpTable.from_summary(df.iloc[200:], 32))
    a.merge(b)
    assert a.rule_json("PipeUtilization") == rule
    assert a.evidence(rule) == one.evidence(rule)


def test_stamp_ns_parses_exactly():
    from msprof_cli.export.derive.advice_table import NA_NS, _stamp_ns

    got = _stamp_ns(np.array(["1700000000000001.237\t", "-1.500", "12", "N/A", 2.5],
                             dtype=object))
    assert got.tolist() == [1_700_000_000_000_001_237, -1500, 12000, NA_NS, 2500]


def test_brief_names_one_bottleneck_per_op():
    """conv and relu are flagged by both 'low vector' and 'low cube' (relu) usage: the
    console summary lists each op once with its busiest pipe, heaviest first."""
    from msprof_cli.export.derive.advice import RuleState
    from msprof_cli.export.derive.advice_table import OpTable
    from msprof_cli.export.derive.advice_text import brief

    state = RuleState(32)
    state.add(OpTable.from_summary(frame(ROWS), 32))
    rule = state.rule_json("PipeUtilization")
    lines = brief(rule, state)
    comp = [ln for ln in lines if ln.startswith("Computation:")]
    assert len(comp) == 1
    assert "2 AI Core ops" in comp[0]
    assert "cube 1 ops (91 %)" in comp[0] and "MTE2 1 ops (9 %)" in comp[0]
    assert comp[0].endswith("Heaviest: conv (cube 0.90, 100 us); relu (MTE2 0.90, 10 us)")
    # every other finding keeps its own line, with the ops' numbers
    assert any(ln.startswith("Operator Processing: Check and reduce AI CPU operators (1 ops; "
                             "heaviest: uniq: 1 task, 50 us in total)") for ln in lines)
    assert sum(ln.startswith("Computation") for ln in lines) == 1
    # the Model Bottleneck data are AI Core µs per dominant pipe (the real tool's
    # "Utilization" keys), said as time and share, not as utilization numbers
    model = [ln for ln in lines if ln.startswith("Model Bottleneck Analysis")]
    assert model and model[0].endswith("(AI Core time by dominant pipe: cube 100 us (91 %), "
                                       "vector 0 us (0 %), scalar 0 us (0 %), MTE 10 us (9 %))")


def test_waits_between_separate_calls_are_host_time_not_task_waits():
    """The wait rule (waits > 10 us over 3 % of task + wait time) reads device scheduling
    waits: with the model executions known, a gap outside one (Python between steps, an
    eager call, warm-up) does not count (docs/export.md, advice)."""
    from msprof_cli.export.derive.advice import RuleState, model_spans
    from msprof_cli.export.derive.advice_table import OpTable

    # two steps of two 10 us ops: a 5 ms host gap between the steps, a 20 us wait inside one
    rows = [["a", "Add", "AI_CORE", "100.000\t", 10.0, 0, 1, "FLOAT", *[0.1] * 6, 0.1],
            ["b", "Mul", "AI_CORE", "130.000\t", 10.0, 20.0, 1, "FLOAT", *[0.1] * 6, 0.1],
            ["a", "Add", "AI_CORE", "5140.000\t", 10.0, 5000.0, 1, "FLOAT", *[0.1] * 6, 0.1],
            ["b", "Mul", "AI_CORE", "5151.000\t", 10.0, 1.0, 1, "FLOAT", *[0.1] * 6, 0.1]]
    start = np.array([100_000, 130_000, 5_140_000, 5_151_000], np.int64)

    def waited(spans):
        st = RuleState(32)
        st.model_spans = spans
        st.add(OpTable.from_summary(frame(rows), 32, start))
        return [r["Rule Suggestion"] for g in st.rule_json()["data"]["Op Summary"]
                for r in g["result"]]

    apis = pd.DataFrame({"level": [10000, 10000], "type": [1, 1],
                         "begin_local": [90_000, 5_130_000], "end_local": [145_000, 5_165_000]})
    import msprof_cli.raw.layouts as L
    apis["level"], apis["type"] = L.LEVEL_MODEL, L.MODEL_EXECUTE
    limit = "Task waiting time has reached the upper limit"
    assert limit in waited(None)  # the real analysis's rule: the 5 ms gap counts
    # inside the steps only 20 us of wait against 40 us of tasks: still over 3 %
    assert limit in waited(model_spans(apis))
    rows[1][5] = 0.5  # no real wait inside a step: the host gap alone is not a finding
    assert limit in waited(None) and limit not in waited(model_spans(apis))


def test_the_int32_advice_leaves_out_a_stateless_rngs_key():
    """StatelessRandomUniformV2 takes its key and counter as INT64: no cast the user can make
    (it fired on 7 of 8 programs with a Dropout); a real INT64 AI CPU op still counts."""
    rows = [["drop/StatelessRandomUniformV2", "StatelessRandomUniformV2", "AI_CPU", "100.000\t",
             60.0, 0, 0, "INT32;UINT64;UINT64;INT64", *["N/A"] * 7],
            ["uniq", "Unique", "AI_CPU", "300.000\t", 50.0, 0, 0, "INT64", *["N/A"] * 7]]
    g = groups(evaluate(frame(rows), core_num=32, aic_metrics="PipeUtilization"))
    proc = {r["Rule Suggestion"]: r["Tuning Data"] for r in g["Operator Processing"]}
    assert proc["Try to cast the data type to INT32 for AI Core operators"] == ["uniq"]


def testdecomposed_batchnorm_is_said_with_its_tasks_and_time() -> None:
    """Keras 3's BatchNormalization (moments + element-wise ops, and their gradients): two
    layers of 10 ops each over 3 steps, against the fused kernel's 4 tasks a layer."""
    import pandas as pd

    from msprof_cli.export.derive.advice_text import decomposed_batchnorm

    names, n, dur = [], [], []
    for layer in ("bn_1", "bn_2"):
        for k in range(5):
            names.append(f"model/{layer}/moments/op_{k}")
            names.append(f"gradient_tape/model/{layer}/batchnorm/op_{k}")
    n = [3] * len(names)
    dur = [3_000.0] * len(names)  # ns in total: 1 us a step each
    names.append("model/conv/Conv2D")
    n.append(3)
    dur.append(60_000.0)
    st = pd.DataFrame({"_n": n, "_dur": dur}, index=names)
    line = decomposed_batchnorm(st)
    assert line.startswith("BatchNorm: 2 BatchNormalization layers run decomposed")
    assert "10 tasks a layer a step, 20 us a step (50 % of the task time)" in line
    assert "4 tasks a layer" in line
    fused = pd.DataFrame({"_n": [3, 3], "_dur": [1.0, 1.0]},
                         index=["model/bn/FusedBatchNormV3", "model/conv/Conv2D"])
    assert decomposed_batchnorm(fused) == ""


def test_decomposed_layer_norms_are_said_apart_from_batchnorm() -> None:
    """Layer norms have moments too: Keras' `layer_normalization` and BERT's `LayerNorm`
    scopes (forward and `gradient_tape/` ops) make a LayerNorm line, not a BatchNorm one;
    2 layers of 13 ops over 2 steps against GE's 3 fused tasks a layer."""
    import pandas as pd

    from msprof_cli.export.derive.advice_text import decomposed_batchnorm, decomposed_layernorm

    names = []
    for layer in ("model/layer_normalization", "bert/encoder/attention/output/LayerNorm"):
        names += [f"{layer}/moments/mean", f"{layer}/moments/variance", f"{layer}/Rsqrt"]
        names += [f"{layer}/op_{k}" for k in range(5)]
        names += [f"gradient_tape/{layer}/moments/op_{k}" for k in range(5)]
    names += ["model/dense/MatMul", "GradientDescent/update_LayerNorm/gamma/ApplyAdam"]
    st = pd.DataFrame({"_n": [2] * len(names),
                       "_dur": [2_000.0] * (len(names) - 2) + [50_000.0, 2_000.0]}, index=names)
    line = decomposed_layernorm(st)
    assert line.startswith("LayerNorm: 2 layer norms run as their moments and element-wise ops: "
                           "13 tasks a layer a step, 26 us a step (50 % of the task time)"), line
    assert "3 tasks a layer" in line and "tf.gradients" in line
    assert decomposed_batchnorm(st) == ""  # not BatchNorm layers
    few = pd.DataFrame({"_n": [2, 2], "_dur": [1.0, 1.0]},
                       index=["m/layer_normalization/LayerNorm", "m/dense/MatMul"])
    assert decomposed_layernorm(few) == ""


def test_ge_conversion_tasks_are_said_with_their_count_and_time() -> None:
    """GE's trans_Cast / trans_TransData nodes (a Cast also heading a UB-fused chain's name)
    over 2 steps; below 3 % of the task time nothing is said."""
    import pandas as pd

    from msprof_cli.export.derive.advice_text import boundary_tasks

    st = pd.DataFrame({"_n": [2, 2, 2, 2], "_dur": [4_000.0, 2_000.0, 2_000.0, 12_000.0]},
                      index=["trans_Cast_0", "trans_Cast_3model/relu", "trans_TransData_1",
                             "model/conv/Conv2D"])
    line = boundary_tasks(st)
    assert line.startswith("Conversions: GE inserts 2 Cast tasks a step, 3 us and 1 "
                           "TransData tasks a step, 1 us (40 % of the task time)")
    assert "allow_mix_precision" in line
    small = pd.DataFrame({"_n": [2, 2], "_dur": [10.0, 12_000.0]},
                         index=["trans_Cast_0", "model/conv/Conv2D"])
    assert boundary_tasks(small) == ""
    assert boundary_tasks(pd.DataFrame({"_n": [1], "_dur": [1.0]}, index=["Cast"])) == ""
