"""Who may call it: the verbs change what the extender holds (the Pods a filter kept nodes for are waited for), so
they answer only a client that sent a certificate ``--client-ca-file`` verifies (kube-scheduler's
``extenders[].tlsConfig`` ``certFile``/``keyFile``), or, without a client CA, only on a loopback ``--bind``; other
requests get 403 naming the way out. ``GET /healthz`` and ``GET /readyz`` answer anyone (kubelet's probes send
no certificate): 200 while the worker is up, unless the app serves a ``/readyz`` of its own.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from webhook.extender.reservations import RESERVATION_TIMEOUT
from webhook.serving.options import ServeError, check_port_free, split_bind

PROBES = frozenset({"/healthz", "/readyz"})
LOOPBACK = ("127.0.0.1", "::1", "localhost")


@dataclass(frozen=True)
class ExtenderOptions:
    bind: str = "0.0.0.0:8444"
    plain: bool = False  # HTTP, for a scheduler on the same host (loopback) only
    cert_file: str | None = None
    key_file: str | None = None
    kubeconfig: str | None = None
    reservation_timeout: float = RESERVATION_TIMEOUT
    client_ca_file: str | None = None  # verifies the scheduler's client certificate; the verbs then need one


def guarded(app: Callable[..., Any], client_auth: bool, own_readyz: bool) -> Callable[..., Any]:
    """WSGI middleware: ``GET /readyz`` answers 200 (unless ``own_readyz``: the app serves it), and with
    ``client_auth`` every other path but the probes answers 403 to a client without a verified certificate."""
    from webhook.serving.tls import PEER_VERIFIED

    refusal = json.dumps({"error": "client certificate required", "reason": (
        "the extender's verbs answer only a client certificate --client-ca-file verifies: give the scheduler's "
        "extenders[].tlsConfig a certFile and keyFile that CA signed")}).encode()

    def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        path, method = environ.get("PATH_INFO"), environ.get("REQUEST_METHOD")
        if path in PROBES and method in ("GET", "HEAD"):
            if path == "/readyz" and not own_readyz:
                start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "3")])
                return [b"ok\n"]
            return app(environ, start_response)
        if client_auth and environ.get(PEER_VERIFIED) is not True:
            start_response("403 Forbidden", [("Content-Type", "application/json"),
                                              ("Content-Length", str(len(refusal)))])
            return [refusal]
        return app(environ, start_response)

    return wrapped


def check_options(opts: ExtenderOptions) -> None:
    """What is wrong before anything listens: exit 2 with the flag named."""
    host, _ = split_bind(opts.bind)
    if opts.plain and host not in LOOPBACK:
        raise ServeError(f"--plain serves without TLS: bind it to loopback (127.0.0.1), not {host}; or drop "
                         "--plain and give --cert-file and --key-file")
    if not opts.plain and not (opts.cert_file and opts.key_file):
        raise ServeError("--cert-file and --key-file are required (the scheduler's tlsConfig.caData names their "
                         "CA), or --plain on loopback")
    if opts.client_ca_file and opts.plain:
        raise ServeError("--client-ca-file verifies client certificates over TLS: drop --plain and give "
                         "--cert-file and --key-file, or drop --client-ca-file (--plain answers loopback only)")
    if not opts.client_ca_file and host not in LOOPBACK:
        raise ServeError(f"--bind {opts.bind}: filter would answer any client that reaches {host}; give "
                         "--client-ca-file (the CA of the scheduler's extenders[].tlsConfig certFile) so that only "
                         "the scheduler is answered, or bind to loopback (127.0.0.1) beside it")
    if opts.client_ca_file:
        import ssl

        try:
            ssl.create_default_context(cafile=opts.client_ca_file)
        except (OSError, ValueError, ssl.SSLError) as exc:
            raise ServeError(f"cannot use --client-ca-file {opts.client_ca_file}: {exc}") from None
    if opts.reservation_timeout <= 0:
        raise ServeError(f"--reservation-timeout {opts.reservation_timeout}: must be over 0 seconds")
    from webhook.cluster.kubeconfig import unusable  # imports no Kubernetes client: the workers import it first

    problem = unusable(opts.kubeconfig)  # before it says it serves: the worker would only fail to boot (exit 3)
    if problem is not None:
        raise ServeError(f"extender: it watches NodeResourceTopology objects and Pods: {problem}")
    if opts.cert_file and opts.key_file:
        from webhook.serving.tls import server_context

        try:
            server_context(opts.cert_file, opts.key_file)
        except (OSError, ValueError) as exc:
            raise ServeError(f"cannot use --cert-file {opts.cert_file} / --key-file {opts.key_file}: {exc}") from None
    check_port_free(opts.bind, "--bind")

