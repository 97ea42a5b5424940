"""``examples/`` as shipped, through the real command: ``check examples/`` judges real manifests and prints what
the README shows, and ``fix`` leaves of the broken one only what a setting can finish."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml

from tests.cli.conftest import Run

ROOT = Path(__file__).resolve().parents[2]


EXAMPLES = ROOT / "examples"


def test_check_examples_judges_real_manifests(qos_guard: Run) -> None:
    """examples/ held only an AdmissionReview, so the first `qos-guard check examples/` a user ran exited 2 with
    "nothing to judge". Its findings are pinned here, as the README shows them."""
    out = qos_guard("check", "examples/", cwd=ROOT)
    assert out.returncode == 1, out.stderr
    broken = "examples/broken-deployment.yaml"
    assert sorted(out.stdout.splitlines()) == [
        f'{broken}:25: Deployment/matching-engine-burstable: requests-not-equal-limits: container "engine" '
        "(spec.template.spec.containers[0]): cpu request 3 differs from its limit 4; set resources.requests.cpu "
        "to 4",
        f'{broken}:31: Deployment/matching-engine-burstable: cpu-not-integer: container "metrics" '
        "(spec.template.spec.containers[1]): cpu limit 500m is not a whole number of CPUs; use 1; or let this "
        "container alone share CPUs (the others stay pinned): add metrics to policy.fractionalCPUContainers",
    ]
    report = json.loads(qos_guard("check", "examples/", "--format", "json", cwd=ROOT).stdout)
    assert report["summary"] == {"objects": 3, "violations": 2, "notices": 0, "errors": 0,
                                 "skipped": {"AdmissionReview": 1}}
    for good in ("inference-pod.yaml", "deployment.yaml"):
        alone = qos_guard("check", str(EXAMPLES / good))
        assert alone.returncode == 0 and alone.stdout == "", (good, alone.stdout)
    pod = yaml.safe_load((EXAMPLES / "inference-pod.yaml").read_text())
    assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 1


def test_fix_makes_the_broken_example_what_only_a_setting_can_finish(qos_guard: Run, tmp_path: Path) -> None:
    shutil.copy(EXAMPLES / "broken-deployment.yaml", tmp_path)
    out = qos_guard("fix", str(tmp_path / "broken-deployment.yaml"))
    assert out.returncode == 1
    assert 'set resources.requests.cpu to 4 (its limit): +1 CPU reserved exclusively' in out.stdout
    assert "mutation.cpuRounding: up would set it to 1" in out.stdout
    config = tmp_path / "c.yaml"
    config.write_text("policy:\n  fractionalCPUContainers: [metrics]\n")
    assert qos_guard("check", str(tmp_path), "--config", str(config)).returncode == 0


def test_the_readme_shows_what_check_examples_prints(qos_guard: Run) -> None:
    """The README and the getting-started page (which says "a test pins this output") both show it."""
    out = qos_guard("check", "examples/", cwd=ROOT)
    for page in (ROOT / "README.md", ROOT / "docs" / "getting-started.md"):
        shown = page.read_text()
        for line in out.stdout.splitlines():
            assert line in shown, (page.name, line)
