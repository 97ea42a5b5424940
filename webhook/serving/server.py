"""``qos-guard serve``: gunicorn run programmatically, with the TLS port served by ``GuardedWorker`` (gevent, a
deadline on every client step: worker.py; why: docs/reliability.md), certificates reloaded from disk (tls.py),
decision lines batched per worker (decisionlog.py), and metrics and health on a separate plain-HTTP port in
the master (health.py).

SIGTERM is gunicorn's graceful shutdown: workers stop accepting, finish in-flight requests, then exit.
"""

from __future__ import annotations

import gc
import logging
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gunicorn.app.base import BaseApplication

from webhook import interpreter
from webhook.core.config import Config
from webhook.core.kubeversion import Semantics
from webhook.manifests.configfile import load_config
from webhook.serving import decisionlog
from webhook.serving.certfiles import resolve_certificates
from webhook.serving.options import ServeError, ServeOptions, check_port_free, split_bind
from webhook.serving.tls import ReloadingContext

if TYPE_CHECKING:
    from flask import Flask

WORKER = "webhook.serving.worker.GuardedWorker"
Extend = Callable[["Flask"], None]  # adds routes to each worker's app (bench/serve.py: ``/noop``)


class _Gunicorn(BaseApplication):  # type: ignore[misc]
    def __init__(self, options: dict[str, Any], factory: Callable[[], Any]) -> None:
        self.options, self.factory = options, factory
        super().__init__()

    def load_config(self) -> None:
        # gunicorn 25.1+ opens a control socket (~/.gunicorn/gunicorn.ctl) through which a local process of the
        # same user resizes, reloads or stops the server: nothing here needs it, and under the chart's read-only
        # root filesystem it logs an ERROR at every start.
        self.cfg.set("control_socket_disable", True)
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        return self.factory()


def _start_health_server(opts: ServeOptions, ready: Callable[[], bool]) -> Any:
    """The plain port (health.py): bounded, in one thread of the master; readiness asks a worker."""
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    from webhook.serving.health import HealthServer, WorkerProbe
    from webhook.serving.metrics import multiprocess_registry

    host, port = split_bind(opts.metrics_bind)
    health = HealthServer(host, port, WorkerProbe(*split_bind(opts.bind)),
                          lambda: (generate_latest(multiprocess_registry()), CONTENT_TYPE_LATEST), ready)
    health.start()
    return health


# A worker's own descriptors besides its connections: the listener, logs, metric files, pipes, the watches of
# numa: auto and deviceClasses, with room to spare (an idle worker holds about 20).
WORKER_FILES = 128


