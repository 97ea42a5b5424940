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
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import builders, waiting
from tests.binaries import binary
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
    builders.claim("cpus-2-and-2", {"requests": [cpus("a", "2"), cpus("b", "2")]}),
    builders.claim("cpus-1500m", {"requests": [cpus("cpus", "1500m")]}),
    builders.claim("cpus-2", {"requests": [cpus("cpus", "2")]}),
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


def taking(name: str, cpu: str, template: str, request: str | None = None,
           namespace: str = NAMESPACE) -> dict[str, Any]:
    """A Pod of ``namespace`` whose container states ``cpu`` CPUs and takes the claim made from ``template``
    (only its request ``request``, when given: kubelet hands the container that request's devices alone)."""
    obj = pod(name, cpu, ("dev", template))
    obj["metadata"]["namespace"] = namespace
    if request is not None:
        obj["spec"]["containers"][0]["resources"]["claims"][0]["request"] = request
    return obj


# What the webhook says of each (its refusal's one rule, or None: admitted without a DRA word), and what
# check --kubeconfig and audit must say the same: a refusal of an unpaired template, of a container stating 4 CPUs
# for the one request of 2 it takes, of a claim asking 1500m (dra-driver-cpu v0.2.0 pins 2: the container's 2 is
# mirrored, the scheduler's 1500m is not), and their compliant twins.
JUDGED = {"unpaired": ("4", "gpu-and-cpus", None, "dra-cpu-unpaired"),
          "paired": ("4", "gpu-and-cpus-paired", None, None),
          "one-request-unmirrored": ("4", "cpus-2-and-2", "a", "dra-cpu-not-mirrored"),
          "one-request-mirrored": ("2", "cpus-2-and-2", "a", None),
          "fractional": ("2", "cpus-1500m", None, "dra-cpu-not-mirrored"),
          "whole": ("2", "cpus-2", None, None)}


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


AUDITED = "e2e-dra-objects-audit"  # not labelled: the webhook leaves it alone, audit -n reads it


def reasons(stderr: str) -> set[str]:
    """The rules a refusal names (kubectl prints one reason a line)."""
    return {line.split(": ", 1)[0] for line in stderr.splitlines()
            if ": " in line and not line.startswith(("Error", "Warning"))}


def judged_by_cli(proc: subprocess.CompletedProcess[str], kind: str = "Pod") -> dict[str, set[str]]:
    """Each object's violated rules in a JSON report of check or audit (objects of ``kind``)."""
    report = json.loads(proc.stdout)
    found: dict[str, set[str]] = {}
    for v in report["violations"]:
        if v["kind"] == kind:
            found.setdefault(v["name"], set()).add(v["rule"])
    return found


def notices_of(proc: subprocess.CompletedProcess[str], name: str) -> list[str]:
    return [f"{n['rule']}: {n['message']}" for n in json.loads(proc.stdout).get("notices", []) if n["name"] == name]


@pytest.fixture(scope="module")
def audited(judged: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Path]]:
    """The same templates and the Pods of ``JUDGED`` stored in a namespace no webhook judges (as objects created
    before qos-guard), and the configuration of the webhook (``CONFIG``, less draObjects: check and audit read the
    claims themselves) with ``deviceClasses: true`` (without which check does not read the cluster)."""
    judged.namespace(AUDITED)
    judged.kubectl("apply", "-n", AUDITED, "-f", "-", stdin=TEMPLATES, check=True)
    judged.kubectl("apply", "-n", AUDITED, "-f", "-", check=True, stdin=[
        taking(name, cpu, template, request, AUDITED) for name, (cpu, template, request, _) in JUDGED.items()])
    config = tmp_path_factory.mktemp("dra-objects-cli") / "config.yaml"
    config.write_text(yaml.safe_dump({"policy": {"dra": "deny", "deviceClasses": True}}))
    try:
        yield judged, config
    finally:
        judged.kubectl("delete", "namespace", AUDITED, "--ignore-not-found", "--wait=false")


def shown(what: str, proc: subprocess.CompletedProcess[str]) -> None:
    print(f"\n$ {what}  # exit {proc.returncode}\n{proc.stdout}{proc.stderr}", end="")


