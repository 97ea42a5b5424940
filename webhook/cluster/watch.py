"""List, then watch, one kind of object into a bounded in-memory store: client-go's reflector, reduced to what
qos-guard needs. The webhook's topology cache (``webhook/cluster/nrt.py``: Nodes, NodeResourceTopology objects)
and the node agent's view of its namespaces and Pods (``webhook/node/watched.py``) are built on it.

A ``Reflector`` lists page by page through the one pager (``webhook/cluster/pager.py``; with an optional label
and field selector; each page is projected into the store before the next is read, so whole objects are never
all held at once), then watches from the list's
resourceVersion with the same selectors and bookmarks: an ended or broken watch resumes from the last
resourceVersion seen, an expired one (410 Gone) lists again, a failed connection (or a watch that ends at once
with nothing, as client-go counts it) retries with the package's one backoff (``webhook/cluster/backoff.py``: 0.5 s
doubling to 30 s, equal jitter, a watch's ``Retry-After`` honoured), a refused list or watch
(401/403/404) is reported with the way out and listed again every ``RETRY_MISSING`` seconds, and a list whose
``continue`` token expired is read again, paged, not older than the first, and the store is rebuilt from the new
list only, as client-go's pager and reflector do. Anything else that goes wrong is
said, and the reflector lists again after ``RESTART_AFTER`` seconds: its thread never ends before ``stop``.

A ``Store`` keeps only a projection of each object (``keep``), keyed by ``namespace/name`` (by name for
cluster-scoped objects), at most ``MAX_OBJECTS`` of them; one watch event or list line is at most
``MAX_EVENT`` bytes. So the memory a watch costs is bounded, whatever the API server sends.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import urllib3

from webhook.cluster import pager
from webhook.cluster.backoff import OVERLOADED, Backoff, retry_after
from webhook.cluster.client import ClusterError, _api_client, call, decode_body
from webhook.cluster.pager import Page

PAGE = 100  # objects per list page: whole Node objects run to tens of kilobytes each (see ``get``'s bound)
WATCH_SECONDS = 240  # the API server ends a watch after this; it is resumed from the last resourceVersion
MAX_EVENT = 4 << 20  # bytes in one watch event or list page line; a NodeResourceTopology object is kilobytes
MAX_OBJECTS = 100_000  # per resource; beyond it the store is marked truncated
BACKOFF_FIRST, BACKOFF_MAX = 0.5, 30.0
RETRY_MISSING = 10.0  # seconds between lists while the resource is missing or the list is refused
RESTART_AFTER = 5.0  # seconds before a reflector that failed unexpectedly lists again
SHORT_WATCH = 1.0  # a watch that ends sooner with no event is a failure (client-go: "very short watch")
REFUSED = (401, 403, 404)


class Overloaded(ClusterError):
    """An answer the reflector retries, with the seconds its ``Retry-After`` asks to wait (None: none)."""

    def __init__(self, message: str, retry_after: float | None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Gone(Exception):
    """The watch's resourceVersion expired (410): list again."""


class Transport(Protocol):
    """What a reflector needs from the API server: one GET, and a streamed GET (a watch)."""

    def get(self, path: str, query: list[tuple[str, str]], accept: str) -> tuple[int, Any]: ...

    def stream(self, path: str, query: list[tuple[str, str]], accept: str) -> tuple[int, Iterator[bytes], Any]: ...


