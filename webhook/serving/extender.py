"""``qos-guard extender``: kube-scheduler's extender (``filterVerb: filter``, ``prioritizeVerb: prioritize``,
``bindVerb: bind``, ``nodeCacheCapable: true``) served by gunicorn with the webhook's worker (deadlines, TLS
reloaded from disk), or over plain HTTP on loopback (``--plain``).

Every body is judged in the worker's hub (``HubWorker``), large ones too: the watches are greenlets of the same
worker that change the stores between calls, and a call judged in an OS thread (as the webhook's worker judges
bodies over 64 KiB, which a filter over a few thousand node names is) would read them while they change.

The parts: the view kept from the watches and the reservations (``webhook.serving.extender_cache``), the
verbs' Flask app (``extender_app``), the Binding POST (``extender_binder``), the options, their checks and the
client-certificate middleware (``extender_options``); this module starts the worker.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from webhook import interpreter
from webhook.serving import decisionlog
from webhook.serving.extender_app import create_extender_app
from webhook.serving.extender_binder import ApiBinder
from webhook.serving.extender_cache import ExtenderCache
from webhook.serving.extender_options import ExtenderOptions, check_options, guarded

HUB_WORKER = "webhook.serving.worker.HubWorker"  # every body judged in the hub: see the module docstring


def worker_app(opts: ExtenderOptions) -> Any:
    """In the worker (after gevent patched ssl, before the Kubernetes client is imported): the cache, started."""
    from webhook.cluster.version import read_version, served
    from webhook.cluster.watch import ApiTransport
    from webhook.core.kubeversion import DEFAULT
    from webhook.serving.health import probe_route

    # The cluster's minor judges the Pods (their stored status.qosClass is kept whatever it is), said once.
    found = served(None, lambda: read_version(opts.kubeconfig))
    print(f"qos-guard extender: {found.says}", file=sys.stderr, flush=True)
    cache = ExtenderCache(ApiTransport(opts.kubeconfig), opts.reservation_timeout, ApiBinder(opts.kubeconfig),
                          found.kube or DEFAULT)
    cache.start()
    app = create_extender_app(cache.view, cache=cache)
    own_readyz = any(rule.rule == "/readyz" for rule in app.url_map.iter_rules())
    return probe_route(guarded(app, client_auth=bool(opts.client_ca_file), own_readyz=own_readyz))


def serve_extender(opts: ExtenderOptions) -> int:
    """Run until SIGTERM (gunicorn's graceful stop)."""
    interpreter.configure(batch=False)  # once, before the worker forks: it inherits it
    check_options(opts)
    from webhook.serving.server import _Gunicorn
    from webhook.serving.worker import hold_stop_signals_across_fork

    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    # urllib3 logs each of its retries ("Retrying (Retry(total=2 ...") and the caller logs the failure once
    # anyway, with the server's address: three lines per attempt said nothing more.
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
    options: dict[str, Any] = {
        "bind": [opts.bind], "workers": 1, "worker_class": HUB_WORKER, "worker_connections": 1000,
        "keepalive": 75, "graceful_timeout": 10, "timeout": 30, "accesslog": None, "errorlog": "-",
        "loglevel": "warning", "proc_name": "qos-guard-extender",
        # Log lines written by an OS thread, never by the worker's event loop (a stalled reader must not stop
        # scheduling); dropped and counted while the reader stalls.
        "post_worker_init": decisionlog.start_in_worker, "worker_exit": decisionlog.flush_in_worker,
        "when_ready": lambda server: print(f"qos-guard extender: serving {'http' if opts.plain else 'https'}://"
                                           f"{opts.bind} (filter, prioritize, bind; "
                                           f"{'client certificates required' if opts.client_ca_file else 'loopback'})",
                                           file=sys.stderr, flush=True),
    }
    if not opts.plain:
        from webhook.serving.tls import ReloadingContext

        options.update(certfile=opts.cert_file, keyfile=opts.key_file,
                       ssl_context=ReloadingContext(opts.cert_file or "", opts.key_file or "",
                                                    client_ca=opts.client_ca_file))
        if opts.client_ca_file:
            options["ca_certs"] = opts.client_ca_file
    hold_stop_signals_across_fork()
    _Gunicorn(options, lambda: worker_app(opts)).run()
    return 0
