"""A real ``qos-guard extender`` (gunicorn, TLS) with ``--client-ca-file``, as the chart runs it, on a free
loopback port: who it answers, and its start-up refusals. Its kubeconfig names an API server that is not there,
so every node is unknown (kept): what is judged here is who may ask, not the answer."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests import waiting
from tests.serving import ROOT, free_port
from webhook.serving.certs import make_ca, write_bundle
from webhook.serving.extender import HUB_WORKER
from webhook.serving.extender_options import ExtenderOptions, check_options
from webhook.serving.options import ServeError

POD = {"metadata": {"name": "p", "namespace": "default", "uid": "u-1"},
       "spec": {"containers": [{"name": "app", "resources": {
           "limits": {"cpu": "4", "memory": "1Gi", "example.com/gpu": "1"},
           "requests": {"cpu": "4", "memory": "1Gi", "example.com/gpu": "1"}}}]}}


def client_pair(folder: Path, ca_key: ec.EllipticCurvePrivateKey, ca: x509.Certificate) -> tuple[str, str]:
    """A client certificate (clientAuth) the CA signed, as the chart's genSignedCert makes the scheduler's."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "qos-guard-numa")]))
            .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    (folder / "client.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / "client.key").write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                          serialization.PrivateFormat.PKCS8,
                                                          serialization.NoEncryption()))
    return str(folder / "client.crt"), str(folder / "client.key")


@dataclass
class Running:
    url: str
    ca: str
    client: tuple[str, str]
    stranger: tuple[str, str]  # a client certificate of a CA the extender does not trust
    log: Path | None = None  # its stdout and stderr


@pytest.fixture(scope="module")
def extender(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    folder = tmp_path_factory.mktemp("extender")
    serving = write_bundle(folder / "pki", ["localhost", "127.0.0.1"], 1, keep_ca_key=True)
    assert serving.ca_key is not None
    ca_key = serialization.load_pem_private_key(serving.ca_key.read_bytes(), None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    client = client_pair(folder / "pki", ca_key, x509.load_pem_x509_certificate(serving.ca.read_bytes()))
    other_key, other_ca = make_ca(1)
    (folder / "other").mkdir()
    stranger = client_pair(folder / "other", other_key, other_ca)
    kubeconfig = folder / "kubeconfig"  # an API server that is not there: the watches retry, nodes are unknown
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{free_port()}",
                                               "insecure-skip-tls-verify": True}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "t"}}]}))
    port = free_port()
    log = folder / "extender.log"
    proc = subprocess.Popen([sys.executable, "-m", "webhook.cli", "extender", f"--bind=127.0.0.1:{port}",
                             f"--cert-file={serving.cert}", f"--key-file={serving.key}",
                             f"--client-ca-file={serving.ca}", f"--kubeconfig={kubeconfig}"],
                            stdout=log.open("wb"), stderr=subprocess.STDOUT, cwd=ROOT)
    url = f"https://127.0.0.1:{port}"

    def up() -> bool:
        assert proc.poll() is None, log.read_text()[-3000:]
        try:
            return requests.get(url + "/healthz", verify=str(serving.ca), timeout=2).ok
        except requests.RequestException:
            return False

    try:
        waiting.eventually("the extender serving", up, within=60, every=0.2)
        yield Running(url, str(serving.ca), client, stranger, log)
    finally:
        proc.terminate()
        proc.wait(20)


def post(running: Running, verb: str, body: Any, cert: tuple[str, str] | None = None) -> requests.Response:
    return requests.post(f"{running.url}/{verb}", data=json.dumps(body), verify=running.ca, cert=cert, timeout=10,
                         headers={"Content-Type": "application/json"})


def test_the_probes_answer_without_a_certificate(extender: Running) -> None:
    """Kubelet's probes send no certificate: they are answered, not refused. This extender's API server is not
    there, so its view is not listed: /readyz says so (503 with the reason), the liveness probe is 200."""
    answer = requests.get(extender.url + "/healthz", verify=extender.ca, timeout=5)
    assert (answer.status_code, answer.text) == (200, "ok\n")
    ready = requests.get(extender.url + "/readyz", verify=extender.ca, timeout=5)
    assert ready.status_code == 503 and ready.text.startswith("not ready"), ready.text


@pytest.mark.parametrize("verb", ["filter", "prioritize"])
def test_the_verbs_refuse_a_client_without_a_certificate(extender: Running, verb: str) -> None:
    """From loopback too: with a client CA, where the request comes from is no credential."""
    answer = post(extender, verb, {"Pod": POD, "NodeNames": ["n1"]})
    assert answer.status_code == 403, answer.text
    assert answer.json() == {"error": "client certificate required", "reason": (
        "the extender's verbs answer only a client certificate --client-ca-file verifies: give the scheduler's "
        "extenders[].tlsConfig a certFile and keyFile that CA signed")}


