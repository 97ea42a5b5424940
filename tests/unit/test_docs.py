"""User-facing text points at what users have: every ``docs/contract.md#anchor`` in the package, chart, docs and
tests names a heading of docs/contract.md (as GitHub makes its anchors), and none points at the internal spec or
at internal issue numbers (work notes stay out of tests as out of docs). The documentation site
builds with ``--strict``, every link of its built pages leads somewhere, its reference pages are the generated
ones, and the README stays a short door into it."""

from __future__ import annotations

import dataclasses
import importlib
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [p for top in ("webhook", "charts", "docs") for p in (ROOT / top).rglob("*")
           if p.is_file() and p.suffix in (".py", ".md", ".yaml", ".tpl", ".json", ".txt")] + [ROOT / "README.md"]
TESTS = [p for p in (ROOT / "tests").rglob("*.py") if "corpus" not in p.parts and p.name != "test_docs.py"]


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


def test_no_internal_issue_numbers() -> None:
    """Tests, fixtures, the package and the docs say what they prove, not which work item found it: an internal
    issue, finding, item or task number ("issue 12", "#12", "item-6", "task 40") means nothing to a reader (an
    upstream one, kubernetes/kubernetes#84869, names its repository)."""
    fixtures = [p for p in (ROOT / "tests" / "fixtures").rglob("*") if p.is_file() and p.suffix in (".yaml", ".json")]
    cited = {(str(p.relative_to(ROOT)), m.group(0)) for p in SOURCES + TESTS + fixtures
             for m in re.finditer(r"\b[Ii]ssues?[- ]#?\d+\b|(?<![\w&/])#\d\d\b|\b[Ff]indings?[- ]\d+|"
                                  r"\b[Ii]tems?[- ]\d+|\b[Tt]asks?[- ]#?\d+",
                                  p.read_text(errors="replace"))}
    assert sorted(cited) == []


# --- the documentation site (mkdocs.yml, docs/) ------------------------------------------------------------------


class _Links(HTMLParser):
    """The ids a built page defines and the links (href, src) it makes."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name == "id" and value:
                self.ids.add(value)
            elif name in ("href", "src") and value and not (tag == "link" and ("rel", "canonical") in attrs):
                self.links.append(value)


def _parsed(page: Path) -> _Links:
    parser = _Links()
    parser.feed(page.read_text())
    return parser


def test_the_site_builds_strict_and_every_link_of_its_pages_resolves(tmp_path: Path) -> None:
    """`mkdocs build --strict` (what `make docs` runs) fails on a broken Markdown link or anchor or a page left out
    of the nav; the built pages' own links (the theme's assets, the nav, every anchor) are then followed here."""
    site = tmp_path / "site"
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                           cwd=ROOT, capture_output=True, text=True, timeout=240, check=False,
                           env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert built.returncode == 0, built.stderr[-3000:]
    pages = {page: _parsed(page) for page in site.rglob("*.html")}
    assert len(pages) >= 30, sorted(str(p.relative_to(site)) for p in pages)
    broken = []
    for page, parsed in pages.items():
        for link in parsed.links:
            url = urlsplit(link)
            if url.scheme or url.netloc or link.startswith(("mailto:", "data:")):
                continue
            base = site if url.path.startswith("/") else page.parent  # 404.html links from the site's root
            target = (base / unquote(url.path).lstrip("/")).resolve() if url.path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.is_relative_to(site.resolve()) or not target.exists():
                broken.append(f"{page.relative_to(site)}: {link}")
            elif url.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else _parsed(target).ids
                if unquote(url.fragment) not in ids:
                    broken.append(f"{page.relative_to(site)}: {link} (no such anchor)")
    assert broken == []


def test_the_reference_pages_are_the_generated_ones() -> None:
    """docs/reference/ and the rules' place in mkdocs.yml are written by hack/generate.py from the code."""
    check = subprocess.run([sys.executable, str(ROOT / "hack" / "generate.py"), "--check"],
                           capture_output=True, text=True, timeout=120, check=False)
    assert check.returncode == 0, check.stderr


def _markdown_outside_the_site() -> list[Path]:
    """Every Markdown file read on GitHub rather than in the site: README.md, CONTRIBUTING.md, the chart's README,
    the SOURCES.md of vendored files (docs/ is the site's, whose build checks its links)."""
    found = []
    for folder, subfolders, files in os.walk(ROOT):
        subfolders[:] = [s for s in subfolders if not s.startswith(".") and s not in ("site", "node_modules")
                         and not (folder == str(ROOT) and s == "docs")]
        found += [Path(folder) / name for name in files if name.endswith(".md")]
    return sorted(found)


