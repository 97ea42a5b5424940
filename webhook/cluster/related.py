"""The objects the operators' builders read (``webhook.core.operators``: KServe's ServingRuntimes,
ClusterServingRuntimes and LLMInferenceServiceConfigs, its ``inferenceservice-config`` and Knative's
``config-deployment``), read once from the cluster for ``check --kubeconfig`` and ``audit`` into the run's
``Facts.related``.

A list that succeeds makes its kind *read whole* (``Related.read``: an object absent from it does not exist, so a
runtime KServe would not find is said as such); a CRD not served (404), a refused list (403) or an unreachable
API server leave the kind unknown (said once, but for 403 and 404: KServe not installed or not granted), and the
builders answer "unknown" as without a cluster. Only the two named ConfigMaps are read (a GET each), never a
namespace's ConfigMaps: ``inferenceservice-config`` in the namespace KServe runs in (``policy.kserveNamespace``,
its controller's POD_NAMESPACE), ``config-deployment`` in knative-serving. KServe's absent (404), refused or failed
makes what KServe builds from it not known (``Related.config_unknown``, as the webhook's cache says it): KServe
refuses to work without it, so absent it says to name KServe's namespace. Knative's not read is taken as
shipped, as Knative does where it is absent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from webhook.cluster.client import ClusterError, Lister, Unreachable
from webhook.cluster.pager import ListFailed
from webhook.core.operators import CLUSTER, KSERVE_NAMESPACE, Related
from webhook.core.operators.kserve import CLUSTER_SERVING_RUNTIME, ISVC_CONFIG, KNATIVE_CONFIG, SERVING_RUNTIME
from webhook.core.operators.kserve_config import CONFIG_ABSENT, CONFIG_UNREAD
from webhook.core.operators.llmisvc import CONFIG as LLMISVC_CONFIG

LISTS = {SERVING_RUNTIME: "/apis/serving.kserve.io/v1alpha1/servingruntimes",
         CLUSTER_SERVING_RUNTIME: "/apis/serving.kserve.io/v1alpha1/clusterservingruntimes",
         LLMISVC_CONFIG: "/apis/serving.kserve.io/v1alpha1/llminferenceserviceconfigs"}
_UNREAD = {SERVING_RUNTIME: "an InferenceService whose runtime they hold is unknown",
           CLUSTER_SERVING_RUNTIME: "an InferenceService whose runtime they hold is unknown",
           LLMISVC_CONFIG: ("an LLMInferenceService whose baseRefs they hold is unknown (a preset: KServe's shipped "
                            "one)")}
KNATIVE_NAMESPACE = "knative-serving"  # Knative Serving's install namespace (its release manifests)


def read_related(lister: Lister, say: Callable[[str], None], kserve_namespace: str = KSERVE_NAMESPACE) -> Related:
    """What the builders read, from ``lister``'s cluster, KServe's ConfigMap from ``kserve_namespace``; each
    kind it could not list said once."""
    objects: dict[tuple[str, str], tuple[Any, ...]] = {}
    read: set[tuple[str, str]] = set()
    for key, path in LISTS.items():
        try:
            objects[key] = tuple(lister.list_objects(path))
        except Unreachable as exc:
            # said where the version is read; nothing more to try
            why = CONFIG_UNREAD.format(namespace=kserve_namespace, why=exc, out="give it in the input")
            return Related({}, CLUSTER, frozenset(), kserve_namespace, why)
        except ListFailed as exc:
            if exc.status not in (403, 404):  # not served (KServe not installed) or not granted: unknown, quietly
                say(f"{key[1]}s are not read ({exc}): {_UNREAD[key]}")
            continue
        except ClusterError as exc:
            say(f"{key[1]}s are not read ({exc}): {_UNREAD[key]}")
            continue
        read.add(key)
    found, unread = [], ""
    for namespace, name in ((kserve_namespace, ISVC_CONFIG), (KNATIVE_NAMESPACE, KNATIVE_CONFIG)):
        try:
            status, body = lister.send("GET", f"/api/v1/namespaces/{namespace}/configmaps/{name}", [], None, None)
        except ClusterError as exc:
            status, body = 0, {"message": str(exc)}
        if status == 200 and body:
            found.append(body)
        elif status == 404 and name == ISVC_CONFIG:  # KServe refuses to work without it: not KServe's namespace
            unread = CONFIG_ABSENT.format(namespace=namespace)
        elif status != 404 and name == ISVC_CONFIG:  # refused or failed: KServe reads it first, so nothing is known
            why = f"HTTP {status}" if status else str(body.get("message", ""))
            out = "grant get on it, or give it in the input" if status in (401, 403) else "give it in the input"
            unread = CONFIG_UNREAD.format(namespace=namespace, why=why, out=out)  # said by each object built on it
        # Knative's config-deployment not read: its shipped values (the queue-proxy's), as where it is absent
    if found:
        objects[("", "ConfigMap")] = tuple(found)
    return Related(objects, CLUSTER, frozenset(read), kserve_namespace, unread)


__all__ = ["read_related"]
