"""Every metric the server exports, defined here: admission requests, violations and answer time, 5xx
answers, and the serving certificate's expiry; and the registry that merges the workers' values.

prometheus-client picks its multiprocess value store when it is first imported, and ``serve`` sets
``PROMETHEUS_MULTIPROC_DIR`` only after checking its options and files: so nothing here imports it at module
level, and the certificate expiry is recorded only once either has happened (not by the start-up check of the
files). With several workers the most recent expiry wins (``mostrecent``), so a renewed certificate replaces
the old value even when it expires earlier: an alert can fire before the API server starts failing TLS
handshakes (with ``failurePolicy: Fail`` that stops Pod creation in every enforced namespace).
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from cryptography import x509

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

EXPIRY_METRIC = "qos_guard_certificate_expiry_timestamp_seconds"
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)


@dataclass(frozen=True)
class Metrics:
    """Bounded-cardinality metrics: labels are paths, kinds, operations, decisions, rule ids and status codes."""

    requests: Counter
    violations: Counter
    latency: Histogram
    server_errors: Counter
    topology: TopologyMetrics | None = None

    @classmethod
    def create(cls, registry: CollectorRegistry | None = None) -> Metrics:
        from prometheus_client import Counter, Histogram

        kw: dict[str, Any] = {"registry": registry} if registry is not None else {}
        metrics = cls(
            Counter("qos_guard_admission_requests", "Admission requests answered",
                    ["path", "kind", "operation", "decision", "dry_run"], **kw),
            Counter("qos_guard_violations", "Rule violations found in admission requests", ["rule"], **kw),
            Histogram("qos_guard_admission_duration_seconds", "Time to answer an admission request", ["path"],
                      buckets=LATENCY_BUCKETS, **kw),
            Counter("qos_guard_http_server_errors", "Answers with a 5xx status; there should be none", ["code"],
                    **kw),
        )
        metrics.server_errors.labels("500")  # exported at 0, so an alert on it has a series from the start
        return metrics

    def with_topology(self, registry: CollectorRegistry | None = None) -> Metrics:
        """These metrics and those of the ``policy.numa: auto`` topology cache."""
        return replace(self, topology=TopologyMetrics.create(registry))


@dataclass(frozen=True)
class TopologyMetrics:
    """``policy.numa: auto``: whether each worker's cache holds a usable topology, and how much of it. In
    multiprocess mode ``available`` is the lowest live worker's, ``nodes`` and ``topologies`` the highest."""

    available: Gauge
    nodes: Gauge
    topologies: Gauge

    @classmethod
    def create(cls, registry: CollectorRegistry | None = None) -> TopologyMetrics:
        from prometheus_client import Gauge

        kw: dict[str, Any] = {"registry": registry} if registry is not None else {}
        return cls(
            Gauge("qos_guard_numa_topology_available", "1 when nodes and NodeResourceTopology objects are read and "
                  "current (policy.numa: auto); 0 when missing, refused or unreachable (numa-unfit then judges no "
                  "node; the log says why)", multiprocess_mode="livemin", **kw),
            Gauge("qos_guard_numa_topology_nodes", "Nodes known to the topology cache", multiprocess_mode="livemax",
                  **kw),
            Gauge("qos_guard_numa_topology_objects", "NodeResourceTopology objects held by the topology cache",
                  multiprocess_mode="livemax", **kw),
        )


def multiprocess_registry() -> CollectorRegistry:
    """All gunicorn workers' metrics, merged (prometheus-client multiprocess mode)."""
    from prometheus_client import CollectorRegistry, multiprocess

    registry = CollectorRegistry()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    return registry


@functools.cache
def _expiry_gauge() -> Any:
    from prometheus_client import Gauge

    return Gauge(EXPIRY_METRIC, "Unix time at which the serving certificate stops being valid (notAfter)",
                 multiprocess_mode="mostrecent")


@functools.cache
def log_lines_dropped() -> Any:
    """Log lines a worker dropped because its log's reader did not keep up (a full pipe): admission never waits
    for the log. Exported at 0 from the start."""
    from prometheus_client import Counter

    counter = Counter("qos_guard_log_lines_dropped", "Log lines dropped while the log's reader did not keep up "
                      "(admission does not wait for the log); there should be none")
    counter.inc(0)
    return counter


def certificate_expiry(cert_path: str) -> float:
    """``notAfter`` of the first certificate in the PEM file ``cert_path``, as Unix time."""
    with open(cert_path, "rb") as f:
        cert = x509.load_pem_x509_certificate(f.read())
    return cert.not_valid_after_utc.timestamp()


def record_certificate_expiry(cert_path: str) -> None:
    """Set the expiry gauge from ``cert_path`` (wherever a worker loads the certificate: its first load and
    every reload); a file that cannot be read is logged, never an error for serving (the TLS context load that
    comes with it reports that itself)."""
    if "prometheus_client" not in sys.modules and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return
    try:
        _expiry_gauge().set(certificate_expiry(cert_path))
    except (OSError, ValueError) as exc:
        logging.getLogger("qos_guard.server").warning("certificate expiry not recorded for %s: %s", cert_path, exc)
