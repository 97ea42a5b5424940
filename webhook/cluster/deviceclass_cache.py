"""The cluster's DeviceClasses (``resource.k8s.io/v1``) for ``policy.deviceClasses: true``: which extended
resources DRA serves (``spec.extendedResourceName``), read once (``read_device_classes``, for ``check`` and
``audit``) or kept current by a list+watch (``DeviceClassCache``, for the webhook), on the reflector of
``webhook/cluster/watch.py`` as the topology cache is.

Only a class's name, ``extendedResourceName`` and creation time are kept. A refused list (403), a cluster that
does not serve the API (404: DRA is GA since 1.34) or an unreachable API server leave the classes unknown
(None): an extended resource is then DRA's only when its name says so (``deviceclass.resource.kubernetes.io/``),
and the admission goes on.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

from webhook.cluster.cache import PublishingCache
from webhook.cluster.client import ClusterError
from webhook.cluster.watch import Listing, ListRefused, Reflector, Store, Transport, refusal, wait_until
from webhook.core.dra_requests import DeviceClasses, device_class_entry, index_device_classes

DEVICE_CLASSES_GROUP_VERSION = "resource.k8s.io/v1"
DEVICE_CLASSES_PATH = f"/apis/{DEVICE_CLASSES_GROUP_VERSION}/deviceclasses"
JSON = ("application/json", "application/json")
GRANTED_BY = "the chart does with config.policy.deviceClasses: true"

LOG = logging.getLogger("qos_guard.deviceclasses")


def device_classes_refusal(exc: ListRefused) -> str:
    """Why the list was refused, with the way out; an API the cluster does not serve is said as such."""
    if exc.status == 404:
        return (f"DeviceClasses ({DEVICE_CLASSES_GROUP_VERSION}) are not served: the cluster has no DRA v1 API "
                "(Kubernetes 1.34 or later); extended resources count as DRA only by the "
                "deviceclass.resource.kubernetes.io/ prefix")
    return refusal("deviceclasses", exc, GRANTED_BY)


class DeviceClassReflector(Reflector):
    def _refused(self, exc: ListRefused) -> str:
        return device_classes_refusal(exc)


class DeviceClassCache(PublishingCache):
    """DeviceClasses, current within ``PUBLISH_EVERY`` of the API server; ``snapshot()`` is the index requests
    judge against (None until the first list, and while the list is refused)."""

    def __init__(self, transport: Transport,
                 on_problem: Callable[[str | None], None] | None = None) -> None:
        super().__init__("qos-guard-deviceclasses")
        self.store = Store(device_class_entry)
        self.problem: str | None = "not read yet"
        self.on_problem = on_problem
        self._said: str | None = "not read yet"
        self._snapshot: DeviceClasses | None = None
        self.reflector = DeviceClassReflector("deviceclasses", transport, DEVICE_CLASSES_PATH, JSON, self.store,
                                              self.changed, self._stop)
        self.reflectors = (self.reflector,)

    def snapshot(self) -> DeviceClasses | None:
        return self._snapshot

    def note(self, resource: str, problem: str | None) -> None:
        self.problem = problem

    def publish(self) -> DeviceClasses | None:
        """The index from the store (None while never listed or refused: unknown, not empty)."""
        # Listed once, the index stays known through a broken watch (the reflector lists again).
        snapshot = index_device_classes(self.store.snapshot().values()) if self.store.listed else None
        self._snapshot = snapshot
        if self.problem != self._said:
            self._said = self.problem
            if self.on_problem is not None:
                self.on_problem(self.problem)
        return snapshot

    def wait_synced(self, timeout: float) -> bool:
        """Whether the classes were listed and published within ``timeout`` seconds (tests, start-up log)."""
        return wait_until(lambda: self._snapshot is not None, timeout, self._stop)


def log_problem(problem: str | None) -> None:
    """The cache's state, in the log once per change."""
    if problem is None:
        LOG.warning(json.dumps({"deviceclasses": "current"}))
    else:
        LOG.warning(json.dumps({"deviceclasses": "unknown: extended resources count as DRA only by the "
                                                 "deviceclass.resource.kubernetes.io/ prefix", "problem": problem}))


def read_device_classes(transport: Transport) -> tuple[DeviceClasses | None, str | None]:
    """One list (``check --kubeconfig``, ``audit``): the index, or None and why it is not known."""
    try:
        store = Store(device_class_entry)
        store.rebuild(Listing(transport, DEVICE_CLASSES_PATH, JSON[0]))
        entries = list(store.items.values())
    except ListRefused as exc:
        return None, device_classes_refusal(exc)
    except ClusterError as exc:
        return None, str(exc)
    return index_device_classes(entries), None
