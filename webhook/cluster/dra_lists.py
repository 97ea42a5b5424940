"""The cluster's DRA objects as the DRA CPU rules and ``qos-guard nodes`` need them: one list of ResourceSlices
(which drivers publish devices on which node, with their attributes), and of ResourceClaims and
ResourceClaimTemplates (the CPUs each asks through ``dra.cpu``). A refused list (403), a cluster without the
``resource.k8s.io/v1`` API (404) or an unreachable API server leave that side unknown (None) with the reason."""

from __future__ import annotations

from collections.abc import Collection

from webhook.cluster.client import ClusterError, Lister, Unreachable
from webhook.core.dracpu import DraFacts, SliceDevice, dra_facts

GROUP_VERSION = "resource.k8s.io/v1"
SLICES_PATH = f"/apis/{GROUP_VERSION}/resourceslices"
CLAIM_PATHS = (("ResourceClaim", f"/apis/{GROUP_VERSION}/resourceclaims"),
               ("ResourceClaimTemplate", f"/apis/{GROUP_VERSION}/resourceclaimtemplates"))


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


def read_dra(lister: Lister, cpu_classes: Collection[str] = ()) -> tuple[DraFacts, list[str]]:
    """Slices and claims, each None where it could not be read, and what could not; an API server that cannot
    be reached at all raises ``Unreachable`` (every other list would fail the same way). ``cpu_classes``: the
    DeviceClasses known to select the CPU driver besides ``dra.cpu`` (``dracpu.cpu_class``)."""
    problems: list[str] = []
    devices, problem = read_slices(lister)
    if problem:
        problems.append(problem)
    claims: list[dict[str, object]] | None = []
    for kind, path in CLAIM_PATHS:
        try:
            listed = lister.list_objects(path)
        except Unreachable:
            raise
        except ClusterError as exc:
            problems.append(_why(f"{kind}s", exc))
            claims = None
            break
        for obj in listed:
            obj.setdefault("kind", kind)
        if claims is not None:
            claims += listed
    found = dra_facts(claims or [], slices=False, claims=claims is not None, known_devices=devices,
                      classes=cpu_classes)
    return DraFacts(devices, found.cpu_claims, cpu_classes=found.cpu_classes), problems
