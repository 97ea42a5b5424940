"""What differs between the Kubernetes minors qos-guard supports, in one table keyed by minor.

Every answer qos-guard gives (the QoS class a Pod is stored with, what the API server defaults, what kubelet's
CPU Manager pins, which APIs are served) is the answer of one Kubernetes release. The code that needs such a
difference reads it from the ``Semantics`` of the minor being judged (``PodSpec.kube``), never from an ``if``
on a version number of its own; each field names the upstream code or feature gate (at that release's
default) it stands for, and docs/contract.md#kubernetes-versions lists them.

The minor comes from the API server's ``/version`` (``serve``, ``audit``, ``nodes``, the extender), or from
``--kubernetes-version`` / the ``kubernetesVersion`` key (``check``, ``fix``, ``policy``); ``DEFAULT`` (the
newest minor released as GA) when neither says.

A minor whose v1.MINOR.0 the Go module proxy does not serve yet is supported from its newest pre-release
(``PRERELEASES``): it is proven against that pre-release's code, every answer at it says so (``Semantics.note``),
and it is not the default until its GA release is served (then ``hack/release-day.sh v1.MINOR.0`` pins it and
takes its line out of ``PRERELEASES``, which makes it the default).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass


class VersionError(ValueError):
    """A Kubernetes version that cannot be read, or that qos-guard does not judge."""


@dataclass(frozen=True, order=True)
class Minor:
    """A Kubernetes minor release (1.37): patches do not change what qos-guard judges."""

    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


_VERSION = re.compile(r"^v?(?P<major>[0-9]+)\.(?P<minor>[0-9]+)(\.[0-9]+)?([-+][0-9A-Za-z.+-]*)?$")
# /version's minor may carry a vendor's suffix ("37+" on some managed offerings).
_SERVED_MINOR = re.compile(r"^(?P<minor>[0-9]+)\+?$")


def parse_minor(text: object) -> Minor:
    """``1.37``, ``v1.37.2``, ``1.37.2-gke.100``: the minor; anything else is a ``VersionError``."""
    if not isinstance(text, str) or len(text) > 64 or not (m := _VERSION.match(text.strip())):
        shown = repr(text)[:40]
        raise VersionError(f"{shown} is not a Kubernetes version (1.MINOR, as 1.37 or v1.37.2)")
    return Minor(int(m["major"]), int(m["minor"]))


def served_minor(version: object) -> Minor:
    """The minor of an API server's ``/version`` answer (``major``/``minor``, else ``gitVersion``)."""
    if not isinstance(version, dict):
        raise VersionError("the API server's /version answer is not an object")
    major, minor = version.get("major"), version.get("minor")
    if isinstance(major, str) and major.isdigit() and isinstance(minor, str) and (m := _SERVED_MINOR.match(minor)):
        return Minor(int(major), int(m["minor"]))
    return parse_minor(version.get("gitVersion"))


