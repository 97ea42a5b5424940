"""The generic list+watch machinery (webhook/cluster/watch.py) over a scripted API, for namespaced objects:
keys by namespace/name, selectors on the list and the watch, 410 Gone, deletions, a refused watch, a stop that
does not wait for the API server to end the watch. tests/unit/test_topology_cache.py covers paging, resume and
bounds through the topology cache; tests/e2e/test_agent_watch.py runs it against a real API server."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from tests import waiting
from webhook.cluster import watch
from webhook.cluster.watch import Reflector, Store, key_of

PODS = "/api/v1/pods"


# Not tests/builders.pod: a watched object as the watch cache keys it, its metadata and nodeName only.
def pod(ns: str, name: str, rv: str = "1", node: str = "n1") -> dict[str, Any]:
    return {"metadata": {"namespace": ns, "name": name, "resourceVersion": rv}, "spec": {"nodeName": node}}


def event(kind: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode()


class Blocked:
    """A watch that sends nothing until it is shut down (as a quiet API server's watch does for minutes)."""

    def __init__(self) -> None:
        self.closed = threading.Event()

    def lines(self) -> Iterator[bytes]:
        self.closed.wait(60)
        if False:  # pragma: no cover - a generator that yields nothing
            yield b""

    def shutdown(self) -> None:
        self.closed.set()


class Scripted:
    """Lists and watches answered from scripts, in order; once a script is used up, a watch blocks."""

    def __init__(self) -> None:
        self.lists: list[tuple[int, Any]] = []
        self.watches: list[tuple[int, list[bytes]]] = []
        self.calls: list[tuple[str, dict[str, str]]] = []
        self.blocked: list[Blocked] = []

    def get(self, path: str, query: list[tuple[str, str]], accept: str) -> tuple[int, Any]:
        self.calls.append(("list", dict(query)))
        if len(self.lists) > 1:
            return self.lists.pop(0)
        return self.lists[0] if self.lists else (200, {"items": [], "metadata": {"resourceVersion": "1"}})

    def stream(self, path: str, query: list[tuple[str, str]], accept: str) -> tuple[int, Iterator[bytes], Any]:
        self.calls.append(("watch", dict(query)))
        if self.watches:
            status, events = self.watches.pop(0)
            return status, iter(events), None
        blocked = Blocked()
        self.blocked.append(blocked)
        return 200, blocked.lines(), blocked


def reflect(api: Scripted, store: Store, until: Callable[[], bool], **selectors: str) -> list[str | None]:
    """Run a reflector of Pods until ``until()`` holds (at most 10 s: else the test fails, naming it); the
    problems it reported."""
    stop = threading.Event()
    problems: list[str | None] = []

    def changed(resource: str, problem: str | None) -> None:
        problems.append(problem)
        if until():
            stop.set()

    reflector = Reflector("pods", api, PODS, ("application/json", "application/json"), store, changed, stop,
                          **selectors)
    thread = threading.Thread(target=reflector.run, daemon=True)
    thread.start()
    try:
        waiting.eventually("the reflector's condition", lambda: stop.is_set() or until(), 10, every=0.01,
                           seen=lambda: problems)
    finally:
        stop.set()
        reflector.interrupt()
        thread.join(5)
    assert not thread.is_alive()
    assert until(), f"the reflector did not get there in 10 s; problems: {problems}"
    return problems


def test_namespaced_objects_are_kept_by_namespace_and_name_cluster_scoped_by_name() -> None:
    store = Store(lambda o: o["metadata"]["name"])
    store.replace([pod("a", "web"), pod("b", "web"), {"metadata": {"name": "node-1"}}, {"metadata": {}}])
    assert sorted(store.items) == ["a/web", "b/web", "node-1"]
    store.apply("DELETED", pod("a", "web"))
    assert sorted(store.snapshot()) == ["b/web", "node-1"]
    assert key_of({"metadata": {"namespace": "a"}}) == ""  # unnamed: not kept


def test_selectors_reach_the_list_and_the_watch() -> None:
    api = Scripted()
    api.lists = [(200, {"items": [pod("a", "web")], "metadata": {"resourceVersion": "7"}})]
    api.watches = [(200, [event("ADDED", pod("b", "db", rv="8"))])]
    store = Store(lambda o: o)
    reflect(api, store, lambda: "b/db" in store.items, label_selector="app=x", field_selector="spec.nodeName=n1")
    (_, listed), (_, watched) = api.calls[:2]
    assert listed == {"limit": str(watch.PAGE), "labelSelector": "app=x", "fieldSelector": "spec.nodeName=n1"}
    assert watched["labelSelector"] == "app=x" and watched["fieldSelector"] == "spec.nodeName=n1"
    assert watched["resourceVersion"] == "7" and watched["watch"] == "1"


def test_no_selector_no_selector_in_the_query() -> None:
    api = Scripted()
    store = Store(lambda o: o)
    reflect(api, store, lambda: store.listed)
    assert api.calls  # all() over no call holds for any code
    assert all("labelSelector" not in q and "fieldSelector" not in q for _, q in api.calls)


def test_a_deleted_pod_leaves_the_store_and_a_modified_one_is_replaced() -> None:
    api = Scripted()
    api.lists = [(200, {"items": [pod("a", "web"), pod("b", "web")], "metadata": {"resourceVersion": "5"}})]
    api.watches = [(200, [event("DELETED", pod("a", "web", rv="6")),
                          event("MODIFIED", pod("b", "web", rv="7", node="n2"))])]
    store = Store(lambda o: o["spec"]["nodeName"])
    reflect(api, store, lambda: "a/web" not in store.items and store.items.get("b/web") == "n2")
    assert store.items == {"b/web": "n2"}


@pytest.mark.parametrize("gone", ["status", "event"])
def test_an_expired_watch_lists_again_and_replaces_the_namespaced_store(gone: str) -> None:
    api = Scripted()
    api.lists = [(200, {"items": [pod("a", "web")], "metadata": {"resourceVersion": "10"}}),
                 (200, {"items": [pod("c", "new")], "metadata": {"resourceVersion": "99"}})]
    api.watches = [(410, []) if gone == "status" else (200, [event("ERROR", {"kind": "Status", "code": 410})])]
    store = Store(lambda o: o)
    reflect(api, store, lambda: "c/new" in store.items, field_selector="spec.nodeName=n1")
    assert list(store.items) == ["c/new"]
    assert [kind for kind, _ in api.calls][:3] == ["list", "watch", "list"]
    assert api.calls[2][1]["fieldSelector"] == "spec.nodeName=n1"  # the relist keeps the selector


def test_a_refused_watch_is_said_with_the_way_out_and_the_store_is_listed_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watch, "RETRY_MISSING", 0.01)
    api = Scripted()
    api.lists = [(200, {"items": [pod("a", "web")], "metadata": {"resourceVersion": "3"}}),
                 (200, {"items": [pod("a", "web"), pod("a", "db")], "metadata": {"resourceVersion": "4"}})]
    api.watches = [(403, [])]
    store = Store(lambda o: o)
    problems = reflect(api, store, lambda: "a/db" in store.items)
    assert "watching pods is not allowed (HTTP 403): grant list and watch on pods" in problems
    assert [kind for kind, _ in api.calls][:3] == ["list", "watch", "list"]


