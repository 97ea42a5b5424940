"""``policy.draObjects: true`` in a worker: the cache of ResourceClaims, ResourceClaimTemplates and ResourceSlices
started, its state said in the log once per change, and the ``DraFacts`` a request in a namespace judges with."""

from __future__ import annotations

from collections.abc import Callable

from webhook.cluster.client import ClusterError
from webhook.cluster.dracache import DraCache, log_problem
from webhook.cluster.watch import ApiTransport
from webhook.core.dracpu import DraFacts


def start_dra_cache(kubeconfig: str | None) -> Callable[[str | None], DraFacts]:
    """The worker's cache, started; what to call for a namespace's view. A kubeconfig that cannot be used is said
    once and leaves the claims unknown (the rules say so): admission goes on."""
    try:
        cache = DraCache(ApiTransport(kubeconfig), on_problem=log_problem)
    except ClusterError as exc:
        log_problem({"all": f"policy.draObjects: true cannot reach the API server: {exc}"})
        unread = DraFacts(claims_unknown=f"the webhook cannot reach the API server: {exc}")
        return lambda namespace: unread
    cache.start()
    return lambda namespace: cache.snapshot().for_namespace(namespace)
