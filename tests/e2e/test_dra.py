"""DRA at admission against a real API server (``dra-unaligned``, ``dra-claim-spread``, ``numa-unfit``): a DeviceClass
that names an extended resource no NodeResourceTopology zone has (``example.com/dra-gpu``), three GPU nodes of two
32-CPU zones under ``single-numa-node``, and two qos-guard webhooks registered through the chart's own webhook
configurations:

- ``qos-guard-dra`` with ``numa: auto`` and ``deviceClasses: true`` (``dra: warn``, the default), reading the
  cluster with the chart's own RBAC for both (a ServiceAccount token, nothing more);
- ``qos-guard-dra-deny`` with ``dra: deny`` alone.

What kubectl prints is printed too (``-s`` shows it), as a user would see it.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import builders, waiting
from tests.e2e.conftest import CHART, Cluster, chart_identity, webhook_outside
from tests.e2e.test_numa import node
from tests.serving import Server

GPU_CLASS = "gpu.example.com"
DRA_GPU = "example.com/dra-gpu"
ZONE = {"cpu": "32", "memory": "256Gi"}
NODES = [f"dra-gpu-{i}" for i in range(3)]
POOL = {"pool": "dra-gpu"}  # these nodes only: other e2e files publish NRT objects of their own


def pinned(name: str, cpu: str, *, claim: bool = False, extended: str | None = None) -> dict[str, Any]:
    """A Guaranteed Pod of ``cpu`` CPUs on the DRA pool, with a GPU through a claim or an ``extended`` resource."""
    amounts = {"cpu": cpu, "memory": "8Gi"} | ({extended: "1"} if extended else {})
    obj = builders.pod(builders.container("app", amounts, amounts, image="registry.invalid/app:1"), name=name,
                       namespace=None, nodeSelector=POOL)
    return builders.take_claim(obj, "one-gpu") if claim else obj


def claim_template(name: str, count: int, constrained: bool = False) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": [builders.exactly("gpus", GPU_CLASS, count)]}
    if constrained:
        devices["constraints"] = [{"matchAttribute": builders.NUMA_NODE}]
    return builders.claim(name, devices)


def cluster_stderr(cluster: Cluster, obj: dict[str, Any], namespace: str = "e2e-dra") -> str:
    """What a dry run of ``obj`` printed on stderr, quietly (for polling)."""
    return cluster.kubectl("apply", "--dry-run=server", "-n", namespace, "-f", "-", stdin=obj).stderr


def admit(cluster: Cluster, namespace: str, obj: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """Server-side dry run: the whole admission chain, nothing stored; what kubectl printed is shown."""
    proc = cluster.kubectl("apply", "--dry-run=server", "-n", namespace, "-f", "-", stdin=obj)
    print(f"\n$ kubectl apply --dry-run=server -n {namespace} ({obj['kind']} {obj['metadata']['name']})  "
          f"# exit {proc.returncode}\n{proc.stdout}{proc.stderr}", end="")
    return proc


@contextlib.contextmanager
def registered(cluster: Cluster, folder: Path, release: str, label: str, config: dict[str, Any],
               namespace: str, *chart_values: str, kubeconfig: Path | None = None) -> Iterator[Server]:
    """A webhook serving ``config`` (``webhook_outside``) for namespaces labelled ``label`` (``namespace``,
    enforce mode, is made here), reachable through the API server before it is handed out."""
    with webhook_outside(cluster, folder, release, label, config, *chart_values, kubeconfig=kubeconfig,
                         workers=1) as server:
        cluster.kubectl("apply", "-f", "-", stdin={"apiVersion": "v1", "kind": "Namespace", "metadata": {
            "name": namespace, "labels": {"qos-guard.io/mode": "enforce", label: "true"}}}, check=True)
        waiting.eventually(f"{release} reachable through the API server",
                           lambda: cluster.kubectl("apply", "--dry-run=server", "-n", namespace, "-f", "-",
                                                   stdin=pinned("probe", "2")).returncode == 0, 30, every=0.25)
        yield server


@pytest.fixture(scope="module")
def dra_cluster(cluster: Cluster) -> Iterator[Cluster]:
    """The DeviceClass, the GPU nodes and their NodeResourceTopology objects; all removed afterwards (the CRD too,
    when it was not there before), as the other e2e files expect a cluster without them."""
    cluster.require("resource.k8s.io/v1", "deviceclasses", "DRA at admission (DeviceClass, ResourceClaim v1)")
    crd_name = "noderesourcetopologies.topology.node.k8s.io"
    had_crd = cluster.kubectl("get", "crd", crd_name).returncode == 0
    crd = CHART / "files" / "topology.node.k8s.io_noderesourcetopologies.yaml"
    cluster.kubectl("apply", "-f", str(crd), check=True)
    cluster.kubectl("wait", "--for", "condition=Established", f"crd/{crd_name}", "--timeout", "30s", check=True)
    device_class = builders.device_class(GPU_CLASS, GPU_CLASS, DRA_GPU)
    objects = [device_class, *(node(n, **POOL) for n in NODES), *(builders.nrt(n, [ZONE, ZONE]) for n in NODES)]
    cluster.kubectl("apply", "-f", "-", stdin=objects, check=True)
    try:
        stored = cluster.get("deviceclass", GPU_CLASS)
        # DRAExtendedResource (alpha and off in 1.34-1.35, beta and on from 1.36): off, the API server drops the
        # DeviceClass's extendedResourceName, and no extended resource is DRA's (neither mapped nor implicit).
        MAPPED.clear()
        if stored["spec"].get("extendedResourceName") == DRA_GPU:
            MAPPED.append(cluster.version())
        yield cluster
    finally:
        cluster.kubectl("delete", "--ignore-not-found", "--wait=true", "-f", "-", stdin=objects)
        if not had_crd:
            cluster.kubectl("delete", "crd", crd_name, "--ignore-not-found", "--wait=true", "--timeout=60s")


ENFORCE, DENY = "e2e-dra", "e2e-dra-deny"
MAPPED: list[str] = []  # the API server's version when it kept the DeviceClass's extendedResourceName


def needs_extended_resources(cluster: Cluster) -> None:
    """Skip, with the reason, where DRA does not serve extended resources (DRAExtendedResource off)."""
    if not MAPPED:
        pytest.skip(f"extended resources through DRA: kube-apiserver {cluster.version()} drops a DeviceClass's "
                    "extendedResourceName (DRAExtendedResource, alpha and off before 1.36)")


@pytest.fixture(scope="module")
def warn_webhook(dra_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("dra-webhook")
    release = "qos-guard-dra"
    values = ["--set", "config.policy.numa=auto", "--set", "config.policy.deviceClasses=true"]
    kubeconfig = chart_identity(dra_cluster, folder, release, *values)
    with registered(dra_cluster, folder, release, "e2e.qos-guard.io/dra",
                    {"policy": {"numa": "auto", "deviceClasses": True}}, ENFORCE, *values,
                    kubeconfig=kubeconfig) as server:
        yield server


@pytest.fixture(scope="module")
def deny_webhook(dra_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("dra-deny-webhook")
    release = "qos-guard-dra-deny"
    with registered(dra_cluster, folder, release, "e2e.qos-guard.io/dra-deny", {"policy": {"dra": "deny"}},
                    DENY, "--set", "config.policy.dra=deny") as server:
        yield server


UNALIGNED = "Warning: dra-unaligned: pod (spec): its exclusive CPUs and memory are not NUMA-aligned with its DRA"


def test_a_pinned_pod_with_a_claim_is_warned_and_admitted(dra_cluster: Cluster, warn_webhook: Server) -> None:
    proc = admit(dra_cluster, ENFORCE, pinned("pinned-claim", "4", claim=True))
    assert proc.returncode == 0 and UNALIGNED in proc.stderr, proc.stderr
    # A fractional cpu gets no exclusive CPUs: nothing to align, nothing said (cpu-not-integer refuses it here).
    assert "dra-unaligned" not in admit(dra_cluster, ENFORCE, pinned("shared", "1500m", claim=True)).stderr


def test_an_extended_resource_a_device_class_maps_is_seen_through_the_watch(dra_cluster: Cluster,
                                                                            warn_webhook: Server) -> None:
    needs_extended_resources(dra_cluster)
    obj = pinned("pinned-extended", "4", extended=DRA_GPU)
    waiting.eventually("the DeviceClass seen", lambda: UNALIGNED in cluster_stderr(dra_cluster, obj), 30, every=0.5)
    proc = admit(dra_cluster, ENFORCE, obj)
    # kubectl shows 120 characters of a warning: the resource's name begins there.
    assert proc.returncode == 0 and f"{UNALIGNED} devices (example.com/dra-" in proc.stderr, proc.stderr
    # Its state, logged once per change by each worker: listed and watched with the chart's RBAC.
    log = (warn_webhook.folder / "server.log").read_text()
    assert '{"deviceclasses": "current"}' in log and '"deviceclasses": "unknown' not in log.split(
        '{"deviceclasses": "current"}')[-1], log[-2000:]
    # The implicit name of any DeviceClass is DRA's without any DeviceClass read.
    implicit = admit(dra_cluster, ENFORCE, pinned("pinned-implicit", "4",
                                               extended=f"deviceclass.resource.kubernetes.io/{GPU_CLASS}"))
    assert implicit.returncode == 0 and UNALIGNED in implicit.stderr


def test_policy_dra_deny_refuses_it(dra_cluster: Cluster, deny_webhook: Server) -> None:
    proc = admit(dra_cluster, DENY, pinned("pinned-claim", "4", claim=True))
    assert proc.returncode != 0
    assert 'admission webhook "validate.qos-guard.io" denied the request' in proc.stderr
    assert ("dra-unaligned: pod (spec): its exclusive CPUs and memory are not NUMA-aligned with its DRA devices "
            "(spec.resourceClaims: gpu): kubelet's Topology Manager has no DRA hint provider") in proc.stderr


def test_a_claim_template_free_to_spread_through_the_webhook_and_check(
        dra_cluster: Cluster, warn_webhook: Server, deny_webhook: Server, tmp_path: Path) -> None:
    spread = claim_template("two-gpus", 2)
    proc = admit(dra_cluster, ENFORCE, spread)
    assert proc.returncode == 0
    assert ("Warning: dra-claim-spread: ResourceClaimTemplate devices (spec.spec.devices): 2 devices (gpus) may be "
            "allocated") in proc.stderr
    refused = admit(dra_cluster, DENY, spread)
    assert 'ResourceClaimTemplate "two-gpus" would let the scheduler spread its devices over NUMA nodes:' \
        in refused.stderr
    assert refused.returncode != 0 and "dra-claim-spread: ResourceClaimTemplate devices (spec.spec.devices): 2 " \
        "devices (gpus) may be allocated on different NUMA nodes: no matchAttribute constraint" in refused.stderr
    together = admit(dra_cluster, DENY, claim_template("two-gpus-together", 2, constrained=True))
    assert together.returncode == 0 and "dra-claim-spread" not in together.stderr
    manifest = tmp_path / "claims.yaml"
    manifest.write_text(yaml.safe_dump_all([spread, claim_template("two-gpus-together", 2, constrained=True)]))
    config = tmp_path / "deny.yaml"
    config.write_text(yaml.safe_dump({"policy": {"dra": "deny"}}))
    check = dra_cluster.qos_guard("check", str(manifest), "--config", str(config))
    print(f"\n$ qos-guard check claims.yaml --config deny.yaml  # exit {check.returncode}\n{check.stdout}"
          f"{check.stderr}", end="")
    assert check.returncode == 1
    assert ": dra-claim-spread: ResourceClaimTemplate devices (spec.spec.devices): 2 devices (gpus) may be " \
        "allocated on different NUMA nodes" in check.stdout
    assert "two-gpus-together" not in check.stdout


@pytest.mark.parametrize("how", ["extended", "implicit", "claim"])
def test_numa_auto_refuses_the_48_cpu_dra_pod_for_its_cpus_and_says_its_gpu_was_not_fitted(
        dra_cluster: Cluster, warn_webhook: Server, how: str) -> None:
    """No NRT zone has example.com/dra-gpu: before, the Pod "landed on no node" and passed; kubelet refuses it on
    its CPU hint alone, whichever way it asks its GPU."""
    if how != "claim":
        needs_extended_resources(dra_cluster)
    extended = {"extended": DRA_GPU, "implicit": f"deviceclass.resource.kubernetes.io/{GPU_CLASS}"}.get(how)
    obj = pinned(f"big-{how}", "48", claim=how == "claim", extended=extended)
    waiting.eventually("the DeviceClass and the topology seen", lambda: "numa-unfit: container" in cluster_stderr(
        dra_cluster, obj), 30, every=0.5)
    proc = admit(dra_cluster, ENFORCE, obj)
    assert proc.returncode != 0
    assert ('numa-unfit: container "app" (spec.containers[0]): needs 48 CPUs on one NUMA node; the largest zone of '
            "any matching node has 32 CPUs; single-numa-node refuses it on nodes dra-gpu-0, dra-gpu-1 and 1 more "
            "(TopologyAffinityError)") in proc.stderr, proc.stderr
    assert "Warning: numa-unfit: pod (spec): its DRA devices (" in proc.stderr
    fits = admit(dra_cluster, ENFORCE, pinned(f"fits-{how}", "16", claim=how == "claim", extended=extended))
    assert fits.returncode == 0 and "Warning: numa-unfit: pod (spec): its DRA devices (" in fits.stderr


def test_check_reads_the_device_classes_with_the_topology(dra_cluster: Cluster, tmp_path: Path) -> None:
    needs_extended_resources(dra_cluster)
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(yaml.safe_dump(pinned("big", "48", extended=DRA_GPU)))
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"policy": {"numa": "auto", "deviceClasses": True}}))
    online = dra_cluster.qos_guard("check", str(manifest), "--config", str(config), "--kubeconfig",
                                   str(dra_cluster.kubeconfig))
    print(f"\n$ qos-guard check pod.yaml --kubeconfig ...  # exit {online.returncode}\n{online.stdout}"
          f"{online.stderr}", end="")
    assert online.returncode == 1, online.stderr
    assert 'numa-unfit: container "app" (spec.containers[0]): needs 48 CPUs on one NUMA node' in online.stdout
    assert f"its DRA devices (example.com/dra-gpu (DeviceClass {GPU_CLASS})) were not fitted" in online.stdout
    assert f"dra-unaligned: pod (spec): its exclusive CPUs and memory are not NUMA-aligned with its DRA devices " \
        f"(example.com/dra-gpu (DeviceClass {GPU_CLASS}))" in online.stdout


def test_audit_reports_claims_but_not_those_made_for_a_pod(dra_cluster: Cluster, tmp_path: Path) -> None:
    namespace = "e2e-dra-audit"
    dra_cluster.namespace(namespace, mode="warn")
    made_for_pod = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {
        "name": "app-gpus", "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "app",
                                                 "uid": "00000000-0000-0000-0000-000000000001",
                                                 "controller": True}]},
        "spec": claim_template("x", 2)["spec"]["spec"]}
    dra_cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=[claim_template("two-gpus", 2), made_for_pod],
                        check=True)
    config = tmp_path / "deny.yaml"
    config.write_text(yaml.safe_dump({"policy": {"dra": "deny"}}))
    audit = dra_cluster.qos_guard("audit", "-n", namespace, "--config", str(config), "--kubeconfig",
                                  str(dra_cluster.kubeconfig))
    print(f"\n$ qos-guard audit -n {namespace} --config deny.yaml  # exit {audit.returncode}\n{audit.stdout}"
          f"{audit.stderr}", end="")
    assert audit.returncode == 1, audit.stderr
    assert "ResourceClaimTemplate/two-gpus: dra-claim-spread: ResourceClaimTemplate devices (spec.spec.devices)" \
        in audit.stdout
    assert "app-gpus" not in audit.stdout  # the Pod's own claim: reported through its template, not again
    default = dra_cluster.qos_guard("audit", "-n", namespace, "--kubeconfig", str(dra_cluster.kubeconfig))
    assert default.returncode == 0 and "notice: dra-claim-spread" in default.stdout, default.stdout + default.stderr
