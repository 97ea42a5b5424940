"""Objects and readings shared by the KServe InferenceService tests (tests/unit/test_kserve_*.py): an
InferenceService, a ServingRuntime, an ``inferenceservice-config`` ConfigMap, a cluster read, and each violation
as ``rule container field``."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from webhook.core.config import Config
from webhook.core.engine import Mode, evaluate
from webhook.core.facts import Facts
from webhook.core.fieldpath import dotted
from webhook.core.operators import CLUSTER, Related, collect
from webhook.core.operators.kserve import CLUSTER_SERVING_RUNTIME, RELATED, SERVING_RUNTIME

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kserve"
RAW = {"serving.kserve.io/deploymentMode": "RawDeployment"}


def docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((FIXTURES / name).read_text()) if d]


def findings(obj: Any, related: Related | None = None) -> Counter[str]:
    """Each violation as ``rule container field``, counted."""
    facts = Facts(related=related) if related is not None else Facts()
    verdict = evaluate(obj, Config(), Mode.ENFORCE, facts)
    return Counter(f"{v.rule} {v.container} {dotted(v.subject)}" for _, v in verdict.violations)


def isvc(predictor: dict[str, Any], annotations: dict[str, str] | None = None,
         namespace: str = "ml") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "m", "namespace": namespace}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService", "metadata": meta,
            "spec": {"predictor": predictor}}


def runtime(name: str, fmt: str, cpu_request: str = "2", kind: str = "ServingRuntime", priority: int | None = None,
            **spec: Any) -> dict[str, Any]:
    supported: dict[str, Any] = {"name": fmt, "autoSelect": True}
    if priority is not None:
        supported["priority"] = priority
    meta: dict[str, Any] = {"name": name}
    if kind == "ServingRuntime":
        meta["namespace"] = "ml"
    return {"apiVersion": "serving.kserve.io/v1alpha1", "kind": kind, "metadata": meta,
            "spec": {"supportedModelFormats": [supported], **spec, "containers": [
                {"name": "kserve-container", "resources": {"requests": {"cpu": cpu_request, "memory": "4Gi"},
                                                           "limits": {"cpu": "2", "memory": "4Gi"}}}]}}


def cluster(*objects: dict[str, Any]) -> Related:
    """What a cluster read gives: every ServingRuntime and ClusterServingRuntime, so an absent one does not
    exist."""
    found = collect(objects, RELATED)
    return Related(found.objects, CLUSTER, frozenset({SERVING_RUNTIME, CLUSTER_SERVING_RUNTIME}))


QUEUE_PROXY = {"limits-missing queue-proxy metadata.annotations.resources.cpu": 1,
               "limits-missing queue-proxy metadata.annotations.resources.memory": 1,
               "cpu-not-integer queue-proxy metadata.annotations.resources.cpu": 1}



# Pods KServe v0.20.0 builds beyond the model container: each case a failing object and its compliant twin, the
# expectation read from KServe's code (the file named in each test).
SI = "requests-not-equal-limits storage-initializer {}.resources.{}"
AGENT = "requests-not-equal-limits agent {}.resources.{}"
RT = collect([runtime("rt", "sklearn")], RELATED)


def both(template: str, where: str) -> Counter[str]:
    return Counter({template.format(where, r): 1 for r in ("cpu", "memory")})


# The sections of inferenceservice-config KServe v0.20.0 reads before and while building a Pod, as it ships them
# (config/configmap/inferenceservice.yaml): a given ConfigMap lacking one builds no Pod (GetStorageInitializerConfigs
# and the agent, logger and batcher readers fail on a missing resource key).
SHIPPED: dict[str, Any] = {
    "storageInitializer": {"image": "kserve/storage-initializer:latest", "memoryRequest": "100Mi",
                           "memoryLimit": "1Gi", "cpuRequest": "100m", "cpuLimit": "1", "caBundleConfigMapName": "",
                           "caBundleVolumeMountPath": "/etc/ssl/custom-certs", "enableModelcar": True,
                           "cpuModelcar": "10m", "memoryModelcar": "15Mi", "uidModelcar": 1010},
    "logger": {"image": "kserve/agent:latest", "memoryRequest": "100Mi", "memoryLimit": "1Gi", "cpuRequest": "100m",
               "cpuLimit": "1", "defaultUrl": "http://default-broker"},
    "batcher": {"image": "kserve/agent:latest", "memoryRequest": "1Gi", "memoryLimit": "1Gi", "cpuRequest": "1",
                "cpuLimit": "1", "maxBatchSize": "32", "maxLatency": "5000"},
    "agent": {"image": "kserve/agent:latest", "memoryRequest": "100Mi", "memoryLimit": "1Gi", "cpuRequest": "100m",
              "cpuLimit": "1"},
    "deploy": {"defaultDeploymentMode": "Serverless"},
    "inferenceService": {"resource": {"cpuLimit": "1", "memoryLimit": "2Gi", "cpuRequest": "1",
                                      "memoryRequest": "2Gi"}},
}


def config(**sections: Any) -> dict[str, Any]:
    """KServe's shipped inferenceservice-config with ``sections`` in place of its own (a str as written)."""
    data = {k: v if isinstance(v, str) else json.dumps(v) for k, v in {**SHIPPED, **sections}.items()}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "inferenceservice-config",
                                                                    "namespace": "kserve"}, "data": data}


def model(**fields: Any) -> dict[str, Any]:
    return {"modelFormat": {"name": "sklearn"}, "runtime": "rt", **fields}

