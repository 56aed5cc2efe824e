"""End-to-end: the emulated device memory of real TensorFlow programs (docs/device-model.md
12, docs/summary.md "Device memory"): the variable memory is the model's parameters and
optimizer slots to the byte, the feature map follows the batch and the precision mode, and a
model that does not fit GE's pools is said so by collect, summary and check."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from msprof_cli.raw import memory_plan as RM

pytestmark = pytest.mark.e2e
SCRIPTS = Path(__file__).resolve().parent / "scripts"
MSPROF = [sys.executable, "-m", "msprof_cli"]
# Keras 3's optimizers keep two scalars besides their slots: `iteration` (int64) and
# `learning_rate` (float32)
KERAS3_COUNTERS = 8 + 4


def msprof(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
           ok: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([*MSPROF, *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})}, cwd=cwd)
    if ok:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def collect(tmp: Path, script: str, *flags: str, **env: str
            ) -> tuple[Path, subprocess.CompletedProcess]:
    proc = msprof("collect", "--output", str(tmp / "out"), *flags, "--", sys.executable,
                  str(SCRIPTS / script), env=env, cwd=tmp)
    [prof] = sorted((tmp / "out").glob("PROF_*"))
    return prof, proc


def params(proc: subprocess.CompletedProcess) -> int:
    [line] = [ln for ln in proc.stdout.splitlines() if ln.startswith("PARAMS ")]
    return int(line.split()[1])


def train_model(facts: RM.MemoryFacts) -> RM.ModelMemory:
    """The model with the biggest feature map: the training step."""
    return max(facts.devices[0].models.values(), key=lambda m: m.feature_map)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, tuple[Path, subprocess.CompletedProcess]]:
    out = {}
    for key, flags, env in (
            ("adam16", (), {"OPT": "adam", "BS": "16"}),
            ("sgd16", (), {"OPT": "sgd", "BS": "16"}),
            ("adam32", (), {"OPT": "adam", "BS": "32"}),
            ("adam16_mix", ("--precision-mode", "allow_mix_precision"),
             {"OPT": "adam", "BS": "16"})):
        out[key] = collect(tmp_path_factory.mktemp(key), "mem_keras.py", *flags, **env)
    return out


def test_variable_memory_is_the_parameters_and_the_slots(runs) -> None:
    for key, slots in (("adam16", 2), ("sgd16", 1)):
        prof, proc = runs[key]
        dm = RM.read(prof).devices[0]
        assert dm.weight == 4 * params(proc)  # fp32 weights, to the byte
        assert dm.optimizer == slots * dm.weight + KERAS3_COUNTERS
        assert dm.pool >= dm.weight + dm.optimizer + dm.state  # GE's alignment


def test_the_batch_grows_the_activations_not_the_weights(runs) -> None:
    small, big = RM.read(runs["adam16"][0]), RM.read(runs["adam32"][0])
    assert small.devices[0].pool == big.devices[0].pool
    ratio = train_model(big).feature_map / train_model(small).feature_map
    assert 1.6 <= ratio <= 2.2, ratio


def test_mixed_precision_shrinks_the_activations(runs) -> None:
    default, mixed = RM.read(runs["adam16"][0]), RM.read(runs["adam16_mix"][0])
    assert train_model(mixed).feature_map < 0.9 * train_model(default).feature_map
    assert mixed.devices[0].pool == default.devices[0].pool  # variables stay fp32


def test_collect_and_summary_say_that_it_fits(runs) -> None:
    prof, proc = runs["adam16"]
    assert "Device memory: predicted peak" in proc.stderr and ": fits" in proc.stderr
    assert "Device memory" not in proc.stdout  # the script's stdout stays the script's
    text = msprof("summary", str(prof)).stdout
    assert "Predicted peak" in text and ": fits," in text
    assert "optimizer state" in text and "Live at the peak" in text
    doc = json.loads(msprof("summary", str(prof), "--format", "json").stdout)
    mem = doc["devices"][0]["memory"]
    assert mem["fits"] and mem["peak"] == sum(mem["parts"].values())
    # the curve over the step peaks at the live peak the model reports
    [train] = [m for m in mem["models"] if m["feature_map"] == max(
        x["feature_map"] for x in mem["models"])]
    c = train["curve"]
    live = [sum(v) for v in zip(*(c[k] for k in c if k != "node"))]
    assert max(live) == train["live_peak"] <= train["feature_map"]


def test_the_report_plots_the_memory(runs, tmp_path) -> None:
    page = tmp_path / "r.html"
    msprof("report", str(runs["adam16"][0]), "-o", str(page))
    text = page.read_text()
    assert "Device memory at the peak (emulated" in text
    assert "Device memory over the step, device 0" in text


def test_a_model_over_the_graph_pool_is_refused_everywhere(runs, tmp_path) -> None:
    prof, proc = collect(tmp_path, "mem_keras.py", "--graph-memory-max-size", "1MiB",
                         OPT="adam", BS="16")
    assert "[WARNING] Device memory: the model does not fit" in proc.stderr
    assert "exceeds total graph size[1048576]" in proc.stderr
    assert "smaller batch" in proc.stderr  # what would help
    assert "DOES NOT FIT" in msprof("summary", str(prof)).stdout
    res = msprof("check", str(prof), "--baseline", str(runs["adam16"][0]), ok=False)
    assert res.returncode == 1, res.stderr
    assert "does not fit the chip" in res.stdout
    # the same collection passes when the memory gate is off
    res = msprof("check", str(prof), "--baseline", str(prof), "--max-peak-memory", "off",
                 ok=False)
    assert res.returncode == 0, res.stdout


def test_diff_and_check_name_the_tensors_that_grew(runs) -> None:
    base, new = runs["adam16"][0], runs["adam32"][0]
    text = msprof("diff", str(base), str(new)).stdout
    assert "memory (emulated)" in text and "Tensors at the peak that grew" in text
    res = msprof("check", str(new), "--baseline", str(base), ok=False)
    assert res.returncode == 1 and "predicted peak memory grew" in res.stdout
    res = msprof("check", str(new), "--baseline", str(base), "--max-peak-memory", "fit,+200%",
                 ok=False)
    assert "predicted peak memory" not in res.stdout


def test_tf1_momentum_slots_from_the_apply_op(tmp_path) -> None:
    prof, _ = collect(tmp_path, "mem_tf1.py")
    dm = RM.read(prof).devices[0]
    assert dm.weight == (64 * 32 + 32) * 4
    assert dm.optimizer == dm.weight  # one Momentum slot a variable


def test_constants_a_task_reads_are_in_the_models_allocation(tmp_path) -> None:
    """A 256 x 256 fp32 constant the step multiplies by is copied to the device with the
    model (GE's tensor size rule); the reshape's shape constant is folded away; the summary
    counts constants as their own category."""
    prof, _ = collect(tmp_path, "mem_const.py")
    facts = RM.read(prof)
    mm = train_model(facts)
    table = (256 * 256 * 4 + 2 * 32 - 1) // 32 * 32
    table = (table + 511) // 512 * 512
    assert table <= mm.constants < table + 16 * 512  # and the optimizer's few scalars
    dm = facts.devices[0]
    assert dm.peak() == dm.pool + sum(m.feature_map + m.io + m.constants
                                      for m in dm.models.values()) + dm.hccl
    text = msprof("summary", str(prof)).stdout
    assert "constants" in text


def test_task_memory_and_hardware_mem_write_the_raw_records(runs, tmp_path) -> None:
    from msprof_cli.raw import layouts as L
    from msprof_cli.raw import memory_layouts as ML

    prof, _ = collect(tmp_path, "mem_keras.py", "--task-memory", "on", "--sys-hardware-mem",
                      "on", "--sys-hardware-mem-freq", "100", OPT="adam", BS="16")
    facts = RM.read(prof)
    host = prof / "host" / "data"
    # GE's static plan: a TOTAL per model (op 0, whole life) of the planned block
    static = np.fromfile(host / L.host_file_name("static_op_mem"), ML.STATIC_OP_MEM)
    totals = static[static["op_name"] == 0]
    assert sorted(totals["size"].tolist()) == sorted(
        m.feature_map for m in facts.devices[0].models.values())
    assert (totals["life_end"] == ML.LIFE_TO_THE_END).all()
    blocks = static[static["op_name"] != 0]
    assert (blocks["life_end"] >= blocks["life_start"]).all() and (blocks["size"] > 0).all()
    # each model's block allocated at its load and freed when the collection ends
    task = np.fromfile(host / L.host_file_name("task_memory_info", aging=True),
                       ML.TASK_MEMORY_INFO)
    assert (task["size"] > 0).sum() == (task["size"] < 0).sum() == len(totals)
    assert task["size"].sum() == 0 and task["total_allocate"][-1] == 0
    # the HBM samples: every 10 ms, the application's from 0 up to its predicted peak
    data = prof / "device_0" / "data"
    app = np.fromfile(data / L.device_file_name("npu_mem_app", 0), ML.NPU_MEM)
    dev = np.fromfile(data / L.device_file_name("npu_mem", 0), ML.NPU_MEM)
    assert len(app) == len(dev) > 2 and (app["event"] == 0).all() and (dev["event"] == 1).all()
    assert np.all(np.diff(app["timestamp"]) == 10_000) and app["timestamp"][0] == 10_000
    assert app["hbm"][0] == 0 and app["hbm"].max() == facts.devices[0].peak()
    assert np.all(np.diff(app["hbm"].astype(np.int64)) >= 0)  # static graphs: steps up
    assert np.all(dev["hbm"] - app["hbm"] == facts.reserved)
    module = np.fromfile(data / L.device_file_name("npu_module_mem", 0), ML.NPU_MODULE_MEM)
    assert (module["module_id"] == ML.MODULE_GE).all() and len(module) == len(app)
    sample = json.loads((prof / "device_0" / "sample.json").read_text())
    assert sample["hardware_mem"] == "on" and sample["hardware_mem_sampling_interval"] == 10
    # both layouts export them: the legacy per-device files are the merged ones less Device_id
    import shutil

    legacy = Path(shutil.copytree(prof, tmp_path / "legacy" / prof.name))
    merged = Path(shutil.copytree(prof, tmp_path / "merged" / prof.name))
    msprof("export", "--output", str(legacy))
    msprof("export", "--output", str(merged), "--layout", "mindstudio")
    for stem in ("npu_mem", "npu_module_mem", "memory_record", "operator_memory",
                 "static_op_mem"):
        [ours] = (legacy / "device_0" / "summary").glob(f"{stem}_0_*.csv")
        [real_like] = (merged / "mindstudio_profiler_output").glob(f"{stem}_*.csv")
        cut = [ln.split(",", 1)[1] for ln in real_like.read_text().splitlines()]
        assert ours.read_text().splitlines() == cut, stem
    timeline = json.loads(next((legacy / "device_0" / "timeline").glob("msprof_*.json"))
                          .read_text())
    hbm = [e for e in timeline if e.get("name") == "APP/HBM"]
    assert len(hbm) == len(app) and max(e["args"]["KB"] for e in hbm) * 1024 == \
        facts.devices[0].peak()
    # a real collection (no emulated plan beside the raw data): summary shows the peak its
    # own npu_mem samples measured
    real = Path(shutil.copytree(prof, tmp_path / "real" / prof.name))
    for name in ("msprof_cli_memory.json", "msprof_cli_run.json"):
        (real / name).unlink()
    doc = json.loads(msprof("summary", str(real), "--format", "json").stdout)
    mem = doc["devices"][0]["memory"]
    assert mem["measured"] and mem["peak"] == facts.devices[0].peak()
    assert mem["samples"] == len(app) and mem["fits"]
    assert "Device memory (measured: npu_mem samples)" in msprof("summary", str(real)).stdout


def test_a_device_that_runs_collectives_holds_hccls_buffers(tmp_path) -> None:
    """MirroredStrategy over two (logical) devices: each replica's variables on its own
    device, and the communicator's 2 x HCCL_BUFFSIZE of send and receive buffers."""
    prof, _ = collect(tmp_path, "mirrored.py", HCCL_BUFFSIZE="16")
    facts = RM.read(prof)
    assert sorted(facts.devices) == [0, 1]
    a, b = facts.devices[0], facts.devices[1]
    assert a.weight == b.weight > 0 and a.optimizer == b.optimizer
    assert a.hccl == b.hccl == 2 * 16 << 20
    doc = json.loads(msprof("summary", str(prof), "--format", "json").stdout)
    parts = doc["devices"][0]["memory"]["parts"]
    assert parts["communication buffers"] == 32 << 20


def test_a_loss_over_many_classes_holds_its_workspace(tmp_path) -> None:
    """Keras' sparse cross-entropy over 30,000 classes runs as OneHotD +
    SoftmaxCrossEntropyWithLogits, whose TBE schedule keeps three N x C fp32 intermediates in
    global memory (device/workspace.py): `msprof summary` shows them as the workspace."""
    from msprof_cli.device import memory_plan as MP

    prof, _ = collect(tmp_path, "mem_keras.py", OPT="sgd", BS="16", CLASSES="30000")
    mm = train_model(RM.read(prof))
    want = int(MP.ge_tensor_bytes(np.array([3 * 16 * 30000 * 4]))[0])
    assert mm.workspace == want
    assert any(t[4] == "workspace" and t[0].endswith("SparseSoftmaxCrossEntropyWithLogits")
               for t in mm.top)
    summary = json.loads(msprof("summary", str(prof), "--format", "json").stdout)
    assert summary["devices"][0]["memory"]["parts"]["workspace"] == want
