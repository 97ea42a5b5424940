"""``qos-guard certs``, run as the real command: a folder or a name a certificate cannot carry is refused with
what and where, IPs, DNS names and wildcards land in the SAN, and an existing CA is never replaced silently
(every caBundle already deployed names it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography import x509

from tests.cli.conftest import Run, refused


def test_certs_output_dir_that_is_a_file_or_cannot_be_made(qos_guard: Run, tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("mine\n")
    refused(qos_guard("certs", "--output-dir", str(afile)), f"--output-dir {afile} is not a folder")
    assert afile.read_text() == "mine\n"
    refused(qos_guard("certs", "--output-dir", str(afile / "sub")), str(afile), "--output-dir")
    refused(qos_guard("certs", "--output-dir", "/proc/nope"), "/proc/nope", "No such file or directory")


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
    refused(out, f"{flag} {value!r} is {what}")
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
    refused(again, f"{tmp_path / 'ca.crt'} exists", "caBundle", "--renew", "--force")
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
    refused(qos_guard("certs", "--output-dir", str(tmp_path), "--renew"), "--renew needs the CA's key")

