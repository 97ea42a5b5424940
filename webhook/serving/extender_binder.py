"""The extender's ``/bind``: the Binding it POSTs to the API server, as kube-scheduler's DefaultBinder.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import quote

MAX_MESSAGE = 1024  # of the API server's refusal, in the answer to kube-scheduler and the log


class ApiBinder:
    """The Binding POST (``pods/binding``), as kube-scheduler's DefaultBinder makes it; its error text, or ""."""

    def __init__(self, kubeconfig: str | None) -> None:
        from webhook.cluster.client import _api_client

        self._api = _api_client(kubeconfig)

    def __call__(self, namespace: str, name: str, uid: str, node: str) -> str:
        from webhook.cluster.client import ClusterError, call, decode_body

        # parse_binding let only Kubernetes names through; escaped all the same, so that no input can make another
        # path (a '/', '..', '?' or '#' in a name would).
        path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}/binding"
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": namespace,
                                                                    **({"uid": uid} if uid else {})},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        try:
            response = call(self._api, "POST", path, [], {"Content-Type": "application/json",
                                                          "Accept": "application/json"}, (10, 30), body)
            try:
                data = response.response.read(1 << 20)
            finally:
                response.response.release_conn()
            if response.status in (200, 201):
                return ""
            decoded = decode_body("POST", path, response.status, data)
            message = decoded.get("message", "") if isinstance(decoded, Mapping) else ""
            message = message if len(message) <= MAX_MESSAGE else message[:MAX_MESSAGE] + "... (cut)"
            return f"binding {namespace}/{name} to {node}: HTTP {response.status} {message}".strip()
        except ClusterError as exc:
            return f"binding {namespace}/{name} to {node}: {exc}"