def test_a_refused_list_names_the_grant() -> None:
    api = Scripted()
    api.lists = [(403, {"message": "pods is forbidden"})]
    problems = reflect(api, Store(lambda o: o), lambda: True)
    assert problems[0] == "listing pods is not allowed (HTTP 403 pods is forbidden): grant list and watch on pods"


def test_stopping_ends_a_quiet_watch_at_once() -> None:
    api = Scripted()
    store = Store(lambda o: o)
    stop = threading.Event()
    reflector = Reflector("pods", api, PODS, ("", ""), store, lambda *_: None, stop)
    thread = threading.Thread(target=reflector.run, daemon=True)
    thread.start()
    waiting.eventually("the watch to start", lambda: api.blocked, within=5, every=0.01)
    started = time.monotonic()
    stop.set()
    reflector.interrupt()
    thread.join(5)
    assert not thread.is_alive() and time.monotonic() - started < 2
    assert [kind for kind, _ in api.calls] == ["list", "watch"]  # no retry after the interruption


def test_a_list_is_projected_page_by_page_never_held_whole() -> None:
    """Whole Node objects are tens of kilobytes: a store built from a list must keep each page's projections
    and let the page go before the next is read, or a 5,000-node list would be held whole at once."""
    api = Scripted()
    api.lists = [(200, {"items": [pod("a", f"p{page}-{i}") for i in range(3)],
                        "metadata": {"resourceVersion": "7", "continue": f"c{page}" if page < 2 else ""}})
                 for page in range(3)]
    kept_when_listed: list[int] = []

    def keep(obj: Mapping[str, Any]) -> str:
        kept_when_listed.append(len(api.calls))
        return key_of(obj)

    store = Store(keep)
    listing = watch.Listing(api, PODS, "application/json")
    store.rebuild(listing)
    # Each object was projected while its own page was the last one read.
    assert kept_when_listed == [1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert len(store.items) == 9 and listing.resource_version == "7" and listing.count == 9
    assert [c[1].get("continue") for c in api.calls] == [None, "c0", "c1"]


def test_a_broken_watch_resumes_from_the_last_version_it_saw(monkeypatch: pytest.MonkeyPatch) -> None:
    """client-go keeps the last synced version per event: resuming from the list's would replay every event
    since (a deleted Pod back in the store until its deletion is replayed) and meet 410 sooner."""
    monkeypatch.setattr(watch, "BACKOFF_FIRST", 0.01)
    api = Scripted()
    api.lists = [(200, {"items": [pod("a", "web")], "metadata": {"resourceVersion": "5"}})]
    api.watches = [(200, [event("ADDED", pod("a", "db", rv="8")), event("BOOKMARK", pod("", "", rv="9")),
                          b"{not json"])]
    store = Store(lambda o: o)
    problems = reflect(api, store, lambda: len([c for c in api.calls if c[0] == "watch"]) == 2 and bool(api.blocked))
    watches = [q for kind, q in api.calls if kind == "watch"]
    assert [q["resourceVersion"] for q in watches[:2]] == ["5", "9"]
    assert [kind for kind, _ in api.calls].count("list") == 1  # resumed, not listed again
    assert any(p and p.startswith("pods: ") and p.endswith("; retrying") for p in problems)


def test_a_watch_that_ends_at_once_with_nothing_backs_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """A proxy that closes every watch at once must not turn the reflector into a busy loop on the API server."""
    monkeypatch.setattr(watch, "BACKOFF_FIRST", 0.05)
    api = Scripted()
    api.watches = [(200, []), (200, []), (200, [])]
    store = Store(lambda o: o)
    problems = reflect(api, store, lambda: bool(api.blocked))
    assert problems.count("pods: watch pods: ended at once with no event; retrying") == 3
    assert [kind for kind, _ in api.calls] == ["list", "watch", "watch", "watch", "watch"]


def test_an_expired_continue_token_reads_the_list_again_paged_and_the_store_keeps_only_it() -> None:
    """client-go's pager: a 410 on a continue page means the snapshot it paged through is compacted away; the
    list is read again (paged, not older than the first: resourceVersion + NotOlderThan), not reported as
    refused, and the store is rebuilt from the new list only: p0, deleted meanwhile, is not kept (a ghost)."""
    api = Scripted()
    api.lists = [(200, {"items": [pod("a", "p0")], "metadata": {"resourceVersion": "7", "continue": "c0"}}),
                 (410, {"message": "The provided continue parameter is too old"}),
                 (200, {"items": [pod("a", "p1")], "metadata": {"resourceVersion": "12", "continue": "n0"}}),
                 (200, {"items": [pod("a", "p2")], "metadata": {"resourceVersion": "12"}})]
    store = Store(key_of)
    listing = watch.Listing(api, PODS, "application/json")
    store.rebuild(listing)
    assert sorted(store.items) == ["a/p1", "a/p2"] and listing.resource_version == "12" and listing.count == 2
    assert [(q.get("limit"), q.get("continue"), q.get("resourceVersion"), q.get("resourceVersionMatch"))
            for _, q in api.calls] == [(str(watch.PAGE), None, None, None), (str(watch.PAGE), "c0", None, None),
                                       (str(watch.PAGE), None, "7", "NotOlderThan"),
                                       (str(watch.PAGE), "n0", None, None)]


@pytest.mark.parametrize(("status", "refused"), [(404, True), (500, False), (429, False)])
def test_only_a_refusal_is_reported_as_one(status: int, refused: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """401/403/404 name what grants or installs the resource; an overloaded or failing API server is retried
    with backoff and said as what it is."""
    monkeypatch.setattr(watch, "BACKOFF_FIRST", 0.01)
    monkeypatch.setattr(watch, "RETRY_MISSING", 0.01)
    api = Scripted()
    api.lists = [(status, {"message": "no"}), (200, {"items": [pod("a", "web")], "metadata": {"resourceVersion": "2"}})]
    store = Store(lambda o: o)
    problems = reflect(api, store, lambda: "a/web" in store.items)
    expected = f"listing pods: HTTP {status} no" if refused else f"pods: listing {PODS}: HTTP {status} no; retrying"
    assert problems[0] == expected


def test_a_watch_not_found_lists_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The resource went away (a CRD deleted): listing again says so, where retrying the watch would not."""
    monkeypatch.setattr(watch, "RETRY_MISSING", 0.01)
    api = Scripted()
    api.lists = [(200, {"items": [], "metadata": {"resourceVersion": "3"}}), (404, {"message": "not found"})]
    api.watches = [(404, [])]
    problems = reflect(api, Store(lambda o: o), lambda: len(api.calls) >= 3)
    assert [kind for kind, _ in api.calls][:3] == ["list", "watch", "list"]
    assert "watching pods: HTTP 404" in problems


def test_an_unexpected_failure_is_said_and_the_reflector_lists_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever escapes (a projection's bug, a RecursionError) must not end the thread: the store would stay
    stale for the life of the webhook or agent, unnoticed."""
    monkeypatch.setattr(watch, "RESTART_AFTER", 0.01)
    api = Scripted()
    api.lists = [(200, {"items": [pod("a", "web")], "metadata": {"resourceVersion": "2"}})]
    failures = iter([RecursionError("too deep")])

    def keep(obj: Any) -> Any:
        for failure in failures:
            raise failure
        return obj

    store = Store(keep)
    problems = reflect(api, store, lambda: "a/web" in store.items)
    assert problems[0] == "pods: RecursionError: too deep; listing again" and problems[-1] is None


def test_a_stop_while_the_watch_opens_is_not_missed() -> None:
    """``interrupt`` finds no response to close while the watch is being opened; the reflector must see the stop
    itself, or it waits for the API server to end a quiet watch minutes later."""
    api = Scripted()
    stop = threading.Event()
    opened = api.stream

    def stream(path: str, query: list[tuple[str, str]], accept: str) -> tuple[int, Iterator[bytes], Any]:
        answer = opened(path, query, accept)
        stop.set()
        return answer

    api.stream = stream  # type: ignore[method-assign]
    reflector = Reflector("pods", api, PODS, ("", ""), Store(lambda o: o), lambda *_: None, stop)
    thread = threading.Thread(target=reflector.run, daemon=True)
    started = time.monotonic()
    thread.start()
    thread.join(5)
    assert not thread.is_alive() and time.monotonic() - started < 2


class _RetryAfter:
    """A watch answer's headers, as urllib3's response carries them."""

    def __init__(self) -> None:
        self.headers = {"Retry-After": "1"}


@pytest.mark.parametrize(("status", "floor"), [(429, 1.0), (503, 1.0), (400, 0.0)])
def test_a_watch_answered_overloaded_waits_its_retry_after(status: int, floor: float,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The reflector retries with the package's one backoff (webhook/cluster/backoff.py): an overloaded API
    server's Retry-After is a floor under the (here tiny) doubling wait, as client-go reads it; a status that is
    not the server's load (400) has no floor."""
    monkeypatch.setattr(watch, "BACKOFF_FIRST", 0.01)
    api = Scripted()
    opened: list[float] = []
    scripted = api.stream

    def stream(path: str, query: list[tuple[str, str]], accept: str) -> tuple[int, Iterator[bytes], Any]:
        opened.append(time.monotonic())
        if len(opened) == 1:
            api.calls.append(("watch", dict(query)))
            return status, iter([]), _RetryAfter()
        return scripted(path, query, accept)

    monkeypatch.setattr(api, "stream", stream)
    problems = reflect(api, Store(lambda o: o), lambda: len(opened) >= 2)
    assert f"pods: watch pods: HTTP {status}; retrying" in problems
    waited = opened[1] - opened[0]
    assert waited >= floor and (floor or waited < 0.5), waited


def test_an_object_the_store_does_not_keep_takes_no_room_and_truncates_nothing() -> None:
    """At its limit a store refuses new objects (and says so), but one its projection drops (a claim made for a
    Pod, an NRT without the attribute read) is no object it left out."""
    store = Store(lambda o: o if o["metadata"]["name"].startswith("kept") else None, limit=2)
    store.apply("ADDED", {"metadata": {"name": "kept-1"}})
    store.apply("ADDED", {"metadata": {"name": "kept-2"}})
    store.apply("ADDED", {"metadata": {"name": "dropped"}})
    assert not store.truncated and sorted(store.snapshot()) == ["kept-1", "kept-2"]
    store.apply("ADDED", {"metadata": {"name": "kept-3"}})
    assert store.truncated and sorted(store.snapshot()) == ["kept-1", "kept-2"]
