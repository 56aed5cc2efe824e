"""KEY ACCEPTANCE TEST: mindstudio export of the golden raw dir == the real tool's files."""
from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from msprof_cli.export.api import run_export
from tests.export_fixtures import GOLDEN_EXPECTED, copy_golden

NAME_RE = re.compile(r"^(?P<stem>.+)_(?P<ts>\d{14})\.(?P<ext>csv|json)$")


def _by_stem(directory: Path) -> dict[tuple[str, str], Path]:
    out = {}
    for p in directory.iterdir():
        m = NAME_RE.match(p.name)
        if m:
            out[(m["stem"], m["ext"])] = p
    return out


def _readme_structure(text: str) -> list[str]:
    """Section headers and numbered `{i}.{name}.{ext}:` block heads, in order."""
    keep = []
    for line in text.splitlines():
        if line.endswith("file description:"):
            keep.append(line)
        m = re.match(r"^(\d+\.[A-Za-z_]+\.(json|csv)):", line)
        if m:
            keep.append(m.group(1))
    return keep


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    prof = copy_golden(tmp_path_factory.mktemp("golden"))
    raw_before = {p: hashlib.sha256(p.read_bytes()).hexdigest()
                  for p in prof.rglob("*") if p.is_file()}
    run_export(prof, layout="mindstudio", quiet=True)
    for p, digest in raw_before.items():  # export never modifies raw files
        assert hashlib.sha256(p.read_bytes()).hexdigest() == digest, p
    return prof / "mindstudio_profiler_output"


def test_same_file_set(exported: Path) -> None:
    assert set(_by_stem(exported)) == set(_by_stem(GOLDEN_EXPECTED))
    assert (exported / "README.txt").is_file()
    assert not list(exported.glob(".*tmp*")), "temporary files left behind"


@pytest.mark.parametrize("key", sorted(_by_stem(GOLDEN_EXPECTED)))
def test_byte_exact(exported: Path, key: tuple[str, str]) -> None:
    expected = _by_stem(GOLDEN_EXPECTED)[key].read_bytes()
    if key == ("op_summary", "csv"):  # the one allowed difference (project naming)
        head, _, rest = expected.partition(b"\n")
        expected = head.replace(b"Block Num", b"Block Dim") + b"\n" + rest
    ours = _by_stem(exported)[key].read_bytes()
    if ours != expected:
        a, b = ours.splitlines(), expected.splitlines()
        first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        pytest.fail(f"{key}: first difference at line {first}:\nours:     "
                    f"{a[first] if first < len(a) else b'<eof>'!r}\nexpected: "
                    f"{b[first] if first < len(b) else b'<eof>'!r}")


def test_readme_structure(exported: Path) -> None:
    ours = (exported / "README.txt").read_text(encoding="utf-8")
    theirs = (GOLDEN_EXPECTED / "README.txt").read_text(encoding="utf-8")
    assert _readme_structure(ours) == _readme_structure(theirs)
    assert "\r" not in ours and ours.endswith("\n")
