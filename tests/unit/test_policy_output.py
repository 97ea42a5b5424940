"""``qos-guard policy``'s output is YAML the API server takes: its --namespace validated as the
namespace name it must be, the objects serialized (never a value pasted into text), and a first line saying the
Kubernetes version they need."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import inprocess
from webhook.core.config import Config
from webhook.policies.generate import PolicyError, render

# libyaml's parser with PyYAML's safe constructors: the same YAML as yaml.safe_load, 15 times faster on the
# 100 KB a render prints (0.007 s against 0.11 s), which the property below reads 60 times.
LIBYAML = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def _namespaces(docs: list[dict[str, Any]]) -> set[str]:
    found: set[str] = {d["metadata"]["namespace"] for d in docs if "namespace" in d["metadata"]}
    found |= {d["spec"]["paramRef"]["namespace"] for d in docs if "paramRef" in (d.get("spec") or {})}
    return found


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.text(max_size=80), st.from_regex(LABEL, fullmatch=True)))
def test_any_namespace_is_refused_or_printed_as_valid_yaml_naming_it(namespace: str) -> None:
    """`''` and `Bad_NS` printed objects the API server refuses; `a'b` printed YAML that did not parse."""
    valid = len(namespace) <= 63 and LABEL.fullmatch(namespace) is not None
    try:
        text = render(Config(), "all", namespace)
    except PolicyError as exc:
        assert not valid, (namespace, exc)
        assert str(exc).startswith(f"--namespace {namespace[:63]!r}"), exc
        assert "DNS-1123 label" in str(exc)
        return
    assert valid, namespace
    docs = list(yaml.load_all(text, Loader=LIBYAML))
    assert _namespaces(docs) == {namespace}


@pytest.mark.parametrize("namespace", ["", "Bad_NS", "a'b", "a: b", "x" * 64, "-a", "a\nb"])
def test_the_cli_refuses_a_namespace_the_api_server_would(namespace: str) -> None:
    out = inprocess.run(["policy", f"--namespace={namespace}"])
    assert out.returncode == 2 and out.stdout == "", out
    assert out.stderr.startswith(f"qos-guard: policy: --namespace {namespace[:63]!r}"), out.stderr
    assert len(out.stderr) < 300 and "Traceback" not in out.stderr


@pytest.mark.parametrize(("mode", "since", "mutating"), [("all", "1.36", True), ("mutate", "1.36", True),
                                                         ("enforce", "1.35", False), ("warn", "1.35", False)])
def test_the_output_says_which_kubernetes_it_needs(mode: str, since: str, mutating: bool) -> None:
    """On a cluster before 1.36, kubectl apply created the ValidatingAdmissionPolicies and failed on the
    MutatingAdmissionPolicy: a partial install nothing warned about."""
    text = render(Config(), mode)
    first = text.splitlines()[0]
    assert first.startswith("# qos-guard policy: ") and f"Kubernetes {since} or later" in first, first
    kinds = {d["kind"] for d in yaml.safe_load_all(text)}
    assert ("MutatingAdmissionPolicy" in kinds) is mutating
    assert ("MutatingAdmissionPolicy v1 is served from 1.36" in first) is mutating
