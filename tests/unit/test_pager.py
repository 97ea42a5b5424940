"""The one list pager (webhook/cluster/pager.py) against a small in-process API that serves a list as the API
server's etcd3 store does: every write a new revision, a list a snapshot at one, continue tokens that carry it
and expire (410 Expired) once etcd compacted past it, ``resourceVersion`` refused beside a token. An object
deleted between pages and after an expired token must not survive in what is built from the list (a ghost: a
reservation that never ends, a node fingerprint that never matches again). tests/e2e/test_pager.py does the
same on a real kube-apiserver, its etcd compacted."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.cluster import pager, watch
from webhook.cluster.client import ClusterError, Lister
from webhook.cluster.pager import TooLarge, pages, whole
from webhook.cluster.watch import Listing, Reflector, Store, key_of
from webhook.core.workloads import KINDS

PODS = "/api/v1/namespaces/ns/pods"
EXPIRED = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Expired", "code": 410,
           "message": "The provided continue parameter is too old to display a consistent list result. You can "
                      "start a new list without the continue parameter."}


# Not tests/builders.pod: a listed item as the pager sees it, only the metadata it pages by.
def pod(name: str, rev: int) -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": name, "uid": f"u-{name}-{rev}", "resourceVersion": str(rev)}}


class FakeAPI:
    """One list endpoint, served from snapshots by revision; ``between(n)`` runs after the n-th page is
    answered (where a test deletes, creates and compacts)."""

    def __init__(self, names: list[str]) -> None:
        self.rev = 1
        self.history: dict[int, dict[str, dict[str, Any]]] = {1: {n: pod(n, 1) for n in names}}
        self.compacted = 0
        self.asked: list[dict[str, str]] = []
        self.between: Callable[[int], None] = lambda n: None
        self.events: list[tuple[int, str, dict[str, Any]]] = []

    def write(self, name: str, delete: bool = False) -> None:
        self.rev += 1
        snap = dict(self.history[self.rev - 1])
        if delete:
            self.events.append((self.rev, "DELETED", {**snap.pop(name), "metadata": {
                **self.history[self.rev - 1][name]["metadata"], "resourceVersion": str(self.rev)}}))
        else:
            snap[name] = pod(name, self.rev)
            self.events.append((self.rev, "ADDED", snap[name]))
        self.history[self.rev] = snap

    def compact(self) -> None:
        self.compacted = self.rev

    def get(self, query: list[tuple[str, str]]) -> tuple[int, Any]:
        q = dict(query)
        self.asked.append(q)
        token = q.get("continue", "")
        if token:
            if "resourceVersion" in q:
                return 400, {"message": "specifying resource version is not allowed when using continue"}
            at, after = int(token.split(":", 1)[0]), token.split(":", 1)[1]
            if at < self.compacted:
                return 410, EXPIRED
        else:
            at, after = self.rev, ""
            pinned = q.get("resourceVersion")
            if pinned and q.get("resourceVersionMatch") == "NotOlderThan" and int(pinned) > self.rev:
                return 504, {"message": "Too large resource version"}
        snap = self.history[at]
        names = sorted(n for n in snap if n > after)
        limit = int(q.get("limit") or 0) or len(names)
        page = names[:limit]
        body = {"kind": "PodList", "metadata": {"resourceVersion": str(at),
                                                "continue": f"{at}:{page[-1]}" if len(names) > limit else ""},
                "items": [snap[n] for n in page]}
        self.between(len(self.asked))
        return 200, body

    # the watch's transport, for a reflector
    def transport_get(self, path: str, query: list[tuple[str, str]], accept: str) -> tuple[int, Any]:
        return self.get(query)

    def stream(self, path: str, query: list[tuple[str, str]], accept: str) -> tuple[int, Iterator[bytes], Any]:
        since = int(dict(query)["resourceVersion"])
        lines = [json.dumps({"type": k, "object": o}).encode() for rev, k, o in self.events if rev > since]
        blocked = threading.Event()

        def stream() -> Iterator[bytes]:
            yield from lines
            blocked.wait(30)

        class Response:
            def shutdown(self) -> None:
                blocked.set()
        return 200, stream(), Response()


class AsTransport:
    def __init__(self, api: FakeAPI) -> None:
        self.get, self.stream = api.transport_get, api.stream


def delete_listed_then_compact(api: FakeAPI) -> None:
    """After the first page: delete ``a`` (on that page), create ``z``, and compact past the list's revision."""
    def between(n: int) -> None:
        if n == 1:
            api.write("a", delete=True)
            api.write("z")
            api.compact()
    api.between = between


