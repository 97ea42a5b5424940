"""Reading a kubelet's configuration: ``qos-guard nodes`` through the API server
(``GET /api/v1/nodes/NAME/proxy/configz``), the agent from its own node's kubelet (``KubeletConfigz``).

Through the API server, the API server authorizes ``get`` on ``nodes/proxy`` for the caller (its node proxy knows
no finer subresource), then asks the kubelet with its own client credentials. kubelet itself, with
``KubeletFineGrainedAuthz`` (beta and on in v1.33-v1.35, GA in v1.36), asks the API server (SubjectAccessReview)
whether the caller may ``get`` ``nodes/configz`` and, failing that, ``nodes/proxy``
(k8s.io/kubernetes ``pkg/kubelet/server/auth.go`` ``GetRequestAttributes``): so the agent, which must never hold
``nodes/proxy`` (kubelet authorizes ``exec`` and ``attach`` upgrades as a ``get`` on it), reads its kubelet's port
directly with its ServiceAccount token, and ``nodes/configz`` is all it needs. A node whose configuration cannot be
read is reported with the reason; the others are still read. What the document means is the pure
``webhook.core.kubeletpinning``'s to say.
"""

from __future__ import annotations

import json
import ssl
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import urllib3

from webhook.cluster.client import ClusterError, Lister
from webhook.core.kubeletpinning import ConfigzError, KubeletPinning, read_configz

# A kubelet's configz is about 5 KiB; anything near this is not one.
MAX_CONFIGZ_BYTES = 1 << 20
# Nodes read at once: each read is one proxied request; a node that does not answer holds one slot until the
# API server gives up on it, so a few slow nodes do not serialise a large cluster.
PARALLEL = 8


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """What the Node object says: its labels, kubelet version and readiness."""

    name: str
    labels: dict[str, str] = field(default_factory=dict)
    kubelet_version: str = ""
    ready: bool | None = None

    @classmethod
    def from_object(cls, obj: dict[str, Any]) -> NodeInfo:
        meta, status = obj.get("metadata") or {}, obj.get("status") or {}
        ready = None
        for condition in status.get("conditions") or []:
            if isinstance(condition, dict) and condition.get("type") == "Ready":
                ready = condition.get("status") == "True"
        labels = meta.get("labels") or {}
        return cls(str(meta.get("name", "")), {str(k): str(v) for k, v in labels.items()},
                   str((status.get("nodeInfo") or {}).get("kubeletVersion", "")), ready)


@dataclass(frozen=True, slots=True)
class NodeConfig:
    """One node and its kubelet's pinning settings, or why they could not be read."""

    node: NodeInfo
    pinning: KubeletPinning | None = None
    error: str | None = None


def _message(body: bytes) -> str:
    """The reason in an error reply: a ``Status`` object's message, else the start of the text."""
    try:
        decoded = json.loads(body)
        if isinstance(decoded, dict) and isinstance(decoded.get("message"), str):
            return str(decoded["message"])[:300]
    except (ValueError, RecursionError):
        pass
    return body[:300].decode("utf-8", "replace").strip()


def _refusal(status: int, body: bytes, ready: bool | None) -> str:
    reason = _message(body)
    if status == 401:
        return f"unauthorized (HTTP 401): {reason}; the kubeconfig's credentials were refused"
    if status == 403:
        return (f"forbidden (HTTP 403): {reason}; reading kubelet's configuration needs get on nodes/proxy "
                "(the ClusterRole in docs/howto/nodes.md)")
    if status == 404:
        return (f"not found (HTTP 404): {reason}; kubelet serves /configz only with enableDebuggingHandlers: "
                "true (its default)")
    hint = "; the node is NotReady" if ready is False else "; is kubelet running and reachable from the API server?"
    return f"the API server could not read it from kubelet (HTTP {status}): {reason}{hint}"


class NodeReader:
    """Nodes and their kubelets' configurations, through one API client."""

    def __init__(self, kubeconfig: str | None = None, context: str | None = None) -> None:
        self._lister = Lister(kubeconfig, context=context)

    def select(self, selector: str | None) -> list[NodeInfo]:
        """Every node matching ``selector`` (all without one), by name. Raises ``ClusterError``."""
        found = [NodeInfo.from_object(obj) for obj in self._lister.list_objects("/api/v1/nodes", selector)]
        return sorted(found, key=lambda n: n.name)

    def get(self, name: str) -> NodeInfo | str:
        """The named node, or why it cannot be had (not found, forbidden). Raises ``ClusterError`` when the
        API server cannot be reached."""
        status, body = self._lister.get_raw(f"/api/v1/nodes/{quote(name, safe='')}", MAX_CONFIGZ_BYTES)
        if status != 200:
            return f"cannot get the Node (HTTP {status}): {_message(body)}"
        try:
            obj = json.loads(body)
        except (ValueError, RecursionError):
            return "the API server's reply is not a Node"
        return NodeInfo.from_object(obj) if isinstance(obj, dict) else "the API server's reply is not a Node"

    def configz(self, node: NodeInfo) -> NodeConfig:
        path = f"/api/v1/nodes/{quote(node.name, safe='')}/proxy/configz"
        try:
            status, body = self._lister.get_raw(path, MAX_CONFIGZ_BYTES, timeout=(10, 30))
        except ClusterError as exc:
            return NodeConfig(node, error=f"GET {path}: {exc}")
        if status != 200:
            return NodeConfig(node, error=f"cannot read kubelet's configuration: {_refusal(status, body, node.ready)}")
        if len(body) > MAX_CONFIGZ_BYTES:
            return NodeConfig(node, error=f"kubelet's configz reply is over {MAX_CONFIGZ_BYTES >> 20} MiB: not a "
                                          "kubelet configuration")
        try:
            return NodeConfig(node, pinning=read_configz(body))
        except ConfigzError as exc:
            return NodeConfig(node, error=f"malformed configz reply: {exc}")

    def read(self, nodes: Sequence[NodeInfo], parallel: int = PARALLEL) -> list[NodeConfig]:
        """``configz`` of every node, in the order given, ``parallel`` at a time."""
        if not nodes:
            return []
        with ThreadPoolExecutor(max_workers=max(1, min(parallel, len(nodes)))) as pool:
            return list(pool.map(self.configz, nodes))


