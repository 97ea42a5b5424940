"""``--kserve-namespace`` (``policy.kserveNamespace``): where KServe reads its ``inferenceservice-config``. The flag
wins over the file; a value that is not a namespace's name is refused (exit 2) before anything is read."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.cli.conftest import Run, refused
from tests.unit.kserve_cases import RAW, config, isvc, model, runtime

WHOLE = {"cpuRequest": "1", "cpuLimit": "1", "memoryRequest": "1Gi", "memoryLimit": "1Gi"}


@pytest.fixture
def manifests(tmp_path: Path) -> Path:
    """A multi-model InferenceService (KServe adds its agent) with its runtime, and opendatahub's
    inferenceservice-config giving the agent whole, equal resources."""
    cm = config(agent=WHOLE)
    cm["metadata"]["namespace"] = "opendatahub"
    path = tmp_path / "isvc.yaml"
    path.write_text(yaml.safe_dump_all([isvc({"model": model()}, RAW), runtime("rt", "sklearn"), cm]))
    return path


def test_the_flag_names_where_kserve_reads_its_configmap(qos_guard: Run, manifests: Path, tmp_path: Path) -> None:
    assert qos_guard("check", str(manifests)).returncode == 1  # the agent as KServe ships it: 100m/1 CPU
    assert qos_guard("check", "--kserve-namespace", "opendatahub", str(manifests)).returncode == 0
    assert qos_guard("fix", "--dry-run", "--kserve-namespace", "opendatahub", str(manifests)).returncode == 0
    written = tmp_path / "config.yaml"
    written.write_text("policy: {kserveNamespace: opendatahub}\n")
    assert qos_guard("check", "--config", str(written), str(manifests)).returncode == 0
    assert qos_guard("check", "--config", str(written), "--kserve-namespace", "kserve", str(manifests)).returncode == 1


@pytest.mark.parametrize("command", [("check",), ("fix", "--dry-run"), ("audit", "--kubeconfig", "/nonexistent")])
@pytest.mark.parametrize("bad", ["Open_DataHub", "odh.example", "a" * 64])
def test_a_bad_namespace_is_refused(qos_guard: Run, manifests: Path, command: tuple[str, ...], bad: str) -> None:
    paths = () if command[0] == "audit" else (str(manifests),)
    out = qos_guard(*command, "--kserve-namespace", bad, *paths)
    refused(out, f"--kserve-namespace: '{bad}' is not a namespace: a namespace must be a DNS-1123 label")


def test_check_says_when_it_judged_with_kserve_s_shipped_config_map(qos_guard: Run, manifests: Path) -> None:
    """Without the ConfigMap in the input or a cluster to read, an InferenceService is judged with KServe's shipped
    values: said once on stderr (as the webhook says it with policy.operatorObjects: false), naming the way out;
    with KServe's ConfigMap in the input, nothing is said."""
    shipped = qos_guard("check", str(manifests))
    assert ("qos-guard: 1 InferenceService judged with KServe's shipped inferenceservice-config (neither the input "
            "nor a cluster gave one): add it to the input, or --kubeconfig reads the cluster's") in shipped.stderr, \
        shipped.stderr
    given = qos_guard("check", "--kserve-namespace", "opendatahub", str(manifests))
    assert given.returncode == 0 and "shipped" not in given.stderr, given.stderr
