"""Golden files of the project's own pipeline: a small PROF dir written by the emulated device
(deterministic clock, pid and host times) is exported in both layouts and compared byte for byte
with tests/golden/device_small/.  After an intended output change, regenerate with
`pytest tests/test_golden_device.py --update-golden` and review the diff."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_device_records import make_chunk, run

from msprof_cli.export.api import run_export
from msprof_cli.options import validate_options

GOLDEN = Path(__file__).parent / "golden" / "device_small"
STAMP = re.compile(r"_\d{14}(?=\.(csv|json)$)")


def build(tmp: Path) -> Path:
    cfg = validate_options({"training_trace": "on", "aicpu": "on", "l2": "on",
                            "runtime_api": "on", "output": str(tmp)})
    return run(tmp, [make_chunk(2), make_chunk(1, first_index=3, start=5_000_000_400_000_000)],
               cfg)


def outputs(prof: Path) -> dict[str, bytes]:
    files = {}
    for path in sorted(prof.rglob("*")):
        rel = path.relative_to(prof)
        if path.is_file() and rel.parts[0] in ("device_0", "mindstudio_profiler_output") \
                and rel.parts[1:2] != ("data",) and rel.suffix in (".csv", ".json", ".txt"):
            if rel.parts[0] == "device_0" and len(rel.parts) == 2:
                continue  # control files
            files[STAMP.sub("", str(rel))] = path.read_bytes()
    return files


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict[str, bytes]:
    prof = build(tmp_path_factory.mktemp("golden_device"))
    run_export(prof, quiet=True)
    run_export(prof, layout="mindstudio", quiet=True)
    return outputs(prof)


def test_golden_device_export(exported: dict[str, bytes], request) -> None:
    if request.config.getoption("--update-golden"):
        if GOLDEN.exists():
            for old in GOLDEN.rglob("*"):
                if old.is_file():
                    old.unlink()
        for rel, data in exported.items():
            target = GOLDEN / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        pytest.skip(f"golden files rewritten in {GOLDEN}")
    expected = {str(p.relative_to(GOLDEN)): p.read_bytes()
                for p in sorted(GOLDEN.rglob("*")) if p.is_file()}
    assert sorted(exported) == sorted(expected), "file set differs (run with --update-golden?)"
    for rel, data in expected.items():
        assert exported[rel] == data, f"{rel} differs from tests/golden/device_small/{rel}"
