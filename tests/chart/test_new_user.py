"""What a new user of the chart trips over: `enforcement: policy` on a cluster without MutatingAdmissionPolicy v1,
scaling out, the README steps from an empty registry and a `qos-guard certs` pair to a running webhook (the first
`helm install` names an image registry; the chart's home is real), and the CI guide's `check` of a rendered chart,
run on this chart."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.chart.conftest import CHART, ROOT, Render, by_kind, one, run_helm

REFUSED = ("enforcement: policy needs MutatingAdmissionPolicy in admissionregistration.k8s.io/v1, which Kubernetes "
           "serves from 1.36; this cluster is v{version}{why}: keep enforcement: webhook, which works on every "
           "supported version (1.33 or later)")
BETA, ALPHA = ", where it is beta (v1beta1) and off by default", ", where it is alpha (v1alpha1) and off by default"


@pytest.mark.parametrize(("version", "why"), [("1.33.0", ALPHA), ("1.33.13", ALPHA), ("1.34.4", BETA),
                                              ("1.35.9", BETA)])
def test_policy_enforcement_is_refused_below_1_36(helm: str, version: str, why: str) -> None:
    """The chart rendered MutatingAdmissionPolicy v1 objects for any version: the install failed later, on the
    API server, with a less helpful message. The refusal says what the cluster's minor serves instead."""
    proc = run_helm(helm, "template", "qos-guard", str(CHART), "--set", "enforcement=policy",
                    "--kube-version", version)
    assert proc.returncode != 0
    assert REFUSED.format(version=version, why=why) in proc.stderr, proc.stderr
    webhook = run_helm(helm, "template", "qos-guard", str(CHART), "--kube-version", version)
    assert webhook.returncode == 0, webhook.stderr


@pytest.mark.parametrize(("version", "apis", "why"), [
    # 1.34 with the beta turned on (feature gate and --runtime-config): still not the v1 the policies are
    ("1.34.4", ["admissionregistration.k8s.io/v1beta1/MutatingAdmissionPolicy"],
     BETA + "; the cluster serves it in v1beta1 only"),
    # a 1.36 cluster whose API server has it turned off (--runtime-config): what helm install reads there
    ("1.36.3", ["v1/Pod", "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy"],
     "; the cluster serves no MutatingAdmissionPolicy"),
])
def test_policy_enforcement_is_refused_where_the_cluster_does_not_serve_it(
        helm: str, version: str, apis: list[str], why: str) -> None:
    """What the cluster serves (helm install reads its discovery; helm template takes --api-versions) decides,
    not only its version."""
    flags = [f for api in apis for f in ("--api-versions", api)]
    proc = run_helm(helm, "template", "qos-guard", str(CHART), "--set", "enforcement=policy",
                    "--kube-version", version, *flags)
    assert proc.returncode != 0
    assert REFUSED.format(version=version, why=why) in proc.stderr, proc.stderr
    served = run_helm(helm, "template", "qos-guard", str(CHART), "--set", "enforcement=policy", "--kube-version",
                      "1.36.3", *flags, "--api-versions", "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy")
    assert served.returncode == 0, served.stderr


@pytest.mark.parametrize("version", ["1.27.0", "1.32.9"])
def test_the_chart_asks_for_kubernetes_1_33_or_later(helm: str, version: str) -> None:
    """The oldest minor the tests run (and the oldest managed offerings still support)."""
    proc = run_helm(helm, "template", "qos-guard", str(CHART), "--kube-version", version)
    assert proc.returncode != 0
    assert f"chart requires kubeVersion: >=1.33.0-0 which is incompatible with Kubernetes v{version}" in proc.stderr


def test_policy_enforcement_renders_from_1_36(render: Render) -> None:
    for version in ("1.36.0", "1.36.3", "1.37.2", "1.40.0"):
        objects = render("--set", "enforcement=policy", "--kube-version", version)
        assert by_kind(objects, "MutatingAdmissionPolicy") and not by_kind(objects, "ServiceAccount")


