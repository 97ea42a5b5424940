"""What a new user of the chart trips over: `enforcement: policy` on a cluster without MutatingAdmissionPolicy v1,
scaling out, and the README steps from an empty registry and a `qos-guard certs` pair to a running webhook."""

from __future__ import annotations

import pytest

from tests.chart.conftest import CHART, Render, by_kind, one, run_helm


@pytest.mark.parametrize("version", ["1.27.0", "1.34.2", "1.35.9"])
def test_policy_enforcement_is_refused_below_1_36(helm: str, version: str) -> None:
    """The chart allows Kubernetes 1.27+, and rendered MutatingAdmissionPolicy v1 objects for any of them: the
    install failed later, on the API server, with a less helpful message."""
    proc = run_helm(helm, "template", "qos-guard", str(CHART), "--set", "enforcement=policy",
                    "--kube-version", version)
    assert proc.returncode != 0
    assert f"enforcement: policy needs Kubernetes 1.36 or later, which serves MutatingAdmissionPolicy in " \
           f"admissionregistration.k8s.io/v1; this cluster is v{version}: keep enforcement: webhook" in proc.stderr
    webhook = run_helm(helm, "template", "qos-guard", str(CHART), "--kube-version", version)
    assert webhook.returncode == 0, webhook.stderr


def test_policy_enforcement_renders_from_1_36(render: Render) -> None:
    for version in ("1.36.0", "1.36.3", "1.40.0"):
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
