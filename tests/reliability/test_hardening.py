"""TLS and log hardening, tried by real clients against the real server."""

from __future__ import annotations

import json
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import waiting
from tests.builders import container, pod, rl
from tests.serving import Server, start_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = start_server(tmp_path_factory.mktemp("hardening"))
    yield srv
    srv.stop()


def _handshake(server: Server, ctx: ssl.SSLContext) -> str:
    """The negotiated cipher, or raise ssl.SSLError / ConnectionError when the server refuses."""
    ctx.load_verify_locations(server.ca)
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw, \
            ctx.wrap_socket(raw, server_hostname="localhost") as tls:
        cipher = tls.cipher()
        assert cipher is not None
        return cipher[0]


def _client(version: ssl.TLSVersion, ciphers: str | None = None) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
    ctx.maximum_version = version
    # Let this client offer what a careless or old client would, so refusing it is the server's doing.
    ctx.set_ciphers((ciphers or "ALL") + ":@SECLEVEL=0")
    return ctx


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1:DeprecationWarning")
@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1])
def test_tls_below_1_2_refused(server: Server, version: ssl.TLSVersion) -> None:
    with pytest.raises((ssl.SSLError, ConnectionError)):
        _handshake(server, _client(version))


@pytest.mark.parametrize("ciphers", [
    "ECDHE-ECDSA-AES128-SHA:ECDHE-ECDSA-AES256-SHA",        # CBC with SHA-1 MACs
    "ECDHE-ECDSA-AES128-SHA256:ECDHE-ECDSA-AES256-SHA384",  # CBC, no AEAD
    "AES128-GCM-SHA256:AES256-GCM-SHA384:AES128-SHA",        # no forward secrecy
    "ECDHE-ECDSA-NULL-SHA:NULL-SHA256",                      # no encryption at all
    "DES-CBC3-SHA:RC4-SHA",                                  # broken ciphers
])
def test_weak_tls_1_2_ciphers_refused(server: Server, ciphers: str) -> None:
    with pytest.raises((ssl.SSLError, ConnectionError)):
        _handshake(server, _client(ssl.TLSVersion.TLSv1_2, ciphers))


def test_strong_ciphers_accepted(server: Server) -> None:
    """The control: the same client code succeeds when it offers a forward-secret AEAD suite."""
    assert _handshake(server, _client(ssl.TLSVersion.TLSv1_2, "ECDHE-ECDSA-AES128-GCM-SHA256")) == \
        "ECDHE-ECDSA-AES128-GCM-SHA256"
    assert _handshake(server, _client(ssl.TLSVersion.TLSv1_3)).startswith("TLS_")


def test_logs_carry_no_key_token_or_object_body(server: Server) -> None:
    marker = "s3cr3t-marker-7f1d"
    obj = pod(container("app", limits=rl("1500m", "1Gi"), env=[{"name": "API_TOKEN", "value": marker}]),
              name="leaky")
    obj["metadata"]["annotations"] = {"note": marker}
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "log-check-uid", "kind": {"group": "", "version": "v1", "kind": "Pod"}, "operation": "CREATE",
        "namespace": "ns", "object": obj, "userInfo": {"username": "alice", "extra": {"token": [marker]}}}}
    for path in ("/validate", "/mutate", "/warn"):
        assert server.post(path, review).status_code == 200
    assert server.post("/validate", b'{"not": "a review", "secret": "' + marker.encode() + b'"}').status_code == 400
    log = _log_with(server, '"uid": "log-check-uid"')  # the decision lines were written ...
    assert marker not in log  # ... without the object, its env, its annotations or the user's extra
    for secret in ("PRIVATE KEY", "BEGIN CERTIFICATE", (server.folder / "pki" / "tls.key").read_text()[40:80]):
        assert secret not in log


def _log_with(server: Server, text: str, timeout: float = 5) -> str:
    """The server log once it contains ``text`` (decision lines are written in batches, 50 ms apart)."""
    log = server.folder / "server.log"
    waiting.eventually(f"{text} in the server log", lambda: text in log.read_text(), within=timeout, every=0.05,
                       seen=lambda: log.read_text()[-2000:])
    return log.read_text()


def test_one_json_line_per_decision_and_all_written_at_shutdown(tmp_path: Path) -> None:
    srv = start_server(tmp_path)
    obj = pod(container("app", limits=rl("1500m", "1Gi")), name="vllm")
    uids = [f"line-{i}" for i in range(30)]
    try:
        for uid in uids:
            body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
                "uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"}, "operation": "CREATE",
                "namespace": "ml", "object": obj, "dryRun": True}}
            assert srv.post("/validate", body).status_code == 200
    finally:
        srv.stop()  # SIGTERM right after the last answer: queued lines must still be written
    lines = [json.loads(line) for line in (tmp_path / "server.log").read_text().splitlines()
             if line.startswith('{"uid"')]
    assert sorted(line["uid"] for line in lines) == sorted(uids)  # each once (two workers: any order)
    first = next(line for line in lines if line["uid"] == "line-0")
    assert first | {"durationMs": 0} == {
        "uid": "line-0", "kind": "Pod", "namespace": "ml", "name": "vllm", "operation": "CREATE",
        "path": "validate", "decision": "denied", "rules": ["cpu-not-integer"], "dryRun": True, "durationMs": 0}
    assert 0 < first["durationMs"] < 1000


def test_private_keys_are_owner_only(server: Server) -> None:
    for key in Path(server.folder / "pki").glob("*.key"):
        assert key.stat().st_mode & 0o777 == 0o600, key
