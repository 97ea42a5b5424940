"""Where the node tests cannot run they say why (and the fixture skips, or fails under CI=true)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.node import node


def test_without_root_the_reason_is_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert node.why_not() == ("needs root (kubelet, containerd and runc manage cgroups, mounts and network "
                              "namespaces)")


def test_kubelet_runs_the_managers_the_users_run() -> None:
    """The configuration the people this tool is for run (checked here, its effect proven in test_pinning)."""
    config = node._kubelet_config(Path("/x"), 1, 2)
    assert config["cpuManagerPolicy"] == "static" and config["memoryManagerPolicy"] == "Static"
    assert config["topologyManagerPolicy"] == "single-numa-node"
    assert config["topologyManagerScope"] == "container"
    assert config["failCgroupV1"] is False


def test_a_feature_gate_change_starts_the_kubelet_on_fresh_checkpoints() -> None:
    """kubelet v1.36.3 refuses the CPU Manager checkpoint it wrote with PodLevelResourceManagers on once the gate
    is off ("checkpoint is corrupted"): restart_kubelet drops the checkpoints when featureGates change."""
    assert all("featureGates" in keys for keys in node.STATE_FILES.values())
