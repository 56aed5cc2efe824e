"""The documentation describes the present and points inside the repository: docs/ hold no
session diary, every relative link resolves, the README lists every page, and no comment or
docstring of the code or the tests names a ticket or a file outside the repository."""
from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").rglob("*.md"))
TICKET = re.compile(r"\b[Ii]ssues? \d+|\b[Ss]ession \d+")
OUTSIDE = re.compile(r"shared/(reference|golden|oracle)|\.\./shared|/work/shared")
REFERENCE_PAGE = re.compile(r"(?<![\w/.-])(raw-format|export-files|step-trace-and-advice|"
                            r"tensorflow-capture)\.md")


def _comments_and_docstrings(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every comment and string token of a Python file (docstrings are
    strings; the few plain strings that cite a doc page are held to the same rule)."""
    out = []
    src = path.read_text(encoding="utf-8")
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type in (tokenize.COMMENT, tokenize.STRING):
            out.append((tok.start[0], tok.string))
    return out


def test_docs_are_not_a_diary() -> None:
    for page in DOCS:
        text = page.read_text(encoding="utf-8")
        assert not re.search(r"(?i)\b(session|round) \d+", text), page
        assert not TICKET.search(text), page
        prose = re.sub(r"`[^`]*`", "", re.sub(r"(?s)```.*?```", "", text))  # not examples
        assert not re.search(r"\b20\d\d-\d\d-\d\d\b", prose), page  # dates: CHANGELOG.md


def test_doc_links_resolve_and_the_readme_lists_every_page() -> None:
    pages = [ROOT / "README.md", ROOT / "CHANGELOG.md", *DOCS]
    for page in pages:
        for m in re.finditer(r"\]\(([^)#\s]+)(#[^)]*)?\)", page.read_text(encoding="utf-8")):
            target = m.group(1)
            if not target.startswith(("http://", "https://", "mailto:")):
                assert (page.parent / target).exists(), (page, target)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for page in DOCS:
        if page.parent.name == "images":
            continue
        assert str(page.relative_to(ROOT)) in readme, page


def test_code_comments_name_no_ticket_and_no_file_outside_the_repository() -> None:
    bad = []
    for path in [*ROOT.glob("msprof_cli/**/*.py"), *ROOT.glob("tests/**/*.py"),
                 *ROOT.glob("benchmarks/*.py")]:
        if path.name in ("test_docs.py", "shared_paths.py"):
            continue  # this test's own patterns; the locator of the shared test data
        for line, text in _comments_and_docstrings(path):
            # the benchmarks may say where the oracle is laid out (outside by design)
            outside = OUTSIDE.search(text) and path.parent.name != "benchmarks"
            if TICKET.search(text) or outside:
                bad.append(f"{path.relative_to(ROOT)}:{line}")
            for m in REFERENCE_PAGE.finditer(text):
                before = text[max(0, m.start() - 13):m.start()]
                if not before.endswith("docs/formats/") and not before.endswith("formats/"):
                    bad.append(f"{path.relative_to(ROOT)}:{line} {m.group(0)}")
    assert bad == []
