"""``enforcement: policy``: the chart installs the admission policies ``qos-guard policy`` prints, from the same
``config`` values, and none of the webhook's objects."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chart.conftest import CHART, Render, run_helm
from webhook.policies import chart as policy

ROOT = CHART.parents[1]
CONFIGS: list[dict[str, Any]] = [
    {},
    {"policy": {"fractionalCPUContainers": ["istio-proxy", "envoy"], "smtAlignment": 2,
                "podLevelResources": "allow"},
     "mutation": {"setLimitsFromRequests": False, "cpuRounding": "up"},
     "exemptions": {"namespaces": ["batch", "ci"], "usernames": ["system:serviceaccount:ci:deployer"],
                    "runtimeClassNames": ["kata"]}},
]


def keyed(objects: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(o["kind"], o["metadata"]["name"]): o for o in objects}


def test_chart_templates_are_the_generated_ones() -> None:
    for name, text in ((policy.CHART_TEMPLATE, policy.chart_template()), (policy.CHART_PARAMS, policy.chart_params())):
        assert (ROOT / name).read_text() == text, f"{name}: run python hack/generate.py"


@pytest.mark.parametrize("config", CONFIGS, ids=["defaults", "custom"])
def test_helm_renders_what_the_cli_prints(render: Render, tmp_path: Path, config: dict[str, Any]) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"enforcement": "policy", "config": config}))
    chart = render("--values", str(values), namespace="platform")
    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml.safe_dump(config))
    proc = subprocess.run([sys.executable, "-m", "webhook.cli", "policy", "--config", str(config_file),
                           "--namespace", "platform"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    cli = [o for o in yaml.safe_load_all(proc.stdout) if o]
    assert keyed(chart) == keyed(cli)
    assert len(cli) == 11  # parameters, 4 validating + 1 mutating policy, 5 bindings


def test_policy_mode_has_no_webhook_objects(render: Render) -> None:
    kinds = {o["kind"] for o in render("--set", "enforcement=policy")}
    # No ServiceAccount either: nothing runs as the webhook's.
    assert kinds == {"ConfigMap", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
                     "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"}
    webhook_kinds = {o["kind"] for o in render()}
    assert not webhook_kinds & {"ValidatingAdmissionPolicy", "MutatingAdmissionPolicy"}
    assert {"Deployment", "Service", "Secret", "ValidatingWebhookConfiguration"} <= webhook_kinds


def test_release_name_and_namespace_reach_every_policy(render: Render) -> None:
    objects = render("--set", "enforcement=policy", namespace="ops", release="edge")
    names = sorted(o["metadata"]["name"] for o in objects if o["kind"] == "ValidatingAdmissionPolicyBinding")
    assert names == ["edge-qos-guard-enforce", "edge-qos-guard-mutate", "edge-qos-guard-namespaces",
                     "edge-qos-guard-warn"]
    for binding in (o for o in objects if o["kind"].endswith("PolicyBinding")):
        selector = binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
        never = [e for e in selector if e["key"] == "kubernetes.io/metadata.name"]
        assert [e["operator"] for e in never] == ["NotIn"] and sorted(never[0]["values"]) == ["kube-system", "ops"]
        if "paramRef" in binding["spec"]:
            assert binding["spec"]["paramRef"] == {"name": "edge-qos-guard-policy", "namespace": "ops",
                                                   "parameterNotFoundAction": "Deny"}


@pytest.mark.parametrize(("values", "named"), [
    (["--set", "config.policy.numa.cpus=32"], "config.policy.numa: numa-unfit is not available"),
    (["--set", "config.policy.numa=auto"], "config.policy.numa: numa-unfit is not available"),
    (["--set", "config.policy.deviceClasses=true"], "config.policy.deviceClasses: the cluster's DeviceClasses are "
                                                    "not available to an admission policy"),
    (["--set", "webhook.excludeNamespaces={batch}"], "webhook.excludeNamespaces applies to the webhook only"),
    (["--set", "enforcement=both"], "at '/enforcement'"),
])
def test_policy_mode_refuses_what_it_cannot_do(helm: str, values: list[str], named: str) -> None:
    proc = run_helm(helm, "template", "qos-guard", str(CHART), "--set", "enforcement=policy", *values)
    assert proc.returncode != 0
    assert named in proc.stderr, proc.stderr


def test_only_hack_writes_into_the_repository() -> None:
    """The installed package returns the chart's policy text; ``python hack/generate.py`` writes it (the module
    had a ``--write-chart`` entry point that wrote into the source tree from inside the package)."""
    from webhook.policies import chart as generate

    assert not hasattr(generate, "main")
    assert generate.chart_template().startswith("{{- /* Generated by `python hack/generate.py` from ")
