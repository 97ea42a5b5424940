"""The chart's reports, audit CronJob, PrometheusRule and dashboard, rendered by the real helm."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from tests.binaries import NRT_API, OPENREPORTS, go_module
from tests.chart.conftest import CHART, Render, by_kind, one, run_helm
from webhook.core.claims import CLAIM_KINDS
from webhook.core.workloads import KINDS

NAMESPACE = "qos-guard"
OPTIONAL = ("reports.installCRDs=true", "audit.enabled=true", "prometheusRule.enabled=true", "dashboard.enabled=true")


def test_all_off_by_default(render: Render) -> None:
    kinds = {o["kind"] for o in render()}
    assert not kinds & {"CustomResourceDefinition", "CronJob", "PrometheusRule", "ClusterRole"}
    assert len(by_kind(render(), "ConfigMap")) == 1


def test_lint_with_everything_on(helm: str) -> None:
    proc = run_helm(helm, "lint", "--strict", str(CHART), *[a for v in OPTIONAL for a in ("--set", v)])
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_vendored_report_crd_is_the_modules_own() -> None:
    vendored = (CHART / "files" / "openreports.io_reports.yaml").read_text()
    header, _, body = vendored.partition("\n---\n")
    assert all(line.startswith("#") for line in header.splitlines()) and "v0.2.1" in header and "Apache" in header
    upstream = (go_module(*OPENREPORTS) / "config" / "crd" / "openreports.io_reports.yaml").read_text()
    assert "---\n" + body == upstream


def test_vendored_topology_crd_is_the_modules_own() -> None:
    vendored = (CHART / "files" / "topology.node.k8s.io_noderesourcetopologies.yaml").read_text()
    header, _, body = vendored.partition("\n---\n")
    assert all(line.startswith("#") for line in header.splitlines()) and "v0.1.2" in header and "Apache" in header
    module = go_module(*NRT_API)
    assert body == (module / "manifests" / "crd.yaml").read_text()
    assert (CHART / "files" / "LICENSE-noderesourcetopology-api.txt").read_text() == (module / "LICENSE").read_text()


def _grants(role: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
            for v in rule["verbs"]}


def test_numa_auto_grants_the_webhook_list_and_watch_on_nodes_and_topologies_only(render: Render) -> None:
    assert not [r for r in by_kind(render(), "ClusterRole") if r["metadata"]["name"].endswith("-topology")]
    assert not by_kind(render("--set", "config.policy.numa.cpus=32"), "ClusterRole")
    objects = render("--set", "config.policy.numa=auto", namespace=NAMESPACE)
    role = one(objects, "ClusterRole")
    assert role["metadata"]["name"] == "qos-guard-topology"
    assert _grants(role) == {(g, r, v) for g, r in (("", "nodes"), ("topology.node.k8s.io", "noderesourcetopologies"))
                             for v in ("list", "watch")}
    binding = one(objects, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == "qos-guard-topology"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "qos-guard", "namespace": NAMESPACE}]
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "qos-guard" and pod["automountServiceAccountToken"] is True
    assert one(objects, "ServiceAccount")["automountServiceAccountToken"] is True


def test_numa_auto_audit_cronjob_lists_nodes_and_topologies(render: Render) -> None:
    objects = render("--set", "audit.enabled=true,config.policy.numa=auto", namespace=NAMESPACE)
    (role,) = [r for r in by_kind(objects, "ClusterRole") if r["metadata"]["name"].endswith("-cronjob")]
    assert {("", "nodes", "list"), ("topology.node.k8s.io", "noderesourcetopologies", "list")} <= _grants(role)


def test_device_classes_grant_list_and_watch_on_deviceclasses_only_when_configured(render: Render) -> None:
    assert not [r for r in by_kind(render(), "ClusterRole") if r["metadata"]["name"].endswith("-deviceclasses")]
    objects = render("--set", "config.policy.deviceClasses=true", namespace=NAMESPACE)
    role = one(objects, "ClusterRole")
    assert role["metadata"]["name"] == "qos-guard-deviceclasses"
    assert _grants(role) == {("resource.k8s.io", "deviceclasses", verb) for verb in ("list", "watch")}
    binding = one(objects, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == "qos-guard-deviceclasses"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "qos-guard", "namespace": NAMESPACE}]
    assert one(objects, "ServiceAccount")["automountServiceAccountToken"] is True
    both = render("--set", "config.policy.deviceClasses=true,config.policy.numa=auto,rbac.audit=true",
                  namespace=NAMESPACE)
    assert sorted(r["metadata"]["name"] for r in by_kind(both, "ClusterRole")) == [
        "qos-guard-audit", "qos-guard-deviceclasses", "qos-guard-topology"]
    cronjob = render("--set", "audit.enabled=true,config.policy.deviceClasses=true", namespace=NAMESPACE)
    (role,) = [r for r in by_kind(cronjob, "ClusterRole") if r["metadata"]["name"].endswith("-cronjob")]
    assert ("resource.k8s.io", "deviceclasses", "list") in _grants(role)


def test_operator_objects_grant_list_and_watch_on_kserve_s_runtimes_only_when_configured(render: Render) -> None:
    assert not [r for r in by_kind(render(), "ClusterRole") if r["metadata"]["name"].endswith("-operatorobjects")]
    objects = render("--set", "config.policy.operatorObjects=true", namespace=NAMESPACE)
    role = one(objects, "ClusterRole")
    assert role["metadata"]["name"] == "qos-guard-operatorobjects"
    assert _grants(role) == {("serving.kserve.io", resource, verb)
                             for resource in ("servingruntimes", "clusterservingruntimes", "llminferenceserviceconfigs")
                             for verb in ("list", "watch")} | {("", "configmaps", "list"), ("", "configmaps", "watch")}
    # KServe's one ConfigMap, by name (its list and watch by fieldSelector are authorized against resourceNames),
    # bound cluster-wide: no Role or RoleBinding in a KServe namespace that may not exist at install
    (config_maps,) = [rule for rule in role["rules"] if rule["resources"] == ["configmaps"]]
    assert config_maps["resourceNames"] == ["inferenceservice-config"]
    elsewhere = render("--set", "config.policy.operatorObjects=true,config.policy.kserveNamespace=opendatahub",
                       namespace=NAMESPACE)
    assert not by_kind(elsewhere, "Role") and not by_kind(elsewhere, "RoleBinding")
    assert one(elsewhere, "ClusterRole")["rules"] == role["rules"]
    binding = one(objects, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == "qos-guard-operatorobjects"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "qos-guard", "namespace": NAMESPACE}]
    assert one(objects, "ServiceAccount")["automountServiceAccountToken"] is True
    (deployment,) = [d for d in by_kind(objects, "Deployment") if d["metadata"]["name"] == "qos-guard"]
    assert deployment["spec"]["template"]["spec"]["automountServiceAccountToken"] is True
    both = render("--set", "config.policy.operatorObjects=true,config.policy.deviceClasses=true", namespace=NAMESPACE)
    assert sorted(r["metadata"]["name"] for r in by_kind(both, "ClusterRole")) == [
        "qos-guard-deviceclasses", "qos-guard-operatorobjects"]


def test_dra_objects_grant_list_and_watch_on_claims_and_slices_only_when_configured(render: Render) -> None:
    assert not [r for r in by_kind(render(), "ClusterRole") if r["metadata"]["name"].endswith("-draobjects")]
    objects = render("--set", "config.policy.draObjects=true", namespace=NAMESPACE)
    role = one(objects, "ClusterRole")
    assert role["metadata"]["name"] == "qos-guard-draobjects"
    assert _grants(role) == {("resource.k8s.io", resource, verb)
                             for resource in ("resourceclaims", "resourceclaimtemplates", "resourceslices")
                             for verb in ("list", "watch")} | {
        ("topology.node.k8s.io", "noderesourcetopologies", verb) for verb in ("list", "watch")}
    binding = one(objects, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == "qos-guard-draobjects"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "qos-guard", "namespace": NAMESPACE}]
    assert one(objects, "ServiceAccount")["automountServiceAccountToken"] is True
    (deployment,) = [d for d in by_kind(objects, "Deployment") if d["metadata"]["name"] == "qos-guard"]
    assert deployment["spec"]["template"]["spec"]["automountServiceAccountToken"] is True
    config = next(c for c in by_kind(objects, "ConfigMap") if "config.yaml" in c.get("data", {}))
    assert yaml.safe_load(config["data"]["config.yaml"])["policy"]["draObjects"] is True


def test_report_crd_is_kept_on_uninstall(render: Render) -> None:
    crd = one(render("--set", "reports.installCRDs=true"), "CustomResourceDefinition")
    assert crd["metadata"]["name"] == "reports.openreports.io"
    assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert crd["spec"]["versions"][0]["name"] == "v1alpha1"


@pytest.mark.parametrize(("report", "group", "plural"), [("openreports", "openreports.io", "reports"),
                                                         ("policyreport", "wgpolicyk8s.io", "policyreports")])
def test_audit_cronjob_rbac_is_what_one_run_does(render: Render, report: str, group: str, plural: str) -> None:
    objects = render("--set", f"audit.enabled=true,audit.report={report}", namespace=NAMESPACE)
    role = one(objects, "ClusterRole")
    granted = {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
               for v in rule["verbs"]}
    listed = {(k.group, k.plural, "list") for k in KINDS.values()} \
        | {(k.group, k.plural, "list") for k in CLAIM_KINDS.values()} | {("", "namespaces", "list")}
    written = {(group, plural, verb) for verb in ("list", "create", "patch", "delete")}
    # the ConfigMaps read_related GETs (KServe's, Knative's), by name only; the LLMInferenceServiceConfigs it lists
    assert granted == listed | written | {("", "configmaps", "get"),
                                          ("serving.kserve.io", "llminferenceserviceconfigs", "list")}
    (config_maps,) = [rule for rule in role["rules"] if rule["resources"] == ["configmaps"]]
    assert config_maps["resourceNames"] == ["inferenceservice-config", "config-deployment"]
    binding = one(objects, "ClusterRoleBinding")
    (account,) = [a for a in by_kind(objects, "ServiceAccount") if a["metadata"]["name"].endswith("-cronjob")]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["metadata"]["name"],
                                    "namespace": NAMESPACE}]
    job = one(objects, "CronJob")
    pod = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == account["metadata"]["name"] != "qos-guard"
    args = pod["containers"][0]["args"]
    assert args == ["audit", f"--report={report}", "--mode=warn", "--config=/etc/qos-guard/config/config.yaml"]
    resources = pod["containers"][0]["resources"]
    assert resources["requests"] == resources["limits"]  # Guaranteed, as the tool asks of others
    # The webhook's Service and Deployment must never select the audit Pods.
    selector = one(objects, "Service")["spec"]["selector"]
    labels = job["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"]
    assert not selector.items() <= labels.items()


def test_audit_all_namespaces_and_release_name_prefix(render: Render) -> None:
    job = one(render("--set", "audit.enabled=true,audit.allNamespaces=true", release="prod"), "CronJob")
    assert job["metadata"]["name"] == "prod-qos-guard-audit-cronjob"
    assert "--all-namespaces" in job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"]


def test_audit_role_does_not_clash_with_rbac_audit(render: Render) -> None:
    objects = render("--set", "audit.enabled=true,rbac.audit=true")
    names = [(o["kind"], o["metadata"]["name"]) for o in objects
             if o["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    assert len(names) == len(set(names)) == 4


def test_dashboard_configmap(render: Render) -> None:
    objects = render("--set", "dashboard.enabled=true,dashboard.namespace=monitoring",
                     "--set", "dashboard.annotations.grafana_folder=Kubernetes")
    (cm,) = [o for o in by_kind(objects, "ConfigMap") if o["metadata"]["name"].endswith("-dashboard")]
    assert cm["metadata"]["namespace"] == "monitoring"
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["metadata"]["annotations"] == {"grafana_folder": "Kubernetes"}
    dash: dict[str, Any] = json.loads(cm["data"]["qos-guard.json"])
    assert dash == json.loads((CHART / "dashboards" / "qos-guard.json").read_text())
    assert dash["uid"] == "qos-guard" and all(p["datasource"]["uid"] == "${datasource}" for p in dash["panels"])


def test_dashboard_shows_every_alignment_state_the_agent_warns_about() -> None:
    """The agent's aligned gauge is 0 when misaligned and -1 when a device's NUMA node is unknown: unknown is its
    own answer, so it gets its own stat panel and its own rows in the table, never folded into 'aligned'."""
    dash = json.loads((CHART / "dashboards" / "qos-guard.json").read_text())
    stats = {t["expr"] for p in dash["panels"] if p["type"] == "stat" for t in p["targets"]}
    rows = {t["expr"] for p in dash["panels"] if p["type"] == "table" for t in p["targets"]}
    for value in ("0", "-1"):
        assert f"count(qos_guard_container_numa_aligned == {value}) or vector(0)" in stats, value
        assert f"qos_guard_container_numa_aligned == {value}" in rows, value
    boxes = [(p["gridPos"]["x"], p["gridPos"]["y"], p["gridPos"]["w"], p["gridPos"]["h"]) for p in dash["panels"]]
    cells = [(x + i, y + j) for x, y, w, h in boxes for i in range(w) for j in range(h)]
    assert len(cells) == len(set(cells)), "two panels overlap"


@pytest.mark.parametrize(("values", "named"), [
    (["--set", "audit.report=bogus"], "at '/audit/report'"),
    (["--set", "audit.resources.cpu=null"], "at '/audit/resources'"),
    (["--set", "prometheusRule.latencyP99Seconds=0.3"], "at '/prometheusRule/latencyP99Seconds'"),
    (["--set", "prometheusRule.downFor=soon"], "at '/prometheusRule/downFor'"),
    (["--set", "dashboard.enabled=yes"], "at '/dashboard/enabled'"),
    (["--set", "reports.installCRDs=1"], "at '/reports/installCRDs'"),
])
def test_schema_refuses_bad_values(helm: str, values: list[str], named: str) -> None:
    proc = run_helm(helm, "template", "qos-guard", str(CHART), *values)
    assert proc.returncode != 0 and named in proc.stderr, proc.stderr


def test_latency_threshold_must_fit_the_timeout(helm: str) -> None:
    proc = run_helm(helm, "template", "qos-guard", str(CHART), "--set", "prometheusRule.enabled=true",
                    "--set-string", "prometheusRule.latencyP99Seconds=1.0", "--set", "webhook.timeoutSeconds=1")
    assert proc.returncode != 0 and "must be under webhook.timeoutSeconds" in proc.stderr


def _audit_pod(objects: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = one(objects, "CronJob")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return spec


@pytest.mark.parametrize("enforcement", ["webhook", "policy"])
def test_audit_cronjob_runs_with_the_charts_config(render: Render, enforcement: str) -> None:
    """The hourly audit ran with the built-in defaults: no --config and no ConfigMap, so the chart's exemptions,
    fractionalCPUContainers and smtAlignment were the webhook's and not the audit's."""
    objects = render("--set", f"audit.enabled=true,enforcement={enforcement}",
                     "--set", "config.policy.fractionalCPUContainers={istio-proxy}",
                     "--set", "config.policy.smtAlignment=2", "--kube-version", "1.36.3", namespace=NAMESPACE)
    pod = _audit_pod(objects)
    (container,) = pod["containers"]
    (flag,) = [a for a in container["args"] if a.startswith("--config=")]
    path = flag.removeprefix("--config=")
    (mount,) = [m for m in container["volumeMounts"] if path.startswith(m["mountPath"] + "/")]
    assert mount["readOnly"] is True
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    (cm,) = [c for c in by_kind(objects, "ConfigMap") if c["metadata"]["name"] == volume["configMap"]["name"]]
    assert cm["metadata"]["namespace"] == NAMESPACE
    config = yaml.safe_load(cm["data"][path.rsplit("/", 1)[1]])
    assert config["policy"]["fractionalCPUContainers"] == ["istio-proxy"]
    assert config["policy"]["smtAlignment"] == 2


def _dashboard(objects: list[dict[str, Any]]) -> dict[str, Any] | None:
    found = [o for o in by_kind(objects, "ConfigMap") if o["metadata"]["name"].endswith("-dashboard")]
    return json.loads(found[0]["data"]["qos-guard.json"]) if found else None


def test_policy_enforcement_ships_no_webhook_alert_or_panel(render: Render) -> None:
    """With enforcement: policy there is no webhook to scrape, so QosGuardWebhookDown (`absent(up{...})`) fired
    for ever, and the dashboard's webhook panels stayed empty."""
    switches = "prometheusRule.enabled=true,dashboard.enabled=true,serviceMonitor.enabled=true"
    webhook = render("--set", switches, "--set", "agent.enabled=true")
    webhook_rules = {r["alert"] for r in one(webhook, "PrometheusRule")["spec"]["groups"][0]["rules"]}
    assert "QosGuardWebhookDown" in webhook_rules
    webhook_dash = _dashboard(webhook)
    assert webhook_dash is not None
    assert webhook_dash == json.loads((CHART / "dashboards" / "qos-guard.json").read_text())

    policy = render("--set", switches, "--set", "enforcement=policy", "--kube-version", "1.36.3")
    assert not by_kind(policy, "PrometheusRule") and _dashboard(policy) is None

    with_agent = render("--set", switches, "--set", "enforcement=policy,agent.enabled=true",
                        "--kube-version", "1.36.3")
    rules = one(with_agent, "PrometheusRule")["spec"]["groups"][0]["rules"]
    agent_alerts = {r["alert"] for r in one(webhook, "PrometheusRule")["spec"]["groups"][0]["rules"]
                    if "qos_guard_container_" in r["expr"]}
    assert {"QosGuardContainerNotPinned", "QosGuardContainerNUMAMisaligned"} <= agent_alerts
    assert {r["alert"] for r in rules} == agent_alerts
    assert all("qos_guard_container_" in r["expr"] for r in rules)
    dash = _dashboard(with_agent)
    assert dash is not None and dash["uid"] == webhook_dash["uid"]
    kept = [p for p in webhook_dash["panels"] if "qos_guard_container_" in json.dumps(p["targets"])]
    assert kept and dash["panels"] == kept
    assert "$job" not in json.dumps(dash) and "qos_guard_admission" not in json.dumps(dash)
