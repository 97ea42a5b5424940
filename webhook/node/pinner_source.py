"""What the agent publishes of who pins its node's CPUs (``webhook.core.cpupinner``): its kubelet's
``cpuManagerPolicy`` (configz) and whether its node's ResourceSlices publish ``dra.cpu`` devices (a list with the
field selector ``spec.nodeName``, which the agent's ServiceAccount may already do), read every ``EVERY`` seconds
and added to the NodeResourceTopology object by the publisher. Kept apart from the Topology Manager settings the
publisher reads (its own read of configz) so that either can change alone. Either source unread: no attribute
(unknown, never ``none``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

from webhook.cluster.client import ClusterError, Reply
from webhook.cluster.configz import KubeletConfigz
from webhook.core.cpupinner import decide, pinner_attributes
from webhook.core.dracpu import CPU_DRIVER

SLICES_PATH = "/apis/resource.k8s.io/v1/resourceslices"
EVERY = 60.0  # seconds between two reads of both sources
SOON = 2.0  # seconds between two reads after a kubelet restart while its configz does not answer yet


class Api(Protocol):
    def request(self, method: str, path: str, query: list[tuple[str, str]], body: str | None,
                content_type: str | None) -> Reply: ...


class PinnerSource:
    """The ``cpuPinner`` attributes for ``node``, current within ``EVERY`` seconds; a change is logged once."""

    def __init__(self, api: Api, node: str, cpu_manager: Callable[[], str | None] | None,
                 log: Callable[[str], None], every: float = EVERY) -> None:
        self._api, self._node, self._cpu_manager, self._log, self._every = api, node, cpu_manager, log, every
        self._at: float | None = None
        self._attributes: list[dict[str, str]] = []
        self._said: str | None = ""
        self._eager_until = float("-inf")  # after a kubelet restart: read again SOON while configz is mute

    def refresh(self, now: float) -> None:
        """kubelet restarted (it may run another ``cpuManagerPolicy``): both sources read at the next look, not
        up to ``every`` seconds later, and every ``SOON`` seconds after while kubelet's configz does not answer yet
        (for up to ``every`` seconds): until then the pinner is unknown, left out, never the old kubelet's."""
        self._at = None
        self._eager_until = now + self._every

    def dra_devices(self) -> bool | None:
        """Whether the node's ResourceSlices publish ``dra.cpu`` devices; None when they cannot be listed."""
        try:
            reply = self._api.request("GET", SLICES_PATH, [("fieldSelector", f"spec.nodeName={quote(self._node)}")],
                                      None, None)
        except ClusterError:
            return None
        items: Any = reply.body.get("items") if reply.status == 200 else None
        if not isinstance(items, list):
            return None
        return any(isinstance(s, dict) and isinstance(s.get("spec"), dict) and s["spec"].get("driver") == CPU_DRIVER
                   for s in items)

    def attributes(self, now: float) -> list[dict[str, str]]:
        if self._at is not None and now < self._at:
            return self._attributes
        self._at = now + self._every
        policy = self._cpu_manager() if self._cpu_manager is not None else None
        dra = self.dra_devices()
        value = decide(policy, dra)
        if value != self._said:
            why = (f"cpuManagerPolicy {policy or 'not read'}, dra.cpu devices "
                   f"{'not listed' if dra is None else ('published' if dra else 'none')}")
            self._log(f"NodeResourceTopology {self._node}: cpuPinner {value or 'unknown (left out)'} ({why})")
            self._said = value
        self._attributes = pinner_attributes(policy, dra)
        if policy is None and now < self._eager_until:
            self._at = now + min(SOON, self._every)  # a kubelet just restarted, its configz not answering yet
        return self._attributes


def cpu_manager_reader(address: str, port: int, ca: Path | None = None) -> Callable[[], str | None]:
    """kubelet's ``cpuManagerPolicy`` from its configz, None when it cannot be read."""
    kubelet = KubeletConfigz(address, port, ca=ca)

    def read() -> str | None:
        got = kubelet.read()
        return None if isinstance(got, str) else got.cpu_manager_policy
    return read
