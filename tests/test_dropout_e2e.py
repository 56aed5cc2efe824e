"""End-to-end: dropout as the script writes it and as the Ascend migration runs it
(`msprof collect --dropout`, MSPROF_CLI_DROPOUT; docs/device-model.md 3.3).  A Keras MLP with
Dropout (tests/scripts/dropout.py) through `msprof collect` and `msprof export`."""
from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
SCRIPT = Path(__file__).resolve().parent / "scripts" / "dropout.py"
MSPROF = [sys.executable, "-m", "msprof_cli"]


def collect(tmp: Path, *flags: str, env: dict | None = None) -> tuple[Path, str]:
    environ = {k: v for k, v in os.environ.items() if k != "MSPROF_CLI_DROPOUT"}
    proc = subprocess.run([*MSPROF, "collect", "--output", str(tmp / "out"), *flags, "--",
                           sys.executable, str(SCRIPT)], capture_output=True, text=True,
                          cwd=tmp, timeout=300, env={**environ, **(env or {})})
    assert proc.returncode == 0, proc.stderr[-3000:]
    [prof] = sorted((tmp / "out").glob("PROF_*"))
    exp = subprocess.run([*MSPROF, "export", str(prof)], capture_output=True, text=True,
                         timeout=300)
    assert exp.returncode == 0, exp.stderr[-3000:]
    return prof, exp.stdout + exp.stderr


def dropout_rows(prof: Path) -> list[dict[str, str]]:
    [path] = sorted((prof / "device_0" / "summary").glob("op_summary_0*.csv"))
    with open(path, newline="") as fh:
        return [r for r in csv.DictReader(fh) if "stateless_dropout/" in r["Op Name"]]


def test_the_script_as_written_draws_its_masks_on_the_ai_cpu(tmp_path: Path) -> None:
    prof, said = collect(tmp_path)
    rows = dropout_rows(prof)
    assert {r["OP Type"] for r in rows if r["Task Type"] == "AI_CPU"} >= \
        {"StatelessRandomUniformV2"}
    assert "npu_ops.dropout makes the masks on the AI Core" in said  # the advice says it


@pytest.mark.parametrize("how", ["flag", "env"])
def test_the_migrated_dropout_runs_on_the_ai_core(tmp_path: Path, how: str) -> None:
    prof, said = collect(tmp_path, *(("--dropout", "npu") if how == "flag" else ()),
                         env={"MSPROF_CLI_DROPOUT": "npu"} if how == "env" else None)
    rows = dropout_rows(prof)
    assert not [r for r in rows if r["Task Type"] == "AI_CPU"], rows[:2]
    types = {r["OP Type"] for r in rows}
    assert {"DropOutGenMask", "DropOutDoMask"} <= types and "GreaterEqual" not in types
    assert all(r["Task Type"] == "AI_CORE" for r in rows if r["OP Type"] == "DropOutGenMask")
    assert "npu_ops.dropout" not in said


def test_an_unknown_dropout_mode_is_refused_before_the_script_runs(tmp_path: Path) -> None:
    proc = subprocess.run([*MSPROF, "collect", "--dropout", "gpu", "--output",
                           str(tmp_path / "out"), "--", sys.executable, str(SCRIPT)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode != 0
    assert '--dropout "gpu" is not a dropout mode; use one of tf, npu' in proc.stderr
    assert "dropout done" not in proc.stdout and not (tmp_path / "out").exists()


def test_an_unknown_soc_version_is_refused_before_the_script_runs(tmp_path: Path) -> None:
    for name, said in (("A100", '--soc-version "A100" is not a CANN soc_version; use one of '
                                'Ascend910A, Ascend910B1'),):
        proc = subprocess.run([*MSPROF, "collect", "--soc-version", name, "--output",
                               str(tmp_path / "out"), "--", sys.executable, str(SCRIPT)],
                              capture_output=True, text=True, cwd=tmp_path, timeout=120)
        assert proc.returncode != 0
        assert said in proc.stderr
        assert "dropout done" not in proc.stdout and not (tmp_path / "out").exists()
