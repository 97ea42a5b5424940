"""CA and serving certificates with ``cryptography``: the local development CA of ``serve`` and the
``certs`` command's CA plus serving certificate for an in-cluster Service."""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import os
import re
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from webhook.core.names import DNS1035_LABEL, namespace_problem

LOCAL_SANS = ("localhost", "127.0.0.1")


@dataclass(frozen=True)
class CertPaths:
    ca: Path
    cert: Path
    key: Path
    ca_key: Path | None = None


# Kubernetes' name rules (k8s.io/apimachinery/pkg/util/validation): a Service's name is a DNS-1035 label, a
# namespace's a DNS-1123 label; a certificate's other names are DNS names (RFC 1123, a wildcard first label
# allowed) or IP addresses.
_HOST_LABEL = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?")


class CertError(Exception):
    """A name the certificate cannot carry, or a folder it cannot be written to: the message says which."""


def check_names(service: str, namespace: str, extra: list[str]) -> None:
    """Refuse a name the API server could never reach the webhook by, before anything is written."""
    if len(service) > 63 or not DNS1035_LABEL.fullmatch(service):
        raise CertError(f"--service {service!r} is not a Service name (a DNS-1035 label: at most 63 lower-case "
                        "letters, digits and '-', starting with a letter and ending with a letter or digit)")
    problem = namespace_problem(namespace)
    if problem is not None:
        raise CertError(f"--namespace {problem}")
    for name in extra:
        try:
            ipaddress.ip_address(name)
            continue
        except ValueError:
            pass
        labels = name.removeprefix("*.").split(".")
        if len(name) > 253 or not all(len(label) <= 63 and _HOST_LABEL.fullmatch(label) for label in labels):
            raise CertError(f"--extra-san {name!r} is neither an IP address nor a DNS name (labels of letters, "
                            "digits and '-' joined by '.', each at most 63 characters, 253 in all; '*.' may "
                            "start it)")


def check_folder(folder: Path, replace: bool) -> None:
    """The folder ``write_bundle`` may write: a folder (or nothing yet), and no CA there unless ``replace``,
    since a new CA breaks every caBundle already made from the old one."""
    if folder.exists() and not folder.is_dir():
        raise CertError(f"--output-dir {folder} is not a folder; name a folder (it is made when missing)")
    present = [p for p in (folder / "ca.crt", folder / "ca.key") if p.exists()]
    if present and not replace:
        raise CertError(f"{present[0]} exists: a new CA would break every caBundle made from it (the webhook "
                        "configurations, a Secret given as the chart's existingSecret); pass --renew to issue a "
                        "new serving certificate from this CA, --force to replace the CA too, or another "
                        "--output-dir")


