"""Why the API server could not be reached, in a few words a person reads (``connection refused``, ``its name
does not resolve``, ``TLS handshake failed: ...``) instead of urllib3's ``HTTPSConnectionPool(...): Max retries
exceeded ... (Caused by NewConnectionError(...))``, and the way out."""

from __future__ import annotations

import errno
import socket
import ssl

import urllib3

_ERRNO = {errno.ECONNREFUSED: "connection refused (is the API server running, and is this its address?)",
          errno.ECONNRESET: "connection reset", errno.EHOSTUNREACH: "no route to the host",
          errno.ENETUNREACH: "the network is unreachable", errno.ETIMEDOUT: "connection timed out"}


def _cause(exc: BaseException) -> BaseException:
    """The innermost error urllib3 wrapped (its retries wrap the last one in ``MaxRetryError``)."""
    seen: set[int] = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        inner = getattr(exc, "reason", None) if isinstance(exc, urllib3.exceptions.MaxRetryError) else None
        inner = inner or exc.__cause__ or exc.__context__
        if not isinstance(inner, BaseException):
            break
        exc = inner
    return exc


def reason(exc: BaseException) -> str:
    """``exc`` (a connection failure of the Kubernetes client) in a few words."""
    wrapped = exc.reason if isinstance(exc, urllib3.exceptions.MaxRetryError) else exc
    if isinstance(wrapped, urllib3.exceptions.NameResolutionError):
        return "its host name does not resolve"
    timeout = (urllib3.exceptions.ConnectTimeoutError, socket.timeout, TimeoutError)
    if isinstance(wrapped, timeout) and not isinstance(wrapped, urllib3.exceptions.NewConnectionError):
        return "connection timed out"
    if isinstance(wrapped, urllib3.exceptions.ReadTimeoutError):
        return "no answer in time (read timed out)"
    inner = _cause(exc)
    if isinstance(inner, (ssl.SSLError, urllib3.exceptions.SSLError)):
        text = getattr(inner, "reason", None) or str(inner)
        return f"TLS handshake failed ({text}; is certificate-authority-data the cluster's CA?)"
    if isinstance(inner, socket.gaierror):
        return "its host name does not resolve"
    if isinstance(inner, OSError) and inner.errno in _ERRNO:
        return _ERRNO[inner.errno]
    if isinstance(wrapped, urllib3.exceptions.ProtocolError):
        return "the connection broke off (connection reset)"
    text = str(inner) or type(inner).__name__
    return text if len(text) <= 200 else text[:200] + "..."


def unreachable(exc: BaseException, server: str | None) -> str:
    """``cannot reach the API server at URL: connection refused ...``."""
    at = f" at {server}" if server else ""
    return f"cannot reach the API server{at}: {reason(exc)}"
