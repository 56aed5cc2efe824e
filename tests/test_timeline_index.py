"""The slice index of sliced timelines: PROF/msprof_cli_timeline_index.json
lists every slice with the time span of its events and the iterations it overlaps, in the
whole and the windowed export, both layouts."""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from msprof_cli.export.api import run_export
from msprof_cli.export.outputs.timeline_index import INDEX_NAME

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import build as corpus  # noqa: E402


@pytest.fixture(scope="module")
def raw(tmp_path_factory) -> Path:
    return corpus.unpack(tmp_path_factory.mktemp("idx_raw"))["two_devices_hccl"]


def _ts_span(path: Path) -> tuple[float, float]:
    ts = [float(e["ts"]) for e in json.loads(path.read_text()) if e.get("ph") != "M"]
    return min(ts), max(ts)


@pytest.mark.parametrize("layout,window", [("legacy", None), ("mindstudio", None),
                                           ("mindstudio", "700")])
def test_every_slice_is_indexed_with_its_span_and_iterations(raw, tmp_path, layout, window,
                                                             monkeypatch) -> None:
    prof = tmp_path / raw.name
    shutil.copytree(raw, prof)
    if window:
        monkeypatch.setenv("MSPROF_EXPORT_WINDOW_TASKS", window)
    res = run_export(prof, layout=layout, json_slice_events=3000, quiet=True)
    index = json.loads((prof / INDEX_NAME).read_text())
    assert prof / INDEX_NAME in res.files
    slices = [s for t in index["timelines"] for s in t["slices"]]
    indexed = {s["file"] for s in slices}
    files = {str(p.relative_to(prof)) for p in prof.rglob("msprof_slice_*.json")}
    assert files <= indexed and len(files) > 2  # every msprof slice (other traces too)
    assert all((prof / f).is_file() for f in indexed)
    for t in index["timelines"]:
        if "msprof_slice_" not in t["slices"][0]["file"]:
            continue
        prev_last = None
        for s in t["slices"]:
            lo, hi = _ts_span(prof / s["file"])
            assert s["first_us"] <= lo and s["last_us"] >= hi  # brackets the slice's events
            if prev_last is not None and layout == "legacy":  # one device: in time order
                assert s["first_us"] >= prev_last - 1000
            prev_last = s["last_us"]
        models = {m for s in t["slices"] for m in s.get("iterations", {})}
        assert "1" in models
        first = t["slices"][0]["iterations"]["1"]
        assert first.startswith("1")


def test_no_index_without_slices(raw, tmp_path) -> None:
    prof = tmp_path / raw.name
    shutil.copytree(raw, prof)
    run_export(prof, layout="mindstudio", quiet=True)
    assert not (prof / INDEX_NAME).exists()
