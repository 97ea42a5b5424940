"""What the API client makes of the answers it gets, over real HTTP from a local server: a 2xx whose body is not
a JSON object is an error (never ``{}``, which passed for an empty list and silently emptied a topology cache or
the agent's view), an error status's body is only its message, and an unreachable API server is its own type,
so ``audit`` stops on it instead of keying on the words of a message."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qsl

import pytest

from webhook.cluster.client import BadAnswer, ClusterError, Lister, Unreachable, decode_body
from webhook.cluster.watch import ApiTransport, Listing

# path -> (status, content type, body), or what answers a query with one
Answer = tuple[int, str, bytes]
ANSWERS: dict[str, Answer | Callable[[dict[str, str]], Answer]] = {}


class Handler(BaseHTTPRequestHandler):
    def _answer(self) -> None:
        path, _, query = self.path.partition("?")
        found = ANSWERS.get(path, (404, "application/json", b'{"message":"nf"}'))
        status, ctype, body = found(dict(parse_qsl(query))) if callable(found) else found
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_PATCH = do_DELETE = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    path = tmp_path_factory.mktemp("kube") / "config"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "t",
        "clusters": [{"name": "t", "cluster": {"server": f"http://127.0.0.1:{server.server_port}"}}],
        "users": [{"name": "t", "user": {"token": "x"}}],
        "contexts": [{"name": "t", "context": {"cluster": "t", "user": "t"}}]}))
    yield str(path)
    server.shutdown()
    server.server_close()


HTML = (200, "text/html", b"<html><body>Sign in to continue</body></html>")
LIST = (200, "application/json",
        b'{"kind":"List","metadata":{"resourceVersion":"7"},"items":[{"metadata":{"name":"a"}}]}')


def test_a_2xx_that_is_not_json_is_an_error_not_an_empty_list(kubeconfig: str) -> None:
    ANSWERS["/api/v1/nodes"] = HTML
    with pytest.raises(BadAnswer, match=r"GET /api/v1/nodes: HTTP 200 with a body that is not a JSON object"):
        Lister(kubeconfig).send("GET", "/api/v1/nodes", [], None, None)
    with pytest.raises(BadAnswer, match="Sign in"):
        list(Lister(kubeconfig).pages("/api/v1/nodes"))
    with pytest.raises(BadAnswer):
        ApiTransport(kubeconfig).get("/api/v1/nodes", [], "application/json")
    with pytest.raises(BadAnswer):
        list(Listing(ApiTransport(kubeconfig), "/api/v1/nodes", "application/json"))


def test_a_2xx_json_that_is_not_an_object_is_an_error(kubeconfig: str) -> None:
    ANSWERS["/api/v1/nodes"] = (200, "application/json", b"[1, 2]")
    with pytest.raises(BadAnswer):
        ApiTransport(kubeconfig).get("/api/v1/nodes", [], "application/json")
    ANSWERS["/api/v1/nodes"] = (200, "application/json", b"")
    with pytest.raises(BadAnswer, match="0 bytes"):
        Lister(kubeconfig).send("GET", "/api/v1/nodes", [], None, None)


def test_good_answers_are_read(kubeconfig: str) -> None:
    ANSWERS["/api/v1/nodes"] = LIST
    assert [p.items for p in Lister(kubeconfig).pages("/api/v1/nodes")] == [[{"metadata": {"name": "a"}}]]
    assert Lister(kubeconfig).list_objects("/api/v1/nodes") == [{"metadata": {"name": "a"}}]
    listing = Listing(ApiTransport(kubeconfig), "/api/v1/nodes", "application/json")
    assert [o["metadata"]["name"] for p in listing for o in p.items] == ["a"] and listing.resource_version == "7"


def test_an_error_status_keeps_its_status_and_reads_a_non_json_body_as_none(kubeconfig: str) -> None:
    ANSWERS["/api/v1/nodes"] = (502, "text/html", b"<html>Bad Gateway</html>")
    assert Lister(kubeconfig).send("GET", "/api/v1/nodes", [], None, None) == (502, {})
    assert ApiTransport(kubeconfig).get("/api/v1/nodes", [], "application/json") == (502, {})
    ANSWERS["/api/v1/nodes"] = (403, "application/json", b'{"message":"forbidden: no"}')
    assert Lister(kubeconfig).send("GET", "/api/v1/nodes", [], None, None) == (403, {"message": "forbidden: no"})


def test_no_content_is_an_empty_answer() -> None:
    assert decode_body("DELETE", "/x", 204, b"") == {}
    with pytest.raises(BadAnswer):
        decode_body("DELETE", "/x", 200, b"")


def test_audit_reports_a_kind_that_answers_badly_and_goes_on(kubeconfig: str) -> None:
    ANSWERS.clear()
    ANSWERS["/api/v1/namespaces/ns/pods"] = HTML
    ANSWERS["/apis/apps/v1/namespaces/ns/deployments"] = LIST
    listed = list(Lister(kubeconfig).objects(["ns"]))
    errors = {x.kind: x.error for x in listed if x.error}
    assert "not a JSON object" in (errors.get("Pod") or "")
    assert [x.obj["metadata"]["name"] for x in listed if x.obj] == ["a"]  # the Deployment
    assert all(x.kind != "Deployment" for x in listed if x.error)


def test_an_unreachable_api_server_is_its_own_error_and_stops_audit(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "t",
        "clusters": [{"name": "t", "cluster": {"server": "http://127.0.0.1:1"}}],
        "users": [{"name": "t", "user": {"token": "x"}}],
        "contexts": [{"name": "t", "context": {"cluster": "t", "user": "t"}}]}))
    with pytest.raises(Unreachable, match="cannot reach the API server"):
        list(Lister(str(config)).objects(["ns"]))
    with pytest.raises(Unreachable):
        ApiTransport(str(config)).get("/api/v1/nodes", [], "application/json")
    assert issubclass(Unreachable, ClusterError) and issubclass(BadAnswer, ClusterError)


def test_an_expired_continue_token_lists_again_paged_and_pinned(kubeconfig: str) -> None:
    """client-go's pager (FullListIfExpired): a continue token that expired mid-list (410: etcd compacted the
    revision) reads the list again, not older than the list it replaces (resourceVersion + NotOlderThan on its
    first page only), and paged (an unpaged list is one body of every object: over the body cap on a large
    cluster); its first page says it restarts, so a store keeps the new list only. audit gave up on the kind."""
    asked: list[dict[str, str]] = []

    def pods(query: dict[str, str]) -> Answer:
        asked.append(query)
        names = {"": ["a", "b"], "t1": ["c", "d"]}
        if query.get("continue") == "t2":
            return 410, "application/json", b'{"kind":"Status","code":410,"reason":"Expired","message":"expired"}'
        if query.get("resourceVersionMatch") == "NotOlderThan":  # the new list, grown since
            names, tokens = {"": ["a", "b"], "n1": ["c", "d"], "n2": ["e", "f"]}, {"": "n1", "n1": "n2"}
        else:
            names, tokens = names, {"": "t1", "t1": "t2"}
        if query.get("continue", "").startswith("n"):
            names, tokens = {"n1": ["c", "d"], "n2": ["e", "f"]}, {"n1": "n2"}
        page = names.get(query.get("continue", ""), [])
        token = tokens.get(query.get("continue", ""), "")
        return 200, "application/json", json.dumps({
            "metadata": {"resourceVersion": "9", "continue": token},
            "items": [{"metadata": {"name": n, "namespace": "ns", "uid": f"u-{n}"}} for n in page]}).encode()

    ANSWERS["/api/v1/namespaces/ns/pods"] = pods
    pages = list(Lister(kubeconfig, page_size=2).pages("/api/v1/namespaces/ns/pods", "app=x"))
    assert [([p["metadata"]["name"] for p in page.items], page.restart) for page in pages] == \
        [(["a", "b"], False), (["c", "d"], False), (["a", "b"], True), (["c", "d"], False), (["e", "f"], False)]
    assert [q.get("continue", "") for q in asked] == ["", "t1", "t2", "", "n1", "n2"]
    assert asked[3] == {"limit": "2", "labelSelector": "app=x", "resourceVersion": "9",
                        "resourceVersionMatch": "NotOlderThan"}
    assert all("resourceVersion" not in q for q in asked[4:])  # refused beside a continue token
    asked.clear()
    assert [o["metadata"]["name"] for o in
            Lister(kubeconfig, page_size=2).list_objects("/api/v1/namespaces/ns/pods", "app=x")] == list("abcdef")


def test_one_attempt_is_one_connection_urllib3_retries_nothing(tmp_path: Path) -> None:
    """Each caller owns its retries (a write loop's backoff with jitter and Retry-After, a reflector's relist, a
    command's one attempt); the kubernetes client's urllib3 retried a failed connection three more times at once,
    so an API server that was down or overloaded got four connections per attempt. A server that accepts and
    closes every connection unanswered now sees one per request, from every client the package builds."""
    accepted: list[int] = []
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                conn, _ = listener.accept()
                accepted.append(1)
                conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    path = tmp_path / "config"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "t",
        "clusters": [{"name": "t", "cluster": {"server": f"http://127.0.0.1:{listener.getsockname()[1]}"}}],
        "users": [{"name": "t", "user": {"token": "x"}}],
        "contexts": [{"name": "t", "context": {"cluster": "t", "user": "t"}}]}))
    try:
        for attempt in (lambda: Lister(str(path)).send("PATCH", "/api/v1/nodes/a", [], {"a": 1}, None),
                        lambda: ApiTransport(str(path)).get("/api/v1/nodes", [], "application/json")):
            before = len(accepted)
            with pytest.raises(Unreachable, match=r"127\.0\.0\.1"):
                attempt()
            assert len(accepted) - before == 1
    finally:
        stop.set()
        thread.join(5)
        listener.close()