def fit_open_files(connections: int) -> tuple[int, str | None]:
    """The connections a worker may hold: ``connections``, with the soft limit on open files raised to hold them
    (the workers inherit it), or fewer when the hard limit cannot; then the sentence saying so at start."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = connections + WORKER_FILES
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return connections, None
    target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    if target >= needed:
        return connections, None
    held = max(target - WORKER_FILES, 1)
    return held, (f"qos-guard: --connections {connections} needs {needed} open files per worker and this process may "
                  f"open {target} (its hard limit, ulimit -Hn): serving up to {held} connections per worker; raise "
                  "the limit (the container runtime's nofile) to serve more")


def cluster_reachable(kubeconfig: str | None) -> bool:
    """Whether there is a way to an API server: ``--kubeconfig``, in-cluster, or the usual files (by presence)."""
    if kubeconfig is not None:
        return os.path.isfile(kubeconfig)
    candidates = [*os.environ.get("KUBECONFIG", "").split(os.pathsep), os.path.expanduser("~/.kube/config")]
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) or any(c and os.path.isfile(c) for c in candidates)


def check_cluster_access(kubeconfig: str | None) -> None:
    """``policy.numa: auto``, ``policy.deviceClasses: true``, ``policy.operatorObjects: true`` and
    ``policy.draObjects: true`` need a way to the API server: in-cluster, ``--kubeconfig`` or the usual files.
    Checked by their presence only: the Kubernetes client (urllib3, ssl) must be first imported in the workers,
    after gevent patched ssl, or its TLS contexts recurse without end."""
    if kubeconfig is not None:
        if not os.path.isfile(kubeconfig):
            raise ServeError(f"--kubeconfig {kubeconfig}: no such file")
        return
    candidates = [*os.environ.get("KUBECONFIG", "").split(os.pathsep), os.path.expanduser("~/.kube/config")]
    if not os.environ.get("KUBERNETES_SERVICE_HOST") and not any(c and os.path.isfile(c) for c in candidates):
        raise ServeError("policy.numa: auto, policy.deviceClasses: true, policy.operatorObjects: true and "
                         "policy.draObjects: true read the cluster (NodeResourceTopology objects and node labels; "
                         "DeviceClasses; KServe's ServingRuntimes and LLMInferenceServiceConfigs; ResourceClaims, "
                         "templates and ResourceSlices): run in-cluster or pass --kubeconfig")


def kubernetes_of(config: Config, kubeconfig: str | None) -> Semantics | None:
    """The API server's minor, asked once per worker (after gevent patched ssl: see ``check_cluster_access``)
    where there is a way to it, and the log line saying which minor judges; None: ``kubernetesVersion`` or the
    newest judges (no cluster to ask, e.g. ``make run`` on a laptop)."""
    from webhook.cluster.client import ClusterError
    from webhook.cluster.version import read_version, served

    def read() -> dict[str, object]:
        if not cluster_reachable(kubeconfig):
            raise ClusterError("no kubeconfig, and not running in a cluster")
        return read_version(kubeconfig)

    found = served(config.kubernetes_version, read)
    logging.getLogger("qos_guard.server").info("qos-guard: %s", found.says)
    return found.kube


def worker_app(config: Config, own_namespace: str | None, extend: Extend | None = None,
               kubeconfig: str | None = None) -> Any:
    """In each worker: the Flask app behind the readiness probe route, 5xx answers counted; with
    ``policy.numa: auto``, the worker's topology cache, with ``policy.deviceClasses: true`` its DeviceClass cache,
    with ``policy.operatorObjects: true`` the cache of KServe's runtimes and configs, with ``policy.draObjects:
    true`` that of the DRA claims and slices (watches, greenlets in the gevent worker)."""
    from webhook.serving.app import create_app
    from webhook.serving.health import probe_route
    from webhook.serving.metrics import Metrics

    metrics = Metrics.create()
    snapshot = None
    if config.numa_auto:
        from webhook.serving.topologycache import start_topology_cache

        metrics = metrics.with_topology()
        snapshot = start_topology_cache(kubeconfig, metrics.topology)
    classes = None
    if config.policy.device_classes:
        from webhook.serving.deviceclass_startup import start_device_class_cache

        classes = start_device_class_cache(kubeconfig)
    related = None
    if config.policy.operator_objects:
        from webhook.serving.operatorobjects import start_related_cache

        related = start_related_cache(kubeconfig, config.policy.kserve_namespace)
    dra = None
    if config.policy.dra_objects:
        from webhook.serving.draobjects import start_dra_cache

        dra = start_dra_cache(kubeconfig)
    app = create_app(config, metrics, own_namespace, snapshot, classes, kubernetes_of(config, kubeconfig), related,
                     dra)
    # What the worker holds from now on (modules, the Kubernetes client's thousands of classes with numa: auto)
    # lives as long as it does: out of the cyclic collector's full scans, which a request's garbage triggers.
    gc.freeze()
    if extend is not None:
        extend(app)
    return probe_route(app, lambda code: metrics.server_errors.labels(code).inc())


def serve(opts: ServeOptions, extend: Extend | None = None, gunicorn: Mapping[str, Any] | None = None) -> int:
    """Run until SIGTERM/SIGINT; gunicorn's arbiter ends the process itself when it stops. ``extend`` and the
    ``gunicorn`` settings laid over ours are for bench/ (a no-op route, the gthread worker to compare with)."""
    interpreter.configure(batch=False)  # once, before the workers fork: they inherit it (bench/ starts here)
    config = load_config(opts.config)  # ConfigError: exit 2 before anything listens
    if config.numa_auto or config.policy.device_classes or config.policy.operator_objects or \
            config.policy.dra_objects:
        check_cluster_access(opts.kubeconfig)
    check_port_free(opts.bind, "--bind")
    check_port_free(opts.metrics_bind, "--metrics-bind")
    connections, limited = fit_open_files(opts.connections)
    if limited is not None:
        print(limited, file=sys.stderr, flush=True)
    cert, key, ca = resolve_certificates(opts, Path.cwd())
    # prometheus-client chooses its multiprocess value store when first imported: set the folder first.
    metrics_dir = tempfile.mkdtemp(prefix="qos-guard-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
    from prometheus_client import multiprocess

    ready = threading.Event()
    health: list[Any] = []
    own_namespace = os.environ.get("POD_NAMESPACE") or None
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    # urllib3 logs each of its retries ("Retrying (Retry(total=2 ...") and the caller logs the failure once
    # anyway, with the server's address: three lines per attempt said nothing more.
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)

    def when_ready(server: Any) -> None:
        health.append(_start_health_server(opts, ready.is_set))
        ready.set()
        host, port = split_bind(opts.bind)
        shown = "localhost" if host in ("0.0.0.0", "::", "127.0.0.1") else host
        hint = f"--cacert {ca} " if ca else ""
        print(f"qos-guard: serving https://{shown}:{port} (metrics http://{opts.metrics_bind}/metrics); try:\n"
              f"  curl {hint}https://{shown}:{port}/validate -H 'Content-Type: application/json' "
              "--data @examples/admission-review.json", file=sys.stderr, flush=True)

    def post_fork(server: Any, worker: Any) -> None:
        for h in health:
            h.close_in_child()

    def child_exit(server: Any, worker: Any) -> None:
        multiprocess.mark_process_dead(worker.pid)  # type: ignore[no-untyped-call]

    options: dict[str, Any] = {
        "bind": [opts.bind],
        "workers": opts.workers,
        "worker_class": WORKER,
        "worker_connections": connections,
        "keepalive": 75,
        "certfile": cert,
        "keyfile": key,
        "ssl_context": ReloadingContext(cert, key),
        "graceful_timeout": opts.graceful_timeout,
        "timeout": 30,
        "accesslog": None,
        "errorlog": "-",
        "loglevel": "warning",
        "when_ready": when_ready,
        "child_exit": child_exit,
        "post_fork": post_fork,
        "post_worker_init": decisionlog.start_in_worker,
        "worker_exit": decisionlog.flush_in_worker,
        "proc_name": "qos-guard",
        **(gunicorn or {}),
    }
    if options["worker_class"] == WORKER:  # it unblocks them once its handlers are in (bench may run gthread)
        from webhook.serving.worker import hold_stop_signals_across_fork

        hold_stop_signals_across_fork()
    master = os.getpid()
    try:
        _Gunicorn(options, lambda: worker_app(config, own_namespace, extend, opts.kubeconfig)).run()
    finally:
        # A worker's exit (sys.exit) unwinds through this frame too, forked with it: only the master owns the
        # folder; removed by a worker, its replacement could not boot and the whole server halted.
        if os.getpid() == master:
            shutil.rmtree(metrics_dir, ignore_errors=True)
    return 0


__all__ = ["ServeError", "ServeOptions", "serve"]
