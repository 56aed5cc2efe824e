"""Byte identity of every export output against the frozen corpus.

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


def test_the_archives_unpack_the_same_on_a_python_without_tarfile_filters(tmp_path, monkeypatch):
    """corpus.extract's own check (Python 3.11 before 3.11.4 has no `filter="data"`) unpacks
    the corpus as the filter does and refuses a member that is not a plain file or dir."""
    import io
    import tarfile

    with_filter = tmp_path / "filter"
    corpus.extract(corpus.RAW_TAR, with_filter)
    monkeypatch.delattr(tarfile, "data_filter", raising=False)
    by_hand = tmp_path / "by_hand"
    corpus.extract(corpus.RAW_TAR, by_hand)
    files = sorted(p.relative_to(with_filter) for p in with_filter.rglob("*") if p.is_file())
    assert files and files == sorted(p.relative_to(by_hand) for p in by_hand.rglob("*")
                                     if p.is_file())
    assert all((with_filter / f).read_bytes() == (by_hand / f).read_bytes() for f in files)

    link = tarfile.TarInfo("case/PROF_1/link")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc"
    outside = tarfile.TarInfo("../outside")
    outside.size = 1
    for k, member in enumerate([link, outside]):
        hostile = tmp_path / f"hostile{k}.tar"
        with tarfile.open(hostile, "w") as tar:
            tar.addfile(member, io.BytesIO(b"x") if member.isfile() else None)
        with pytest.raises(ValueError, match=f"refusing to unpack '{member.name}'"):
            corpus.extract(hostile, tmp_path / "h" / "d")
        assert not (tmp_path / "h" / "outside").exists()
        assert not (tmp_path / "h" / "d").exists() or not any((tmp_path / "h" / "d").iterdir())
