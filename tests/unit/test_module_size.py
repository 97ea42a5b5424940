"""No module of the package, the benchmark or the generators is over 450 lines: one that grows past
that mixes jobs and is split along its seams (node/decide.py, policies/generate.py and bench/peers.py were)."""

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
