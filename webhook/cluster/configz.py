"""Reading each node's kubelet configuration through the API server: ``GET /api/v1/nodes/NAME/proxy/configz``.

The API server authorizes ``get`` on ``nodes/proxy`` for the caller, then asks the kubelet with its own
client credentials (with ``KubeletFineGrainedAuthz``, GA in v1.36, kubelet checks ``nodes/configz`` for
that identity, which ``system:kubelet-api-admin`` holds). A node whose configuration cannot be read is
reported with the reason; the others are still read. What the document means is the pure
``webhook.core.kubeletpinning``'s to say.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

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
                "(the ClusterRole in the README)")
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
