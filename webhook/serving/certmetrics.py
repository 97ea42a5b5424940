"""The serving certificate's expiry as a metric, so an alert can fire before the API server starts failing
TLS handshakes (with ``failurePolicy: Fail`` that stops Pod creation in every enforced namespace).

``record_certificate_expiry`` is called wherever the server loads a certificate (``server.server_context``:
each worker's first load and every reload). prometheus-client picks its multiprocess value store when it is
first imported, and the server sets ``PROMETHEUS_MULTIPROC_DIR`` only after checking the files: so this module
imports it lazily, and records nothing while neither has happened (the start-up check of the files). With
several gunicorn workers the most recent value wins (``mostrecent``), so a renewed certificate replaces the old
expiry even when the new one expires earlier.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from typing import Any

from cryptography import x509

EXPIRY_METRIC = "qos_guard_certificate_expiry_timestamp_seconds"


@functools.cache
def _gauge() -> Any:
    from prometheus_client import Gauge

    return Gauge(EXPIRY_METRIC, "Unix time at which the serving certificate stops being valid (notAfter)",
                 multiprocess_mode="mostrecent")


def certificate_expiry(cert_path: str) -> float:
    """``notAfter`` of the first certificate in the PEM file ``cert_path``, as Unix time."""
    with open(cert_path, "rb") as f:
        cert = x509.load_pem_x509_certificate(f.read())
    return cert.not_valid_after_utc.timestamp()


def record_certificate_expiry(cert_path: str) -> None:
    """Set the gauge from ``cert_path``; a file that cannot be read is logged, never an error for serving
    (the TLS context load that comes with it reports that itself)."""
    if "prometheus_client" not in sys.modules and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return
    try:
        _gauge().set(certificate_expiry(cert_path))
    except (OSError, ValueError) as exc:
        logging.getLogger("qos_guard.server").warning("certificate expiry not recorded for %s: %s", cert_path, exc)
