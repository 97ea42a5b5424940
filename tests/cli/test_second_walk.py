"""What a new user tripped over through the CLI (certs, help, JSON layout, CI examples, kubeconfig, examples/,
the license and pins, make run, templates), run as the real command."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from cryptography import x509

from tests import inprocess
from tests.cli.conftest import Run

# --- certs: bad folders, bad names, an existing CA ---------------------------------------------------------


def _refused(out: subprocess.CompletedProcess[str], *words: str) -> None:
    assert out.returncode == 2, out.stderr
    stderr = out.stderr
    assert "Traceback" not in stderr and stderr.startswith("qos-guard: "), stderr
    for word in words:
        assert word in stderr, (word, stderr)


def test_certs_output_dir_that_is_a_file_or_cannot_be_made(qos_guard: Run, tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("mine\n")
    _refused(qos_guard("certs", "--output-dir", str(afile)), f"--output-dir {afile} is not a folder")
    assert afile.read_text() == "mine\n"
    _refused(qos_guard("certs", "--output-dir", str(afile / "sub")), str(afile), "--output-dir")
    _refused(qos_guard("certs", "--output-dir", "/proc/nope"), "/proc/nope", "No such file or directory")


@pytest.mark.parametrize(("flag", "value", "what"), [
    ("--service", "Bad_Name", "not a Service name (a DNS-1035 label"),
    ("--service", "1webhook", "not a Service name"),
    ("--service", "w" * 64, "not a Service name"),
    ("--namespace", "Ops", "not a namespace name (a DNS-1123 label"),
    ("--extra-san", "bad name!", "neither an IP address nor a DNS name"),
    ("--extra-san", "a..b", "neither an IP address nor a DNS name"),
])
def test_certs_refuses_names_a_certificate_cannot_carry(qos_guard: Run, tmp_path: Path, flag: str, value: str,
                                                        what: str) -> None:
    out = qos_guard("certs", "--output-dir", str(tmp_path / "c"), flag, value)
    _refused(out, f"{flag} {value!r} is {what}")
    assert not (tmp_path / "c").exists()


def test_certs_accepts_ips_dns_names_and_wildcards(qos_guard: Run, tmp_path: Path) -> None:
    out = qos_guard("certs", "--service", "qg", "--namespace", "ops-1", "--output-dir", str(tmp_path),
                    "--extra-san", "10.0.0.7", "--extra-san", "::1", "--extra-san", "*.webhook.Example.com")
    assert out.returncode == 0, out.stderr
    cert = x509.load_pem_x509_certificate((tmp_path / "tls.crt").read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "*.webhook.Example.com" in san.get_values_for_type(x509.DNSName)
    assert {str(ip) for ip in san.get_values_for_type(x509.IPAddress)} == {"10.0.0.7", "::1"}


def test_certs_never_replaces_a_ca_silently(qos_guard: Run, tmp_path: Path) -> None:
    """Run twice, `certs` replaced the CA and its key, breaking every caBundle already deployed."""
    first = qos_guard("certs", "--output-dir", str(tmp_path))
    assert first.returncode == 0, first.stderr
    ca, ca_key = (tmp_path / "ca.crt").read_bytes(), (tmp_path / "ca.key").read_bytes()
    old_cert = (tmp_path / "tls.crt").read_bytes()
    again = qos_guard("certs", "--output-dir", str(tmp_path))
    _refused(again, f"{tmp_path / 'ca.crt'} exists", "caBundle", "--renew", "--force")
    assert (tmp_path / "ca.crt").read_bytes() == ca and (tmp_path / "tls.crt").read_bytes() == old_cert

    renewed = qos_guard("certs", "--output-dir", str(tmp_path), "--renew", "--days", "30")
    assert renewed.returncode == 0, renewed.stderr
    assert first.stdout == renewed.stdout  # the same caBundle
    assert (tmp_path / "ca.crt").read_bytes() == ca and (tmp_path / "ca.key").read_bytes() == ca_key
    cert = x509.load_pem_x509_certificate((tmp_path / "tls.crt").read_bytes())
    assert cert.issuer == x509.load_pem_x509_certificate(ca).subject and (tmp_path / "tls.crt").read_bytes() != old_cert

    forced = qos_guard("certs", "--output-dir", str(tmp_path), "--force")
    assert forced.returncode == 0, forced.stderr
    assert (tmp_path / "ca.crt").read_bytes() != ca and forced.stdout != first.stdout

    (tmp_path / "ca.key").unlink()
    _refused(qos_guard("certs", "--output-dir", str(tmp_path), "--renew"), "--renew needs the CA's key")


# --- every --help: a description and the exit codes ---------------------------------------------------------

COMMANDS = ["check", "fix", "audit", "serve", "certs", "policy", "nodes", "agent", "verify", "extender"]


def test_the_top_level_help_lists_every_command_tested_here(qos_guard: Run) -> None:
    listed = re.findall(r"^    ([a-z]+)  ", qos_guard("--help").stdout, re.M)
    assert sorted(listed) == sorted(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_help_has_a_description_and_exit_codes(qos_guard: Run, command: str) -> None:
    """`agent --help` and `verify --help` had neither, though the contract says every --help lists them."""
    out = qos_guard(command, "--help")
    assert out.returncode == 0
    after_usage = out.stdout.split("\n\n", 1)[1]
    description = after_usage.split("\n\n", 1)[0].strip()
    assert description and not description.startswith(("positional arguments", "options")), out.stdout
    codes = out.stdout.split("exit codes:", 1)[1]
    for code in ("0", "2"):
        assert re.search(rf"^  {code}  \S", codes, re.M), (code, out.stdout)


# --- fix keeps a JSON file's layout ------------------------------------------------------------------------

HAND_FORMATTED = """{
  "apiVersion": "apps/v1", "kind": "Deployment",
  "metadata": {"name": "vllm", "labels": {"app": "vllm",   "tier": "inference"}},
  "spec": {
    "replicas": 2,
    "selector": {"matchLabels": {"app": "vllm"}},
    "template": {
      "metadata": {"labels": {"app": "vllm"}},
      "spec": {
        "containers": [
          {"name": "vllm",    "image": "vllm:1",
           "resources": {"requests": {"cpu": "3", "memory": "16Gi"}, "limits": {"cpu": "4", "memory": "16Gi"}}},
          {"name": "metrics", "image": "exporter:2",
           "resources": {"limits": {"cpu": "1", "memory": "64Mi"}}},
          {"name": "logs",    "image": "fluent:3",
           "resources": {"requests": {"cpu": "1", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "64Mi"}}}
        ]
      }
    }
  }
}
"""


def _changed_lines(before: str, after: str) -> list[tuple[str, str]]:
    a, b = before.splitlines(), after.splitlines()
    assert len(a) == len(b), after
    return [(x, y) for x, y in zip(a, b, strict=True) if x != y]


def test_fix_changes_only_the_changed_values_of_a_hand_formatted_json_file(qos_guard: Run, tmp_path: Path) -> None:
    """`fix` re-indented the whole file: one changed value, every line changed."""
    path = tmp_path / "vllm.json"
    path.write_text(HAND_FORMATTED)
    out = qos_guard("fix", str(path))
    assert out.returncode == 0, out.stdout + out.stderr
    after = path.read_text()
    (changed,) = _changed_lines(HAND_FORMATTED, after)
    assert changed[1] == changed[0].replace('"requests": {"cpu": "3"', '"requests": {"cpu": "4"')
    check = json.loads(qos_guard("check", str(path), "--format", "json").stdout)
    assert check["violations"] == [] and check["summary"]["objects"] == 1


TABBED = ('{\n\t"apiVersion": "v1",\n\t"kind": "Pod",\n\t"metadata": {\n\t\t"name": "tabbed"\n\t},\n'
          '\t"spec": {\n\t\t"containers": [\n\t\t\t{\n\t\t\t\t"name": "app",\n\t\t\t\t"image": "app:1",\n'
          '\t\t\t\t"resources": {\n\t\t\t\t\t"requests": {\n\t\t\t\t\t\t"cpu": "2",\n\t\t\t\t\t\t"memory": "1Gi"\n'
          '\t\t\t\t\t}\n\t\t\t\t}\n\t\t\t}\n\t\t]\n\t},\n\t"status": {\n\t\t"qosClass": "Burstable"\n\t}\n}\n')


def test_fix_keeps_a_tab_indented_json_pod_tab_indented(qos_guard: Run, tmp_path: Path) -> None:
    """A tab-indented JSON Pod came out on one line. Here a removal (status.qosClass) and a new block
    (resources.limits, set from the requests) are written in the file's tabs. Judged at 1.36, where the API
    server keeps a copied status.qosClass and fix removes it (from 1.37 it is reset on create: no removal)."""
    path = tmp_path / "pod.json"
    path.write_text(TABBED)
    assert qos_guard("fix", "--kubernetes-version", "1.36", str(path)).returncode == 0
    after = path.read_text()
    assert after.startswith('{\n\t"apiVersion": "v1",\n\t"kind": "Pod",\n\t"metadata": {\n\t\t"name": "tabbed"\n')
    lines = after.splitlines()
    assert len(lines) > 10 and all(not line.startswith(" ") for line in lines), after
    assert json.loads(after)["status"] == {}
    assert ('\t\t\t\t"resources": {\n\t\t\t\t\t"limits": {\n\t\t\t\t\t\t"cpu": "2",\n\t\t\t\t\t\t"memory": "1Gi"\n'
            '\t\t\t\t\t},\n\t\t\t\t\t"requests": {\n') in after, after
    assert qos_guard("check", "--kubernetes-version", "1.36", str(path)).returncode == 0


def test_fix_rewrites_a_json_file_whole_in_its_own_tab_indent_when_it_must(qos_guard: Run, tmp_path: Path) -> None:
    """An empty `resources: {}` gives no layout to follow: the file is written whole, still with tabs."""
    path = tmp_path / "pod.json"
    path.write_text('{\n\t"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},\n\t"spec": {"containers": '
                    '[{"name": "a", "image": "a", "resources": {"limits": {}, "requests": {"cpu": "1", '
                    '"memory": "1Gi"}}}]}\n}\n')
    assert qos_guard("fix", str(path)).returncode == 0
    after = path.read_text()
    assert "\n\t\"apiVersion\"" in after and not re.search(r"^ ", after, re.M)
    assert json.loads(after)["spec"]["containers"][0]["resources"]["limits"] == {"cpu": "1", "memory": "1Gi"}


# --- the README's CI examples ------------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]


def _ci_section() -> str:
    readme = (ROOT / "README.md").read_text()
    start = readme.index("### In CI and before a commit")
    return readme[start:readme.index("\n### ", start + 1)]


def _uploads(steps: list[dict[str, object]]) -> list[dict[str, object]]:
    return [s for s in steps if str(s.get("uses", "")).startswith("github/codeql-action/upload-sarif")]


def test_sarif_upload_runs_when_the_check_step_fails() -> None:
    """With the default fail-on-violation: true the check step fails exactly when there are findings, and an
    upload without `if: always()` is then skipped: code scanning never saw them."""
    blocks = re.findall(r"```yaml\n(.*?)```", _ci_section(), re.S)
    steps = [step for block in blocks for step in (yaml.safe_load(block) or []) if isinstance(step, dict)]
    header = "\n".join(line.removeprefix("#   ") for line in (ROOT / "action.yml").read_text().splitlines()
                       if line.startswith("#   "))
    header = header.replace("<owner>/qos-guard@<commit SHA or tag>", "qos-guard")
    steps += [s for s in yaml.safe_load(header) if isinstance(s, dict)]
    uploads = _uploads(steps)
    assert len(uploads) == 2
    assert all(u.get("if") == "always()" for u in uploads), uploads


# --- kubeconfig, check --kubeconfig, fix - ---------------------------------------------------------------


def _run(*args: str, env: dict[str, str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return inprocess.run(args, stdin=stdin, env=env)


def _no_cluster_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST",
                                                            "KUBERNETES_SERVICE_PORT")}
    return {**env, "HOME": str(home)}


def test_a_missing_kubeconfig_names_the_paths_and_the_places_looked_at(tmp_path: Path) -> None:
    """It said `no usable kubeconfig: Invalid kube-config file. No configuration found.`: no path, no places."""
    env = _no_cluster_env(tmp_path)
    default = tmp_path / ".kube" / "config"
    for command in (["audit"], ["nodes"]):
        out = _run(*command, env=env)
        _refused(out, f"no usable kubeconfig: {default} does not exist", "not in a Pod (KUBERNETES_SERVICE_HOST "
                 f"unset); the default {default}", "pass --kubeconfig FILE, or set KUBECONFIG")
    listed = _run("audit", env={**env, "KUBECONFIG": f"{tmp_path / 'a'}{os.pathsep}{tmp_path / 'b'}"})
    _refused(listed, f"{tmp_path / 'a'} does not exist; {tmp_path / 'b'} does not exist",
             f"$KUBECONFIG {tmp_path / 'a'}{os.pathsep}{tmp_path / 'b'}")
    given = _run("audit", "--kubeconfig", str(tmp_path / "nope"), env=env)
    _refused(given, f"{tmp_path / 'nope'} does not exist (looked at: --kubeconfig {tmp_path / 'nope'})")
    broken = tmp_path / "broken"
    broken.write_text("clusters: [\n")
    _refused(_run("audit", "--kubeconfig", str(broken), env=env), f"{broken} is not YAML (line 2)")


def test_check_kubeconfig_without_numa_auto_is_refused(qos_guard: Run, tmp_path: Path) -> None:
    """`check --kubeconfig` without policy.numa: auto was silently ignored: the user believed the cluster was
    consulted. It is refused, naming the setting that makes it count."""
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(GOOD_POD)
    out = qos_guard("check", str(manifest), "--kubeconfig", str(tmp_path / "kubeconfig"))
    _refused(out, "check: --kubeconfig is read only with policy.numa: auto", "or policy.deviceClasses: true",
             "the default configuration sets neither; drop --kubeconfig, or set one in --config")
    assert out.stdout == ""
    config = tmp_path / "numa.yaml"
    config.write_text("policy:\n  numa: auto\n")
    unread = qos_guard("check", str(manifest), "--config", str(config), "--kubeconfig", str(tmp_path / "nope"))
    # the cluster is never a reason to fail (contract): the file's own finding decides
    assert unread.returncode == 1 and "requests-not-equal-limits" in unread.stdout, unread.stderr
    # fail-open, but a counted notice: a CI job sees that NUMA fit was not judged
    assert (f"{tmp_path / 'nope'}: notice: numa-unfit: policy.numa: auto: numa-unfit is not judged: no usable "
            f"kubeconfig: {tmp_path / 'nope'} does not exist") in unread.stdout, unread.stdout
    assert "1 violation, 1 notice, 0 errors" in unread.stderr, unread.stderr


GOOD_POD = """apiVersion: v1
kind: Pod   # kept
metadata: {name: p}
spec:
  containers:
    - name: a
      resources:
        requests: {cpu: "1", memory: 1Gi}
        limits: {cpu: "2", memory: 1Gi}   # a limit above its request
