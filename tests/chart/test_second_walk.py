"""What a new user tripped over through the chart (existingSecret, the PodDisruptionBudget, the first install,
the chart's metadata, docs that disagreed), rendered by the real helm."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chart.conftest import CHART, Render, by_kind, one, run_helm

NAMESPACE = "qos-guard"


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


# --- existingSecret and the PodDisruptionBudget ------------------------------------------------------------


def test_existing_secret_without_a_readable_ca_is_refused_with_the_way_out(helm: str) -> None:
    """`helm template` (GitOps) cannot read the Secret: the webhooks were rendered without a caBundle, and with
    failurePolicy Fail every judged request was then refused, without a word."""
    proc = run_helm(helm, "template", "qos-guard", str(CHART), "--namespace", NAMESPACE,
                    "--set", "existingSecret=my-tls")
    assert proc.returncode != 0
    assert f"existingSecret: cannot read Secret {NAMESPACE}/my-tls here (helm template and --dry-run do not read " \
           "the cluster), so the webhooks would get no caBundle; pass its CA: --set existingSecretCABundle=" \
           "$(base64 -w0 certs/ca.crt)" in proc.stderr


def test_existing_secret_with_its_ca_given_renders_every_caBundle(render: Render) -> None:
    ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").decode()
    objects = render("--set", f"existingSecret=my-tls,existingSecretCABundle={ca}")
    assert not by_kind(objects, "Secret")
    hooks = [h for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
             for h in one(objects, kind)["webhooks"]]
    assert len(hooks) == 5 and all(h["clientConfig"]["caBundle"] == ca for h in hooks)
    volumes = one(objects, "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "tls", "secret": {"secretName": "my-tls"}} in volumes


def test_cert_manager_with_existing_secret_is_refused(helm: str) -> None:
    proc = run_helm(helm, "template", "qos-guard", str(CHART), "--set", "existingSecret=my-tls",
                    "--set", "certManager.enabled=true", "--set", "existingSecretCABundle=QUJD")
    assert proc.returncode != 0
    assert "existingSecret (my-tls) and certManager.enabled exclude each other: cert-manager would write its " \
           "certificate into your Secret" in proc.stderr
    alone = run_helm(helm, "template", "qos-guard", str(CHART), "--set", "existingSecretCABundle=QUJD")
    assert alone.returncode != 0 and "existingSecretCABundle is the CA of existingSecret, which is not set" in \
        alone.stderr


@pytest.mark.parametrize(("values", "spec"), [
    ([], {"minAvailable": 1}),
    (["podDisruptionBudget.maxUnavailable=1"], {"maxUnavailable": 1}),
    (["podDisruptionBudget.maxUnavailable=50%"], {"maxUnavailable": "50%"}),
    (["podDisruptionBudget.minAvailable=2"], {"minAvailable": 2}),
    (["podDisruptionBudget.minAvailable=null", "podDisruptionBudget.maxUnavailable=1"], {"maxUnavailable": 1}),
])
def test_pdb_max_unavailable_is_honoured_without_nulling_min_available(render: Render, values: list[str],
                                                                       spec: dict[str, Any]) -> None:
    """`podDisruptionBudget.maxUnavailable=1` was ignored unless minAvailable was set to null as well."""
    args = [a for v in values for a in ("--set", v)]
    pdb = one(render("--set", "replicaCount=3", *args), "PodDisruptionBudget")["spec"]
    assert {k: v for k, v in pdb.items() if k != "selector"} == spec


# --- a new user's first install, the chart's metadata ------------------------------------------------------


def test_readme_first_helm_install_sets_the_image_and_chart_home_is_real() -> None:
    """The README's first `helm install` had no image setting, though no registry serves the default image; the
    chart's `home` was a domain nobody owns."""
    readme = (CHART.parents[1] / "README.md").read_text()
    first = readme[readme.index("helm install qos-guard charts/qos-guard"):]
    command = first[:first.index("\nkubectl")]
    assert "--set image.registry=" in command, command
    assert readme.index("make image-push REGISTRY=") < readme.index("helm install qos-guard charts/qos-guard")
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert "qos-guard.io" not in yaml.safe_dump(chart)
    assert chart["home"] in chart["sources"]