@dataclass(frozen=True)
class Semantics:
    """One minor's answers where minors differ, each at that release's default feature gates."""

    minor: Minor
    # PodLevelResources (alpha 1.32, beta and on 1.34): off, the API server drops spec.resources on create
    # (podutil.DropDisabledPodFields) and ComputePodQOS reads containers only.
    pod_level_resources: bool
    # PodLevelResourcesFixKubeletQOSClass (beta 1.37): the pod-level block decides the QoS class only when it
    # sets a supported resource (helper.IsPodLevelResourcesSet); before, any spec.resources did, even {}.
    pod_level_qos_needs_set: bool
    # PodLevelResourcesFixDefaulting (beta 1.37): pod-level defaults come from podutil.DefaultPodLevelResources
    # in PrepareForCreate (requests from the containers' aggregate whenever the block sets anything, limits
    # from the containers' when every container has one); before, SetDefaults_Pod's defaultPodRequests filled
    # requests only, and only when pod-level limits were set.
    pod_level_fix_defaulting: bool
    # PrepareForCreate (pkg/registry/core/pod/strategy.go): up to 1.36 the class is GetPodQOS of the Pod as
    # sent, so a status.qosClass in the manifest is stored as written; from 1.37 the status is reset first.
    keeps_declared_qos: bool
    # PodLevelResourceManagers (alpha 1.36, beta 1.37, off by default in both): on, kubelet's CPU and Memory
    # Managers pin Pods with pod-level resources instead of skipping them.
    pod_level_resource_managers: bool
    # DynamicResourceAllocation (GA 1.34): off (1.33), spec.resourceClaims is dropped on create and
    # resource.k8s.io/v1 is not served.
    dra: bool
    # DRAExtendedResource (alpha 1.34, beta and on 1.36): off, no extended resource is DRA's: the API server
    # drops a DeviceClass's spec.extendedResourceName, and a deviceclass.resource.kubernetes.io/<class> name is a
    # plain extended resource the scheduler finds on no node's allocatable (as a device plugin's would be).
    dra_extended_resources: bool
    # DRAConsumableCapacity (alpha 1.34, beta and on 1.36): off, the API server drops a claim request's
    # ``capacity`` and a slice device's ``allowMultipleAllocations`` (pkg/api/resourceclaimspec/util.go), and the
    # allocator records no ConsumedCapacity: dra-driver-cpu v0.2.0's grouped mode then pins no CPU.
    dra_consumable_capacity: bool
    # admissionregistration.k8s.io/v1 MutatingAdmissionPolicy is served (GA 1.36; beta and off in 1.34-1.35).
    mutating_admission_policy: bool
    # The device manager's hints cover only the NUMA nodes that have the resource's devices (from 1.36:
    # pkg/kubelet/cm/devicemanager/topology_hints.go, generateDeviceTopologyHints over deviceNUMANodes), so a
    # container asking 0 of a device plugin's resource must still sit on such a node; before, every NUMA node
    # holds 0 devices and a zero request constrains nothing. Not a feature gate: a code change.
    zero_device_request_aligned: bool
    # Toleration.ToleratesTaint (k8s.io/api/core/v1): up to 1.34 it knows Equal and Exists only, so an Lt or Gt
    # toleration tolerates nothing; from 1.35 the scheduler compares the values as integers
    # (TaintTolerationComparisonOperators, alpha and off through 1.37, gates only the API server's acceptance:
    # a Pod that carries such a toleration was admitted with it on).
    toleration_comparison_operators: bool
    # getPodRequestedResources (pkg/kubelet/cm/memorymanager/policy_static.go), the Pod's memory hint in the
    # Topology Manager's pod scope: from 1.38 it counts every memory type any container asks (init containers and
    # sidecars too); before, only the types app containers ask, so an init container's hugepages could miss the
    # Pod's NUMA node. Not a feature gate: a code change.
    pod_memory_hint_all_containers: bool
    # The pre-release this minor is judged from (``PRERELEASES``) while its GA release is not served; None: GA.
    prerelease: str | None = None

    def __str__(self) -> str:
        return str(self.minor)

    @property
    def note(self) -> str | None:
        """What an answer at a pre-release minor says beside it (None at a GA minor)."""
        if self.prerelease is None:
            return None
        # Short enough for one admission warning (under 120 characters with its "qos-guard: " prefix).
        return (f"Kubernetes {self.minor} is judged from its pre-release {self.prerelease}: an answer may change at "
                f"{self.minor}.0")


