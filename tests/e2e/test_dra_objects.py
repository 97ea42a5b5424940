"""``policy.draObjects: true`` on a real kube-apiserver: ``qos-guard serve`` with ``policy.dra: deny`` watches the
cluster's ResourceClaimTemplates (and claims and slices) with the chart's own RBAC for it (a ServiceAccount token
bound to the chart's ``-draobjects`` ClusterRole, list and watch only), and refuses at ``kubectl apply`` a Pod by
the templates it names, templates created before the namespace was judged (as in a cluster where qos-guard came
later):

- a Pod naming a template that pairs a GPU and four ``dra.cpu`` CPUs without a NUMA ``matchAttribute``:
  refused by ``dra-cpu-unpaired``, naming the Pod's claim and the template; the paired twin is admitted;
- the issue's BestEffort mirror case: a Pod whose CPUs come from a ``dra.cpu`` template with no requests or
  limits is refused, ``dra-cpu-not-mirrored`` among the reasons; a Guaranteed Pod stating 2 CPUs for a claim of
  4 is refused by it alone (without the claims, at the default ``policy.dra: warn``, nothing refuses it: the
  engine without facts admits it; with ``deny`` only ``dra-unaligned`` would, for the wrong reason);
- a Pod naming a template that does not exist yet is admitted with a warning that says "unknown" (never passed
  as compliant), and once the template is created (a GPU only) the warning goes;
- a Pod taking dra.cpu CPUs is refused by ``dra-cpu-pinner-mismatch`` once a node's agent publishes in its
  NodeResourceTopology that the static CPU Manager pins there too (``cpuPinner``).

What kubectl prints is printed too (``-s`` shows it)."""

from __future__ import annotations

import copy
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import builders, waiting
from tests.e2e.conftest import (
    CHART,
    RELEASE_NAMESPACE,
    WEBHOOK_CONFIG,
    Cluster,
    chart_objects,
    webhook_outside,
)
from webhook.core.config import parse_config
from webhook.core.cpupinner import pinner_attributes
from webhook.core.dracpu import dra_facts
from webhook.core.engine import Mode, evaluate
from webhook.core.facts import Facts
from webhook.core.numatopology import NRT_GROUP_VERSION

NAMESPACE = "e2e-dra-objects"
LABEL = "e2e.qos-guard.io/dra-objects"
RELEASE = "qos-guard-draobjects"
CONFIG = {"policy": {"dra": "deny", "draObjects": True}}
VALUES = ("--set", "config.policy.dra=deny", "--set", "config.policy.draObjects=true")
GPU, CPU = "gpu.example.com", "dra.cpu"


def cpus(name: str, count: str) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": CPU, "capacity": {"requests": {"dra.cpu/cpu": count}}}}


TEMPLATES = [
    builders.claim("gpu-and-cpus", {"requests": [builders.exactly("gpu", GPU), cpus("cpus", "4")]}),
    builders.claim("gpu-and-cpus-paired", {"requests": [builders.exactly("gpu", GPU), cpus("cpus", "4")],
                                              "constraints": [{"matchAttribute": "dra.net/numaNode"}]}),
    builders.claim("cpus-4", {"requests": [cpus("cpus", "4")]}),
]


def pod(name: str, cpu: str | None, *claims: tuple[str, str]) -> dict[str, Any]:
    """A Pod whose one container takes ``claims`` ((claim name, template)), with ``cpu`` CPUs in requests and
    limits (None: no resources at all, BestEffort)."""
    resources: dict[str, Any] = {"claims": [{"name": c} for c, _ in claims]}
    if cpu is not None:
        resources |= {"requests": {"cpu": cpu, "memory": "1Gi"}, "limits": {"cpu": cpu, "memory": "1Gi"}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"resourceClaims": [{"name": c, "resourceClaimTemplateName": t} for c, t in claims],
                     "containers": [{"name": "app", "image": "registry.invalid/app:1", "resources": resources}]}}


def admit(cluster: Cluster, obj: dict[str, Any], namespace: str = NAMESPACE) -> subprocess.CompletedProcess[str]:
    """Server-side dry run: the whole admission chain, nothing stored; what kubectl printed is shown."""
    proc = cluster.kubectl("apply", "--dry-run=server", "-n", namespace, "-f", "-", stdin=copy.deepcopy(obj))
    print(f"\n$ kubectl apply --dry-run=server -n {namespace} (Pod {obj['metadata']['name']})  "
          f"# exit {proc.returncode}\n{proc.stdout}{proc.stderr}", end="")
    return proc