def test_readme_and_contributing_links_lead_somewhere() -> None:
    """The README is read on GitHub, outside the site: its relative links (and those of CONTRIBUTING.md, the
    chart's README and every other Markdown file outside docs/, inline or by reference) name files of the
    repository and headings of them."""
    docs = _markdown_outside_the_site()
    assert {ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "charts" / "qos-guard" / "README.md"} <= set(docs)
    broken = []
    for doc in docs:
        text = doc.read_text()
        for link in re.findall(r"\]\(([^)\s]+)\)", text) + re.findall(r"^ {0,3}\[[^\]]+\]:\s+(\S+)", text, re.M):
            if urlsplit(link).scheme:
                continue
            path, _, fragment = link.partition("#")
            target = (doc.parent / path).resolve() if path else doc
            if not target.exists():
                broken.append(f"{doc.relative_to(ROOT)}: {link}")
            elif fragment and target.suffix == ".md":
                headings = {anchor(h) for h in re.findall(r"^#+ (.+)$", target.read_text(), re.M)}
                if fragment not in headings:
                    broken.append(f"{doc.relative_to(ROOT)}: {link} (no such heading)")
    assert broken == []


def test_user_readme_opens_plainly_and_leaves_test_harness_detail_to_contributing() -> None:
    readme = (ROOT / "README.md").read_text()
    opening = readme[:readme.index("## Quick start")]
    assert "instead of" not in opening and "µs" not in opening
    assert "### On a real node (tests/node)" not in readme and "mmdebstrap" not in readme
    contributing = (ROOT / "CONTRIBUTING.md").read_text()
    assert "## On a real node (tests/node)" in contributing and "mmdebstrap" in contributing
    assert "CONTRIBUTING.md#on-a-real-node-testsnode" in readme


def test_the_readme_stays_short() -> None:
    """What it does and why, the two commands, the three ways in, links: everything else is in the site."""
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 150, len(lines)
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", "\n".join(lines)), "a dated measurement: current figures only"


def _generator(monkeypatch: pytest.MonkeyPatch) -> Any:
    """hack/reference_observed.py (the metrics and Events pages), as hack/generate.py imports it."""
    monkeypatch.syspath_prepend(str(ROOT / "hack"))
    return importlib.import_module("reference_observed")


def _families(*collectors: Any) -> dict[str, tuple[str, tuple[str, ...], str]]:
    """What a scrape says of each metric family: (type, label names, help), by the name scraped."""
    found: dict[str, tuple[str, tuple[str, ...], str]] = {}
    for collector in collectors:
        for family in collector.collect():
            name = f"{family.name}_total" if family.type == "counter" else family.name
            own: Any = getattr(collector, "_labelnames", None) or getattr(family, "_labelnames", ())
            labels = tuple(str(label) for label in own)
            found[name] = (family.type, labels, family.documentation)
    return found


def test_the_metrics_page_finds_what_the_servers_export(monkeypatch: pytest.MonkeyPatch) -> None:
    """The metrics read from the source (by their definitions, wherever they are) are those the webhook's and the
    agent's registries export, with the same type, labels and help: a definition the scan misreads or misses
    fails here."""
    from prometheus_client import CollectorRegistry

    from webhook.node.agent import PublisherMetrics, VerdictGauges
    from webhook.serving.metrics import Metrics

    served = Metrics.create(CollectorRegistry()).with_topology(CollectorRegistry())
    assert served.topology is not None
    own = [getattr(group, f.name) for group in (served, served.topology) for f in dataclasses.fields(group)
           if f.name != "topology"]  # the prometheus-client objects themselves: they know their label names
    publisher = SimpleNamespace(node="n", age=lambda: 0.0, attempts={"ok": 1})
    exported = _families(*own, VerdictGauges(), PublisherMetrics(publisher))  # type: ignore[arg-type]
    scanned = {m.name: (m.type, m.labels, m.help) for m in _generator(monkeypatch).metrics()}
    assert len(exported) == 15
    assert {name: scanned.get(name) for name in exported} == exported
    found_by_text = {"qos_guard_extender_view_incomplete": ("gauge", ("store",)),
                     "qos_guard_extender_binds_total": ("counter", ("result",)),
                     "qos_guard_health_probe_errors_total": ("counter", ())}
    assert {name: scanned[name][:2] for name in found_by_text} == found_by_text


def test_the_events_page_lists_every_reason_the_agent_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each reason a problem on a placed container carries (and so an Event), read from the source."""
    from webhook.node import verdict

    reasons = {r.reason: r.messages for r in _generator(monkeypatch).event_reasons("reason")}
    assert set(reasons) == {verdict.NOT_PINNED, verdict.NUMA_MISALIGNED, verdict.NUMA_UNKNOWN,
                            verdict.NUMA_REMOTE_MEMORY}
    # NotPinned's detail is filled in with what the verdict says of a container without exclusive CPUs, less the
    # one case it does not report (a fractional CPU the policy allows)
    (not_pinned,) = reasons[verdict.NOT_PINNED]
    assert not_pinned.count("“") >= 5 and "no cpu request" in not_pinned
    assert "fractionalCPUContainers" not in not_pinned
