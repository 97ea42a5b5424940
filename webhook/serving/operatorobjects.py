"""``policy.operatorObjects: true`` in a worker: the cache of the objects KServe's Pods are built from started,
its state said in the log once per change, and the ``Related`` each request judges with."""

from __future__ import annotations

from collections.abc import Callable

from webhook.cluster.client import ClusterError
from webhook.cluster.relatedcache import RelatedCache, log_problem
from webhook.cluster.watch import ApiTransport
from webhook.core.operators import CLUSTER, Related


def start_related_cache(kubeconfig: str | None) -> Callable[[], Related]:
    """The worker's cache, started; what to call for the current objects. A kubeconfig that cannot be used is said
    once and leaves every kind unread (what needs one is unknown): admission goes on."""
    try:
        cache = RelatedCache(ApiTransport(kubeconfig), on_problem=log_problem)
    except ClusterError as exc:
        log_problem({"all": f"policy.operatorObjects: true cannot reach the API server: {exc}"})
        unread = Related({}, CLUSTER, frozenset())
        return lambda: unread
    cache.start()
    return cache.snapshot