class ApiTransport:
    """The API server through the ``kubernetes`` client's connection (kubeconfig or in-cluster)."""

    def __init__(self, kubeconfig: str | None = None, context: str | None = None) -> None:
        self._api = _api_client(kubeconfig, context)

    def _call(self, path: str, query: list[tuple[str, str]], accept: str, timeout: tuple[float, float]) -> Any:
        return call(self._api, "GET", path, query, {"Accept": accept}, timeout)

    def get(self, path: str, query: list[tuple[str, str]], accept: str) -> tuple[int, Any]:
        response = self._call(path, query, accept, (10, 60))
        try:
            data = response.response.read(pager.BODY_CAP + 1)
        except (OSError, urllib3.exceptions.HTTPError) as exc:
            raise ClusterError(f"reading GET {path}: {exc}") from None
        finally:
            response.response.release_conn()
        if len(data) > pager.BODY_CAP:
            raise pager.TooLarge(f"GET {path}: the answer is over {pager.BODY_CAP} bytes")
        return response.status, decode_body("GET", path, response.status, data)

    def stream(self, path: str, query: list[tuple[str, str]], accept: str) -> tuple[int, Iterator[bytes], Any]:
        response = self._call(path, query, accept, (10, WATCH_SECONDS + 60))
        return response.status, lines(response.response.stream(64 * 1024)), response.response


def lines(chunks: Iterator[bytes], limit: int = MAX_EVENT) -> Iterator[bytes]:
    """The newline-separated lines of a stream, each at most ``limit`` bytes (a longer one: ``ClusterError``)."""
    pending = b""
    for chunk in chunks:
        pending += chunk
        while True:
            end = pending.find(b"\n")
            if end < 0:
                break
            line, pending = pending[:end], pending[end + 1:]
            if line.strip():
                yield line
        if len(pending) > limit:
            raise ClusterError(f"a watch event over {limit} bytes")
    if pending.strip():
        yield pending


def status_reason(status: int, body: Any) -> str:
    message = body.get("message", "") if isinstance(body, Mapping) else ""
    return f"HTTP {status}" + (f" {message}" if message else "")