def test_an_object_deleted_then_an_expired_token_leaves_no_ghost_in_the_store(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: the watch's pager read the list again whole and the store kept what the first pass held, so
    ``a``, deleted meanwhile, stayed for ever (the watch began after its deletion). Now the store is rebuilt
    from the new list only."""
    monkeypatch.setattr(watch, "PAGE", 2)
    api = FakeAPI(list("abcde"))
    delete_listed_then_compact(api)
    store = Store(key_of)
    listing = Listing(AsTransport(api), PODS, "application/json")
    store.rebuild(listing)
    assert sorted(store.items) == ["ns/b", "ns/c", "ns/d", "ns/e", "ns/z"]
    assert listing.resource_version == str(api.rev) and listing.count == 5
    # The new list is pinned not older than the one it replaces, on its first page only, and paged.
    assert [(q.get("continue", "")[:1], q.get("resourceVersion"), q.get("resourceVersionMatch"), q["limit"])
            for q in api.asked] == [("", None, None, "2"), ("1", None, None, "2"), ("", "1", "NotOlderThan", "2"),
                                    ("3", None, None, "2"), ("3", None, None, "2")]


def test_a_reflector_ends_without_the_ghost_and_watches_from_the_new_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watch, "PAGE", 2)
    api = FakeAPI(list("abcde"))
    delete_listed_then_compact(api)
    store = Store(key_of)
    stop = threading.Event()
    watched: list[str] = []
    stream = api.stream

    def recording(path: str, query: list[tuple[str, str]], accept: str) -> tuple[int, Iterator[bytes], Any]:
        watched.append(dict(query)["resourceVersion"])
        stop.set()
        return stream(path, query, accept)
    transport = AsTransport(api)
    transport.stream = recording
    reflector = Reflector("pods", transport, PODS, ("application/json",) * 2, store,
                          lambda name, problem: None, stop)
    thread = threading.Thread(target=reflector.run, daemon=True)
    thread.start()
    thread.join(10)
    reflector.interrupt()
    assert not thread.is_alive()
    assert sorted(store.items) == ["ns/b", "ns/c", "ns/d", "ns/e", "ns/z"]
    assert watched == [str(api.rev)]


def test_one_shot_readers_keep_the_new_list_only_and_audit_judges_each_once() -> None:
    """``Lister.list_objects`` (nodes, reports, the agent's reads) keeps the new list only; ``audit`` streams, so
    it leaves out of the new list what it judged already (``a`` was judged while it existed)."""
    api = FakeAPI(list("abcde"))
    delete_listed_then_compact(api)
    assert [o["metadata"]["name"] for o in whole(pages(api.get, PODS, limit=2))] == list("bcdez")
    api = FakeAPI(list("abcde"))
    delete_listed_then_compact(api)
    judged = []
    for page in pages(api.get, PODS, limit=2):
        judged += [o["metadata"]["name"] for o in page.items
                   if not (page.restart and o["metadata"]["name"] in judged)]
    assert judged == list("abcdez")


class Handler(BaseHTTPRequestHandler):
    api: FakeAPI

    def do_GET(self) -> None:
        path, _, query = self.path.partition("?")
        status, body = self.api.get(parse_qsl(query)) if path == PODS else (404, {"message": "not found"})
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def served(tmp_path: Any) -> Iterator[tuple[FakeAPI, str]]:
    api = FakeAPI(list("abcde"))
    Handler.api = api
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    config = tmp_path / "config"
    config.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "t",
        "clusters": [{"name": "t", "cluster": {"server": f"http://127.0.0.1:{server.server_port}"}}],
        "users": [{"name": "t", "user": {"token": "x"}}],
        "contexts": [{"name": "t", "context": {"cluster": "t", "user": "t"}}]}))
    yield api, str(config)
    server.shutdown()
    server.server_close()


def test_the_audit_lister_over_http_keeps_no_ghost_and_judges_each_once(served: tuple[FakeAPI, str]) -> None:
    api, config = served
    delete_listed_then_compact(api)
    assert [o["metadata"]["name"] for o in Lister(config, page_size=2).list_objects(PODS)] == list("bcdez")
    api.__init__(list("abcde"))  # type: ignore[misc]
    delete_listed_then_compact(api)
    judged = [x.obj["metadata"]["name"] for x in Lister(config, page_size=2).objects(
        ["ns"], {("", "Pod"): KINDS[("", "Pod")]}) if x.obj is not None]
    assert judged == list("abcdez")  # a, judged while it existed; none twice


def test_a_page_over_the_body_cap_is_asked_again_smaller_and_one_object_over_it_is_an_error() -> None:
    api = FakeAPI(list("abcdefgh"))
    sizes: list[str] = []

    def capped(query: list[tuple[str, str]]) -> tuple[int, Any]:
        limit = dict(query)["limit"]
        sizes.append(limit)
        if int(limit) > 2:
            raise TooLarge("over")
        return api.get(query)
    assert [o["metadata"]["name"] for o in whole(pages(capped, PODS, limit=8))] == list("abcdefgh")
    assert sizes == ["8", "4", "2", "2", "2", "2"]

    def never(query: list[tuple[str, str]]) -> tuple[int, Any]:
        raise TooLarge("over")
    with pytest.raises(ClusterError, match=f"one object is over {pager.BODY_CAP} bytes"):
        list(pages(never, PODS, limit=4))


def test_a_list_whose_token_keeps_expiring_is_given_up_with_the_way_out() -> None:
    api = FakeAPI(list("abcd"))

    def always(n: int) -> None:
        api.write(f"x{n}")
        api.compact()
    api.between = always
    with pytest.raises(ClusterError, match=r"expired 5 times in a row.*--etcd-compaction-interval"):
        list(pages(api.get, PODS, limit=1))


def test_a_refused_page_is_list_failed_with_its_status() -> None:
    with pytest.raises(pager.ListFailed, match="GET /x: HTTP 403 no") as caught:
        list(pages(lambda q: (403, {"message": "no"}), "/x"))
    assert caught.value.status == 403


# Any schedule of writes and compactions between pages: what is built is exactly the last list's snapshot.
step = st.tuples(st.sampled_from(["delete", "create", "compact", "nothing"]), st.integers(0, 9))


@settings(max_examples=200, deadline=None)
@given(st.lists(step, max_size=12), st.integers(1, 4))
def test_the_store_is_the_snapshot_of_the_last_list(schedule: list[tuple[str, int]], limit: int) -> None:
    api = FakeAPI([f"p{i}" for i in range(6)])

    def between(n: int) -> None:
        if n - 1 < len(schedule):
            what, i = schedule[n - 1]
            name = f"p{i}"
            if what == "delete" and name in api.history[api.rev]:
                api.write(name, delete=True)
            elif what == "create":
                api.write(name)
            elif what == "compact":
                api.compact()
    api.between = between
    listed = list(pages(api.get, PODS, limit=limit))
    last = listed[-1].resource_version
    assert sorted(o["metadata"]["name"] for o in whole(listed)) == sorted(api.history[int(last)])
