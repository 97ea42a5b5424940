"""Service-mesh sidecars, for real: a mutating webhook that injects an ``istio-proxy`` container the way Istio's
injector does (its default resources: requests 100m cpu / 128Mi, limits 2000m / 1Gi, or the Pod's
``sidecar.istio.io/proxy*`` annotations) runs beside qos-guard on the real API server.

Its configuration sorts after qos-guard's, so it runs after qos-guard's mutating webhook: the Pod that reaches
storage is judged with the sidecar only because qos-guard's validating webhooks run after every mutation, and
its mutating webhook is called again (``reinvocationPolicy: IfNeeded``) once the injector changed the Pod.
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tests import waiting
from tests.e2e.conftest import Cluster, Webhook, compliant_pod
from tests.serving import free_port
from webhook.serving.certs import write_bundle

INJECTOR = "zz-sidecar-injector"  # sorts after "qos-guard": called after qos-guard's mutating webhook
MESH_LABEL = "e2e-mesh-injection"
ISTIO_DEFAULTS = {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "2000m", "memory": "1Gi"}}
ANNOTATIONS = {("requests", "cpu"): "sidecar.istio.io/proxyCPU", ("limits", "cpu"): "sidecar.istio.io/proxyCPULimit",
               ("requests", "memory"): "sidecar.istio.io/proxyMemory",
               ("limits", "memory"): "sidecar.istio.io/proxyMemoryLimit"}


def proxy_resources(annotations: dict[str, str]) -> dict[str, dict[str, str]]:
    """As Istio's injection template: the annotations when any is set, else the mesh's defaults."""
    if not any(a in annotations for a in ANNOTATIONS.values()):
        return ISTIO_DEFAULTS
    out: dict[str, dict[str, str]] = {}
    for (kind, resource), annotation in ANNOTATIONS.items():
        if annotation in annotations:
            out.setdefault(kind, {})[resource] = annotations[annotation]
    return out


class _Injector(BaseHTTPRequestHandler):
    calls: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        pod = review["request"]["object"]
        self.calls.append(pod["metadata"].get("name", ""))
        response: dict[str, Any] = {"uid": review["request"]["uid"], "allowed": True}
        if not any(c["name"] == "istio-proxy" for c in pod["spec"]["containers"]):
            sidecar = {"name": "istio-proxy", "image": "registry.invalid/proxyv2:1",
                       "resources": proxy_resources(pod["metadata"].get("annotations") or {})}
            patch = [{"op": "add", "path": "/spec/containers/-", "value": sidecar}]
            response |= {"patchType": "JSONPatch", "patch": base64.b64encode(json.dumps(patch).encode()).decode()}
        body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                           "response": response}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def injector(cluster: Cluster, webhook: Webhook, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    """The injector serving over TLS on loopback, registered for namespaces labelled ``MESH_LABEL=enabled``."""
    pki = write_bundle(tmp_path_factory.mktemp("injector") / "pki", ["127.0.0.1"], 2, keep_ca_key=False)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(pki.cert), str(pki.key))
    port = free_port()
    server = ThreadingHTTPServer(("127.0.0.1", port), _Injector)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Injector.calls = []
    config = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
              "metadata": {"name": INJECTOR},
              "webhooks": [{"name": "sidecar-injector.e2e.invalid", "admissionReviewVersions": ["v1"],
                            "sideEffects": "None", "failurePolicy": "Fail", "reinvocationPolicy": "Never",
                            "clientConfig": {"url": f"https://127.0.0.1:{port}/inject",
                                             "caBundle": base64.b64encode(Path(pki.ca).read_bytes()).decode()},
                            "namespaceSelector": {"matchLabels": {MESH_LABEL: "enabled"}},
                            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                       "resources": ["pods"]}]}]}
    cluster.kubectl("apply", "-f", "-", stdin=config, check=True)
    try:
        yield _Injector.calls
    finally:
        cluster.kubectl("delete", "mutatingwebhookconfiguration", INJECTOR, "--ignore-not-found")
        server.shutdown()
        server.server_close()


def meshed_namespace(cluster: Cluster, name: str, mode: str) -> str:
    cluster.kubectl("apply", "-f", "-", stdin={"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": name, "labels": {"qos-guard.io/mode": mode, MESH_LABEL: "enabled"}}}, check=True)
    return name


def create(cluster: Cluster, ns: str, pod: dict[str, Any]) -> Any:
    return cluster.kubectl("create", "-n", ns, "-f", "-", stdin=pod)


def test_enforce_judges_the_pod_with_the_injected_sidecar(cluster: Cluster, injector: list[str]) -> None:
    """A Pod that is compliant as written becomes Burstable once the mesh injects its proxy; the refusal names
    the proxy and the Istio annotations that set its resources."""
    ns = meshed_namespace(cluster, "e2e-mesh-enforce", "enforce")
    proc = create(cluster, ns, compliant_pod("meshed"))
    assert proc.returncode != 0, "the Pod with the injected Burstable sidecar was stored"
    assert "meshed" in injector  # the injector did run
    assert 'admission webhook "validate.qos-guard.io" denied the request' in proc.stderr
    # (the API server stores 2000m as 2 before any validating webhook sees it)
    assert 'requests-not-equal-limits: container "istio-proxy" (spec.containers[1]): cpu request 100m differs ' \
           "from its limit 2; set resources.requests.cpu to 2" in proc.stderr
    assert "Istio injects this container: set its cpu with the Pod annotations sidecar.istio.io/proxyCPU and " \
           "sidecar.istio.io/proxyCPULimit" in proc.stderr
    assert "sidecar.istio.io/proxyMemory and sidecar.istio.io/proxyMemoryLimit" in proc.stderr
    assert cluster.kubectl("get", "pod", "meshed", "-n", ns).returncode != 0


def test_the_annotations_the_message_names_fix_it_at_the_source(cluster: Cluster, injector: list[str]) -> None:
    ns = meshed_namespace(cluster, "e2e-mesh-enforce", "enforce")
    pod = compliant_pod("meshed-fixed")
    pod["metadata"]["annotations"] = {"sidecar.istio.io/proxyCPU": "1", "sidecar.istio.io/proxyCPULimit": "1",
                                      "sidecar.istio.io/proxyMemory": "256Mi",
                                      "sidecar.istio.io/proxyMemoryLimit": "256Mi"}
    proc = create(cluster, ns, pod)
    assert proc.returncode == 0, proc.stderr
    stored = cluster.get("pod", "meshed-fixed", "-n", ns)
    proxy = next(c for c in stored["spec"]["containers"] if c["name"] == "istio-proxy")
    assert proxy["resources"] == {"requests": {"cpu": "1", "memory": "256Mi"},
                                  "limits": {"cpu": "1", "memory": "256Mi"}}
    assert stored["status"]["qosClass"] == "Guaranteed"


def test_mutate_is_reinvoked_after_the_injector_and_stores_a_guaranteed_pod(cluster: Cluster, webhook: Webhook,
                                                                             injector: list[str]) -> None:
    """qos-guard's mutating webhook runs first (its configuration sorts first) and finds nothing to do; the
    injector then adds the proxy; the API server calls qos-guard again (IfNeeded), which sets the proxy's
    requests to its limits, saying what that costs."""
    ns = meshed_namespace(cluster, "e2e-mesh-mutate", "mutate")
    proc = create(cluster, ns, compliant_pod("reinvoked"))
    assert proc.returncode == 0, proc.stderr
    assert "qos-guard: container \"istio-proxy\": set resources.requests.cpu to 2 (its limit): +1.9 CPU " \
           "reserved exclusively" in proc.stderr
    assert "set resources.requests.memory to 1Gi (its limit): +896Mi memory reserved" in proc.stderr
    stored = cluster.get("pod", "reinvoked", "-n", ns)
    proxy = next(c for c in stored["spec"]["containers"] if c["name"] == "istio-proxy")
    assert proxy["resources"]["requests"] == proxy["resources"]["limits"] == {"cpu": "2", "memory": "1Gi"}
    assert stored["status"]["qosClass"] == "Guaranteed"

    def logged() -> list[dict[str, Any]]:
        return [json.loads(line) for line in (webhook.server.folder / "server.log").read_text().splitlines()
                if line.startswith("{") and '"name": "reinvoked"' in line]

    # decision lines are written every 50 ms
    waiting.eventually("the final Pod's validate-mutated decision logged",
                       lambda: any(d["path"] == "validate-mutated" for d in logged()), 10, seen=logged)
    decisions = logged()
    mutations = [d["decision"] for d in decisions if d["path"] == "mutate"]
    assert mutations == ["allowed", "patched"], decisions  # before the injector, then reinvoked after it
    assert [d["decision"] for d in decisions if d["path"] == "validate-mutated"] == ["allowed"]  # the final Pod
