"""The one list pager: every list qos-guard reads from the API server goes through ``pages`` (``Lister.pages`` and
``Lister.list_objects`` for ``audit``, ``nodes``, reports and the agent's one-shot reads; ``watch.Listing`` for each
reflector's store: the webhook's topology cache, the device classes, the extender's stores, the agent's watched
objects). client-go's ``tools/pager`` (v0.36.3, ``FullListIfExpired``), as ``tools/cache/reflector.go`` uses it,
with two differences said where they are.

Interface (all a caller needs):

- ``pages(get, path, selectors, limit)`` yields ``Page``s: ``items`` (the page's objects), ``resource_version``
  (the list's), ``restart``. ``get(query)`` is one GET of the list with that query, answering
  ``(status, decoded body)``; it raises ``TooLarge`` when the body is over ``BODY_CAP``.
- ``restart`` True: the continue token expired (410) and a new list began with this page; whatever earlier
  pages gave is void. A store is rebuilt from the new list only (``whole``, ``watch.Store.rebuild``), so an
  object deleted in between does not survive as a ghost; a streaming reader (``audit``) may instead leave out
  what it already handled.
- ``whole(pages)``: the objects of the last whole list.
- Failures: ``ListFailed`` (an HTTP status other than 200, ``.status``), ``ClusterError`` (a body that is not
  a list, a list whose token expired ``MAX_EXPIRED`` times in a row, one object over the body cap).

As client-go, the first page of the new list after an expired token is pinned with the list's own
``resourceVersion`` and ``resourceVersionMatch=NotOlderThan``, so the new list is never older than what was
read (the API server serves it at its newest revision; it cannot be expired in turn); later pages carry only
the continue token (the API server refuses a resourceVersion beside one). Unlike client-go, the new list is
paged too: client-go's unpaged fallback (``Limit = 0``) is one body of every object, which on a large cluster is
over the body cap every time. And a page over ``BODY_CAP`` is asked again with half the limit (a continue token
is valid with any limit), down to one object.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.cluster.client import ClusterError

PAGE_SIZE = 500  # client-go's pager default
BODY_CAP = 32 << 20  # bytes in one list answer read, at most
MAX_EXPIRED = 5  # continue tokens expired in a row before the list is given up (each relist took the whole
# compaction interval: the way out is a larger page, or a longer --etcd-compaction-interval)

Query = list[tuple[str, str]]
Get = Callable[[Query], tuple[int, Any]]


class ListFailed(ClusterError):
    """The API server answered a list page with ``status`` (not 200); ``message`` is its Status message."""

    def __init__(self, path: str, status: int, message: str) -> None:
        super().__init__(f"GET {path}: HTTP {status} {message}".rstrip())
        self.status, self.message = status, message


class TooLarge(ClusterError):
    """A list answer over ``BODY_CAP`` bytes (raised by a ``get``; the pager asks again with a smaller page)."""


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a list: its objects, the list's resourceVersion, and whether a new list began with it (the
    continue token expired: what earlier pages gave is void)."""

    items: list[Mapping[str, Any]]
    resource_version: str
    restart: bool = False


def selectors_of(label_selector: str | None, field_selector: str | None) -> Query:
    return ([("labelSelector", label_selector)] if label_selector else []) + \
        ([("fieldSelector", field_selector)] if field_selector else [])


def pages(get: Get, path: str, selectors: Sequence[tuple[str, str]] = (), limit: int = PAGE_SIZE) -> Iterator[Page]:
    """Each page of the list at ``path`` (see the module docstring); ``selectors``: its label and field
    selectors (``selectors_of``), sent with every page."""
    token, version, restart, expired, size = "", "", False, 0, max(1, limit)
    while True:
        query: Query = [("limit", str(size))]
        if token:
            query.append(("continue", token))
        elif version:  # a new list after an expired token: not older than the one it replaces
            query += [("resourceVersion", version), ("resourceVersionMatch", "NotOlderThan")]
        query += list(selectors)
        try:
            status, body = get(query)
        except TooLarge as exc:
            if size == 1:
                raise ClusterError(f"GET {path}: one object is over {BODY_CAP} bytes ({exc})") from None
            size = max(1, size // 2)
            continue
        if status == 410 and token:  # the snapshot the token pages through is compacted away
            expired += 1
            if expired >= MAX_EXPIRED:
                raise ClusterError(f"GET {path}: the list's continue token expired {expired} times in a row "
                                   "(each list took longer than etcd keeps a revision); ask for larger pages or "
                                   "raise the API server's --etcd-compaction-interval")
            token, restart = "", True
            continue
        if status != 200:
            message = body.get("message") if isinstance(body, Mapping) else None
            raise ListFailed(path, status, message if isinstance(message, str) else "")
        if not isinstance(body, Mapping):
            raise ClusterError(f"GET {path}: the answer is not a list object")
        meta = body.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        found, following = meta.get("resourceVersion"), meta.get("continue")
        version = found if isinstance(found, str) and found else version
        items = body.get("items")
        yield Page([o for o in items if isinstance(o, Mapping)] if isinstance(items, list) else [], version, restart)
        del body, items  # the page goes before the next is read
        restart = False
        token = following if isinstance(following, str) else ""
        if not token:
            return


def whole(listed: Iterable[Page]) -> list[Mapping[str, Any]]:
    """The objects of the last whole list: a page that restarts the list drops what came before it."""
    found: list[Mapping[str, Any]] = []
    for page in listed:
        if page.restart:
            found = []
        found.extend(page.items)
    return found
