"""What ``qos-guard serve`` is told (``ServeOptions``), the bind addresses it is given, and the error for
what is wrong with them before anything listens (``ServeError``: exit 2)."""

from __future__ import annotations

import socket
from dataclasses import dataclass


class ServeError(RuntimeError):
    """A problem found before serving: the program exits 2 with this message."""


@dataclass(frozen=True)
class ServeOptions:
    bind: str = "0.0.0.0:8443"
    metrics_bind: str = "0.0.0.0:8080"
    workers: int = 2
    connections: int = 1000
    config: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    graceful_timeout: int = 30
    # policy.numa: auto reads the cluster through this kubeconfig (default: in-cluster, else $KUBECONFIG).
    kubeconfig: str | None = None


def split_bind(bind: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::]:8443`` too) as a host and a port."""
    host, _, port = bind.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ServeError(f"bind address {bind!r} is not HOST:PORT")
    return host.strip("[]"), int(port)


def check_port_free(bind: str, flag: str) -> None:
    """Refuse a bind address nothing can listen on now, naming the flag (rather than a gunicorn retry loop)."""
    host, port = split_bind(bind)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise ServeError(f"{flag} {bind}: cannot listen there ({exc.strerror})") from None
