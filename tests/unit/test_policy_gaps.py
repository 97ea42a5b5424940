"""The rules the generated admission policies do not have are each named, with why, in the admission-policies
how-to (``Rules the policies do not have``): a rule added without CEL and without a refusal of its configuration
fails here until its page says so. ``invalid-quantity`` (the API server refuses such values before any policy)
and ``numa-unfit`` (``qos-guard policy`` refuses ``policy.numa``) are said elsewhere on the page."""

from __future__ import annotations

from pathlib import Path

from webhook.core.rules import RULES

PAGE = Path(__file__).resolve().parents[2] / "docs" / "howto" / "admission-policies.md"
SAID_ELSEWHERE = {"invalid-quantity", "numa-unfit"}


def test_every_rule_without_cel_is_named_with_its_reason() -> None:
    section = PAGE.read_text().split("### Rules the policies do not have")[1].split("\n## ")[0]
    missing = [r.id for r in RULES if r.cel is None and r.id not in SAID_ELSEWHERE and f"`{r.id}`" not in section]
    assert missing == [], f"not said in {PAGE.name}: {missing}"
    assert all(f"`{r}`" in PAGE.read_text() for r in SAID_ELSEWHERE)
