"""The one list pager (webhook/cluster/pager.py) behind a real reflector (webhook/cluster/watch.py), against the
real kube-apiserver and etcd, with pages of two objects (limit=2):

- an object deleted between pages: the list is a consistent snapshot, so it is listed, and the watch from the
  list's resourceVersion brings its deletion: the store ends without it;
- an object already listed, deleted, then the continue token expired: etcd is compacted through its v3 JSON
  gateway (POST /v3/kv/compaction) and the API server told through ``compact_rev_key``, as its own compactor
  does (the watch cache then drops its list snapshots, so the next page is read from etcd: 410 Expired). The
  new list is pinned with ``resourceVersion`` + ``NotOlderThan`` and the store is rebuilt from it only: the
  deleted object is not a ghost (before, the store kept what the first pass held, for ever: the watch began
  after the deletion, so no event ever removed it).
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests

from tests import waiting
from tests.e2e.conftest import Cluster
from webhook.cluster import watch
from webhook.cluster.watch import ApiTransport, Reflector, Store, key_of

NAMESPACE = "e2e-pager"
PATH = f"/api/v1/namespaces/{NAMESPACE}/configmaps"


def configmaps(cluster: Cluster, *names: str) -> None:
    cluster.kubectl("apply", "-f", "-", check=True, stdin=[
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": n, "namespace": NAMESPACE}, "data": {"n": n}}
        for n in names])


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def compact(cluster: Cluster) -> int:
    """Compact etcd at its current revision and record it where the API server's compactor does
    (``compact_rev_key``): the API server's watch of that key then tells its watch cache."""
    head = requests.post(f"{cluster.etcd}/v3/kv/range", json={"key": b64("compact_rev_key")}, timeout=10)
    head.raise_for_status()
    revision = int(head.json()["header"]["revision"])
    done = requests.post(f"{cluster.etcd}/v3/kv/compaction", json={"revision": str(revision), "physical": True},
                         timeout=30)
    assert done.ok, done.text
    put = requests.post(f"{cluster.etcd}/v3/kv/put",
                        json={"key": b64("compact_rev_key"), "value": b64(str(revision))}, timeout=10)
    assert put.ok, put.text
    return revision


class Hooked:
    """The real transport; ``after_first(token)`` runs once, after the first list page is answered."""

    def __init__(self, inner: ApiTransport, after_first: Callable[[str], object]) -> None:
        self.inner, self.after_first = inner, after_first
        self.lists: list[dict[str, str]] = []
        self.answers: list[int] = []

    def get(self, path: str, query: list[tuple[str, str]], accept: str) -> tuple[int, Any]:
        self.lists.append(dict(query))
        status, body = self.inner.get(path, query, accept)
        self.answers.append(status)
        if len(self.lists) == 1:
            self.after_first(str((body.get("metadata") or {}).get("continue") or ""))
        return status, body

    def stream(self, path: str, query: list[tuple[str, str]], accept: str) -> tuple[int, Iterator[bytes], Any]:
        return self.inner.stream(path, query, accept)


def reflect(transport: Hooked, until: Callable[[Store], bool], what: str) -> Store:
    store = Store(key_of)
    stop = threading.Event()
    problems: list[str | None] = []
    reflector = Reflector("configmaps", transport, PATH, ("application/json",) * 2, store,
                          lambda name, problem: problems.append(problem), stop)
    thread = threading.Thread(target=reflector.run, daemon=True)
    thread.start()
    try:
        waiting.eventually(what, lambda: store.listed and until(store), 60, every=0.1,
                           seen=lambda: (sorted(store.items), problems[-3:], transport.lists, transport.answers))
    finally:
        stop.set()
        reflector.interrupt()
        thread.join(10)
    return store


@pytest.fixture
def names(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    monkeypatch.setattr(watch, "PAGE", 2)
    cluster.namespace(NAMESPACE)
    listed = [f"cm-{i}" for i in range(6)]
    configmaps(cluster, *listed)
    yield listed
    cluster.kubectl("delete", "configmaps", "--all", "-n", NAMESPACE, "--wait=false")


def names_of(store: Store) -> list[str]:
    return sorted(k.split("/", 1)[1] for k in store.snapshot() if k.split("/", 1)[1].startswith("cm-"))


def test_an_object_deleted_between_pages_leaves_the_store(cluster: Cluster, names: list[str]) -> None:
    transport = Hooked(ApiTransport(str(cluster.kubeconfig)),
                       lambda token: cluster.kubectl("delete", "configmap", "cm-4", "-n", NAMESPACE, check=True))
    store = reflect(transport, lambda s: "cm-4" not in names_of(s) and len(names_of(s)) == 5,
                    "the store without cm-4, deleted between pages")
    assert names_of(store) == ["cm-0", "cm-1", "cm-2", "cm-3", "cm-5"]
    assert [q.get("limit") for q in transport.lists[:3]] == ["2", "2", "2"] and "continue" in transport.lists[1]


def test_an_object_deleted_then_an_expired_token_is_no_ghost(cluster: Cluster, names: list[str]) -> None:
    """cm-0 is on the first page; deleted, cm-new created, etcd compacted; the next page is 410 Expired."""
    seen: dict[str, Any] = {}

    def delete_and_compact(token: str) -> None:
        assert token, "the first page of two should have a continue token"
        cluster.kubectl("delete", "configmap", "cm-0", "-n", NAMESPACE, check=True)
        configmaps(cluster, "cm-new")
        seen["compacted"] = compact(cluster)
        probe = ApiTransport(str(cluster.kubeconfig))

        def expired() -> bool:
            status, _ = probe.get(PATH, [("limit", "2"), ("continue", token)], "application/json")
            return status == 410
        seen["expired after"] = waiting.eventually("the continue token expired after compaction", expired, 60,
                                                   every=0.5)

    transport = Hooked(ApiTransport(str(cluster.kubeconfig)), delete_and_compact)
    store = reflect(transport, lambda s: True, "the list read again after the expired token")
    assert 410 in transport.answers, (transport.lists, transport.answers)
    assert names_of(store) == ["cm-1", "cm-2", "cm-3", "cm-4", "cm-5", "cm-new"], seen
    relist = transport.lists[transport.answers.index(410) + 1]
    assert relist.get("resourceVersionMatch") == "NotOlderThan" and relist.get("resourceVersion") and \
        relist.get("limit") == "2" and "continue" not in relist
