"""No module of the package, the benchmark or the generators is over 450 lines: one that grows past
that mixes jobs and is split along its seams (node/decide.py, policies/generate.py and bench/peers.py were); and
no file name of the package is used twice."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 450


def test_no_module_is_over_450_lines() -> None:
    sizes = {str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines())
             for folder in ("webhook", "bench", "hack") for p in (ROOT / folder).rglob("*.py")}
    over = {name: n for name, n in sizes.items() if n > LIMIT}
    assert not over, f"over {LIMIT} lines, split along their seams: {over}"
    assert sizes, "no module found"


def test_no_module_name_sits_in_two_layers() -> None:
    """A module's file name says what lives in it, so one name is one module: ``dra.py`` in core, cluster and
    node sent a reader to the wrong one (they are ``dra_requests.py``, ``dra_lists.py``, ``dra_locality.py``)."""
    seen: dict[str, list[str]] = {}
    for p in (ROOT / "webhook").rglob("*.py"):
        if p.name != "__init__.py":
            seen.setdefault(p.name, []).append(str(p.parent.relative_to(ROOT)))
    twice = {name: folders for name, folders in seen.items() if len(folders) > 1}
    assert not twice, f"one file name in several layers, name each for what it holds: {twice}"
    assert len(seen) > 100, "no module found"
