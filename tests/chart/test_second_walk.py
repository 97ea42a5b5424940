"""What a new user tripped over on the second walk through the chart (issue #31), rendered by the real helm."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.chart.conftest import Render, by_kind, one

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