"""


def test_fix_dash_is_a_stdin_to_stdout_filter(qos_guard: Run) -> None:
    out = qos_guard("fix", "-", stdin=GOOD_POD)
    assert out.returncode == 0, out.stderr
    assert out.stdout == GOOD_POD.replace('requests: {cpu: "1"', 'requests: {cpu: "2"')
    assert '<stdin>:8: Pod/p: fixed: container "a": set resources.requests.cpu to 2 (its limit)' in out.stderr
    again = qos_guard("fix", "-", stdin=out.stdout)
    assert again.returncode == 0 and again.stdout == out.stdout  # idempotent
    diff = qos_guard("fix", "-", "--dry-run", stdin=GOOD_POD)
    assert diff.returncode == 0 and diff.stdout.startswith("--- a/stdin\n+++ b/stdin\n")
    assert '+        requests: {cpu: "2", memory: 1Gi}' in diff.stdout


def test_fix_dash_gives_its_input_back_when_it_cannot_fix_it(qos_guard: Run) -> None:
    """An editor replaces its buffer with a filter's output: on an error that output is the input, unchanged."""
    broken = "kind: [\n"
    out = qos_guard("fix", "-", stdin=broken)
    assert out.returncode == 2 and out.stdout == broken
    assert "<stdin>:2: error: YAML does not parse" in out.stderr and "Traceback" not in out.stderr
    fractional = GOOD_POD.replace('cpu: "2"', "cpu: 1500m")
    left = qos_guard("fix", "-", stdin=fractional)
    assert left.returncode == 1 and "cpu-not-integer" in left.stderr
    assert left.stdout.startswith("apiVersion: v1\nkind: Pod   # kept\n")


