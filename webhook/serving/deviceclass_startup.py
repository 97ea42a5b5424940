"""``policy.deviceClasses: true`` in a worker: the DeviceClass cache started, its state said in the log once per
change, and the index each request judges against (None while not known)."""

from __future__ import annotations

from collections.abc import Callable

from webhook.cluster.client import ClusterError
from webhook.cluster.deviceclass_cache import DeviceClassCache, log_problem
from webhook.cluster.watch import ApiTransport
from webhook.core.dra_requests import DeviceClasses


def start_device_class_cache(kubeconfig: str | None) -> Callable[[], DeviceClasses | None]:
    """The worker's cache, started; what to call for the current index. A kubeconfig that cannot be used is said
    once and leaves the classes unknown: admission goes on."""
    try:
        cache = DeviceClassCache(ApiTransport(kubeconfig), on_problem=log_problem)
    except ClusterError as exc:
        log_problem(f"policy.deviceClasses: true cannot reach the API server: {exc}")
        return lambda: None
    cache.start()
    return cache.snapshot
