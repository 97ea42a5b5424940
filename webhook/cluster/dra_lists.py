"""The cluster's DRA objects as the DRA CPU rules and ``qos-guard nodes`` need them, read once (``check
--kubeconfig``, ``audit``): one list of ResourceSlices (which drivers publish devices on which node, with their
attributes, every device kept), and of ResourceClaims and ResourceClaimTemplates, kept as the webhook's cache keeps
them (``webhook.cluster.dracache``: its stores, projection and bound, filled page by page through the one pager),
so that a Pod is judged with its namespace's claims and their specs as the webhook judges it at admission. A
refused list (403), a cluster without the ``resource.k8s.io/v1`` API (404) or an unreachable API server leave that
side unknown (None) with the reason; claims past the bound are not whole (a claim not kept is unknown)."""

from __future__ import annotations

from collections.abc import Collection

from webhook.cluster.client import ClusterError, Lister, Unreachable
from webhook.cluster.dracache import CLAIMS, TEMPLATES, WATCHED, DraSnapshot, claim_stores, claims_of
from webhook.core.dracpu import SliceDevice, dra_facts

GROUP_VERSION = "resource.k8s.io/v1"
SLICES_PATH = f"/apis/{GROUP_VERSION}/resourceslices"


def _why(what: str, exc: ClusterError) -> str:
    text = str(exc)
    if "404" in text:
        return f"{what} ({GROUP_VERSION}) are not served: the cluster has no DRA v1 API (Kubernetes 1.34 or later)"
    if "403" in text:
        return f"{what} cannot be listed (needs list on {what.lower()}.resource.k8s.io): {text}"
    return f"{what} cannot be read: {text}"


def read_slices(lister: Lister) -> tuple[tuple[SliceDevice, ...] | None, str | None]:
    """Every device the cluster's ResourceSlices publish, or None and why not."""
    try:
        objects = lister.list_objects(SLICES_PATH)
    except Unreachable:
        raise
    except ClusterError as exc:
        return None, _why("ResourceSlices", exc)
    for obj in objects:
        obj.setdefault("kind", "ResourceSlice")
    devices = dra_facts(objects, claims=False).devices
    return devices, None


def read_dra(lister: Lister, cpu_classes: Collection[str] | None = ()) -> tuple[DraSnapshot, list[str]]:
    """Slices and claims, each None where it could not be read, and what could not; an API server that cannot
    be reached at all raises ``Unreachable`` (every other list would fail the same way). The claims are whole when
    both lists were read within the bound (``DraSnapshot.whole``): a claim a Pod names that is absent then does
    not exist; otherwise a Pod's claims are "unknown" with the reason, never judged as fitting. ``cpu_classes``:
    the DeviceClasses known to select the CPU driver besides ``dra.cpu`` (``dracpu.cpu_class``); None: not known (the
    list refused), so a claim naming another class keeps its spec, for ``dracpu_classes.classes_unknown``."""
    problems: list[str] = []
    devices, problem = read_slices(lister)
    if problem:
        problems.append(problem)
    stores = claim_stores(None if cpu_classes is None else frozenset(cpu_classes))
    unread: str | None = None
    for resource in (CLAIMS, TEMPLATES):
        kind, path, _ = WATCHED[resource]
        try:
            stores[resource].rebuild(lister.pages(path))
        except Unreachable:
            raise
        except ClusterError as exc:
            unread = _why(f"{kind}s", exc)
            problems.append(unread)
            break
        if stores[resource].truncated and unread is None:
            unread = (f"the cluster has more than {stores[resource].limit} {kind}s (besides those made for a Pod), "
                      "the most qos-guard keeps (the webhook's cache's bound): one it does not hold is not known")
            problems.append(unread)
    refused = unread is not None and not all(stores[r].listed for r in (CLAIMS, TEMPLATES))
    return DraSnapshot(devices, None if refused else claims_of(stores), unread is None, unread,
                       cpu_classes=frozenset(cpu_classes or ())), problems
