"""``placement.schedulerName`` on the real API server: ``qos-guard serve`` with the configuration the chart renders
for ``scheduler.enabled``, registered through the chart's own ``place.qos-guard.io`` webhook, and the real
kube-scheduler v1.36.3 with ``qos-guard extender`` as the chart's second scheduler (tests/e2e/test_extender.py's
harness: Node objects without a kubelet, their NodeResourceTopology objects).

A Pod with exclusive CPUs and a GPU created in an opted-in namespace, without a schedulerName, gets the second
scheduler's and is bound by it to the one node where it fits one NUMA node; a Pod that needs no alignment keeps
``default-scheduler`` (and so this scheduler never binds it); a Pod naming its own scheduler keeps it, warned; a
Pod whose device comes from DRA keeps ``default-scheduler`` (one scheduler per device), warned.
"""

from __future__ import annotations

import base64
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import waiting
from tests.binaries import binary
from tests.builders import container, pod
from tests.e2e.conftest import CHART, Cluster
from tests.e2e.test_extender import GIB, GPU, POOL, SCHEDULER, TOLERATION, Api, add_node, scheduler, start_extender
from tests.serving import Server, start_server

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

NAMESPACE = "e2e-placement"
MUTATED = "e2e-placement-mutate"  # mode mutate: mutate.qos-guard.io runs first, then place.qos-guard.io
SELECTED = "e2e.qos-guard.io/placement"  # only this module's namespace: other modules' Pods are left alone
CONFIG_NAME = "qos-guard-place-e2e"