def test_a_certificate_of_another_ca_is_refused_at_the_handshake(extender: Running) -> None:
    with pytest.raises(requests.exceptions.ConnectionError):
        post(extender, "filter", {"Pod": POD, "NodeNames": ["n1"]}, cert=extender.stranger)


def test_the_schedulers_certificate_is_answered_large_bodies_too(extender: Running) -> None:
    """A filter over 6,000 node names (about 80 KiB, over the 64 KiB the webhook's worker judges in an OS thread)
    is answered by the extender's worker in its hub."""
    # Its view is not listed yet (no API server): a filter is answered with the extender's error, which
    # kube-scheduler retries (an unlisted view never places NUMA-blind in its first minute), not refused.
    answer = post(extender, "filter", {"Pod": POD, "NodeNames": ["n1", "n2"]}, cert=extender.client)
    assert answer.status_code == 200 and answer.json().get("Error"), answer.text
    names = [f"node-{i:05d}" for i in range(6000)]
    body = {"Pod": POD, "NodeNames": names}
    assert len(json.dumps(body)) > 64 * 1024
    answer = post(extender, "filter", body, cert=extender.client)
    assert answer.status_code == 200 and answer.json().get("Error"), answer.text
    scores = post(extender, "prioritize", body, cert=extender.client)
    assert scores.status_code == 200 and len(scores.json()) == 6000


@pytest.mark.parametrize(("opts", "said"), [
    (ExtenderOptions(bind="0.0.0.0:8444", cert_file="c", key_file="k"),
     "--bind 0.0.0.0:8444: filter would answer any client that reaches 0.0.0.0; give --client-ca-file (the CA of "
     "the scheduler's extenders[].tlsConfig certFile) so that only the scheduler is answered, or bind to loopback "
     "(127.0.0.1) beside it"),
    (ExtenderOptions(bind="127.0.0.1:8444", plain=True, client_ca_file="ca.crt"),
     "--client-ca-file verifies client certificates over TLS: drop --plain and give --cert-file and --key-file, "
     "or drop --client-ca-file (--plain answers loopback only)"),
])
def test_an_unauthenticated_bind_is_refused_at_start(opts: ExtenderOptions, said: str) -> None:
    with pytest.raises(ServeError) as exc:
        check_options(opts)
    assert str(exc.value) == said


def test_an_unreadable_client_ca_is_refused_at_start(tmp_path: Path) -> None:
    pki = write_bundle(tmp_path, ["localhost"], 1, keep_ca_key=False)
    bad = tmp_path / "bad.crt"
    bad.write_text("not a certificate\n")
    with pytest.raises(ServeError, match=rf"^cannot use --client-ca-file {bad}: "):
        check_options(ExtenderOptions(bind="127.0.0.1:8444", cert_file=str(pki.cert), key_file=str(pki.key),
                                      client_ca_file=str(bad)))


def test_every_body_is_judged_in_the_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    """The watches are greenlets of the extender's one worker: a body judged in an OS thread would read their
    stores while they change them. The extender's worker offloads none (the webhook's offloads over 64 KiB)."""
    from webhook.serving import extender, server
    from webhook.serving.worker import OFFLOAD_BODY, GuardedWorker, HubWorker

    assert HubWorker.offload_body is None and GuardedWorker.offload_body == OFFLOAD_BODY == 64 * 1024
    seen: dict[str, Any] = {}

    class Captured:
        def __init__(self, options: dict[str, Any], factory: Any) -> None:
            seen.update(options)

        def run(self) -> None:
            pass

    monkeypatch.setattr(server, "_Gunicorn", Captured)
    monkeypatch.setattr(extender, "check_options", lambda opts: None)
    monkeypatch.setattr("webhook.serving.worker.hold_stop_signals_across_fork", lambda: None)
    extender.serve_extender(ExtenderOptions(bind="127.0.0.1:0", plain=True))
    assert seen["worker_class"] == HUB_WORKER == "webhook.serving.worker.HubWorker"


def test_a_bind_with_a_huge_pod_name_is_400_and_logs_no_huge_line(extender: Running, tmp_path: Path) -> None:
    """A /bind with a 2 MB PodName (from a client with the scheduler's certificate) wrote two
    4 MB log lines and would have been formatted into the Binding's URL. It is a 400 naming the field; no line of
    the log is over 4 KiB."""
    body = {"PodName": "p" * 2_000_000, "PodNamespace": "ns", "PodUID": "u", "Node": "n"}
    r = post(extender, "bind", body, cert=extender.client)
    assert r.status_code == 400 and r.json()["reason"].startswith("PodName: 'ppp"), r.text[:300]
    assert "(2000000 characters) is not a Pod name" in r.json()["reason"]
    r = post(extender, "bind", {"PodName": "p", "PodNamespace": "a/b", "PodUID": "u", "Node": "n"},
             cert=extender.client)
    assert r.status_code == 400 and r.json()["reason"].startswith("PodNamespace: 'a/b' is not a namespace name")
    assert extender.log is not None
    assert max(len(line) for line in extender.log.read_bytes().splitlines()) <= 4096
