"""User-facing text points at what users have: every ``docs/contract.md#anchor`` in the package, chart, docs and
tests names a heading of docs/contract.md (as GitHub makes its anchors), and none points at the internal spec or
at issues the repository does not hold (work notes stay out of tests as out of docs)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [p for top in ("webhook", "charts", "docs") for p in (ROOT / top).rglob("*")
           if p.is_file() and p.suffix in (".py", ".md", ".yaml", ".tpl", ".json", ".txt")] + [ROOT / "README.md"]
TESTS = [p for p in (ROOT / "tests").rglob("*.py") if "corpus" not in p.parts and p.name != "test_docs.py"]
ISSUES = range(28, 34)  # the issues the repository holds (`issues show N`)


def anchor(heading: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_contract_links_name_real_headings() -> None:
    contract = (ROOT / "docs" / "contract.md").read_text()
    anchors = {anchor(h) for h in re.findall(r"^#+ (.+)$", contract, re.M)}
    linked = {(path.relative_to(ROOT), name) for path in SOURCES + TESTS
              for name in re.findall(r"contract\.md#([\w-]+)", path.read_text(errors="replace"))}
    assert linked, "no link to docs/contract.md found"
    assert [(str(p), a) for p, a in sorted(linked) if a not in anchors] == []


def test_no_reference_to_the_internal_spec() -> None:
    assert [str(p.relative_to(ROOT)) for p in SOURCES + TESTS if "SPEC §" in p.read_text(errors="replace")] == []


def test_tests_cite_no_issue_the_repository_does_not_hold() -> None:
    cited = {(str(p.relative_to(ROOT)), m.group(0)) for p in TESTS
             for m in re.finditer(r"\b[Ii]ssue #?(\d+)\b|(?<![\w&])#(\d\d+)\b|\b[Ff]indings? \d+|\b[Ii]tem \d+",
                                  p.read_text(errors="replace"))
             if not (number := m.group(1) or m.group(2)) or int(number) not in ISSUES}
    assert sorted(cited) == []
