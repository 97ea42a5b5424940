"""A denial quotes bounded input: a bad `qos-guard.io/mode` label is quoted whole when short, capped when huge."""

from __future__ import annotations

from flask.testing import FlaskClient

from tests.helpers import admission_review
from webhook.core.config import parse_config
from webhook.serving.app import create_app


def _namespace_answer(value: object) -> dict[str, object]:
    client: FlaskClient = create_app(parse_config({})).test_client()
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x", "labels": {"qos-guard.io/mode": value}}}
    r = client.post("/validate-namespace", json=admission_review(ns, kind="Namespace", namespace=""))
    assert r.status_code == 200
    answer: dict[str, object] = r.get_json()["response"]
    return answer


def test_a_huge_mode_label_is_quoted_capped() -> None:
    """/validate-namespace answered a 1 MB qos-guard.io/mode value with a 1,000,101-byte message (warnings were
    capped, messages were not)."""
    out = _namespace_answer("x" * 1_000_000)
    assert out["allowed"] is False
    status = out["status"]
    assert isinstance(status, dict)
    message = status["message"]
    assert len(message) < 300, len(message)
    assert message == (f'namespace label qos-guard.io/mode="{"x" * 63}"... (1000000 characters) is not one of '
                       "enforce, mutate, warn; remove the label to opt out")


def test_a_short_bad_mode_label_is_quoted_whole() -> None:
    status = _namespace_answer("x" * 63)["status"]
    assert isinstance(status, dict) and f'="{"x" * 63}" is not one of' in status["message"]