# --- docs that disagreed ------------------------------------------------------------------------------------

ROOT = CHART.parents[1]


def test_autoscaling_text_and_sizing_give_the_same_p99() -> None:
    """`autoscaling.enabled` said "p99 under a second" where Sizing (and the chart README) say under 0.1 s."""
    values = (CHART / "values.yaml").read_text()
    text = values[values.index("autoscaling:"):values.index("  enabled:", values.index("autoscaling:"))]
    sizing = (ROOT / "docs" / "operations" / "sizing.md").read_text().split("## The webhook", 1)[1].split("##", 1)[0]
    assert "p99.9 under 0.1 s" in sizing and "p99 under 0.1 s" in " ".join(text.split())
    assert "under a second" not in values and "p99 under 0.1 s" in (CHART / "README.md").read_text()


def test_readme_webhook_kubernetes_versions_are_the_charts(render: Render) -> None:
    """The README's table said any cluster with admission.k8s.io v1 or v1beta1; the chart asks for 1.27+ and
    registers v1 only."""
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    minimum = chart["kubeVersion"].removeprefix(">=").removesuffix(".0-0")
    row = next(line for line in (ROOT / "docs" / "howto" / "admission-policies.md").read_text().splitlines()
               if line.startswith("| Kubernetes |"))
    webhook_cell = row.split("|")[3]
    assert f"{minimum}+" in webhook_cell and "admissionReviewVersions: [v1]" in webhook_cell, row
    objects = render()
    hooks = [h for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
             for h in one(objects, kind)["webhooks"]]
    assert hooks and all(h["admissionReviewVersions"] == ["v1"] for h in hooks)


def test_user_readme_opens_plainly_and_leaves_test_harness_detail_to_contributing() -> None:
    readme = (ROOT / "README.md").read_text()
    opening = readme[:readme.index("## Quick start")]
    assert "instead of" not in opening and "µs" not in opening
    assert "### On a real node (tests/node)" not in readme and "mmdebstrap" not in readme
    contributing = (ROOT / "CONTRIBUTING.md").read_text()
    assert "## On a real node (tests/node)" in contributing and "mmdebstrap" in contributing
    assert "CONTRIBUTING.md#on-a-real-node-testsnode" in readme


def test_the_charts_own_render_passes_the_readme_check_workflow(helm: str, tmp_path: Path) -> None:
    """The README's workflow for a chart, on this chart: its own Pods (the webhook's 250m, the test Pod's 50m)
    are in its release namespace, which its webhooks never judge; the CI guide's exemption says so to check
    (the bare pipe found 2 violations)."""
    from tests.binaries import ROOT

    readme = (ROOT / "docs" / "howto" / "ci.md").read_text()
    config_line = re.search(r"`printf '(exemptions: \{namespaces: \[qos-guard\]\})\\n' > ci.yaml`", readme)
    assert config_line, "the CI guide's exemption for a chart's own namespace"
    (tmp_path / "ci.yaml").write_text(config_line[1] + "\n")
    rendered = run_helm(helm, "template", "qos-guard", str(CHART), "-n", "qos-guard")
    assert rendered.returncode == 0, rendered.stderr
    bare = subprocess.run([sys.executable, "-m", "webhook.cli", "check", "-"], input=rendered.stdout,
                          capture_output=True, text=True, timeout=120, check=False)
    assert bare.returncode == 1 and bare.stdout.count("cpu-not-integer") == 2, bare.stdout + bare.stderr
    checked = subprocess.run([sys.executable, "-m", "webhook.cli", "check", "--config", str(tmp_path / "ci.yaml"),
                              "-"], input=rendered.stdout, capture_output=True, text=True, timeout=120, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "(2 exempt)" in checked.stderr, checked.stderr
    # the namespace the CI guide exempts is the one the chart's webhooks leave out
    hooks = [d for d in yaml.safe_load_all(rendered.stdout) if d and d["kind"].endswith("WebhookConfiguration")]
    for hook in (w for d in hooks for w in d["webhooks"]):
        names = [e for e in hook["namespaceSelector"]["matchExpressions"] if e["key"] == "kubernetes.io/metadata.name"]
        assert names and "qos-guard" in names[0]["values"] and names[0]["operator"] == "NotIn", hook["name"]
