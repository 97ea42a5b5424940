"""The CLI's cluster half with no cluster to reach, run as the real command
against a real closed port (nothing listens: the connection is refused by the kernel, as with an API server down),
or with no kubeconfig to read: each is a refusal naming the paths looked at and the way out."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest

from tests import inprocess
from tests.cli.conftest import LIMIT_ABOVE_REQUEST, Run, refused

KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: down
  cluster: {{server: "https://127.0.0.1:{port}"}}
users:
- name: u
  user: {{token: abc}}
contexts:
- name: here
  context: {{cluster: down, user: u}}
- name: there
  context: {{cluster: down, user: u}}
current-context: here
"""


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def down(tmp_path: Path) -> tuple[Path, str]:
    """A kubeconfig whose API server is down, and that server's URL."""
    port = _closed_port()
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG.format(port=port))
    return path, f"https://127.0.0.1:{port}"


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST",
                                                            "KUBERNETES_SERVICE_PORT")}
    return {**env, "HOME": str(home)}


def _run(*args: str, home: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    if args[0] in inprocess.SERVERS:
        return inprocess.subprocess_run(args, env=_env(home), timeout=timeout)
    return inprocess.run(args, env=_env(home))


def _unreachable(url: str) -> str:
    return f"cannot reach the API server at {url}: connection refused"


def test_certs_patch_webhooks_with_the_server_down_writes_nothing_and_can_be_run_again(
        tmp_path: Path, down: tuple[Path, str]) -> None:
    """It wrote the CA, then ended in urllib3's traceback (exit 1); the same command again: "ca.crt exists"."""
    kubeconfig, url = down
    folder = tmp_path / "certs"
    for _ in range(2):
        out = _run("certs", "--output-dir", str(folder), "--patch-webhooks", "qos-guard", "--kubeconfig",
                   str(kubeconfig), home=tmp_path)
        refused(out, f"--patch-webhooks: {_unreachable(url)}", f"nothing was written to {folder}")
        assert "HTTPSConnectionPool" not in out.stderr and "ca.crt" not in out.stderr, out.stderr
        assert not folder.exists()
        assert out.stdout == ""  # no caBundle printed for certificates that were not written


@pytest.mark.parametrize("command", [["audit"], ["nodes"]])
def test_cluster_errors_name_the_server_and_the_cause_not_urllib3(tmp_path: Path, down: tuple[Path, str],
                                                                    command: list[str]) -> None:
    """It printed `HTTPSConnectionPool(host=..., port=...): Max retries exceeded with url: ... (Caused by
    NewConnectionError(...))`."""
    kubeconfig, url = down
    out = _run(*command, "--kubeconfig", str(kubeconfig), home=tmp_path)
    refused(out, f"qos-guard: {command[0]}: {_unreachable(url)}")
    assert "HTTPSConnectionPool" not in out.stderr and "Max retries" not in out.stderr, out.stderr


@pytest.mark.parametrize("command", [["audit"], ["nodes"]])
def test_a_context_the_kubeconfig_lacks_is_named_with_those_it_has(tmp_path: Path, down: tuple[Path, str],
                                                                   command: list[str]) -> None:
    """nodes said `Invalid kube-config file. Expected object with name nosuch ...; pass --kubeconfig FILE`;
    audit had no --context at all."""
    kubeconfig, _ = down
    out = _run(*command, "--kubeconfig", str(kubeconfig), "--context", "nosuch", home=tmp_path)
    refused(out, f"--context nosuch: no such context in {kubeconfig} (its contexts: here, there)")
    assert "pass --kubeconfig" not in out.stderr, out.stderr


def test_audit_uses_the_context_it_is_given(tmp_path: Path, down: tuple[Path, str]) -> None:
    """``audit --context there`` reads through that context's cluster (here: the same one, down)."""
    kubeconfig, url = down
    refused(_run("audit", "--kubeconfig", str(kubeconfig), "--context", "there", home=tmp_path),
            _unreachable(url))


@pytest.mark.parametrize("fmt", ["json", "sarif", "junit"])
@pytest.mark.parametrize("command", ["audit", "nodes"])
def test_machine_formats_get_an_error_record_when_the_cluster_is_unreachable(
        tmp_path: Path, down: tuple[Path, str], command: str, fmt: str) -> None:
    """stdout was empty: a SARIF upload step then got an empty file. check writes an error record; so do these."""
    kubeconfig, url = down
    out = _run(command, "--kubeconfig", str(kubeconfig), "--format", fmt, home=tmp_path)
    refused(out, _unreachable(url))
    assert _unreachable(url) in out.stdout, out.stdout
    if fmt == "junit":
        import xml.etree.ElementTree as ET

        root = ET.fromstring(out.stdout)
        assert root.find(".//error") is not None
        return
    doc = json.loads(out.stdout)
    if fmt == "sarif":
        assert doc["version"] == "2.1.0"
        text = json.dumps(doc["runs"][0].get("invocations") or doc["runs"][0].get("results"))
        assert _unreachable(url) in text, doc["runs"][0].keys()
    else:
        assert doc["summary"]["errors"] >= 1 if command == "audit" else doc["errors"], doc


def test_extender_without_a_kubeconfig_says_where_it_looked_before_serving(tmp_path: Path) -> None:
    """It printed "serving http://...", then a gunicorn worker's traceback, and exited 3."""
    out = _run("extender", "--plain", "--bind", f"127.0.0.1:{_closed_port()}", home=tmp_path, timeout=60)
    default = tmp_path / ".kube" / "config"
    refused(out, f"no usable kubeconfig: {default} does not exist",
            "not in a Pod (KUBERNETES_SERVICE_HOST unset)", "set KUBECONFIG")
    assert "serving" not in out.stderr, out.stderr


def test_serve_names_the_certificate_file_that_is_missing(tmp_path: Path) -> None:
    """It said `certificate file not found: None`."""
    key = tmp_path / "tls.key"
    key.write_text("")
    out = _run("serve", "--cert-file", "/nonexistent.crt", "--key-file", str(key), "--bind",
               f"127.0.0.1:{_closed_port()}", "--metrics-bind", f"127.0.0.1:{_closed_port()}", home=tmp_path,
               timeout=60)
    refused(out, "certificate file not found: --cert-file /nonexistent.crt")
    assert "None" not in out.stderr and str(key) not in out.stderr, out.stderr
    both = _run("serve", "--cert-file", "/nonexistent.crt", "--key-file", "/nonexistent.key", "--bind",
                f"127.0.0.1:{_closed_port()}", "--metrics-bind", f"127.0.0.1:{_closed_port()}", home=tmp_path,
                timeout=60)
    refused(both, "--cert-file /nonexistent.crt, --key-file /nonexistent.key")


# --- no kubeconfig at all, or one check would not read ---


def test_a_missing_kubeconfig_names_the_paths_and_the_places_looked_at(tmp_path: Path) -> None:
    """It said `no usable kubeconfig: Invalid kube-config file. No configuration found.`: no path, no places."""
    default = tmp_path / ".kube" / "config"
    for command in (["audit"], ["nodes"]):
        out = _run(*command, home=tmp_path)
        refused(out, f"no usable kubeconfig: {default} does not exist", "not in a Pod (KUBERNETES_SERVICE_HOST "
                f"unset); the default {default}", "pass --kubeconfig FILE, or set KUBECONFIG")
    listed = inprocess.run(("audit",), env={**_env(tmp_path),
                                            "KUBECONFIG": f"{tmp_path / 'a'}{os.pathsep}{tmp_path / 'b'}"})
    refused(listed, f"{tmp_path / 'a'} does not exist; {tmp_path / 'b'} does not exist",
            f"$KUBECONFIG {tmp_path / 'a'}{os.pathsep}{tmp_path / 'b'}")
    given = _run("audit", "--kubeconfig", str(tmp_path / "nope"), home=tmp_path)
    refused(given, f"{tmp_path / 'nope'} does not exist (looked at: --kubeconfig {tmp_path / 'nope'})")
    broken = tmp_path / "broken"
    broken.write_text("clusters: [\n")
    refused(_run("audit", "--kubeconfig", str(broken), home=tmp_path), f"{broken} is not YAML (line 2)")


def test_check_kubeconfig_reads_the_cluster_without_a_setting(qos_guard: Run, tmp_path: Path) -> None:
    """`check --kubeconfig` reads the cluster whatever the configuration (its minor, the objects operators build
    Pods from, its DRA claims): the builders' "run with --kubeconfig" is a way out that works. It had been refused
    (exit 2) without policy.numa: auto or policy.deviceClasses: true. A cluster that cannot be read is said, named
    as the kubeconfig's problem, and the file's own finding decides."""
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(LIMIT_ABOVE_REQUEST)
    out = qos_guard("check", str(manifest), "--kubeconfig", str(tmp_path / "kubeconfig"))
    assert out.returncode == 1 and "requests-not-equal-limits" in out.stdout, out.stderr
    assert (f"the API server's version is not known: no usable kubeconfig: {tmp_path / 'kubeconfig'} does not "
            "exist") in out.stderr, out.stderr
    config = tmp_path / "numa.yaml"
    config.write_text("policy:\n  numa: auto\n")
    unread = qos_guard("check", str(manifest), "--config", str(config), "--kubeconfig", str(tmp_path / "nope"))
    # the cluster is never a reason to fail (contract): the file's own finding decides
    assert unread.returncode == 1 and "requests-not-equal-limits" in unread.stdout, unread.stderr
    # fail-open, but a counted notice: a CI job sees that NUMA fit was not judged
    assert (f"{tmp_path / 'nope'}: notice: numa-unfit: policy.numa: auto: numa-unfit is not judged: no usable "
            f"kubeconfig: {tmp_path / 'nope'} does not exist") in unread.stdout, unread.stdout
    assert "1 violation, 1 notice, 0 errors" in unread.stderr, unread.stderr



def test_check_kubeconfig_on_an_api_server_without_dra_says_it_on_stderr_not_as_notices(
        qos_guard: Run, tmp_path: Path) -> None:
    """A plain `check --kubeconfig` (no policy.numa: auto, no policy.deviceClasses) against an API server that
    serves no resource.k8s.io/v1 (1.33): what could not be read is said on stderr, not counted as notices for a run
    of Pods that name no claim (a Pod that names one is said unknown with the reason). With policy.numa: auto the
    run is set to read the cluster, and they stay notices."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class OldApiServer(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = (json.dumps({"major": "1", "minor": "33", "gitVersion": "v1.33.13"}) if self.path == "/version"
                    else json.dumps({"kind": "Status", "code": 404, "reason": "NotFound"})).encode()
            self.send_response(200 if self.path == "/version" else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), OldApiServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(KUBECONFIG.replace("https://", "http://").format(port=server.server_address[1]))
        manifest = tmp_path / "pod.yaml"
        manifest.write_text(LIMIT_ABOVE_REQUEST)
        out = qos_guard("check", str(manifest), "--kubeconfig", str(kubeconfig))
        assert out.returncode == 1 and "requests-not-equal-limits" in out.stdout, out.stderr
        assert "notice" not in out.stdout and "1 violation, 0 errors" in out.stderr, (out.stdout, out.stderr)
        assert "ResourceSlices (resource.k8s.io/v1) are not served" in out.stderr, out.stderr
        assert "judging with Kubernetes 1.33 semantics (the API server's /version: v1.33.13)" in out.stderr
    finally:
        server.shutdown()
