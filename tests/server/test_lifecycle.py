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

from tests import waiting
from tests.builders import guaranteed, pod
from tests.server.conftest import EXAMPLE, Server, free_port, review, start_server
from tests.serving import launch, rotate_certificate
from webhook.serving.certs import write_bundle


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
        certs = tmp_path / "certs" / "localhost"
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
        waiting.eventually("the rotated certificate served", lambda: serving_serial(server.port, server.ca) != before,
                           within=10, every=0.2)
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


def _idle_keepalive_connection(server: Server) -> ssl.SSLSocket:
    """A TLS connection that has had one answer and stays open, as the API server keeps its connections."""
    body = json.dumps(EXAMPLE).encode()
    head = (f"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    ctx = ssl.create_default_context(cafile=server.ca)
    tls = ctx.wrap_socket(socket.create_connection(("127.0.0.1", server.port), timeout=10),
                          server_hostname="localhost")
    tls.sendall(head + body)
    reply = b""
    while b"\r\n\r\n" not in reply:
        reply += tls.recv(65536)
    header, rest = reply.split(b"\r\n\r\n", 1)
    length = int(next(line.split(b":")[1] for line in header.split(b"\r\n")
                      if line.lower().startswith(b"content-length:")))
    while len(rest) < length:
        rest += tls.recv(65536)
    assert header.startswith(b"HTTP/1.1 200") and b"connection: close" not in header.lower()
    return tls


def test_sigterm_closes_idle_keepalive_connections_and_exits_at_once(tmp_path: Path) -> None:
    """An idle keep-alive connection (the API server always holds some) neither delays the stop nor keeps a
    worker answering after it: a stopped webhook must fail the calls, not answer them."""
    server = start_server(tmp_path)
    tls = _idle_keepalive_connection(server)
    try:
        started = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        assert tls.recv(65536) == b""  # closed by the server, not kept for the next request
        assert server.proc.wait(timeout=10) == 0
        assert time.monotonic() - started < 5, "the stop waited for an idle connection"
    finally:
        tls.close()
        server.stop()


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


def test_make_run_never_overwrites_certificates_it_did_not_make(tmp_path: Path) -> None:
    """After `qos-guard certs` (which writes certs/), `make run` replaced certs/ca.crt, tls.crt and tls.key with
    localhost ones and left the old ca.key, which no longer matched. Now its local CA has its own folder, and
    a folder holding someone else's files is refused, not written."""
    made = subprocess.run([sys.executable, "-m", "webhook.cli", "certs", "--service", "qos-guard", "--namespace",
                           "qos-guard"], cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert made.returncode == 0, made.stderr
    theirs = {p.name: p.read_bytes() for p in (tmp_path / "certs").iterdir()}
    assert set(theirs) == {"ca.crt", "ca.key", "tls.crt", "tls.key"}
    server = start_server(tmp_path, certs=False)
    try:
        assert server.post("/validate", review(pod(guaranteed()))).status_code == 200  # the local CA serves
    finally:
        server.stop()
    assert {p.name: p.read_bytes() for p in (tmp_path / "certs").iterdir() if p.is_file()} == theirs
    local = tmp_path / "certs" / "localhost"
    assert {p.name for p in local.iterdir()} == {"ca.crt", "tls.crt", "tls.key", "made-by-qos-guard-serve"}
    # someone else's files where the local CA would go: refused with the way out, and left as they were
    other = tmp_path / "elsewhere"
    (other / "certs" / "localhost").mkdir(parents=True)
    (other / "certs" / "localhost" / "tls.crt").write_text("mine\n")
    out = run_serve(other)
    assert out.returncode == 2 and "holds files qos-guard serve did not make (tls.crt)" in out.stderr
    assert "--cert-file and --key-file" in out.stderr and "Traceback" not in out.stderr
    assert (other / "certs" / "localhost" / "tls.crt").read_text() == "mine\n"


def test_make_run_binds_localhost_and_passes_args(tmp_path: Path) -> None:
    """`make run` bound 0.0.0.0 while the README said localhost, and nothing could be passed to it."""
    root = Path(__file__).resolve().parents[2]
    port, mport = free_port(), free_port()
    args = f"ARGS=--bind 127.0.0.1:{port} --metrics-bind 127.0.0.1:{mport} --workers 1"
    dry = subprocess.run(["make", "-n", "--no-print-directory", "-C", str(root), "run", args],
                         capture_output=True, text=True, timeout=60, check=False)
    assert dry.returncode == 0, dry.stderr
    command = dry.stdout.strip().splitlines()[-1].split()
    assert command[1:6] == ["serve", "--bind", "127.0.0.1:8443", "--metrics-bind", "127.0.0.1:8080"]
    assert command[6:] == ["--bind", f"127.0.0.1:{port}", "--metrics-bind", f"127.0.0.1:{mport}", "--workers", "1"]
    readme = (root / "README.md").read_text()
    assert "https://localhost:8443" in readme and "127.0.0.1" in readme and 'make run ARGS="--bind' in readme
    # what make runs, run (in a scratch folder): the last --bind wins, and it listens on loopback only
    server = launch(tmp_path, [sys.executable, "-m", "webhook.cli", *command[1:]], port, mport, ca="")
    try:
        listening = Path("/proc/net/tcp").read_text()
        assert f"0100007F:{port:04X}" in listening and f"00000000:{port:04X}" not in listening
    finally:
        server.stop()
    out = (tmp_path / "server.log").read_text()
    assert f"serving https://localhost:{port}" in out and "certs/localhost/ca.crt" in out


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


_AUDITED_SERVE = """
import sys, threading
def hook(event, args):
    if event == "import" and threading.current_thread().name == "health":
        sys.stderr.write(f"import in the health thread: {args[0]}\\n")
sys.addaudithook(hook)
from webhook.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_master_health_thread_imports_nothing(tmp_path: Path) -> None:
    """gunicorn forks workers while the master's health thread runs. A fork while that thread imports a module
    leaves the worker blocked for good on the module's import lock (it ignores SIGTERM, so every stop took
    graceful_timeout): every probe, metrics scrape and error answer must find its modules imported."""
    paths = write_bundle(tmp_path / "pki", ["localhost", "127.0.0.1"], 2, keep_ca_key=False)
    port, mport = free_port(), free_port()
    log = tmp_path / "server.log"
    server = launch(tmp_path, [sys.executable, "-c", _AUDITED_SERVE, "serve", "--bind", f"127.0.0.1:{port}",
                               "--metrics-bind", f"127.0.0.1:{mport}", "--cert-file", str(paths.cert),
                               "--key-file", str(paths.key)], port, mport, str(paths.ca),
                    env={"PYTHONPATH": str(Path(__file__).parents[2])})
    try:
        for path in ("/metrics", "/healthz", "/readyz", "/nowhere"):
            time.sleep(1.1)  # past the probe's shared result: each readiness asks a worker again
            requests.get(f"http://127.0.0.1:{mport}{path}", timeout=5)
        with socket.create_connection(("127.0.0.1", mport), timeout=5) as bad:
            bad.sendall(b"BREW /pot HTTP/1.1\r\n\r\n")
            bad.recv(1024)
    finally:
        server.stop()
    assert "import in the health thread" not in log.read_text(), log.read_text()


def _children(pid: int) -> set[int]:
    return {int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}


def test_sigterm_while_a_worker_boots_stops_it_too(tmp_path: Path) -> None:
    """A worker forked just before SIGTERM reached it used to get the signal before it had installed its
    handlers: the inherited master handler swallowed it, and the worker served on until the master killed it
    after graceful_timeout. Stop signals are held across the fork until the worker's handlers are in place."""
    server = start_server(tmp_path)
    try:
        workers = _children(server.proc.pid)
        os.kill(min(workers), signal.SIGKILL)  # the master forks a replacement ...
        # polled every 10 ms: the signal is to reach the replacement while it boots
        waiting.eventually("a replacement worker", lambda: _children(server.proc.pid) - workers, within=10,
                           every=0.01, seen=lambda: f"children {_children(server.proc.pid)}, before {workers}")
        started = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)  # ... and is stopped while the replacement boots
        assert server.proc.wait(timeout=20) == 0
        assert time.monotonic() - started < 5, "a booting worker missed the stop signal"
    finally:
        server.stop()


