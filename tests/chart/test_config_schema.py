"""The chart's schema (its `config` part) and the server's `parse_config` accept and refuse the same
configurations: one table drives both, so `helm install` never accepts what the server then refuses at start
(or refuses what it would run)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chart.conftest import CHART, Render, one, run_helm
from webhook.core.config import SCHEMA, ConfigError, parse_config

ROOT = CHART.parents[1]

# (configuration, accepted). Nulls are left out: Helm deletes a key set to null before the schema sees it.
TABLE: list[tuple[dict[str, Any], bool]] = [
    ({}, True),
    ({"policy": {"fractionalCPUContainers": ["istio-proxy", "istio-proxy"]}}, True),
    ({"policy": {"fractionalCPUContainers": "istio-proxy"}}, False),
    ({"policy": {"fractionalCPUContainers": [""]}}, False),
    ({"policy": {"podLevelResources": "allow"}}, True),
    ({"policy": {"podLevelResources": "sometimes"}}, False),
    ({"policy": {"smtAlignment": 2}}, True),
    ({"policy": {"smtAlignment": 0}}, False),
    ({"policy": {"smtAlignment": "2"}}, False),
    ({"policy": {"smtAlignment": True}}, False),
    ({"policy": {"numa": {"cpus": 32, "memory": "240Gi"}}}, True),
    ({"policy": {"numa": {"scope": "pod", "memory": "240e9"}}}, True),
    ({"policy": {"numa": {"cpus": "2000m"}}}, True),
    ({"policy": {"numa": {"cpus": "0.5"}}}, True),
    ({"policy": {"numa": {"cpus": "+4"}}}, True),
    ({"policy": {"numa": {"devices": {"nvidia.com/gpu": 4}}}}, True),
    ({"policy": {"numa": {"devices": {"nvidia.com/gpu": "4"}}}}, True),
    ({"policy": {"numa": "auto"}}, True),
    ({"policy": {"numa": "Auto"}}, False),
    ({"policy": {"numa": "static"}}, False),
    ({"policy": {"numa": {"scope": "pod"}}}, False),
    ({"policy": {"numa": {"devices": {}}}}, False),
    ({"policy": {"numa": {"cpus": 0}}}, False),
    ({"policy": {"numa": {"cpus": "0m"}}}, False),
    ({"policy": {"numa": {"cpus": -1}}}, False),
    ({"policy": {"numa": {"memory": "1K"}}}, False),
    ({"policy": {"numa": {"memory": "lots"}}}, False),
    ({"policy": {"numa": {"cpus": True}}}, False),
    ({"policy": {"numa": {"scope": "socket", "cpus": 2}}}, False),
    ({"policy": {"numa": {"cpus": 2, "threads": 4}}}, False),
    ({"policy": {"bogus": 1}}, False),
    ({"policy": {"kserveNamespace": "redhat-ods-applications"}}, True),
    ({"policy": {"kserveNamespace": "Open_DataHub"}}, False),
    ({"policy": {"kserveNamespace": "odh.example"}}, False),
    ({"policy": {"kserveNamespace": "a" * 64}}, False),
    ({"policy": {"kserveNamespace": ""}}, False),
    ({"mutation": {"setLimitsFromRequests": False, "cpuRounding": "up"}}, True),
    ({"mutation": {"setLimitsFromRequests": "yes"}}, False),
    ({"mutation": {"cpuRounding": "down"}}, False),
    ({"exemptions": {"namespaces": ["batch"], "usernames": ["system:admin"], "runtimeClassNames": ["kata"]}}, True),
    ({"exemptions": {"namespaces": "batch"}}, False),
    ({"exemptions": {"usernames": [3]}}, False),
    ({"extra": {}}, False),
]


def _server_accepts(config: dict[str, Any]) -> bool:
    try:
        parse_config(config)
    except ConfigError:
        return False
    return True


@pytest.mark.parametrize(("config", "accepted"), TABLE, ids=[yaml.safe_dump(c, default_flow_style=True).strip()
                                                              for c, _ in TABLE])
def test_schema_and_server_agree(helm: str, tmp_path: Path, config: dict[str, Any], accepted: bool) -> None:
    assert _server_accepts(config) is accepted, "the server"
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"config": config}))
    proc = run_helm(helm, "template", "qos-guard", str(CHART), "-f", str(values))
    assert (proc.returncode == 0) is accepted, proc.stderr
    if not accepted:
        assert "values don't meet the specifications of the schema" in proc.stderr


def test_schema_values_and_contract_are_generated_and_current() -> None:
    """values.schema.json's `config`, values.yaml's `config` defaults and docs/contract.md's table come from
    webhook.core.config.SCHEMA (hack/generate.py, which writes every generated file), so none of them spells a
    default of its own."""
    check = subprocess.run([sys.executable, str(ROOT / "hack" / "generate.py"), "--check"],
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stderr
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert parse_config(values["config"]) == parse_config(None)
    contract = (ROOT / "docs" / "contract.md").read_text()
    for key, _ in SCHEMA.settings():
        assert f"| `{key}` |" in contract, key


def test_the_kserve_namespace_reaches_the_webhook_and_audit(render: Render) -> None:
    """``config.policy.kserveNamespace`` is in the config.yaml the webhook and the audit CronJob read (one
    ConfigMap), so both judge KServe's objects with the ConfigMaps of that namespace; unset, kserve."""
    objects = render("--set", "config.policy.kserveNamespace=redhat-ods-applications", "--set", "audit.enabled=true")
    mounted = yaml.safe_load(one(objects, "ConfigMap")["data"]["config.yaml"])
    assert parse_config(mounted).policy.kserve_namespace == "redhat-ods-applications"
    default = yaml.safe_load(one(render(), "ConfigMap")["data"]["config.yaml"])
    assert parse_config(default).policy.kserve_namespace == "kserve"
