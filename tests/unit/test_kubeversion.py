"""The minor judged: read from versions as users and API servers write them, and said as it was chosen."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.helpers import judged_from, pre_release_minors
from webhook.cluster.client import ClusterError
from webhook.cluster.version import served
from webhook.core.kubeversion import (
    CHANGES,
    DEFAULT,
    NEWEST,
    PRERELEASES,
    SUPPORTED,
    Minor,
    Semantics,
    VersionError,
    nearest,
    newest_released,
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
    with pytest.raises(VersionError, match=r"qos-guard judges 1\.33 to 1\.38"):
        resolve("1.32")
    with pytest.raises(VersionError, match=r"Kubernetes 1\.39 is not supported"):
        resolve("v1.39.0-alpha.1")


def test_an_api_servers_version_vendor_suffixes_included() -> None:
    assert served_minor({"major": "1", "minor": "37+", "gitVersion": "v1.37.2-gke.1"}) == Minor(1, 37)
    assert served_minor({"major": "", "minor": "", "gitVersion": "v1.35.4"}) == Minor(1, 35)
    kube, note = nearest(Minor(1, 39))
    assert kube is SUPPORTED[NEWEST] and note is not None and "judging with 1.38's semantics" in note


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


# Each difference pinned per minor, written out by hand (1.33 .. 1.38): the CHANGES table must give exactly these.
# 1.38 (v1.38.0-beta.0) answers as 1.37 for every field but one: its gates at their defaults move none
# (PodLevelResourceManagers still beta and off, TaintTolerationComparisonOperators still alpha and off), and its
# Memory Manager's pod-scope hint counts every container's memory types (found by tests/fidelity's topology
# differential at v1.38.0-beta.0: 7 of 5,598 cases disagreed until it was modelled).
PINNED = {
    "pod_level_resources": (False, True, True, True, True, True),
    "pod_level_qos_needs_set": (False, False, False, False, True, True),
    "pod_level_fix_defaulting": (False, False, False, False, True, True),
    "keeps_declared_qos": (True, True, True, True, False, False),
    "pod_level_resource_managers": (False, False, False, False, False, False),
    "dra": (False, True, True, True, True, True),
    "dra_extended_resources": (False, False, False, True, True, True),
    "dra_consumable_capacity": (False, False, False, True, True, True),
    "mutating_admission_policy": (False, False, False, True, True, True),
    "zero_device_request_aligned": (False, False, False, True, True, True),
    "toleration_comparison_operators": (False, False, True, True, True, True),
    "pod_memory_hint_all_containers": (False, False, False, False, False, True),
}


@pytest.mark.parametrize("field", sorted(PINNED))
def test_each_difference_per_minor(field: str) -> None:
    assert tuple(getattr(SUPPORTED[Minor(1, m)], field) for m in range(33, 39)) == PINNED[field]


def test_every_field_is_pinned_and_in_the_table_once() -> None:
    fields = {f.name for f in dataclasses.fields(Semantics)} - {"minor", "prerelease"}
    assert set(PINNED) == fields
    assert sorted(name for name, _, _ in CHANGES) == sorted(fields)


ROOT = Path(__file__).resolve().parents[2]


def test_a_minor_not_yet_released_is_judged_from_its_pre_release_and_is_not_the_default() -> None:
    """Each minor the table judges from a pre-release (1.38 from v1.38.0-beta.0 until v1.38.0 is served) resolves
    from that release's name and says so in every answer; the default is the newest minor released as GA."""
    for minor, release in PRERELEASES.items():
        kube = resolve(f"1.{minor}")
        assert kube is resolve(release) and kube.prerelease == release
        assert kube.note == (f"Kubernetes 1.{minor} is judged from its pre-release {release}: an answer may change "
                             f"at 1.{minor}.0")
        assert len(f"({kube.note})") < 120  # one admission warning, never truncated (review.fit_warnings)
    assert DEFAULT.prerelease is None and DEFAULT.note is None
    assert DEFAULT.minor == max(m for m in SUPPORTED if m.minor not in PRERELEASES)
    assert all(s.note is None for m, s in SUPPORTED.items() if m.minor not in PRERELEASES)


@pytest.mark.parametrize("release", ["v1.38.0-beta.0", "v1.39.0-rc.12", "v1.99.0-alpha.3"])
def test_the_default_passes_over_every_pre_release_minor_and_the_note_fits_a_warning(release: str) -> None:
    """Independent of the live table: the newest supported minor, then also the one before it, made pre-releases
    of a fixture table; the default is the newest left released, and the note names the release."""
    newest = dataclasses.replace(SUPPORTED[NEWEST], prerelease=release)
    before = Minor(1, NEWEST.minor - 1)
    table = {**SUPPORTED, NEWEST: newest}
    assert newest_released(table) is SUPPORTED[before]
    table[before] = dataclasses.replace(SUPPORTED[before], prerelease=release)
    assert newest_released(table) is SUPPORTED[Minor(1, NEWEST.minor - 2)]
    assert newest_released({**SUPPORTED, NEWEST: dataclasses.replace(newest, prerelease=None)}).minor == NEWEST
    assert newest.note == (f"Kubernetes {NEWEST} is judged from its pre-release {release}: an answer may change at "
                           f"{NEWEST}.0")
    assert len(f"({newest.note})") < 120


def _pins() -> dict[int, str]:
    """The k8s.io/kubernetes release each supported minor's oracle is pinned to (hack/oracle/minors/v1.MINOR.mod)."""
    pins = {}
    for minor in SUPPORTED:
        mod = (ROOT / "hack" / "oracle" / "minors" / f"v{minor}.mod").read_text()
        found = re.search(r"^\tk8s\.io/kubernetes (v\S+)$", mod, re.MULTILINE)
        assert found, minor
        pins[minor.minor] = found.group(1)
    return pins


def test_the_pre_release_judged_is_the_one_the_oracle_and_the_tools_are_built_at() -> None:
    """What each minor's answers are proven against (hack/oracle/minors/v1.MINOR.mod, make test-versions) is the
    release the answers name: a pin moved alone (to rc.0, or to v1.38.0 with the line left in PRERELEASES, or a
    KUBE_VERSIONS entry left behind) fails here. hack/release-day.sh moves the three together."""
    versions = re.search(r"^KUBE_VERSIONS \?= (.*)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert versions
    by_minor = {int(v.split(".")[1]): v for v in versions.group(1).split()}
    assert by_minor == _pins()
    assert {m: v for m, v in by_minor.items() if "-" in v} == PRERELEASES


def test_a_served_released_minor_says_nothing_of_a_pre_release() -> None:
    released = served(None, lambda: {"major": "1", "minor": "37", "gitVersion": "v1.37.2"})
    assert released.kube is SUPPORTED[Minor(1, 37)] and "pre-release" not in released.says


@pytest.mark.parametrize(("minor", "release"), pre_release_minors())
def test_an_api_server_at_a_pre_release_is_judged_from_it_and_said(monkeypatch: pytest.MonkeyPatch, minor: int,
                                                                    release: str) -> None:
    """The live table's pre-releases and a stand-in one (so this runs, and can fail, when the table is empty)."""
    kube = judged_from(monkeypatch, minor, release)
    found = served(None, lambda: {"major": "1", "minor": str(minor), "gitVersion": release})
    assert found.kube is kube
    assert found.says == (f"judging with Kubernetes 1.{minor} semantics (the API server's /version: {release}); "
                          f"Kubernetes 1.{minor} is judged from its pre-release {release}: an answer may change at "
                          f"1.{minor}.0")