def test_autoscaling_on_cpu_with_at_least_two_replicas(render: Render, helm: str) -> None:
    objects = render("--set", "autoscaling.enabled=true", "--set", "autoscaling.maxReplicas=10")
    hpa = one(objects, "HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                             "name": one(objects, "Deployment")["metadata"]["name"]}
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 10)
    assert hpa["spec"]["metrics"] == [{"type": "Resource", "resource": {
        "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}}]
    assert "replicas" not in one(objects, "Deployment")["spec"]  # the autoscaler owns it
    assert one(objects, "PodDisruptionBudget")["spec"]["minAvailable"] == 1
    fixed = render()
    assert not by_kind(fixed, "HorizontalPodAutoscaler") and one(fixed, "Deployment")["spec"]["replicas"] == 2
    too_few = run_helm(helm, "template", "qos-guard", str(CHART), "--set", "autoscaling.enabled=true",
                       "--set", "autoscaling.minReplicas=1")
    assert too_few.returncode != 0 and "/autoscaling/minReplicas" in too_few.stderr
    upside_down = run_helm(helm, "template", "qos-guard", str(CHART), "--set", "autoscaling.enabled=true",
                           "--set", "autoscaling.maxReplicas=2", "--set", "autoscaling.minReplicas=3")
    assert upside_down.returncode != 0 and "maxReplicas must be at least" in upside_down.stderr
    policy = render("--set", "enforcement=policy", "--set", "autoscaling.enabled=true")
    assert not by_kind(policy, "HorizontalPodAutoscaler")


def test_readme_takes_a_new_user_from_an_empty_registry_to_a_running_webhook(render: Render) -> None:
    readme = (CHART / "README.md").read_text()
    for step in ("make image REGISTRY=", "make image-push REGISTRY=", "--set image.registry=",
                 "qos-guard certs --service", "--type kubernetes.io/tls", "--set existingSecret=",
                 "helm test qos-guard", "autoscaling.enabled=true", "--kube-version"):
        assert step in readme, step
    # the image the README's steps build and push is the one the chart then runs
    image = one(render("--set", "image.registry=registry.example.com:5000"), "Deployment")[
        "spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == "registry.example.com:5000/qos-guard/qos-guard:0.1.0"
    assert "registry.example.com:5000/qos-guard/qos-guard:0.1.0" in readme


def test_the_chart_installs_on_the_1_38_pre_release(render: Render) -> None:
    """Kubernetes 1.38 before its release (v1.38.0-beta.0, the newest 1.38 the Go module proxy served on
    2026-12-07): the chart's kubeVersion (>=1.33.0-0) admits the pre-release, and the policies' parameters carry
    1.38, which qos-guard judges (webhook.core.kubeversion: from the pre-release PRERELEASES names while it names
    one, as GA after release day)."""
    from webhook.core.kubeversion import PRERELEASES, resolve

    for enforcement in ("webhook", "policy"):
        objects = render("--set", f"enforcement={enforcement}", "--kube-version", "1.38.0-beta.0")
        assert one(objects, "Deployment") if enforcement == "webhook" else by_kind(objects, "MutatingAdmissionPolicy")
    params = [o for o in render("--set", "enforcement=policy", "--kube-version", "1.38.0-beta.0")
              if o.get("kind") == "ConfigMap" and "kubernetesVersion" in (o.get("data") or {})]
    assert params and {o["data"]["kubernetesVersion"] for o in params} == {"1.38"}
    assert resolve(params[0]["data"]["kubernetesVersion"]).prerelease == PRERELEASES.get(38)


def test_readme_first_helm_install_sets_the_image_and_chart_home_is_real() -> None:
    """The README's first `helm install` had no image setting, though no registry serves the default image; the
    chart's `home` was a domain nobody owns."""
    readme = (ROOT / "README.md").read_text()
    first = readme[readme.index("helm install qos-guard charts/qos-guard"):]
    command = first[:first.index("\nkubectl")]
    assert "--set image.registry=" in command, command
    assert readme.index("make image-push REGISTRY=") < readme.index("helm install qos-guard charts/qos-guard")
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert "qos-guard.io" not in yaml.safe_dump(chart)
    assert chart["home"] in chart["sources"]


def test_the_charts_own_render_passes_the_readme_check_workflow(helm: str, tmp_path: Path) -> None:
    """The README's workflow for a chart, on this chart: its own Pods (the webhook's 250m, the test Pod's 50m)
    are in its release namespace, which its webhooks never judge; the CI guide's exemption says so to check
    (the bare pipe found 2 violations)."""
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
