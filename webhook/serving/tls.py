"""TLS on the serving port: 1.2 minimum with forward-secret AEAD ciphers, and the certificate files reloaded
when they change on disk (kubelet updating a mounted Secret, cert-manager renewing it). With a client CA (the
extender's ``--client-ca-file``) a client certificate is asked for and, when one is sent, verified against it
(``CERT_OPTIONAL``: a probe without one still gets its answer; the app decides which paths need one, from
``PEER_VERIFIED`` in the WSGI environ)."""

from __future__ import annotations

import logging
import os
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any

from webhook.serving.metrics import record_certificate_expiry

CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20:!aNULL:!eNULL:!MD5:!DSS:!RC4:!3DES"
LOG = logging.getLogger("qos_guard.server")
PEER_VERIFIED = "qos_guard.peer_verified"  # environ key: True when the client sent a certificate the CA verified


def server_context(cert: str, key: str, client_ca: str | None = None) -> ssl.SSLContext:
    """TLS 1.2+ with forward-secret AEAD ciphers only; the certificate's expiry goes to its metric. With
    ``client_ca``, a client certificate is requested and verified against it when sent."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers(CIPHERS)
    ctx.options |= ssl.OP_NO_COMPRESSION | ssl.OP_CIPHER_SERVER_PREFERENCE
    ctx.load_cert_chain(certfile=cert, keyfile=key)
    if client_ca:
        ctx.load_verify_locations(cafile=client_ca)
        ctx.verify_mode = ssl.CERT_OPTIONAL
    record_certificate_expiry(cert)
    return ctx


class ReloadingContext:
    """gunicorn's ``ssl_context`` hook, called for every new connection: it hands out a context built
    from the files on disk, rebuilt (at most once a second) when they change. A half-written pair keeps the
    old context."""

    def __init__(self, cert: str, key: str, interval: float = 1.0, client_ca: str | None = None) -> None:
        self.cert, self.key, self.interval, self.client_ca = cert, key, interval, client_ca or None
        self._lock = threading.Lock()
        self._stamp: tuple[int, ...] | None = None
        self._context: ssl.SSLContext | None = None
        self._checked = 0.0

    def _files_stamp(self) -> tuple[int, ...]:
        stamp: tuple[int, ...] = ()
        for path in (self.cert, self.key) + ((self.client_ca,) if self.client_ca else ()):
            found = os.stat(path)
            stamp += (found.st_mtime_ns, found.st_size, found.st_ino)
        return stamp

    def current(self) -> ssl.SSLContext:
        now = time.monotonic()
        if self._context is not None and now - self._checked < self.interval:
            return self._context
        with self._lock:
            self._checked = now
            try:
                stamp = self._files_stamp()
                if stamp != self._stamp or self._context is None:
                    self._context = server_context(self.cert, self.key, self.client_ca)
                    if self._stamp is not None:
                        LOG.warning('{"event": "certificate reloaded", "cert": "%s"}', self.cert)
                    self._stamp = stamp
            except (OSError, ssl.SSLError) as exc:
                if self._context is None:
                    raise
                LOG.warning('{"event": "certificate reload failed, keeping the old one", "error": "%s"}', exc)
            return self._context

    def __call__(self, conf: Any, default_factory: Callable[[], ssl.SSLContext]) -> ssl.SSLContext:
        return self.current()
