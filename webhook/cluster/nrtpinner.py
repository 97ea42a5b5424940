"""Who pins each node's CPUs as the node agents published it (``cpuPinner`` in their NodeResourceTopology objects,
``webhook.core.cpupinner``), read once for ``qos-guard nodes``, ``check --kubeconfig`` and ``audit``: a source
used where theirs (each kubelet's configz, the ResourceSlices) cannot be read. A CRD not installed (404), a
refused list (403) or an unreachable API server leave it unread (None) with why; a node whose object publishes no
pinner is not in the mapping (unknown)."""

from __future__ import annotations

from webhook.cluster.client import ClusterError, Lister
from webhook.core.cpupinner import Pinner, read_pinner
from webhook.core.numatopology import NRT_PATH

SOURCE = "the agent's NodeResourceTopology (cpuPinner)"


def read_pinners(lister: Lister) -> tuple[dict[str, Pinner] | None, str | None]:
    """Each node's published pinner, or None and why the objects cannot be listed."""
    try:
        objects = lister.list_objects(NRT_PATH)
    except ClusterError as exc:
        return None, f"NodeResourceTopology objects cannot be listed: {exc}"
    found: dict[str, Pinner] = {}
    for obj in objects:
        meta = obj.get("metadata")
        name = meta.get("name") if isinstance(meta, dict) else None
        pinner = read_pinner(obj)
        if isinstance(name, str) and pinner is not None:
            found[name] = pinner
    return found, None