KUBELET_PORT = 10250  # kubelet's authenticated port (KubeletConfiguration port)
TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
# Where the agent is told to turn when its kubelet cannot be read: the settings it would have read.
GIVE_SETTINGS = ("set the chart's agent.topologyManagerPolicy and agent.topologyManagerScope to this node's kubelet "
                 "settings (the agent's --topology-manager-policy and --topology-manager-scope)")


def _host(address: str) -> str:
    """An address as a URL's host: an IPv6 one in brackets."""
    return f"[{address}]" if ":" in address and not address.startswith("[") else address


class KubeletConfigz:
    """The agent's own kubelet's ``/configz`` on its authenticated port (``https://ADDRESS:10250/configz``), with
    the agent's ServiceAccount token (read again for each request: kubelet rotates it; none outside a Pod, where the
    request is anonymous). kubelet authenticates the
    token (TokenReview: ``authentication.webhook.enabled``) and authorizes ``get`` on ``nodes/configz``
    (SubjectAccessReview: ``authorization.mode: Webhook``).

    kubelet's serving certificate is self-signed unless ``serverTLSBootstrap`` is on, so it is verified only
    against ``ca`` when given. ``address`` is the Pod's own node (the downward API's ``status.hostIP``): a
    connection to it does not leave the node, and kubelet is the one that issued the token in the first place."""

    def __init__(self, address: str, port: int = KUBELET_PORT, token: Path = TOKEN, ca: Path | None = None,
                 timeout: float = 10.0) -> None:
        self.url = f"https://{_host(address)}:{port}/configz"
        self._token, self._timeout = token, timeout
        if ca is not None:
            self._pool = urllib3.PoolManager(cert_reqs=ssl.CERT_REQUIRED, ca_certs=str(ca), retries=False)
        else:
            self._pool = urllib3.PoolManager(cert_reqs=ssl.CERT_NONE, assert_hostname=False, retries=False)

    def read(self) -> KubeletPinning | str:
        """kubelet's pinning settings, or why they cannot be had, with the way out."""
        headers: dict[str, str] = {}
        try:
            headers["Authorization"] = f"Bearer {self._token.read_text().strip()}"
        except FileNotFoundError:
            pass  # not in a Pod (a host process): asked anonymously, which a kubelet allows only if told to
        except OSError as exc:
            return f"cannot read the ServiceAccount token to show kubelet ({exc}); {GIVE_SETTINGS}"
        try:
            with warnings.catch_warnings():  # unverified only without ca, as said above: no warning per read
                warnings.simplefilter("ignore", urllib3.exceptions.InsecureRequestWarning)
                reply = self._pool.request("GET", self.url, headers=headers,
                                           timeout=self._timeout, preload_content=False, redirect=False)
            body = reply.read(MAX_CONFIGZ_BYTES + 1)
            reply.release_conn()
        except (OSError, urllib3.exceptions.HTTPError) as exc:
            return f"cannot reach kubelet at {self.url}: {exc}; {GIVE_SETTINGS}"
        if reply.status == 401:
            who = "the ServiceAccount token" if headers else f"an anonymous request (no token at {self._token})"
            return (f"kubelet at {self.url} did not accept {who} (HTTP 401): its authentication.webhook.enabled is "
                    f"off, or the token is not the agent's; {GIVE_SETTINGS}")
        if reply.status == 403:
            return (f"kubelet at {self.url} refused (HTTP 403: {_message(body)[:200]}): it needs get on "
                    "nodes/configz (the chart grants it) and kubelet's fine-grained authorization "
                    f"(KubeletFineGrainedAuthz, on from Kubernetes 1.33; never nodes/proxy); {GIVE_SETTINGS}")
        if reply.status != 200:
            return f"kubelet at {self.url} answered HTTP {reply.status}: {_message(body)[:200]}; {GIVE_SETTINGS}"
        if len(body) > MAX_CONFIGZ_BYTES:
            return f"kubelet's configz reply is over {MAX_CONFIGZ_BYTES >> 20} MiB: not a kubelet configuration"
        try:
            return read_configz(body)
        except ConfigzError as exc:
            return f"malformed configz reply from {self.url}: {exc}; {GIVE_SETTINGS}"