def test_check_and_audit_read_the_claims_specs_and_answer_as_the_webhook(
        audited: tuple[Cluster, Path], tmp_path: Path) -> None:
    cluster, config = audited
    webhook: dict[str, set[str]] = {}
    for name, (cpu, template, request, rule) in JUDGED.items():
        said = admit(cluster, taking(name, cpu, template, request))
        assert (said.returncode == 0) is (rule is None), said.stderr
        assert reasons(said.stderr) == ({rule} if rule else set()), said.stderr
        assert "dra-" not in said.stderr or rule is not None, said.stderr  # the twins: not a DRA warning either
        if rule is not None:
            webhook[name] = {rule}
    assert webhook == {"unpaired": {"dra-cpu-unpaired"}, "one-request-unmirrored": {"dra-cpu-not-mirrored"},
                       "fractional": {"dra-cpu-not-mirrored"}}
    fractional = admit(cluster, taking("fractional", "2", "cpus-1500m")).stderr
    assert ("dra-cpu-not-mirrored: pod (spec): claim dev (cpus-1500m): request cpus asks dra.cpu/cpu: 1500m; the "
            "scheduler books that of the device, dra.cpu pins 2 CPUs (rounded up)") in fractional, fractional
    assert "ask dra.cpu/cpu: 2, no CPU more than it pins now" in fractional, fractional
    manifest = tmp_path / "pods.yaml"
    manifest.write_text(yaml.safe_dump_all([taking(name, cpu, template, request)
                                            for name, (cpu, template, request, _) in JUDGED.items()]))
    check = cluster.qos_guard("check", str(manifest), "--config", str(config), "--kubeconfig", str(cluster.kubeconfig),
                              "--format", "json")
    shown("qos-guard check pods.yaml --kubeconfig ... --format json", check)
    assert check.returncode == 1, check.stderr
    assert judged_by_cli(check) == webhook
    assert not any("dra-" in n for name in JUDGED for n in notices_of(check, name))  # every claim known
    # the same Pods beside templates of the same names in another namespace, asking otherwise: not theirs (the API
    # server makes a Pod's claim from its own namespace's template), so nothing changes and nothing is unknown
    elsewhere = [{**t, "metadata": {**t["metadata"], "namespace": "elsewhere"}, "spec": {"spec": {"devices": {
        "requests": [cpus(r["name"], "3") for r in t["spec"]["spec"]["devices"]["requests"]]}}}} for t in TEMPLATES]
    manifest.write_text(yaml.safe_dump_all([*elsewhere, *(taking(name, cpu, template, request)
                                                          for name, (cpu, template, request, _) in JUDGED.items())]))
    beside = cluster.qos_guard("check", str(manifest), "--config", str(config), "--kubeconfig",
                               str(cluster.kubeconfig), "--format", "json")
    shown("qos-guard check pods-and-elsewhere.yaml --kubeconfig ... --format json", beside)
    assert beside.returncode == 1 and judged_by_cli(beside) == webhook, beside.stdout + beside.stderr
    assert not any("dra-" in n for name in JUDGED for n in notices_of(beside, name)), beside.stdout
    # the templates of the Pods' namespace in the input as written (the API server stored them defaulted, the
    # cache without CEL selectors): held alike, so judged as before and nothing unknown; one changed (cpus-2
    # asking 3) is said unknown for the Pod naming it, with its namespace and the way out
    pods = [taking(name, cpu, template, request) for name, (cpu, template, request, _) in JUDGED.items()]
    written = [builders.claim(t["metadata"]["name"], t["spec"]["spec"]["devices"], namespace=NAMESPACE)
               for t in TEMPLATES]
    manifest.write_text(yaml.safe_dump_all([*written, *pods]))
    alike = cluster.qos_guard("check", str(manifest), "--config", str(config), "--kubeconfig",
                              str(cluster.kubeconfig), "--format", "json")
    shown("qos-guard check templates-as-written-and-pods.yaml --kubeconfig ... --format json", alike)
    assert alike.returncode == 1 and judged_by_cli(alike) == webhook, alike.stdout + alike.stderr
    assert not any("dra-" in n for name in JUDGED for n in notices_of(alike, name)), alike.stdout
    changed = [builders.claim("cpus-2", {"requests": [cpus("cpus", "3")]}, namespace=NAMESPACE) if
               t["metadata"]["name"] == "cpus-2" else t for t in written]
    manifest.write_text(yaml.safe_dump_all([*changed, *pods]))
    differ = cluster.qos_guard("check", str(manifest), "--config", str(config), "--kubeconfig",
                               str(cluster.kubeconfig), "--format", "json")
    shown("qos-guard check a-changed-template-and-pods.yaml --kubeconfig ... --format json", differ)
    assert any(n.startswith("dra-cpu-not-mirrored: unknown: ") and (
        f"ResourceClaimTemplate cpus-2: the input and the cluster hold it differently in namespace {NAMESPACE}; "
        "apply the input, or check without --kubeconfig") in n for n in notices_of(differ, "whole")), differ.stdout
    assert "whole" not in judged_by_cli(differ), differ.stdout  # never refused nor passed on either side's count
    audit = cluster.qos_guard("audit", "-n", AUDITED, "--config", str(config), "--kubeconfig", str(cluster.kubeconfig),
                              "--format", "json")
    shown(f"qos-guard audit -n {AUDITED} --format json", audit)
    assert audit.returncode == 1, audit.stderr
    assert judged_by_cli(audit) == webhook
    # the templates themselves too (two CPU requests with no constraint may spread: dra-claim-spread)
    assert judged_by_cli(audit, "ResourceClaimTemplate") == {"gpu-and-cpus": {"dra-cpu-unpaired"},
                                                             "cpus-2-and-2": {"dra-claim-spread"}}
    messages = {v["name"]: v["message"] for v in json.loads(audit.stdout)["violations"] if v["kind"] == "Pod"}
    assert messages["one-request-unmirrored"].startswith(
        'container "app" (spec.containers[0]): its DRA CPU claims (dev (cpus-2-and-2)) ask 2 CPUs of dra.cpu, but '
        "the container has requests.cpu 4 and limits.cpu 4"), messages
    assert messages["unpaired"].startswith("pod (spec): claim dev (ResourceClaimTemplate gpu-and-cpus): "), messages
    assert messages["fractional"].startswith("pod (spec): claim dev (cpus-1500m): request cpus asks dra.cpu/cpu: "
                                             "1500m; the scheduler books that of the device"), messages


