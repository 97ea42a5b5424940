"""A cache the webhook judges against: reflectors (``webhook/cluster/watch.py``) keep stores current, and one
publisher thread turns the stores into an immutable snapshot at most every ``PUBLISH_EVERY`` seconds, so a request
reads one snapshot from start to end and never waits for the API server.

``TopologyCache`` (``cluster/nrt.py``), ``DeviceClassCache`` (``cluster/deviceclass_cache.py``), ``RelatedCache``
(``cluster/relatedcache.py``) and ``DraCache`` (``cluster/dracache.py``) are four; each says what a snapshot is
(``publish``) and keeps its problems (``note``). The loop, the threads and the stop are written once, here, so that
a fix to one (a stop that ends the open watches now) is a fix to all; so is the reflector that tells its cache its
list was refused (``TellingReflector``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from webhook.cluster.watch import ListRefused, Reflector, refusal, wait_until

PUBLISH_EVERY = 0.2


class PublishingCache:
    """Reflectors and a publisher; a subclass makes its ``reflectors`` with ``self.changed`` and ``self._stop``,
    and writes ``note`` and ``publish``. ``prefix`` names the threads (``qos-guard-topology-nodes``)."""

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._stop = threading.Event()
        self._dirty = threading.Event()
        self.reflectors: tuple[Reflector, ...] = ()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        """One thread per reflector and one publisher (greenlets, in a gevent worker)."""
        for target, name in [*((r.run, r.name) for r in self.reflectors), (self._publisher, "publisher")]:
            thread = threading.Thread(target=target, name=f"{self._prefix}-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        """Stop publishing and end the open watches now (not when the API server ends them minutes later)."""
        self._stop.set()
        self._dirty.set()
        for reflector in self.reflectors:
            reflector.interrupt()

    def changed(self, resource: str, problem: str | None) -> None:
        """A reflector's ``changed``: the problem noted, a new snapshot due."""
        self.note(resource, problem)
        self._dirty.set()

    def note(self, resource: str, problem: str | None) -> None:
        """Keep ``resource``'s problem (None: current) for the next snapshot."""
        raise NotImplementedError

    def publish(self) -> object:
        """Build and keep the snapshot requests judge against, from the stores (a copy: they go on changing)."""
        raise NotImplementedError

    def _publisher(self) -> None:
        while not self._stop.is_set():
            self._dirty.wait()
            if self._stop.is_set():
                return
            self._dirty.clear()
            self.publish()
            self._stop.wait(PUBLISH_EVERY)


class TellingReflector(Reflector):
    """A reflector that tells its cache when its list is refused (its kind is then not read), and says why in the
    cache's words: ``not_served`` words a 404 (a kind the cluster does not serve), ``granted_by`` names what grants
    the list (for a 403)."""

    def __init__(self, refused: Callable[[str], None], not_served: Callable[[str], str], granted_by: str,
                 *args: Any) -> None:
        super().__init__(*args)
        self.refused, self.not_served, self.granted_by = refused, not_served, granted_by

    def _refused(self, exc: ListRefused) -> str:
        self.refused(self.name)
        if exc.status == 404:
            return self.not_served(self.name)
        return refusal(self.name, exc, self.granted_by)


NOT_READ_YET = "not read yet"


class KindsCache(PublishingCache):
    """A cache of several kinds that says each one's problem: ``problems`` by resource (None: current), the
    resources ``refused`` since their last list or watch (not read), ``on_problem`` told of every change once it is
    published (``tell``); the DRA objects' and the operator objects' caches."""

    def __init__(self, prefix: str, resources: Iterable[str],
                 on_problem: Callable[[dict[str, str | None]], None] | None) -> None:
        super().__init__(prefix)
        self.problems: dict[str, str | None] = {resource: NOT_READ_YET for resource in resources}
        self.on_problem = on_problem
        self._said: dict[str, str | None] = {}
        self.refused: set[str] = set()

    def note(self, resource: str, problem: str | None) -> None:
        self.problems[resource] = problem
        if problem is None:
            self.refused.discard(resource)

    def tell(self) -> None:
        """``on_problem`` with the problems a snapshot was just published with, when they changed."""
        if self.problems != self._said:
            self._said = dict(self.problems)
            if self.on_problem is not None:
                self.on_problem(dict(self.problems))

    def wait_synced(self, timeout: float) -> bool:
        """Whether every kind was listed (or refused) and published within ``timeout`` seconds (tests)."""
        return wait_until(lambda: bool(self._said) and all(p != NOT_READ_YET for p in self._said.values()),
                          timeout, self._stop)
