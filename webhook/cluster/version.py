"""The cluster's Kubernetes minor, from the API server's ``GET /version``: the semantics ``serve``, ``audit``,
``check --kubeconfig``, ``nodes`` and the extender judge with (``webhook.core.kubeversion``).

Every authenticated client may read ``/version`` (the ``system:public-info-viewer`` ClusterRole), so nothing is
granted for it. An API server that cannot be asked leaves the configured minor (``kubernetesVersion``, else
the newest) and the answer says so: the version is never a reason not to judge.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from webhook.cluster.client import ClusterError, _api_client, call, decode_body
from webhook.core.kubeversion import DEFAULT, Semantics, VersionError, nearest, served_minor

# /version is a few hundred bytes: anything larger is not an API server's answer.
_MAX = 64 * 1024


@dataclass(frozen=True)
class Served:
    """What the API server said: the semantics judged with (None: not read) and the line that says so."""

    kube: Semantics | None
    says: str


def read_version(kubeconfig: str | None = None, context: str | None = None,
                 timeout: tuple[float, float] = (3, 5)) -> dict[str, object]:
    """The API server's ``/version`` answer (``ClusterError`` when it cannot be had)."""
    api = _api_client(kubeconfig, context)
    response = call(api, "GET", "/version", [], {"Accept": "application/json"}, timeout)
    try:
        data = response.response.read(_MAX + 1)
    except OSError as exc:
        raise ClusterError(f"reading GET /version: {exc}") from None
    finally:
        response.response.release_conn()
    if len(data) > _MAX:
        raise ClusterError(f"GET /version: the answer is over {_MAX} bytes")
    body = decode_body("GET", "/version", response.status, data)
    if not 200 <= response.status < 300:
        raise ClusterError(f"GET /version: HTTP {response.status}")
    return dict(body)


def served(configured: Semantics | None, read: Callable[[], dict[str, object]]) -> Served:
    """The minor to judge with, from ``read()`` (the API server's /version), and the line saying which and why;
    ``configured`` (``kubernetesVersion``) when the API server cannot be asked."""
    fallback = configured or DEFAULT
    why = "kubernetesVersion" if configured is not None else "the newest released"
    try:
        answer = read()
        minor = served_minor(answer)
    except (ClusterError, VersionError) as exc:
        says = f"judging with Kubernetes {fallback} semantics ({why}): the API server's version is not known: {exc}"
        return Served(None, f"{says}; {fallback.note}" if fallback.note else says)
    kube, note = nearest(minor)
    shown = answer.get("gitVersion") if isinstance(answer.get("gitVersion"), str) else str(minor)
    says = f"judging with Kubernetes {kube} semantics (the API server's /version: {shown})"
    if note:
        says = f"{says}; {note}"
    if configured is not None and configured.minor != kube.minor:
        says = f"{says}; kubernetesVersion {configured} is not used: the API server's own version wins"
    if kube.note:
        says = f"{says}; {kube.note}"
    return Served(kube, says)


__all__ = ["Served", "read_version", "served"]
