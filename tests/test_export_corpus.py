"""Byte identity of every export output against the frozen corpus (issue 16).

tests/corpus/raw.tar.xz holds raw PROF dirs (device writer: 1 and 2 devices, HCCL, L2, PMU,
AI CPU, msproftx, dynamic shape, a damaged hwts tail; real collections: the shared golden
cases); manifest.json the sha256 of every file each variant (both layouts, csv and json
summaries, db, a selection, forced 700-task windows, --reports switches; the full advice
report of every legacy variant) wrote when it was recorded.
A restructured export must reproduce all of it; re-record (tests/corpus/build.py) only for
an intended change of an output."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.corpus import build as corpus

MANIFEST = json.loads(corpus.MANIFEST.read_text())


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> dict[str, Path]:
    return corpus.unpack(tmp_path_factory.mktemp("corpus_raw"))


def test_the_corpus_covers_every_case_and_variant(cases):
    assert sorted(cases) == sorted(MANIFEST)
    for case in cases:
        assert sorted(MANIFEST[case]) == sorted(corpus.variants_of(case))


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(MANIFEST))
def test_export_reproduces_the_corpus(cases, case, tmp_path):
    bad = []
    for variant, want in MANIFEST[case].items():
        got = corpus.export_variant(cases[case], tmp_path / variant, variant)
        if got != want:
            diff = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
            bad.append(f"{variant}: {len(diff)} differ: {', '.join(diff[:6])}")
    assert not bad, f"{case}:\n" + "\n".join(bad)