def draobjects_identity(cluster: Cluster, folder: Path) -> Path:
    """The chart's ServiceAccount and its ``-draobjects`` RBAC applied (nothing else), and a kubeconfig with a
    token of that account: the webhook reads what the chart grants, no more."""
    cluster.namespace(RELEASE_NAMESPACE)
    rbac = chart_objects(RELEASE, *VALUES, "--show-only", "templates/serviceaccount.yaml",
                         "--show-only", "templates/rbac-draobjects.yaml")
    assert {o["kind"] for o in rbac} == {"ServiceAccount", "ClusterRole", "ClusterRoleBinding"}
    cluster.kubectl("apply", "-f", "-", stdin=rbac, check=True)
    folder.mkdir(parents=True, exist_ok=True)
    return cluster.kubeconfig_as(RELEASE, RELEASE_NAMESPACE, folder / "kubeconfig", duration="2h")


@pytest.fixture(scope="module")
def judged(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The templates created in a namespace not judged yet, then the webhook registered and the namespace judged
    (enforce); removed afterwards."""
    cluster.require("resource.k8s.io/v1", "resourceclaimtemplates", "DRA claims at admission (resource.k8s.io/v1)")
    folder = tmp_path_factory.mktemp("dra-objects")
    cluster.namespace(NAMESPACE)
    cluster.kubectl("apply", "-n", NAMESPACE, "-f", "-", stdin=TEMPLATES, check=True)
    kubeconfig = draobjects_identity(cluster, folder)
    # The session's webhook (tests/e2e/conftest.py ``webhook``: the chart's configurations, without draObjects)
    # judges every namespace labelled qos-guard.io/mode too: its answers would mix with this one's (a dra-unaligned
    # warning, a refusal of its own shown first). Set aside while this file runs, and put back as it was.
    aside = [_without_server_fields(cluster.get(kind, WEBHOOK_CONFIG)) for kind in HOOK_KINDS
             if cluster.kubectl("get", kind, WEBHOOK_CONFIG).returncode == 0]
    for obj in aside:
        cluster.kubectl("delete", obj["kind"].lower(), WEBHOOK_CONFIG, check=True)
    try:
        with webhook_outside(cluster, folder, RELEASE, LABEL, CONFIG, *VALUES, kubeconfig=kubeconfig, workers=1):
            cluster.kubectl("label", "namespace", NAMESPACE, "qos-guard.io/mode=enforce", f"{LABEL}=true",
                            "--overwrite", check=True)
            waiting.eventually("the webhook reachable and its cache synced", lambda: "dra-cpu-unpaired" in admit(
                cluster, pod("probe", "4", ("devices", "gpu-and-cpus"))).stderr, 60, every=0.5)
            yield cluster
    finally:
        cluster.kubectl("delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=false")
        if aside:
            cluster.kubectl("create", "-f", "-", stdin=aside, check=True)


HOOK_KINDS = ("validatingwebhookconfiguration", "mutatingwebhookconfiguration")


def _without_server_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as it can be created again: without what the API server sets."""
    meta = obj["metadata"]
    for field in ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"):
        meta.pop(field, None)
    return obj


def test_a_pod_naming_an_unpaired_template_is_refused_and_the_paired_one_admitted(judged: Cluster) -> None:
    refused = admit(judged, pod("unpaired", "4", ("devices", "gpu-and-cpus")))
    assert refused.returncode != 0
    assert 'admission webhook "validate.qos-guard.io" denied the request' in refused.stderr, refused.stderr
    assert ("dra-cpu-unpaired: pod (spec): claim devices (ResourceClaimTemplate gpu-and-cpus): its CPUs (cpus, "
            "DeviceClass dra.cpu) and other devices (gpu) may land on different NUMA nodes") in refused.stderr, \
        refused.stderr
    assert "(policy.dra: off to stop this)" in refused.stderr  # the whole finding, its way out not cut
    assert "dra-cpu-not-mirrored" not in refused.stderr  # its 4 CPUs are stated
    paired = admit(judged, pod("paired", "4", ("devices", "gpu-and-cpus-paired")))
    assert paired.returncode == 0, paired.stderr
    assert "dra-" not in paired.stderr, paired.stderr  # not even dra-unaligned: its CPUs are known to be DRA's


def test_the_best_effort_mirror_case_is_refused_at_admission(judged: Cluster) -> None:
    best_effort = admit(judged, pod("best-effort", None, ("cpus", "cpus-4")))
    assert best_effort.returncode != 0
    assert ("dra-cpu-not-mirrored: container \"app\" (spec.containers[0]): its DRA CPU claims (cpus (cpus-4)) ask "
            "4 CPUs of dra.cpu, but the container has requests.cpu unset and limits.cpu unset") in best_effort.stderr
    two_for_four = admit(judged, pod("two-for-four", "2", ("cpus", "cpus-4")))
    assert two_for_four.returncode != 0
    reasons = [line for line in two_for_four.stderr.splitlines() if ": " in line and not line.startswith("Error")]
    assert reasons and all(line.startswith("dra-cpu-not-mirrored: ") for line in reasons), two_for_four.stderr
    assert "ask 4 CPUs of dra.cpu, but the container has requests.cpu 2 and limits.cpu 2" in two_for_four.stderr
    assert admit(judged, pod("four-for-four", "4", ("cpus", "cpus-4"))).returncode == 0
    # without the claims (no cache), at the default policy.dra: warn, the two-for-four Pod is admitted; with them
    # it is refused whatever policy.dra says: the claims are what refuse it
    warn, obj = parse_config({}), pod("two-for-four", "2", ("cpus", "cpus-4"))
    assert evaluate(obj, warn, Mode.ENFORCE).allowed
    assert not evaluate(obj, warn, Mode.ENFORCE, Facts(dra=dra_facts(TEMPLATES, slices=False))).allowed


def test_a_template_not_in_the_cluster_is_unknown_until_it_is_created(judged: Cluster) -> None:
    # its CPUs known to be DRA's (cpus-4), its GPU template not created yet: admitted, and said to be unknown
    obj = pod("later", "4", ("cpus", "cpus-4"), ("gpu", "gpu-later"))
    said = admit(judged, obj)
    assert said.returncode == 0, said.stderr
    assert ("Warning: dra-cpu-not-mirrored: unknown: pod (spec): claim gpu: ResourceClaimTemplate gpu-later not "
            "found; whether the CPUs") in said.stderr, said.stderr
    assert "Warning: dra-cpu-unpaired: unknown: pod (spec): claim gpu" in said.stderr, said.stderr
    judged.kubectl("apply", "-n", NAMESPACE, "-f", "-", check=True, stdin=builders.claim(
        "gpu-later", {"requests": [builders.exactly("gpu", GPU)]}))
    waiting.eventually("the created template watched", lambda: "unknown" not in admit(judged, obj).stderr,
                       30, every=0.5)
    # Known now: its CPUs and its GPU come from two claims, which no DRA constraint ties (one claim each).
    refused = admit(judged, obj)
    assert refused.returncode != 0
    assert ('dra-cpu-unpaired: container "app" (spec.containers[0]): its CPUs (claim cpus, dra.cpu) and its other '
            "devices (claim gpu) are allocated apart") in refused.stderr, refused.stderr


def test_a_node_whose_agent_says_both_pin_refuses_dra_cpus_at_admission(judged: Cluster) -> None:
    """The webhook watches NodeResourceTopology objects too (the chart's draobjects role lists them): once a node's
    agent publishes ``cpuPinner: cpu-manager+dra.cpu`` beside its dra.cpu ResourceSlice, a Pod taking dra.cpu
    CPUs is refused by dra-cpu-pinner-mismatch (it was admitted above). The CRD is installed after the webhook
    started (its list answered 404: unread) and read once it is served."""
    crd = "noderesourcetopologies.topology.node.k8s.io"
    had_crd = judged.kubectl("get", "crd", crd).returncode == 0
    node = "draobjects-both"
    objects = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}},
               {"apiVersion": NRT_GROUP_VERSION, "kind": "NodeResourceTopology", "metadata": {"name": node},
                "topologyPolicies": ["None"], "zones": [], "attributes": pinner_attributes("static", True)},
               {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-dra.cpu"},
                "spec": {"driver": CPU, "nodeName": node, "pool": {"name": node, "generation": 1,
                                                                   "resourceSliceCount": 1},
                         "devices": [{"name": "cpudevnuma000", "attributes": {"dra.net/numaNode": {"int": 0}}}]}}]
    judged.kubectl("apply", "-f", str(CHART / "files" / "topology.node.k8s.io_noderesourcetopologies.yaml"),
                   check=True)
    judged.kubectl("wait", "--for", "condition=Established", f"crd/{crd}", "--timeout", "30s", check=True)
    judged.kubectl("apply", "-f", "-", stdin=objects, check=True)
    try:
        obj = pod("both-pin", "4", ("cpus", "cpus-4"))
        # the reflector lists a kind not served again every RETRY_MISSING (10 s)
        waiting.eventually("the agent's cpuPinner watched", lambda: "dra-cpu-pinner-mismatch" in admit(
            judged, obj).stderr, 60, every=1.0)
        refused = admit(judged, obj)
        assert refused.returncode != 0
        assert (f"dra-cpu-pinner-mismatch: pod (spec): its CPUs come from a dra.cpu claim, but node {node} also run "
                "the static CPU Manager") in refused.stderr, refused.stderr
    finally:
        judged.kubectl("delete", "--ignore-not-found", "--wait=true", "-f", "-", stdin=objects)
        if not had_crd:
            judged.kubectl("delete", "crd", crd, "--ignore-not-found", "--wait=true", "--timeout=60s")