# Where minors differ, one line each: the field, the first supported minor whose answer is the value given (the
# minors before it answer the opposite), and that value; ``None``: no supported minor, at default gates. 1.38's
# gates at their defaults move no field (pkg/features/kube_features.go of v1.38.0-beta.0); its code moves one, the
# Memory Manager's pod-scope hint (``pod_memory_hint_all_containers``), found by the topology differential there.
# Its Quantity parser changed too (29 significant digits, nano precision; docs/contract.md#kubernetes-versions).
CHANGES: tuple[tuple[str, int | None, bool], ...] = (
    ("pod_level_resources", 34, True),
    ("pod_level_qos_needs_set", 37, True),
    ("pod_level_fix_defaulting", 37, True),
    ("keeps_declared_qos", 37, False),
    ("pod_level_resource_managers", None, True),
    ("dra", 34, True),
    ("dra_extended_resources", 36, True),
    ("dra_consumable_capacity", 36, True),
    ("mutating_admission_policy", 36, True),
    ("zero_device_request_aligned", 36, True),
    ("toleration_comparison_operators", 35, True),
    ("pod_memory_hint_all_containers", 38, True),
)


# Supported minors whose GA release is not served yet, each with the pre-release its answers come from: the one
# source of that release. The oracle (hack/oracle/minors/v1.MINOR.mod) and make test-versions (the Makefile's
# KUBE_VERSIONS) are built at the same one, which tests/unit/test_kubeversion.py holds; hack/release-day.sh moves
# all three (to an rc, or to the GA release, which takes the line out). Code and tests read it from here.
PRERELEASES: dict[int, str] = {38: "v1.38.0-beta.0"}


def _semantics(minor: int) -> Semantics:
    """One minor's row of ``CHANGES``: each field's value from its minor on, the opposite before it."""
    fields = {name: (value if since is not None and minor >= since else not value) for name, since, value in CHANGES}
    return Semantics(minor=Minor(1, minor), prerelease=PRERELEASES.get(minor), **fields)


def newest_released(table: Mapping[Minor, Semantics]) -> Semantics:
    """The default: the newest minor of ``table`` released as GA (a pre-release minor is judged only when asked
    for or served, never by default)."""
    return table[max(m for m, s in table.items() if s.prerelease is None)]


SUPPORTED: dict[Minor, Semantics] = {s.minor: s for s in map(_semantics, range(33, 39))}
OLDEST, NEWEST = min(SUPPORTED), max(SUPPORTED)
DEFAULT = newest_released(SUPPORTED)
SUPPORTED_TEXT = f"{OLDEST} to {NEWEST}"
# Which supported minors are judged from a pre-release, for help texts and docs.
PRERELEASE_TEXT = ", ".join(f"{s.minor} is judged from its pre-release {s.prerelease}"
                            for s in SUPPORTED.values() if s.prerelease) or "every supported minor is released"


def semantics(minor: Minor) -> Semantics:
    """The semantics of a supported minor; any other is a ``VersionError`` saying which are."""
    found = SUPPORTED.get(minor)
    if found is None:
        raise VersionError(f"Kubernetes {minor} is not supported: qos-guard judges {SUPPORTED_TEXT}")
    return found


def nearest(minor: Minor) -> tuple[Semantics, str | None]:
    """For a version a cluster reports: its semantics, or the nearest supported minor's with the note that says
    so (a cluster is judged as best qos-guard can, never refused for its version)."""
    if minor in SUPPORTED:
        return SUPPORTED[minor], None
    chosen = SUPPORTED[OLDEST] if minor < OLDEST else SUPPORTED[NEWEST]
    return chosen, (f"Kubernetes {minor} is outside the minors qos-guard judges ({SUPPORTED_TEXT}); judging with "
                    f"{chosen.minor}'s semantics")


def resolve(text: object) -> Semantics:
    """``--kubernetes-version`` or ``kubernetesVersion``: one supported minor (``VersionError`` otherwise)."""
    return semantics(parse_minor(text))


__all__ = ["CHANGES", "DEFAULT", "NEWEST", "OLDEST", "PRERELEASES", "PRERELEASE_TEXT", "SUPPORTED", "Minor",
           "Semantics", "VersionError", "nearest", "newest_released", "parse_minor", "resolve", "semantics",
           "served_minor"]
