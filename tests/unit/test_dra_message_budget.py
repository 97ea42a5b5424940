"""Every DRA rule's message, rendered with realistic values (a Deployment's paths, a claim named after its
template, node names of a real cluster), fits the line a refusal keeps per finding (``refusal.LINE_CHARS``):
the rest is cut, and the way out (the setting that fixes it, what it costs) is at the end. A message the table
below does not know fails here, so a new one is measured too."""

from __future__ import annotations

import importlib
import string

import pytest

from tests.builders import resource_slice
from webhook.core.dracpu import UNKNOWN, slice_devices, unreadable_size
from webhook.core.refusal import LINE_CHARS, finding
from webhook.core.rules import RULE_IDS
from webhook.core.rules.base import Text
from webhook.core.rules.dra_cpu_not_mirrored import MIRROR, POD_LEVEL
from webhook.core.rules.dra_cpu_unpaired import IN_POD, _unlabelled

CONTAINER = 'container "inference-server" (spec.template.spec.containers[0].resources)'
POD = "pod (spec.template.spec)"
CLAIM = "ResourceClaimTemplate devices (spec.spec.devices)"
# The longest reasons a claim is not known, as the webhook's cache and dracpu.unreadable_size say them.
NOT_SYNCED = "the webhook's cache of ResourceClaims and ResourceClaimTemplates has not synced yet"


def _unreadable() -> str:
    """What ``dracpu.unreadable_size`` says of a claim asking a whole device of four unreadable groups."""
    devices = [{"name": f"cpudevnuma00{i}", "capacity": {"dra.cpu/cpu": {"value": "1500m"}}} for i in range(4)]
    spec = {"devices": {"requests": [{"name": "cpus", "exactly": {"deviceClassName": "dra.cpu"}}]}}
    why = unreadable_size(spec, slice_devices(resource_slice("s", "dra.cpu", devices, node="gpu-node-a-17")))
    assert why is not None
    return why


UNREADABLE = _unreadable()
VALUES = {
    "how": "spec.template.spec.resourceClaims: gpu, cpus", "path": "spec.template.spec", "names": "gpu, cpus",
    "devices": "4", "requests": "gpu, nic", "cpu": "cpus", "cpu_class": "dra.cpu", "others": "gpu, nic",
    "attribute": "dra.net/numaNode", "dra": "dra", "driver": "dra.cpu", "request": "gpu",
    "published": "dra.cpu/numaNodeID, dra.net/numaNode", "claim": "cpus (cpus-8)", "why": NOT_SYNCED,
    "kind": "ResourceClaimTemplate", "name": "gpu-and-cpus", "cpus": "16", "claims": "cpus (cpus-16), gpu (gpu-1)",
    "where": "the container", "limit": "16", "pod_level": POD_LEVEL(),
    "minor": "1.35", "nodes": "nodes gpu-node-a-17, gpu-node-b-04, gpu-node-c-22 and 5 more",
    "containers": "inference-server, metrics-exporter", "first": "model-loader", "later": "inference-server",
    "several": "Deployment inference-server",
}
# (rule, message) -> the values that differ from VALUES: its label above all.
MESSAGES: dict[tuple[str, str], dict[str, str]] = {
    ("dra-unaligned", "UNALIGNED"): {"label": POD},
    ("dra-unaligned", "CLAIMS"): {},
    ("dra-claim-spread", "SPREAD"): {"label": CLAIM},
    ("dra-cpu-unpaired", "UNPAIRED"): {"label": CLAIM},
    ("dra-cpu-unpaired", "UNPUBLISHED"): {"label": CLAIM, "attribute": "resource.kubernetes.io/numaNode"},
    ("dra-cpu-unpaired", "OTHER_UNPUBLISHED"): {"label": CLAIM, "driver": "gpu.nvidia.com",
                                                "published": "resource.kubernetes.io/pcieRoot"},
    ("dra-cpu-unpaired", "SOCKET_ROOTS"): {"label": CLAIM, "attribute": "resource.kubernetes.io/pcieRoot",
                                           "devices": "cpudevsocket000 and 3 more"},
    ("dra-cpu-unpaired", "APART"): {"label": CONTAINER, "cpus": "claim cpus",
                                    "others": "claim gpu, nvidia.com/gpu: 1"},
    ("dra-cpu-unpaired", "UNKNOWN_CLAIM"): {"label": POD},
    ("dra-cpu-unpaired", "IN_POD"): {"label": POD, "finding": "(each claim finding, measured below)"},
    ("dra-cpu-not-mirrored", "NOT_MIRRORED"): {"label": CONTAINER, "request": "2",
                                               "advice": MIRROR(cpus="16", pod_level=POD_LEVEL())},
    ("dra-cpu-not-mirrored", "MIRROR"): {},
    ("dra-cpu-not-mirrored", "POD_LEVEL"): {},
    ("dra-cpu-not-mirrored", "POD_BUDGET"): {"label": POD, "request": "2", "limit": "4"},
    ("dra-cpu-not-mirrored", "NO_CAPACITY"): {"label": POD},
    ("dra-cpu-not-mirrored", "FRACTIONAL"): {"label": POD, "request": "cpus", "capacity": "dra.cpu/cpu",
                                             "asked": "1.50000000000000001...", "whole": "2"},
    ("dra-cpu-not-mirrored", "UNKNOWN_CLAIM"): {"label": POD, "why": UNREADABLE},
    ("dra-cpu-pinner-mismatch", "NO_CPU_MANAGER"): {"label": POD},
    ("dra-cpu-pinner-mismatch", "BOTH_PIN"): {"label": POD},
    ("dra-cpu-shared", "CONTAINERS"): {"label": POD},
    ("dra-cpu-shared", "SEQUENTIAL"): {"label": POD},
    ("dra-cpu-shared", "PODS"): {"label": POD},
    ("dra-cpu-shared", "DAEMONSET"): {"label": POD},
    ("dra-numa-list-match", "LIST_MATCH"): {
        "label": CLAIM, "attribute": "resource.kubernetes.io/numaNode",
        "devices": "gpu.nvidia.com device gpu-0 on node gpu-node-a-17 (0, 1) and 7 more"},
}
DRA_RULES = [r for r in RULE_IDS if r.startswith("dra-")]
CLAIM_FINDINGS = ["UNPAIRED", "UNPUBLISHED", "OTHER_UNPUBLISHED", "SOCKET_ROOTS"]  # judge_claim's, in a Pod


