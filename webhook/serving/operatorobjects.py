"""``policy.operatorObjects: true`` in a worker: the cache of the objects KServe's Pods are built from started,
its state said in the log once per change, and the ``Related`` each request judges with."""

from __future__ import annotations

from collections.abc import Callable

from webhook.cluster.client import ClusterError
from webhook.cluster.relatedcache import RelatedCache, log_problem
from webhook.cluster.watch import ApiTransport
from webhook.core.operators import CLUSTER, KSERVE_NAMESPACE, Related
from webhook.core.operators.kserve_config import CONFIG_NO_CACHE


def start_related_cache(kubeconfig: str | None, kserve_namespace: str = KSERVE_NAMESPACE) -> Callable[[], Related]:
    """The worker's cache, started (KServe's ConfigMap watched in ``kserve_namespace``); what to call for the
    current objects. A kubeconfig that cannot be used is said once and leaves every kind and the ConfigMap unread
    (what needs one is unknown): admission goes on."""
    try:
        cache = RelatedCache(ApiTransport(kubeconfig), on_problem=log_problem, kserve_namespace=kserve_namespace)
    except ClusterError as exc:
        log_problem({"all": f"policy.operatorObjects: true cannot reach the API server: {exc}"})
        unread = Related({}, CLUSTER, frozenset(), kserve_namespace, CONFIG_NO_CACHE.format(namespace=kserve_namespace))
        return lambda: unread
    cache.start()
    return cache.snapshot
