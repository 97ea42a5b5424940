"""The server's life: local CA made and reused, certificate rotation under load with zero failures,
SIGTERM letting in-flight requests finish, and clear start-up errors."""

from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import requests
from cryptography import x509

from tests.helpers import guaranteed, pod
from tests.server.conftest import EXAMPLE, free_port, review, start_server
from tests.serving import rotate_certificate


def serving_serial(port: int, ca: str) -> int:
    ctx = ssl.create_default_context(cafile=ca)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
            ctx.wrap_socket(raw, server_hostname="localhost") as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def test_local_ca_created_once_and_reused(tmp_path: Path) -> None:
    server = start_server(tmp_path, certs=False)
    try:
        certs = tmp_path / "certs"
        assert stat.S_IMODE((certs / "tls.key").stat().st_mode) == 0o600
        cert = x509.load_pem_x509_certificate((certs / "tls.crt").read_bytes())
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert "localhost" in sans.get_values_for_type(x509.DNSName)
        assert "created a local development CA" in (tmp_path / "server.log").read_text()
        assert server.post("/validate", review(pod(guaranteed()))).status_code == 200
        first = (certs / "tls.crt").read_bytes()
    finally:
        server.stop()
    again = start_server(tmp_path, certs=False)
    try:
        assert (certs / "tls.crt").read_bytes() == first
        assert "reusing a local development CA" in (tmp_path / "server.log").read_text()
    finally:
        again.stop()


def test_certificate_rotation_under_load_zero_failures(tmp_path: Path) -> None:
    server = start_server(tmp_path)
    failures: list[str] = []
    answered = [0]
    stop = threading.Event()

    def load() -> None:
        while not stop.is_set():
            try:
                with requests.Session() as s:  # new connections, so new handshakes see the rotation
                    r = s.post(server.url + "/validate", data=json.dumps(EXAMPLE), verify=server.ca, timeout=10)
                if r.status_code != 200 or r.json()["response"]["allowed"] is not False:
                    failures.append(r.text)
                answered[0] += 1
            except requests.RequestException as exc:
                failures.append(repr(exc))

    try:
        before = serving_serial(server.port, server.ca)
        threads = [threading.Thread(target=load) for _ in range(4)]
        for t in threads:
            t.start()
        time.sleep(1)
        serial = rotate_certificate(server)
        deadline = time.monotonic() + 10
        while serving_serial(server.port, server.ca) == before and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1)
        stop.set()
        for t in threads:
            t.join()
        assert serving_serial(server.port, server.ca) == serial
        assert failures == [] and answered[0] > 20
    finally:
        stop.set()
        server.stop()


def test_sigterm_lets_in_flight_requests_finish(tmp_path: Path) -> None:
    server = start_server(tmp_path)
    body = json.dumps(EXAMPLE).encode()
    head = (f"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    ctx = ssl.create_default_context(cafile=server.ca)
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    tls = ctx.wrap_socket(raw, server_hostname="localhost")
    tls.sendall(head + body[:100])  # the request is in flight: headers and part of the body sent
    time.sleep(0.3)
    server.proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    tls.sendall(body[100:])
    reply = b""
    while chunk := tls.recv(65536):
        reply += chunk
    tls.close()
    assert reply.startswith(b"HTTP/1.1 200")
    assert json.loads(reply.split(b"\r\n\r\n", 1)[1])["response"]["allowed"] is False
    assert server.proc.wait(timeout=30) == 0


def run_serve(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "webhook.cli", "serve", "--bind", f"127.0.0.1:{free_port()}",
                           "--metrics-bind", f"127.0.0.1:{free_port()}", *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, check=False)


def test_missing_or_corrupt_certificate_exits_2(tmp_path: Path) -> None:
    out = run_serve(tmp_path, "--cert-file", str(tmp_path / "nope.crt"), "--key-file", str(tmp_path / "nope.key"))
    assert out.returncode == 2 and "certificate file not found" in out.stderr
    (tmp_path / "bad.crt").write_text("-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n")
    (tmp_path / "bad.key").write_text("garbage")
    out = run_serve(tmp_path, "--cert-file", str(tmp_path / "bad.crt"), "--key-file", str(tmp_path / "bad.key"))
    assert out.returncode == 2 and "cannot use --cert-file" in out.stderr
    out = run_serve(tmp_path, "--cert-file", str(tmp_path / "bad.crt"))
    assert out.returncode == 2 and "go together" in out.stderr


def test_bad_config_and_port_in_use_exit_2(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("mutation:\n  cpuRounding: sideways\n")
    out = run_serve(tmp_path, "--config", str(cfg))
    assert out.returncode == 2 and "mutation.cpuRounding" in out.stderr
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        out = subprocess.run([sys.executable, "-m", "webhook.cli", "serve", "--bind", f"127.0.0.1:{port}"],
                             cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 2 and f"--bind 127.0.0.1:{port}: cannot listen there" in out.stderr


def test_tls_below_1_2_refused_and_no_plain_http(tmp_path: Path) -> None:
    server = start_server(tmp_path)
    try:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_verify_locations(server.ca)
        ctx.maximum_version = ssl.TLSVersion.TLSv1_1
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw:
            try:
                ctx.wrap_socket(raw, server_hostname="localhost").close()
                refused = False
            except (ssl.SSLError, OSError):
                refused = True
        assert refused
        try:
            plain = requests.post(f"http://127.0.0.1:{server.port}/validate", data=json.dumps(EXAMPLE), timeout=5)
            assert plain.status_code != 200  # never an admission answer over plain HTTP
        except requests.ConnectionError:
            pass
    finally:
        server.stop()


def test_certs_command(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "webhook.cli", "certs", "--service", "qg", "--namespace", "ops",
                          "--output-dir", str(tmp_path)], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0
    import base64
    assert base64.b64decode(out.stdout.strip()) == (tmp_path / "ca.crt").read_bytes()
    cert = x509.load_pem_x509_certificate((tmp_path / "tls.crt").read_bytes())
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["qg", "qg.ops", "qg.ops.svc", "qg.ops.svc.cluster.local"]
    for key in ("tls.key", "ca.key"):
        assert stat.S_IMODE((tmp_path / key).stat().st_mode) == 0o600
    assert os.path.exists(tmp_path / "ca.crt")
