"""The minor judged: read from versions as users and API servers write them, and said as it was chosen."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.cluster.client import ClusterError
from webhook.cluster.version import served
from webhook.core.kubeversion import (
    CHANGES,
    DEFAULT,
    SUPPORTED,
    Minor,
    Semantics,
    VersionError,
    nearest,
    parse_minor,
    resolve,
    served_minor,
)


@pytest.mark.parametrize(("text", "minor"), [("1.37", Minor(1, 37)), ("v1.37.2", Minor(1, 37)),
                                             ("1.33.4-eks-abc", Minor(1, 33)), ("v1.36.3+k3s1", Minor(1, 36))])
def test_versions_as_written(text: str, minor: Minor) -> None:
    assert parse_minor(text) == minor


@given(st.text(max_size=30))
def test_anything_else_is_a_named_refusal(text: str) -> None:
    try:
        parse_minor(text)
    except VersionError as exc:
        assert "is not a Kubernetes version" in str(exc)


def test_unsupported_minors_are_refused_naming_the_supported() -> None:
    with pytest.raises(VersionError, match=r"qos-guard judges 1\.33 to 1\.37"):
        resolve("1.32")


def test_an_api_servers_version_vendor_suffixes_included() -> None:
    assert served_minor({"major": "1", "minor": "37+", "gitVersion": "v1.37.2-gke.1"}) == Minor(1, 37)
    assert served_minor({"major": "", "minor": "", "gitVersion": "v1.35.4"}) == Minor(1, 35)
    kube, note = nearest(Minor(1, 39))
    assert kube is DEFAULT and note is not None and "judging with 1.37's semantics" in note


def test_which_minor_is_said_and_why() -> None:
    found = served(None, lambda: {"major": "1", "minor": "36", "gitVersion": "v1.36.3"})
    assert found.kube is not None and str(found.kube) == "1.36"
    assert found.says == "judging with Kubernetes 1.36 semantics (the API server's /version: v1.36.3)"
    configured = resolve("1.35")
    other = served(configured, lambda: {"major": "1", "minor": "37", "gitVersion": "v1.37.2"})
    assert str(other.kube) == "1.37" and "kubernetesVersion 1.35 is not used" in other.says

    def down() -> dict[str, object]:
        raise ClusterError("connection refused")

    fallback = served(configured, down)
    assert fallback.kube is None
    assert fallback.says == ("judging with Kubernetes 1.35 semantics (kubernetesVersion): the API server's version "
                             "is not known: connection refused")


# Each difference pinned per minor, written out by hand (1.33 .. 1.37): the CHANGES table must give exactly these.
PINNED = {
    "pod_level_resources": (False, True, True, True, True),
    "pod_level_qos_needs_set": (False, False, False, False, True),
    "pod_level_fix_defaulting": (False, False, False, False, True),
    "keeps_declared_qos": (True, True, True, True, False),
    "pod_level_resource_managers": (False, False, False, False, False),
    "dra": (False, True, True, True, True),
    "dra_extended_resources": (False, False, False, True, True),
    "mutating_admission_policy": (False, False, False, True, True),
    "zero_device_request_aligned": (False, False, False, True, True),
    "toleration_comparison_operators": (False, False, True, True, True),
}


@pytest.mark.parametrize("field", sorted(PINNED))
def test_each_difference_per_minor(field: str) -> None:
    assert tuple(getattr(SUPPORTED[Minor(1, m)], field) for m in range(33, 38)) == PINNED[field]


def test_every_field_is_pinned_and_in_the_table_once() -> None:
    fields = {f.name for f in dataclasses.fields(Semantics)} - {"minor"}
    assert set(PINNED) == fields
    assert sorted(name for name, _, _ in CHANGES) == sorted(fields)