def rendered(url: str, ca: str | None) -> dict[str, Any]:
    """The chart's MutatingWebhookConfiguration for scheduler.enabled, reaching ``url``, trusting ``ca``, and
    (``config``) the webhook's configuration file as its ConfigMap holds it."""
    proc = subprocess.run([binary("helm"), "template", CONFIG_NAME, str(CHART), "--namespace", "qos-guard",
                           "--set", f"webhook.url={url}", "--set", "scheduler.enabled=true",
                           "--set", f"webhook.namespaceSelector.matchExpressions[0].key={SELECTED}",
                           "--set", "webhook.namespaceSelector.matchExpressions[0].operator=Exists",
                           "--show-only", "templates/webhooks.yaml", "--show-only", "templates/configmap.yaml"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    docs = {d["kind"]: d for d in yaml.safe_load_all(proc.stdout) if d}
    hooks: dict[str, Any] = docs["MutatingWebhookConfiguration"]
    if ca is not None:
        for hook in hooks["webhooks"]:
            hook["clientConfig"]["caBundle"] = base64.b64encode(Path(ca).read_bytes()).decode()
    hooks["config"] = docs["ConfigMap"]["data"]["config.yaml"]
    return hooks


def placed(name: str, cpu: str, gpu: bool = True, scheduler_name: str | None = None) -> dict[str, Any]:
    """This file's Pod: Guaranteed, ``cpu`` CPUs (and a GPU), on the placement pool's tainted nodes."""
    amounts = {"cpu": cpu, "memory": "1Gi"} | ({GPU: "1"} if gpu else {})
    extra: dict[str, Any] = {"schedulerName": scheduler_name} if scheduler_name else {}
    return pod(container("app", amounts, amounts, image="registry.invalid/app:1"), name=name, namespace=NAMESPACE,
               nodeSelector={POOL: "placement"}, tolerations=[TOLERATION], **extra)


@pytest.fixture(scope="module")
def placing(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    """The NRT CRD, the webhook with the chart's configuration for scheduler.enabled, registered, and this
    module's namespace opted in (warn: placement does not depend on the mode); all gone afterwards."""
    folder = tmp_path_factory.mktemp("placement")
    crd = CHART / "files" / "topology.node.k8s.io_noderesourcetopologies.yaml"
    cluster.kubectl("apply", "-f", str(crd), check=True)
    cluster.kubectl("wait", "--for", "condition=Established", "crd/noderesourcetopologies.topology.node.k8s.io",
                    "--timeout", "30s", check=True)
    config = folder / "config.yaml"
    config.write_text(rendered("https://127.0.0.1", None)["config"])
    assert yaml.safe_load(config.read_text())["placement"]["schedulerName"] == SCHEDULER
    server: Server = start_server(folder / "serve", "--config", str(config), workers=1)
    url = f"https://127.0.0.1:{server.port}"
    hooks = rendered(url, server.ca)
    hooks.pop("config")
    api = Api(cluster)
    try:
        cluster.kubectl("apply", "-f", "-", stdin=hooks, check=True)
        cluster.kubectl("apply", "-f", "-", stdin={"apiVersion": "v1", "kind": "Namespace", "metadata": {
            "name": NAMESPACE, "labels": {"qos-guard.io/mode": "warn", SELECTED: "true"}}}, check=True)
        cluster.kubectl("apply", "-f", "-", stdin={"apiVersion": "v1", "kind": "Namespace", "metadata": {
            "name": MUTATED, "labels": {"qos-guard.io/mode": "mutate", SELECTED: "true"}}}, check=True)
        yield api
    finally:
        cluster.kubectl("delete", "namespace", MUTATED, "--ignore-not-found", "--wait=false")
        cluster.kubectl("delete", "mutatingwebhookconfiguration", CONFIG_NAME, "--ignore-not-found")
        api("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods", gracePeriodSeconds="0")
        api("DELETE", "/api/v1/nodes", labelSelector=f"{POOL}=placement")
        server.stop()
        cluster.kubectl("delete", "-f", str(crd), "--wait=true", "--timeout=60s")


def get(api: Api, name: str) -> dict[str, Any]:
    found: dict[str, Any] = api("GET", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}")
    return found


def test_a_pod_that_needs_one_numa_node_goes_to_the_second_scheduler(
        cluster: Cluster, placing: Api, tmp_path: Path) -> None:
    api = placing
    # p-fits: the GPU's NUMA node has 4 CPUs; p-split: 8 CPUs and a GPU, but only 2 CPUs on the GPU's NUMA node.
    add_node(api, "p-fits", [{"cpu": 4, "memory": 16 * GIB, GPU: 1}, {"cpu": 4, "memory": 16 * GIB}], "placement")
    add_node(api, "p-split", [{"cpu": 2, "memory": 16 * GIB, GPU: 1}, {"cpu": 6, "memory": 16 * GIB}], "placement")
    extender = start_extender(cluster, tmp_path / "extender")
    try:
        with scheduler(cluster, tmp_path / "scheduler", SCHEDULER, extender):
            created = cluster.kubectl("create", "-f", "-", stdin=placed("aligned", "4"))
            assert created.returncode == 0, created.stderr
            assert created.stdout.strip() == "pod/aligned created", created.stdout
            # (the session's own webhook, when an earlier module registered it, may warn too)
            said = next(line for line in created.stderr.splitlines() if "schedulerName" in line)
            assert said == ("Warning: qos-guard: set spec.schedulerName to qos-guard-numa: exclusive CPUs with "
                            "example.com/gpu must fit one NUMA node"), said
            shared = cluster.kubectl("create", "-f", "-", stdin=placed("shared", "1500m", gpu=False))
            assert shared.returncode == 0 and "schedulerName" not in shared.stderr, shared.stderr
            own = cluster.kubectl("create", "-f", "-", stdin=placed("own", "4", scheduler_name="gpu-scheduler"))
            assert own.returncode == 0, own.stderr
            assert "spec.schedulerName gpu-scheduler left as set (not default-scheduler)" in own.stderr, own.stderr
            waiting.eventually("the aligned Pod bound", lambda: get(api, "aligned")["spec"].get("nodeName"),
                               within=60)
            aligned = get(api, "aligned")
            assert aligned["spec"]["schedulerName"] == SCHEDULER
            assert aligned["spec"]["nodeName"] == "p-fits"  # the extender left p-split out
            bound_by = next(c for c in aligned["status"]["conditions"] if c["type"] == "PodScheduled")
            assert bound_by["status"] == "True"
            assert get(api, "shared")["spec"]["schedulerName"] == "default-scheduler"
            assert get(api, "own")["spec"]["schedulerName"] == "gpu-scheduler"
            # This scheduler binds only its own Pods: the other two stay unbound (no default scheduler runs here).
            assert not get(api, "shared")["spec"].get("nodeName") and not get(api, "own")["spec"].get("nodeName")
            table = cluster.kubectl("get", "pods", "-n", NAMESPACE, "-o",
                                    "custom-columns=NAME:.metadata.name,SCHEDULER:.spec.schedulerName,"
                                    "NODE:.spec.nodeName", "--sort-by=.metadata.name", check=True).stdout
            print(f"\n$ kubectl create -f aligned.yaml\n{said}\n{created.stdout.strip()}\n$ kubectl get pods\n{table}")
    finally:
        extender.stop()
    api("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods", gracePeriodSeconds="0")
    waiting.eventually("the Pods gone", lambda: not api("GET", f"/api/v1/namespaces/{NAMESPACE}/pods")["items"],
                       within=60, every=0.5)


def test_a_pod_with_dra_devices_stays_with_the_default_scheduler(cluster: Cluster, placing: Api) -> None:
    """One scheduler per device: a Pod with exclusive CPUs and a DRA claim (which needed one NUMA node and was sent
    to the second scheduler until this was changed) keeps default-scheduler, which allocates the rest of the
    ResourceSlice pool, and the warning says why."""
    claimed = placed("claimed", "4", gpu=False)
    claimed["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}]
    claimed["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    created = cluster.kubectl("create", "-f", "-", stdin=claimed)
    assert created.returncode == 0, created.stderr
    said = [line for line in created.stderr.splitlines() if "qos-guard-numa" in line]
    assert said == ["Warning: qos-guard: default-scheduler kept, not qos-guard-numa: two schedulers can give one DRA "
                    "device to two claims, as each..."], created.stderr
    assert get(placing, "claimed")["spec"]["schedulerName"] == "default-scheduler"
    placing("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/claimed", gracePeriodSeconds="0")


def readme_rbac() -> list[dict[str, Any]]:
    """The scheduler guide's ClusterRole and binding for the extender beside a self-managed control plane's
    scheduler (docs/howto/scheduler.md)."""
    readme = (CHART.parents[1] / "docs" / "howto" / "scheduler.md").read_text()
    blocks = readme.split("```yaml\n")[1:]
    block = next(b.split("```")[0] for b in blocks if "name: qos-guard-extender" in b)
    return [d for d in yaml.safe_load_all(block) if d]


def test_the_readmes_rbac_lets_the_schedulers_own_credentials_read_nrts(cluster: Cluster, placing: Api) -> None:
    """kube-scheduler's scheduler.conf authenticates as system:kube-scheduler: its bootstrap ClusterRole lists Pods
    but not NodeResourceTopology objects, which the guide's snippet grants."""
    def can(verb: str, resource: str) -> str:
        return cluster.kubectl("auth", "can-i", verb, resource, "--as", "system:kube-scheduler").stdout.strip()

    nrts = "noderesourcetopologies.topology.node.k8s.io"
    assert can("watch", "pods") == "yes"
    assert can("list", nrts) == "no"
    objects = readme_rbac()
    assert [o["kind"] for o in objects] == ["ClusterRole", "ClusterRoleBinding"]
    try:
        cluster.kubectl("apply", "-f", "-", stdin=objects, check=True)
        waiting.eventually("RBAC in effect", lambda: can("list", nrts) == "yes", within=30, every=0.5)
        assert can("watch", nrts) == "yes" and can("get", nrts) == "no"  # what the extender reads, no more
    finally:
        cluster.kubectl("delete", "-f", "-", "--ignore-not-found", stdin=objects)


def test_a_pod_the_mutation_makes_guaranteed_gets_the_scheduler_too(cluster: Cluster, placing: Api) -> None:
    """In a mutate namespace the chart's mutate.qos-guard.io sets the request to its limit first; then
    place.qos-guard.io sees a Guaranteed Pod with 4 exclusive CPUs and a GPU."""
    burstable = placed("mutated", "4")
    burstable["metadata"]["namespace"] = MUTATED
    burstable["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
    created = cluster.kubectl("create", "-f", "-", stdin=burstable)
    assert created.returncode == 0, created.stderr
    warnings = [line for line in created.stderr.splitlines() if line.startswith("Warning: qos-guard: ")]
    assert "Warning: qos-guard: container \"app\": set resources.requests.cpu to 4 (its limit): +2 CPU reserved " \
           "exclusively" in warnings, created.stderr
    assert ("Warning: qos-guard: set spec.schedulerName to qos-guard-numa: exclusive CPUs with example.com/gpu "
            "must fit one NUMA node") in warnings, created.stderr
    stored = placing("GET", f"/api/v1/namespaces/{MUTATED}/pods/mutated")
    assert stored["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "4"
    assert stored["spec"]["schedulerName"] == SCHEDULER
    placing("DELETE", f"/api/v1/namespaces/{MUTATED}/pods/mutated", gracePeriodSeconds="0")
