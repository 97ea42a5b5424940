"""The agent's watched view (webhook/node/watched.py) without threads: what it keeps of a Pod and a namespace,
that it refuses to answer before both lists, and that a problem is said once."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import pytest

from tests import waiting
from tests.nodelogic.fakes import FakeAPI
from webhook.cluster import watch
from webhook.cluster.client import ClusterError
from webhook.node.observe import OptedIn
from webhook.node.watched import NotSynced, WatchedView, pod_kept


def test_a_pod_is_kept_without_its_managed_fields() -> None:
    obj: dict[str, Any] = {"metadata": {"name": "p", "namespace": "a", "managedFields": [{"manager": "kubectl"}]},
           "spec": {"nodeName": "n1"}}
    kept = pod_kept(obj)
    assert kept == {"metadata": {"name": "p", "namespace": "a"}, "spec": {"nodeName": "n1"}}
    assert "managedFields" in obj["metadata"]  # the event's object is not changed under the reflector


def test_before_both_lists_nothing_is_answered_then_the_stores_are() -> None:
    said: list[str] = []
    view = WatchedView(FakeAPI(), "n1", said.append)
    with pytest.raises(NotSynced, match="waiting for the first list of namespaces and pods"):
        view.opted_in()
    view.namespaces.replace([{"metadata": {"name": "enf", "labels": {"qos-guard.io/mode": "enforce"}}},
                             {"metadata": {"name": "off", "labels": {}}}])
    with pytest.raises(NotSynced, match="first list of pods from"):
        view.pods("n1", [])
    view.pod_store.replace([{"metadata": {"name": "p", "namespace": "enf", "managedFields": []}}])
    assert view.opted_in() == {"enf": OptedIn("enforce", None)}
    assert view.pods("n1", []) == {("enf", "p"): {"metadata": {"name": "p", "namespace": "enf"}}}
    with pytest.raises(ClusterError, match="watches the Pods of node n1, not n2"):
        view.pods("n2", [])
    view.namespaces.apply("DELETED", {"metadata": {"name": "enf"}})  # left the label selector
    assert view.opted_in() == {}


def test_a_problem_is_said_once_and_its_end_once() -> None:
    said: list[str] = []
    view = WatchedView(FakeAPI(), "n1", said.append)
    for _ in range(3):
        view._changed("pods", "listing pods is not allowed")
    view._changed("namespaces", None)
    view._changed("pods", None)
    view._changed("pods", None)
    assert said == ["listing pods is not allowed", "pods: listed and watched again"]


def test_a_reflector_that_fails_unexpectedly_says_so_and_lists_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watch, "RESTART_AFTER", 0.01)
    api = FakeAPI()
    api.pods = [{"metadata": {"name": "p", "namespace": "enf"}}]
    said: list[str] = []
    view = WatchedView(api, "n1", said.append)
    failures = iter([RuntimeError("boom")])

    def keep(obj: Mapping[str, Any]) -> dict[str, Any]:
        for failure in failures:
            raise failure
        return pod_kept(obj)

    view.pod_store.keep = keep
    view.start()
    try:
        assert view.wait_synced(5)
    finally:
        view.stop()
    assert view.pods("n1", []) == {("enf", "p"): {"metadata": {"name": "p", "namespace": "enf"}}}
    assert said == ["pods: RuntimeError: boom; listing again", "pods: listed and watched again"]
    assert [p for p, _ in api.listed].count("/api/v1/pods") == 2


def test_a_view_failing_for_longer_than_stale_after_is_not_judged_against(monkeypatch: pytest.MonkeyPatch) -> None:
    """Listed once, then the grant revoked (or the API server gone): the stores stop changing, and a cycle judged
    against them would count as ok while a new Pod is never seen. Past ``STALE_AFTER`` it is an error, said with
    the problem; a new problem does not restart the clock; the view is current again once the watch is."""
    from webhook.node import watched

    monkeypatch.setattr(watched, "STALE_AFTER", 0.2)
    view = WatchedView(FakeAPI(), "n1", lambda _: None)
    view.namespaces.replace([])
    view.pod_store.replace([{"metadata": {"name": "p", "namespace": "enf"}}])
    view._changed("pods", "pods: cannot reach the API server: refused; retrying")
    assert view.pods("n1", []) == {("enf", "p"): {"metadata": {"name": "p", "namespace": "enf"}}}  # not yet stale
    time.sleep(0.15)
    view._changed("pods", "listing pods is not allowed (HTTP 403)")
    time.sleep(0.1)
    with pytest.raises(NotSynced, match=r"the view of pods has not been current for 0 s \(listing pods is not "):
        view.pods("n1", [])
    with pytest.raises(NotSynced, match="view of pods"):  # a cycle reads both: it judges nothing
        view.opted_in()
    view._changed("pods", None)
    assert list(view.pods("n1", [])) == [("enf", "p")]


def test_a_cluster_without_dra_is_said_once_at_start_and_the_pods_are_judged(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Kubernetes 1.33 serves no resource.k8s.io/v1: the slices' list answers 404, every time it is retried. The
    agent says once what that means (not a missing grant), and judges the node's Pods all the same."""
    from tests.nodelogic.fakes import SLICES

    monkeypatch.setattr(watch, "RETRY_MISSING", 0.02)
    api = FakeAPI()
    api.pods = [{"metadata": {"name": "p", "namespace": "enf"}}]
    api.refuse[SLICES] = 404
    said: list[str] = []
    view = WatchedView(api, "n1", said.append)
    view.start()
    try:
        assert view.wait_synced(5)
        waiting.eventually("the slices listed again", lambda: [p for p, _ in api.listed].count(SLICES) >= 4, 5,
                           every=0.02)
    finally:
        view.stop()
    dra = [s for s in said if "resourceslices" in s]
    assert dra == [f"DRA devices are not visible on this node: the API server does not serve resourceslices in "
                   f"resource.k8s.io/v1 (Kubernetes serves it from 1.34); every other container is judged as usual "
                   f"(listing them: HTTP 404 {SLICES} is forbidden)"]
    assert "grant" not in dra[0]
    assert view.pods("n1", []) == {("enf", "p"): {"metadata": {"name": "p", "namespace": "enf"}}}
    assert view.slices("n1")[1] == dra[0]  # each DRA device is unknown with that reason
