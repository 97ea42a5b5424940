"""``policy.operatorObjects: true`` in the webhook: the objects the operators' builders read
(``webhook.core.operators``: KServe's ServingRuntimes and ClusterServingRuntimes, its LLMInferenceServiceConfigs),
kept current by a list+watch each (the reflectors of ``webhook/cluster/watch.py``, published as the DeviceClass
cache is) and handed to each request as ``Facts.related`` from the cluster (``read_related`` is the one-shot read
of ``check --kubeconfig`` and ``audit``).

A kind is *read* (``Related.read``: an object absent from it does not exist) only while its list has succeeded
and its store is whole; a CRD not installed (404), a refused list (403) or a store cut at ``MAX_OBJECTS`` leave
it unread, and the builders answer "unknown" for what needs it, never "compliant". Only an object's apiVersion,
kind, name, namespace and ``spec`` are kept (what the builders read), at most ``MAX_OBJECTS`` per kind.

KServe's ``inferenceservice-config`` is watched in the namespace KServe runs in (``policy.kserveNamespace``): a
list and watch of that one name (``fieldSelector=metadata.name=...``, which the API server authorizes as a request
for that name, so an RBAC rule with ``resourceNames`` grants it: k8s.io/apiserver v0.36.3
pkg/endpoints/request/requestinfo.go:247-251), its ``data`` kept. Until it is listed, while refused, and listed
absent, what KServe builds from it is not judged, said with the way out (``Related.config_unknown``): KServe
refuses to work without it, so a namespace that holds none is not KServe's (``kserve_pod.CONFIG_ABSENT``), as
``read_related`` says it too. The ``config-scheduler-*`` ConfigMaps an LLMInferenceService
may name are not watched (any name of that prefix, which ``resourceNames`` cannot grant): the scheduler's tokenizer
is then not known, as without a cluster; nor is Knative's ``config-deployment``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from webhook.cluster.cache import KindsCache, TellingReflector
from webhook.cluster.watch import Store, Transport
from webhook.core.operators import CLUSTER, KSERVE_NAMESPACE, Related
from webhook.core.operators.kserve_config import CONFIG_ABSENT, CONFIG_MAP, CONFIG_NOT_READ, ISVC_CONFIG
from webhook.core.operators.kserve_runtimes import CLUSTER_SERVING_RUNTIME, SERVING_RUNTIME
from webhook.core.operators.llmisvc import CONFIG as LLMISVC_CONFIG

JSON = ("application/json", "application/json")
GRANTED_BY = "the chart does with config.policy.operatorObjects: true"
# (group, kind) -> its list path and resource name; v1alpha1 is served by KServe v0.20.0's CRDs for each.
WATCHED: dict[tuple[str, str], tuple[str, str]] = {
    SERVING_RUNTIME: ("/apis/serving.kserve.io/v1alpha1/servingruntimes", "servingruntimes"),
    CLUSTER_SERVING_RUNTIME: ("/apis/serving.kserve.io/v1alpha1/clusterservingruntimes", "clusterservingruntimes"),
    LLMISVC_CONFIG: ("/apis/serving.kserve.io/v1alpha1/llminferenceserviceconfigs", "llminferenceserviceconfigs"),
}

LOG = logging.getLogger("qos_guard.operatorobjects")


def keep(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What the builders read of an object: its kind, name, namespace and spec (not its status or managedFields)."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
            "metadata": {k: meta[k] for k in ("name", "namespace") if k in meta}, "spec": obj.get("spec")}


def keep_config_map(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What the builders read of a ConfigMap: its name, namespace and ``data`` (a list's items carry no kind)."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return {"apiVersion": "v1", "kind": "ConfigMap", "data": obj.get("data"),
            "metadata": {k: meta[k] for k in ("name", "namespace") if k in meta}}


def _not_served(name: str) -> str:
    return f"{name} are not served (their CRD is not installed): what needs them is unknown"


class RelatedCache(KindsCache):
    """The watched kinds, current within ``PUBLISH_EVERY`` of the API server; ``snapshot()`` is the ``Related``
    requests judge against (from the cluster, ``read`` the kinds listed whole)."""

    def __init__(self, transport: Transport,
                 on_problem: Callable[[dict[str, str | None]], None] | None = None,
                 kserve_namespace: str = KSERVE_NAMESPACE) -> None:
        self.namespace, self.config_name = kserve_namespace, f"configmaps {kserve_namespace}/{ISVC_CONFIG}"
        super().__init__("qos-guard-operatorobjects",
                         (*(resource for _, resource in WATCHED.values()), self.config_name), on_problem)
        self.stores = {key: Store(keep) for key in WATCHED}
        self.config_store = Store(keep_config_map)
        self.config_unread = CONFIG_NOT_READ.format(namespace=kserve_namespace)
        self._snapshot = Related({}, CLUSTER, frozenset(), kserve_namespace, self.config_unread)
        config = TellingReflector(self.refused.add, _not_served, GRANTED_BY, self.config_name, transport,
                                  f"/api/v1/namespaces/{kserve_namespace}/configmaps", JSON, self.config_store,
                                  self.changed, self._stop, None, f"metadata.name={ISVC_CONFIG}")
        self.reflectors = (*(TellingReflector(self.refused.add, _not_served, GRANTED_BY, resource, transport, path,
                                              JSON, self.stores[key], self.changed, self._stop)
                             for key, (path, resource) in WATCHED.items()), config)

    def snapshot(self) -> Related:
        return self._snapshot

    def publish(self) -> Related:
        """The objects of every store listed; ``read`` those listed, not refused since, and whole; KServe's
        ConfigMap said not known until listed, while refused, and listed absent (KServe refuses to work without
        it: the namespace named is not KServe's)."""
        objects: dict[tuple[str, str], tuple[Any, ...]] = {}
        read: set[tuple[str, str]] = set()
        for key, (_, resource) in WATCHED.items():
            store = self.stores[key]
            if not store.listed or resource in self.refused:
                continue
            objects[key] = tuple(store.snapshot().values())
            if not store.truncated:
                read.add(key)
        unread = not self.config_store.listed or self.config_name in self.refused
        config = () if unread else tuple(self.config_store.snapshot().values())
        if config:
            objects[CONFIG_MAP] = config
        why = self.config_unread if unread else "" if config else CONFIG_ABSENT.format(namespace=self.namespace)
        self._snapshot = snapshot = Related(objects, CLUSTER, frozenset(read), self.namespace, why)
        self.tell()
        return snapshot


def log_problem(problems: dict[str, str | None]) -> None:
    """The cache's state, in the log once per change."""
    LOG.warning(json.dumps({"operatorObjects": {r: p or "current" for r, p in problems.items()}}))


__all__ = ["WATCHED", "RelatedCache", "keep", "keep_config_map", "log_problem"]