def name_of(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return name if isinstance(name, str) else ""


def key_of(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` for a namespaced object, ``name`` for a cluster-scoped one; ``""``: unnamed."""
    name = name_of(obj)
    meta = obj.get("metadata")
    namespace = meta.get("namespace") if isinstance(meta, Mapping) else None
    return f"{namespace}/{name}" if name and isinstance(namespace, str) and namespace else name


def resource_version(obj: Any) -> str:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    rv = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
    return rv if isinstance(rv, str) else ""


@dataclass
class Store:
    """One resource's objects, by ``key_of``, as the projection ``keep`` makes of them (``None``: not kept).

    The reflector's thread writes it; readers in other threads take ``snapshot()``, a copy made under the lock.
    """

    keep: Callable[[Mapping[str, Any]], Any]
    items: dict[str, Any] = field(default_factory=dict)
    listed: bool = False  # a list has succeeded at least once
    truncated: bool = False
    limit: int | None = None  # objects kept (None: MAX_OBJECTS); beyond it the store is truncated
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def replace(self, objects: Iterable[Mapping[str, Any]]) -> None:
        """The store made of ``objects`` (one whole list's) only."""
        self.rebuild([Page(list(objects), "")])

    def rebuild(self, listed: Iterable[Page]) -> None:
        """The store rebuilt from one list, page by page (``Listing``): from its last whole list only, so an
        object deleted while a list whose continue token expired was read again is not kept (a ghost)."""
        fresh: dict[str, Any] = {}
        truncated = False
        for page in listed:
            if page.restart:
                fresh, truncated = {}, False
            for obj in page.items:
                truncated = self._put(fresh, obj) or truncated
        with self.lock:
            self.items, self.listed, self.truncated = fresh, True, truncated

    def apply(self, kind: str, obj: Mapping[str, Any]) -> None:
        with self.lock:
            if kind == "DELETED":
                self.items.pop(key_of(obj), None)
            elif kind in ("ADDED", "MODIFIED"):
                self.truncated = self._put(self.items, obj) or self.truncated

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return dict(self.items)

    def _put(self, into: dict[str, Any], obj: Mapping[str, Any]) -> bool:
        """Keep ``obj``'s projection in ``into``; whether it was left out for the bound."""
        key = key_of(obj)
        if not key:
            return False
        value = self.keep(obj)  # first: an object the store does not keep takes no room and truncates nothing
        if value is None:
            into.pop(key, None)
            return False
        if key not in into and len(into) >= (MAX_OBJECTS if self.limit is None else self.limit):
            return True
        into[key] = value
        return False


class ListRefused(ClusterError):
    """The API server refused to list (or watch) the resource: 401, 403, 404."""

    def __init__(self, status: int, reason: str, verb: str = "list") -> None:
        super().__init__(reason)
        self.status = status
        self.verb = verb


query_of = pager.selectors_of


class Listing:
    """One list through the one pager (``webhook/cluster/pager.py``), page by page: iterating yields its
    ``Page``s, one held at a time, so a projection (``Store.rebuild``) never holds every whole object at once;
    a page with ``restart`` begins a new list (the continue token expired) and voids the pages before it.
    ``resource_version`` is the list's, once iterated; ``count`` the objects of the current list. At most
    ``MAX_OBJECTS + 1`` objects are read (one more than a store keeps, so it can say it is truncated)."""

    def __init__(self, transport: Transport, path: str, accept: str, label_selector: str | None = None,
                 field_selector: str | None = None) -> None:
        self.transport, self.path, self.accept = transport, path, accept
        self.selectors = query_of(label_selector, field_selector)
        self.resource_version = ""
        self.count = 0

    def __iter__(self) -> Iterator[Page]:
        try:
            for page in pager.pages(lambda query: self.transport.get(self.path, query, self.accept), self.path,
                                    self.selectors, PAGE):
                self.count = len(page.items) + (0 if page.restart else self.count)
                self.resource_version = page.resource_version
                yield page
                if self.count > MAX_OBJECTS:
                    return
        except pager.ListFailed as exc:
            reason = status_reason(exc.status, {"message": exc.message})
            if exc.status in REFUSED:
                raise ListRefused(exc.status, reason) from None
            raise ClusterError(f"listing {self.path}: {reason}") from None


def wait_until(done: Callable[[], bool], timeout: float, stop: threading.Event) -> bool:
    """Whether ``done()`` held within ``timeout`` seconds, checked every 50 ms until then or ``stop``."""
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline and not stop.is_set():
        stop.wait(0.05)
    return done()


def refusal(resource: str, exc: ListRefused, granted_by: str = "") -> str:
    """Why a list or watch was refused, with the way out (``granted_by``: what grants it, e.g. the chart)."""
    if exc.status in (401, 403):
        return (f"{exc.verb}ing {resource} is not allowed ({exc}): grant list and watch on {resource}"
                + (f" ({granted_by})" if granted_by else ""))
    return f"{exc.verb}ing {resource}: {exc}"


class Reflector:
    """List, then watch, one resource into a ``Store``; see the module docstring.

    ``changed(name, problem)`` is called after each change of the store and each watch opened (``problem``
    None: current) and with each problem (a refused list, an unreachable API server), from the reflector's
    thread.
    """

    def __init__(self, name: str, transport: Transport, path: str, accept: tuple[str, str], store: Store,
                 changed: Callable[[str, str | None], None], stop: threading.Event,
                 label_selector: str | None = None, field_selector: str | None = None) -> None:
        self.name, self.transport, self.path, self.accept, self.store = name, transport, path, accept, store
        self.changed, self.stop = changed, stop
        self.selectors = (label_selector, field_selector)
        self.relists = 0
        self.resource_version = ""  # the last seen: the list's, then each event's and bookmark's
        self._response: Any = None  # the open watch's response, for ``interrupt``

    def run(self) -> None:
        """List and watch until ``stop``. Whatever goes wrong is said and the reflector lists again after a
        pause: an exception must not end the thread and leave the store silently stale for the process's life."""
        while not self.stop.is_set():
            try:
                self._reflect()
            except Exception as exc:  # anything else would end the thread unnoticed
                self.changed(self.name, f"{self.name}: {type(exc).__name__}: {exc}; listing again")
                self.stop.wait(RESTART_AFTER)

    def _reflect(self) -> None:
        # The one retry policy of the package (webhook/cluster/backoff.py): doubling with equal jitter up to a cap,
        # a server's Retry-After honoured as a floor. Read here, not at import, so a test can shorten the base.
        backoff = Backoff(base=BACKOFF_FIRST, cap=BACKOFF_MAX)
        self.resource_version = ""
        while not self.stop.is_set():
            try:
                if not self.resource_version:
                    listing = Listing(self.transport, self.path, self.accept[0], *self.selectors)
                    self.store.rebuild(listing)
                    self.resource_version = listing.resource_version
                    self.relists += 1
                    self.changed(self.name, None)
                self.watch()
                backoff.succeeded()
            except Gone:
                self.resource_version = ""  # expired: list again at once
            except ListRefused as exc:
                self.resource_version = ""
                self.changed(self.name, self._refused(exc))
                self.stop.wait(RETRY_MISSING)
            except (ClusterError, OSError, urllib3.exceptions.HTTPError, ValueError) as exc:
                if self.stop.is_set():
                    return  # interrupted: the error is the closed connection
                # The watch resumes from the last resourceVersion it saw, not from where it began.
                self.changed(self.name, f"{self.name}: {exc}; retrying")
                self.stop.wait(backoff.failed(time.monotonic(), getattr(exc, "retry_after", None)))

    def _refused(self, exc: ListRefused) -> str:
        """The problem a refusal is reported as (a subclass names what grants the access)."""
        return refusal(self.name, exc)

    def interrupt(self) -> None:
        """End the open watch now (after ``stop`` is set), not when the API server ends it minutes later."""
        response = self._response
        close = getattr(response, "shutdown", None) or getattr(response, "close", None)
        if close is not None:
            with contextlib.suppress(OSError, urllib3.exceptions.HTTPError):
                close()

    def watch(self) -> None:
        """Stream events from ``resource_version`` until the API server ends the watch, keeping the last
        resourceVersion seen (an event or a bookmark) as it goes, so a broken watch resumes from there."""
        started = time.monotonic()
        events = 0
        query = [("watch", "1"), ("resourceVersion", self.resource_version), ("allowWatchBookmarks", "true"),
                 ("timeoutSeconds", str(WATCH_SECONDS)), *query_of(*self.selectors)]
        status, stream, response = self.transport.stream(self.path, query, self.accept[1])
        self._response = response
        try:
            if self.stop.is_set():
                return  # stopped while the watch was being opened: ``interrupt`` found nothing to close
            if status == 410:
                raise Gone()
            if status in REFUSED:
                raise ListRefused(status, f"HTTP {status}", verb="watch")
            if status != 200:
                raise Overloaded(f"watch {self.name}: HTTP {status}",
                                 retry_after(getattr(response, "headers", None)) if status in OVERLOADED else None)
            self.changed(self.name, None)  # watching again: a problem before (a retried connection) is over
            for line in stream:
                if self.stop.is_set():
                    return
                event = json.loads(line)
                if not isinstance(event, Mapping):
                    raise ClusterError(f"watch {self.name}: an event that is not an object")
                kind, obj = event.get("type"), event.get("object")
                if kind == "ERROR":
                    code = obj.get("code") if isinstance(obj, Mapping) else None
                    if code == 410:
                        raise Gone()
                    raise ClusterError(f"watch {self.name}: {status_reason(code or 0, obj)}")
                if not isinstance(obj, Mapping):
                    continue
                events += 1
                self.resource_version = resource_version(obj) or self.resource_version
                if kind != "BOOKMARK":
                    self.store.apply(str(kind), obj)
                    self.changed(self.name, None)
        finally:
            self._response = None
            close = getattr(response, "release_conn", None)
            if close is not None:
                close()
        if not events and time.monotonic() - started < SHORT_WATCH and not self.stop.is_set():
            raise ClusterError(f"watch {self.name}: ended at once with no event")
