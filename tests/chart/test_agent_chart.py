"""The chart's optional node agent: off by default; when on, a DaemonSet mounting kubelet's pod-resources
DIRECTORY (not the socket file) and the host's /sys read-only, root without any capability, and a ClusterRole
with only what one look does."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from tests.chart.conftest import CHART, Render, by_kind, one, run_helm
from tests.chart.test_chart import KUBE_SCHEMA, NAMESPACE


@pytest.fixture(scope="module")
def default(render: Render) -> list[dict[str, Any]]:
    return render(namespace=NAMESPACE)


def agent_objects(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if o["metadata"]["name"].endswith("-agent")]


def test_off_by_default(default: list[dict[str, Any]]) -> None:
    assert not agent_objects(default) and not by_kind(default, "DaemonSet")


@pytest.fixture(scope="module")
def agent(render: Render) -> list[dict[str, Any]]:
    return render("--set", "agent.enabled=true", namespace=NAMESPACE)


def test_daemonset_mounts_read_only_and_drops_everything(agent: list[dict[str, Any]]) -> None:
    ds = one(agent, "DaemonSet")
    spec = ds["spec"]["template"]["spec"]
    (c,) = spec["containers"]
    assert c["args"][0] == "agent"
    assert "--pod-resources-socket=/var/lib/kubelet/pod-resources/kubelet.sock" in c["args"]
    assert "--sys-root=/host/sys" in c["args"] and not any(a.startswith("--report") for a in c["args"])
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["pod-resources"]["hostPath"] == {"path": "/var/lib/kubelet/pod-resources", "type": "Directory"}
    assert volumes["sys"]["hostPath"] == {"path": "/sys", "type": "Directory"}
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    assert all(m["readOnly"] for m in mounts.values())
    assert mounts["pod-resources"]["mountPath"] == "/var/lib/kubelet/pod-resources"
    sc = c["securityContext"]
    assert sc == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}
    assert "privileged" not in sc and not spec.get("hostNetwork") and not spec.get("hostPID")
    assert c["env"] == [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]
    assert c["resources"]["requests"] == c["resources"]["limits"]  # Guaranteed, as it asks of others
    # The API token only in the agent container, expiring hourly (not the admission plugin's automount).
    assert spec["automountServiceAccountToken"] is False
    assert mounts["api-token"]["mountPath"] == "/var/run/secrets/kubernetes.io/serviceaccount"
    assert volumes["api-token"]["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"] == 3607
    assert spec["tolerations"] == [{"operator": "Exists"}]
    # Never an endpoint of the webhook's Service.
    selector = next(s for s in by_kind(agent, "Service") if not s["metadata"]["name"].endswith("-agent"))
    assert not selector["spec"]["selector"].items() <= ds["spec"]["template"]["metadata"]["labels"].items()


def test_rbac_is_least_privilege(agent: list[dict[str, Any]], render: Render) -> None:
    (role,) = [r for r in by_kind(agent, "ClusterRole") if r["metadata"]["name"].endswith("-agent")]
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["namespaces", "pods"], "verbs": ["list", "watch"]},
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"], "verbs": ["list", "watch"]},
        # each DRA device's claim, read (never listed) for adminAccess
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
    ]
    # What the agent's code watches is what the role grants list and watch on (webhook/node/watched.py), by API
    # group: /api/v1/R is the core group "", /apis/GROUP/VERSION/R is GROUP.
    from webhook.node.watched import WatchedView

    def group_and_resource(path: str) -> tuple[str, str]:
        parts = path.strip("/").split("/")
        return ("", parts[2]) if parts[0] == "api" else (parts[1], parts[3])

    watched = {group_and_resource(r.path) for r in WatchedView(None, "n", print).reflectors}  # type: ignore[arg-type]
    granted = {(group, res) for rule in role["rules"] if {"list", "watch"} <= set(rule["verbs"])
               for group in rule["apiGroups"] for res in rule["resources"]}
    assert watched == {("", "namespaces"), ("", "pods"), ("resource.k8s.io", "resourceslices")}
    assert watched == granted  # nothing granted that is not watched
    binding = one(agent, "ClusterRoleBinding")
    assert binding["subjects"][0]["name"] == one(agent, "DaemonSet")["spec"]["template"]["spec"]["serviceAccountName"]
    reporting = render("--set", "agent.enabled=true,agent.report=openreports", namespace=NAMESPACE)
    (role,) = by_kind(reporting, "ClusterRole")
    assert role["rules"][-1] == {"apiGroups": ["openreports.io"], "resources": ["reports"],
                                 "verbs": ["list", "create", "patch", "delete"]}
    assert "--report=openreports" in one(reporting, "DaemonSet")["spec"]["template"]["spec"]["containers"][0]["args"]
    # The webhook's own ServiceAccount is not given anything by the agent.
    assert one(reporting, "Deployment")["spec"]["template"]["spec"]["automountServiceAccountToken"] is False


def test_objects_valid_against_kubernetes_openapi(render: Render) -> None:
    objects = render("--set", "agent.enabled=true,agent.report=policyreport,serviceMonitor.enabled=true",
                     namespace=NAMESPACE)
    checked = [o for o in agent_objects(objects) if o["apiVersion"] != "monitoring.coreos.com/v1"]
    for obj in checked:
        kubernetes_validate.validate(obj, KUBE_SCHEMA, strict=True)
    assert len(checked) == 6  # ServiceAccount, ClusterRole, ClusterRoleBinding, ConfigMap, DaemonSet, Service


def test_scraping_keeps_the_judged_pods_labels(render: Render) -> None:
    objects = render("--set", "agent.enabled=true,serviceMonitor.enabled=true", namespace=NAMESPACE)
    monitors = {m["metadata"]["name"]: m for m in by_kind(objects, "ServiceMonitor")}
    agent_monitor, webhook_monitor = monitors["qos-guard-agent"], monitors["qos-guard"]
    assert agent_monitor["spec"]["endpoints"][0]["honorLabels"] is True
    services = {s["metadata"]["name"]: s for s in by_kind(objects, "Service")}
    # Each ServiceMonitor selects its own Service only.
    for monitor, service in ((agent_monitor, "qos-guard-agent"), (webhook_monitor, "qos-guard")):
        wanted = monitor["spec"]["selector"]["matchLabels"].items()
        assert [n for n, s in services.items() if wanted <= s["metadata"]["labels"].items()] == [service]


def test_fractional_containers_reach_the_agent(render: Render) -> None:
    import yaml

    objects = render("--set", "agent.enabled=true", "--set", "config.policy.fractionalCPUContainers={istio-proxy}")
    cm = next(c for c in by_kind(objects, "ConfigMap") if c["metadata"]["name"].endswith("-agent"))
    assert yaml.safe_load(cm["data"]["config.yaml"]) == {"policy": {"fractionalCPUContainers": ["istio-proxy"]}}


@pytest.mark.parametrize(("values", "named"), [
    ("agent.report=yes", "at '/agent/report'"),
    ("agent.interval=0", "at '/agent/interval'"),
    ("agent.podResourcesHostPath=relative", "at '/agent/podResourcesHostPath'"),
    ("agent.bogus=1", "additional properties 'bogus' not allowed"),
])
def test_schema_refuses_bad_agent_values(helm: str, values: str, named: str) -> None:
    proc = run_helm(helm, "template", "qos-guard", str(CHART), "--set", values)
    assert proc.returncode != 0 and named in proc.stderr, proc.stderr


def test_agent_must_be_guaranteed(helm: str) -> None:
    proc = run_helm(helm, "template", "qos-guard", str(CHART), "--set", "agent.enabled=true",
                    "--set", "agent.resources.limits.cpu=200m")
    assert proc.returncode != 0 and "agent.resources.requests.cpu must equal agent.resources.limits.cpu" in proc.stderr


def test_publish_topology_grants_only_its_object_and_the_node(render: Render, helm: str) -> None:
    """Off by default (no flag, no grant); on: create and patch on NRTs (server-side apply; no get, update or
    delete, which nothing does), get on the Node (its uid, the ownerReference), and nodes/configz (the node's own
    kubelet's configz) only while the Topology Manager settings are not given; never nodes/proxy."""
    def topology_rules(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
        (role,) = [r for r in by_kind(objects, "ClusterRole") if r["metadata"]["name"].endswith("-agent")]
        return [r for r in role["rules"] if "topology.node.k8s.io" in r["apiGroups"]
                or {"nodes", "nodes/proxy", "nodes/configz"} & set(r["resources"])]

    def args(objects: list[dict[str, Any]]) -> list[str]:
        return list(one(objects, "DaemonSet")["spec"]["template"]["spec"]["containers"][0]["args"])

    off = render("--set", "agent.enabled=true", namespace=NAMESPACE)
    assert topology_rules(off) == [] and not any("topology" in a for a in args(off))
    assert by_kind(off, "ValidatingAdmissionPolicy") == []
    nrt = {"apiGroups": ["topology.node.k8s.io"], "resources": ["noderesourcetopologies"],
           "verbs": ["create", "patch"]}
    node = {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}
    on = render("--set", "agent.enabled=true,agent.publishTopology=true", namespace=NAMESPACE)
    assert topology_rules(on) == [nrt, node, {"apiGroups": [""], "resources": ["nodes/configz"], "verbs": ["get"]}]
    assert "--publish-topology" in args(on) and "--topology-poll=0.25" in args(on)
    assert {"--kubelet-address=$(NODE_IP)", "--kubelet-port=10250"} <= set(args(on))
    env = {e["name"]: e for e in one(on, "DaemonSet")["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["NODE_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.hostIP"}}
    assert not any(a.startswith("--topology-manager") for a in args(on))
    # Each agent writes only its own node's object: the policy matches the agent's account, and only it.
    policy = one(on, "ValidatingAdmissionPolicy")
    binding = one(on, "ValidatingAdmissionPolicyBinding")
    assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}
    assert policy["spec"]["failurePolicy"] == "Fail"
    assert policy["spec"]["matchConditions"] == [{"name": "agent", "expression": 'request.userInfo.username == '
                                                  '"system:serviceaccount:platform:qos-guard-agent"'}]
    assert "authentication.kubernetes.io/node-name" in policy["spec"]["variables"][0]["expression"]
    given = render("--set", "agent.enabled=true,agent.publishTopology=true,agent.topologyManagerPolicy="
                   "single-numa-node,agent.topologyManagerScope=pod", namespace=NAMESPACE)
    assert topology_rules(given) == [nrt, node]
    assert {"--topology-manager-policy=single-numa-node", "--topology-manager-scope=pod"} <= set(args(given))
    assert not any(a.startswith("--kubelet-") for a in args(given))
    # The flags the chart writes are the agent's own.
    from webhook.cli.parser import build_parser

    parsed = build_parser().parse_args([a for a in args(given) if not a.startswith("--config")])
    assert parsed.publish_topology and parsed.topology_manager_policy == "single-numa-node"
    parsed = build_parser().parse_args([a for a in args(on) if not a.startswith("--config")])
    assert (parsed.kubelet_address, parsed.kubelet_port) == ("$(NODE_IP)", 10250)
    half = run_helm(helm, "template", "qos-guard", str(CHART), "--set",
                    "agent.enabled=true,agent.publishTopology=true,agent.topologyManagerPolicy=none")
    assert half.returncode != 0 and "set both or neither" in half.stderr
    bad = run_helm(helm, "template", "qos-guard", str(CHART), "--set", "agent.topologyManagerScope=node")
    assert bad.returncode != 0 and "at '/agent/topologyManagerScope'" in bad.stderr