def test_claims_that_cannot_be_listed_are_a_note_and_unknown_never_a_pass(
        audited: tuple[Cluster, Path], tmp_path: Path) -> None:
    """An identity that may list every resource but ResourceClaims: check and audit say why the claims are not
    read, and the Pods naming templates are "unknown" for the DRA CPU rules, never judged compliant (and no
    traceback)."""
    cluster, config = audited
    account = "dra-no-claims"
    listed = cluster.kubectl("api-resources", "--verbs=list", "-o", "name", check=True).stdout.split()
    groups: dict[str, list[str]] = {}
    for resource in listed:
        plural, _, group = resource.partition(".")
        if resource != "resourceclaims.resource.k8s.io":
            groups.setdefault(group, []).append(plural)
    rules = [{"apiGroups": [group], "resources": plurals, "verbs": ["get", "list"]}
             for group, plurals in groups.items()]
    cluster.kubectl("apply", "-f", "-", check=True, stdin=[
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account, "namespace": AUDITED}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": account},
         "rules": rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": account},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": account},
         "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": AUDITED}]}])
    try:
        kubeconfig = cluster.kubeconfig_as(account, AUDITED, tmp_path / "kubeconfig")
        waiting.eventually("the role bound", lambda: subprocess.run(
            [binary("kubectl"), "--kubeconfig", str(kubeconfig), "get", "resourceclaimtemplates", "-n", AUDITED],
            capture_output=True, timeout=60, env=cluster.env).returncode == 0, 30, every=0.5)
        forbidden = "ResourceClaims cannot be listed (needs list on resourceclaims.resource.k8s.io)"
        manifest = tmp_path / "pods.yaml"
        manifest.write_text(yaml.safe_dump_all([taking(name, cpu, template, request)
                                                for name, (cpu, template, request, _) in JUDGED.items()]))
        for what, proc in (
                ("check pods.yaml", cluster.qos_guard("check", str(manifest), "--config", str(config),
                                                      "--kubeconfig", str(kubeconfig), "--format", "json")),
                (f"audit -n {AUDITED}", cluster.qos_guard("audit", "-n", AUDITED, "--config", str(config),
                                                          "--kubeconfig", str(kubeconfig), "--format", "json"))):
            shown(f"qos-guard {what} --kubeconfig (no list on resourceclaims) --format json", proc)
            assert "Traceback" not in proc.stderr, proc.stderr
            assert forbidden in proc.stderr, proc.stderr
            # the claim rules judge none of them; with policy.dra: deny, dra-unaligned refuses each (its CPUs not
            # known to come from dra.cpu: as the webhook answers when its cache's list is refused)
            assert judged_by_cli(proc) == {name: {"dra-unaligned"} for name in JUDGED}, proc.stdout
            for name in JUDGED:  # and each claim is said unknown, with why
                unknown = [n for n in notices_of(proc, name) if ": unknown: " in n and "HTTP 403" in n]
                assert {n.split(": ", 1)[0] for n in unknown} == {"dra-cpu-not-mirrored", "dra-cpu-unpaired"}, \
                    notices_of(proc, name)
            assert proc.returncode == 1, proc.stderr
        # audit also lists the claims it judges: that list is one error record, saying so
        errors = json.loads(proc.stdout)["errors"]
        assert any(e["message"].startswith("listing ResourceClaim: ") and "403" in e["message"] for e in errors), errors
    finally:
        cluster.kubectl("delete", "clusterrolebinding,clusterrole", account, "--ignore-not-found")
