"""``fix``'s refusals are typed (``NotFixed``), carry their line, and are rendered once by the CLI."""

from __future__ import annotations

import pytest

from webhook.batch.files import NotFixed, NotRewritable, Unjudgeable, Unreadable
from webhook.batch.rewrite import fix_text
from webhook.core.config import Config

POD = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: a\n"


@pytest.mark.parametrize(("text", "kind", "line", "reason"), [
    (POD + "  bad: [\n", Unreadable, 8, "YAML does not parse"),
    ("- {kind: Pod}\n", Unreadable, 1, "document is a list, not an object"),
    (POD + "--- trailing\n", Unreadable, 7, "invalid YAML document separator"),
    ('{"kind": "Pod"}\nkind: Pod\n', NotRewritable, None, "JSON followed by YAML"),
    ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: 3}\n", Unjudgeable, None, "expected a list"),
])
def test_refusals_are_typed(text: str, kind: type[NotFixed], line: int | None, reason: str) -> None:
    with pytest.raises(NotFixed) as caught:
        fix_text("f.yaml", text, Config())
    assert type(caught.value) is kind
    assert caught.value.line == line and reason in caught.value.reason
    assert "not changed" not in caught.value.reason  # said once, by render()
    assert caught.value.render("f.yaml").endswith("; not changed")
    assert caught.value.render("f.yaml").startswith(f"f.yaml:{line}: error: " if line else "f.yaml: error: ")