def test_fix_dash_is_given_alone(qos_guard: Run, tmp_path: Path) -> None:
    for args in (["-", str(tmp_path)], ["-", "--output", str(tmp_path)]):
        _refused(qos_guard("fix", *args, stdin=GOOD_POD), "fix: - (standard input to standard output, a filter) "
                 "is given alone")


# --- examples/ -----------------------------------------------------------------------------------------------

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
    out = qos_guard("check", "examples/", cwd=ROOT)
    readme = (ROOT / "README.md").read_text()
    for line in out.stdout.splitlines():
        assert line in readme, line


# --- what a user outside the repository needs: a license, pins that exist, an install ------------------------


def test_license_is_the_apache_2_0_text_the_metadata_names() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License\n                           Version 2.0, January 2004")
    assert "END OF TERMS AND CONDITIONS" in text and "APPENDIX: How to apply the Apache License" in text
    assert 'license = "Apache-2.0"' in (ROOT / "pyproject.toml").read_text()
    assert yaml.safe_load((ROOT / "charts" / "qos-guard" / "Chart.yaml").read_text())["annotations"][
        "artifacthub.io/license"] == "Apache-2.0"


def test_ci_pins_name_no_tag_the_repository_lacks() -> None:
    """Pre-commit and the Action pinned v0.1.0, a tag the repository does not have."""
    tags = subprocess.run(["git", "-C", str(ROOT), "tag"], capture_output=True, text=True, check=False).stdout.split()
    section = _ci_section()
    pins = re.findall(r"rev: ([^,}\s]+)", section) + re.findall(r"uses: qos-guard/qos-guard@(\S+)", section)
    assert len(pins) == 2 and all(pin in tags or pin == "COMMIT" for pin in pins), pins
    assert "pin a commit" in " ".join(section.split())