def service_sans(service: str, namespace: str) -> list[str]:
    """The DNS names the API server may use to reach a webhook Service."""
    return [service, f"{service}.{namespace}", f"{service}.{namespace}.svc",
            f"{service}.{namespace}.svc.cluster.local"]


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "qos-guard"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _san(names: list[str] | tuple[str, ...]) -> x509.SubjectAlternativeName:
    entries: list[x509.GeneralName] = []
    for name in names:
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            entries.append(x509.DNSName(name))
    return x509.SubjectAlternativeName(entries)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def make_ca(days: int) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("qos-guard CA")).issuer_name(_name("qos-guard CA"))
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def make_serving(ca_key: ec.EllipticCurvePrivateKey, ca_cert: x509.Certificate, names: list[str] | tuple[str, ...],
                 days: int) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(names[0])).issuer_name(ca_cert.subject)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_san(names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return key, cert


def _write(path: Path, data: bytes, private: bool) -> None:
    """Write atomically; private keys are created 0600 from the start, never world-readable."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(tmp, path)


def write_bundle(folder: Path, names: list[str] | tuple[str, ...], days: int, keep_ca_key: bool) -> CertPaths:
    """A fresh CA and a serving certificate for ``names`` under ``folder``."""
    ca_key, ca_cert = make_ca(days)
    key, cert = make_serving(ca_key, ca_cert, names, days)
    paths = CertPaths(folder / "ca.crt", folder / "tls.crt", folder / "tls.key",
                      folder / "ca.key" if keep_ca_key else None)
    _write(paths.ca, ca_cert.public_bytes(serialization.Encoding.PEM), private=False)
    if paths.ca_key is not None:
        _write(paths.ca_key, _pem_key(ca_key), private=True)
    _write(paths.key, _pem_key(key), private=True)
    _write(paths.cert, cert.public_bytes(serialization.Encoding.PEM), private=False)
    return paths


def reissue_serving(folder: Path, names: list[str] | tuple[str, ...], days: int) -> CertPaths:
    """A new serving key and certificate for ``names`` from the CA kept in ``folder`` (``write_bundle`` with
    ``keep_ca_key``): a renewal as cert-manager does one, the CA unchanged. The key is written first, so a
    server reloading between the two writes sees a pair that does not match and keeps its old one."""
    paths = CertPaths(folder / "ca.crt", folder / "tls.crt", folder / "tls.key", folder / "ca.key")
    assert paths.ca_key is not None
    ca_key = serialization.load_pem_private_key(paths.ca_key.read_bytes(), None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{paths.ca_key}: not an EC private key")
    ca_cert = x509.load_pem_x509_certificate(paths.ca.read_bytes())
    key, cert = make_serving(ca_key, ca_cert, names, days)
    _write(paths.key, _pem_key(key), private=True)
    _write(paths.cert, cert.public_bytes(serialization.Encoding.PEM), private=False)
    return paths


def usable(paths: CertPaths, names: list[str] | tuple[str, ...], margin_days: int = 1) -> bool:
    """True when the files exist, the certificate is valid for a while yet and covers ``names``."""
    try:
        cert = x509.load_pem_x509_certificate(paths.cert.read_bytes())
        x509.load_pem_x509_certificate(paths.ca.read_bytes())
        if not paths.key.is_file():
            return False
    except (OSError, ValueError):
        return False
    if cert.not_valid_after_utc < dt.datetime.now(dt.UTC) + dt.timedelta(days=margin_days):
        return False
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    present = {str(v) for v in sans.get_values_for_type(x509.DNSName)} | {
        str(v) for v in sans.get_values_for_type(x509.IPAddress)}
    return set(names) <= present


LOCAL_CA_DIR = Path("certs") / "localhost"  # serve's own folder, beside what `qos-guard certs` writes to certs/
LOCAL_MARK = "made-by-qos-guard-serve"


class ForeignFiles(Exception):
    """The local CA's folder holds files ``serve`` did not make: it never overwrites them."""


def ensure_local(folder: Path, days: int = 365) -> tuple[CertPaths, bool]:
    """The development CA and certificate for localhost in ``folder``, made once and reused; True when just
    made. Only a folder that is new, empty or marked as made here is written to: certificates someone else put
    there (``qos-guard certs --output-dir``, a real CA) are never replaced (``ForeignFiles``)."""
    paths = CertPaths(folder / "ca.crt", folder / "tls.crt", folder / "tls.key")
    mark = folder / LOCAL_MARK
    if usable(paths, LOCAL_SANS) and mark.is_file():
        return paths, False
    present = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
    if present and not mark.is_file():
        raise ForeignFiles(f"{folder} holds files qos-guard serve did not make ({', '.join(present[:5])}); "
                           "it never overwrites them: pass --cert-file and --key-file to serve them, or move them "
                           "away and the local development CA is made there")
    written = write_bundle(folder, LOCAL_SANS, days, keep_ca_key=False)
    _write(mark, b"The local development CA of `qos-guard serve` (make run): made and replaced by it alone.\n",
           private=False)
    return written, True


def ca_bundle(ca_path: Path) -> str:
    """The base64 caBundle a webhook configuration takes."""
    return base64.b64encode(ca_path.read_bytes()).decode("ascii")