def test_a_worker_that_exits_is_replaced_and_the_server_keeps_serving(tmp_path: Path) -> None:
    """A worker that ends cleanly (SIGTERM to it alone; the arbiter's timeout sends SIGABRT) unwinds through the
    master's stack it was forked with: it must not remove what the master owns (the metrics folder), or its
    replacement cannot boot and the whole server halts."""
    server = start_server(tmp_path)
    try:
        workers = _children(server.proc.pid)
        os.kill(min(workers), signal.SIGTERM)
        waiting.eventually("a replacement worker (or the server exited)",  # an exit: the assertion below says so
                           lambda: _children(server.proc.pid) - workers or server.proc.poll() is not None,
                           within=20, every=0.05,
                           seen=lambda: f"children {_children(server.proc.pid)}, before {workers}")
        time.sleep(3)  # the replacement boots (or fails to)
        assert server.proc.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
        assert server.post("/validate", EXAMPLE).status_code == 200
        assert requests.get(server.metrics + "/metrics", timeout=5).status_code == 200
        assert "failed to boot" not in (tmp_path / "server.log").read_text()
    finally:
        server.stop()


def test_no_control_socket_is_opened(tmp_path: Path) -> None:
    """gunicorn 25.1+ opens a control socket (in $XDG_RUNTIME_DIR or ~/.gunicorn) through which any process of
    the same user resizes, reloads or stops the server; qos-guard serve opens none (and so logs no ERROR where
    the root filesystem is read-only, as in the chart)."""
    home, runtime = tmp_path / "home", tmp_path / "run"
    home.mkdir()
    runtime.mkdir()
    pki = write_bundle(tmp_path / "pki", ["localhost", "127.0.0.1"], 2, keep_ca_key=False)
    port, mport = free_port(), free_port()
    server = launch(tmp_path, [sys.executable, "-m", "webhook.cli", "serve", "--bind", f"127.0.0.1:{port}",
                               "--metrics-bind", f"127.0.0.1:{mport}", "--workers", "1",
                               "--cert-file", str(pki.cert), "--key-file", str(pki.key)],
                    port, mport, str(pki.ca), env={"HOME": str(home), "XDG_RUNTIME_DIR": str(runtime)})
    try:
        sockets = [p for p in (*home.rglob("*"), *runtime.rglob("*")) if p.is_socket()]
        assert sockets == [], sockets
        assert "Control server" not in (tmp_path / "server.log").read_text()
    finally:
        server.stop()