def test_readme_says_how_to_install_the_cli_outside_the_repository() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "python3 -m pip install ./qos-guard" in readme
    version = re.search(r'__version__ = "(.*)"', (ROOT / "webhook" / "__init__.py").read_text())
    assert version is not None
    wheel = f"dist/qos_guard-{version.group(1)}-py3-none-any.whl"
    assert f"python3 -m pip wheel --no-deps -w dist ./qos-guard      # {wheel}" in readme
    assert f"python3 -m pip install {wheel}" in readme


def test_nodes_sarif_names_no_domain_nobody_owns() -> None:
    from webhook.batch.formats import render, render_nodes
    from webhook.batch.nodes import build
    from webhook.batch.report import Report
    from webhook.core.engine import Mode

    nodes = render_nodes(build([], [], ["the cluster has no node"]), "sarif")
    for text in (nodes, render(Report(Mode.ENFORCE), "sarif")):
        driver = json.loads(text)["runs"][0]["tool"]["driver"]
        assert "informationUri" not in driver and "//qos-guard.io" not in json.dumps(driver)
        assert driver["name"] == "qos-guard"


# --- make run's first install --------------------------------------------------------------------------------


@pytest.mark.slow
def test_make_install_prints_no_editable_install_banner() -> None:
    """`make run` on a fresh clone printed setuptools' "Editable installation ... Please be careful with folders
    in your working directory" banner. The Makefile's own pip line is run (without dependencies or build
    isolation, so no download), with and without its warning filter."""
    dry = subprocess.run(["make", "-n", "-B", "--no-print-directory", "-C", str(ROOT), "install"],
                         capture_output=True, text=True, timeout=60, check=False)
    (line,) = [ln for ln in dry.stdout.splitlines() if "pip install" in ln and " -e " in ln]
    assert line.startswith("PYTHONWARNINGS="), line
    command = line.replace("-e '.[test,bench]'", "--no-deps --no-build-isolation -e .")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    quiet = subprocess.run(["bash", "-c", command], cwd=ROOT, capture_output=True, text=True, timeout=300,
                           env=env, check=False)
    assert quiet.returncode == 0, quiet.stderr
    assert "Editable installation" not in quiet.stdout + quiet.stderr, quiet.stderr
    loud = subprocess.run(["bash", "-c", command[command.index('" ') + 2:]], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env=env, check=False)
    assert loud.returncode == 0 and "Editable installation" in loud.stderr  # the control: the filter is the fix


# --- a loose template names helm template ------------------------------------------------------------------


def test_a_loose_file_with_braces_names_helm_template(qos_guard: Run, tmp_path: Path) -> None:
    """It said "render it first" without naming `helm template`, which the chart-folder message does."""
    loose = tmp_path / "deployment.yaml"
    loose.write_text("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\n"
                     "spec:\n  replicas: {{ .Values.replicas }\n")
    out = qos_guard("check", str(loose))
    assert out.returncode == 2
    assert "a Helm or Go template? render it first: helm template RELEASE CHART | qos-guard check -" in out.stdout