def texts(rule: str) -> dict[str, Text]:
    module = importlib.import_module("webhook.core.rules." + rule.replace("-", "_"))
    return {name: t for name, t in vars(module).items() if isinstance(t, Text)}


def rendered(rule: str, name: str) -> str:
    text = texts(rule)[name]
    holes = {h for _, h, _, _ in string.Formatter().parse(text.template) if h}
    values = VALUES | MESSAGES[(rule, name)]
    return text(**{h: values[h] for h in holes})


def test_every_dra_message_is_measured() -> None:
    assert {(r, n) for r in DRA_RULES for n in texts(r)} == set(MESSAGES)


@pytest.mark.parametrize(("rule", "name"), sorted(MESSAGES))
def test_each_dra_message_fits_a_refusal_line(rule: str, name: str) -> None:
    line = finding(rule, rendered(rule, name))
    assert len(line) <= LINE_CHARS, f"{len(line)} > {LINE_CHARS}: {line}"


@pytest.mark.parametrize("name", CLAIM_FINDINGS)
def test_a_claim_finding_fits_in_the_pod_that_names_it(name: str) -> None:
    """dra-cpu-unpaired repeats a claim's finding in each Pod naming it, the Pod and claim named in place of the
    claim's label."""
    unknown, text = _unlabelled(rendered("dra-cpu-unpaired", name), "ResourceClaimTemplate")
    assert text != rendered("dra-cpu-unpaired", name).removeprefix(UNKNOWN)  # the label went
    line = finding("dra-cpu-unpaired", unknown + IN_POD(label=POD, claim="dev", kind="ResourceClaimTemplate",
                                                        name="gpu-and-cpus", finding=text))
    assert len(line) <= LINE_CHARS, f"{len(line)} > {LINE_CHARS}: {line}"


def _reasons() -> list[str]:
    """The reasons a claim is not known that ``DraFacts.unknown_why`` carries (after the claim's kind and name)."""
    from webhook.batch.clusterfacts import CLASSES_UNREAD
    from webhook.batch.runner import differ, elsewhere
    from webhook.core.dracpu import DraFacts, dra_facts
    from webhook.core.dracpu_classes import CLASS_NOT_LISTED

    key = ("ResourceClaimTemplate", "gpu-and-cpus")
    namespaces = ("inference-prod", "inference-staging", "inference-canary", "team-b")
    apart = elsewhere(DraFacts(cpu_claims={}), {ns: dra_facts([{
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "gpu-and-cpus", "namespace": ns}, "spec": {"spec": {}}}], slices=False)
        for ns in namespaces})[key]
    return [CLASS_NOT_LISTED.format(name="cpus.inference.example.com"),
            CLASSES_UNREAD.format(name="cpus.inference.example.com"), differ("inference-staging")(key),
            differ(None)(key), apart]


@pytest.mark.parametrize("rule", ["dra-cpu-not-mirrored", "dra-cpu-unpaired"])
@pytest.mark.parametrize("why", _reasons())
def test_each_reason_a_claim_is_not_known_fits_a_refusal_line(rule: str, why: str) -> None:
    text = texts(rule)["UNKNOWN_CLAIM"]
    line = finding(rule, text(label=POD, claim="dev: ResourceClaimTemplate gpu-and-cpus", why=why,
                              driver="dra.cpu"))
    assert len(line) <= LINE_CHARS, f"{len(line)} > {LINE_CHARS}: {line}"
