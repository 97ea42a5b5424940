"""``policy.numa: auto`` and ``policy.deviceClasses: true`` for ``check`` and ``audit``: the cluster's
NodeResourceTopology objects and node labels, and its DeviceClasses, read once into the run's ``Facts`` (with a
memo for the run), handed to the engine beside the configuration. Without a cluster to read (``check`` with no
``--kubeconfig``), or when the CRD or the objects are missing, numa-unfit judges no node (and without
DeviceClasses only ``deviceclass.resource.kubernetes.io/`` names count as DRA), and the command says so once on
stderr: it is never a reason to fail."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from webhook.cluster.client import ClusterError, Lister
from webhook.cluster.deviceclass_cache import read_device_classes
from webhook.cluster.dracache import DraSnapshot
from webhook.cluster.kubeconfig import explain, preflight
from webhook.cluster.nrt import read_topology
from webhook.cluster.nrtpinner import SOURCE as NRT_SOURCE
from webhook.cluster.related import read_related
from webhook.cluster.version import read_version, served
from webhook.cluster.watch import ApiTransport
from webhook.core.config import Config
from webhook.core.dra_requests import DeviceClasses
from webhook.core.dracpu import CPU_DRIVER, DraFacts
from webhook.core.dracpu_classes import classes_unknown
from webhook.core.facts import NO_FACTS, Facts, Memo
from webhook.core.kubeversion import Semantics
from webhook.core.numatopology import Topology
from webhook.core.operators import CLUSTER, KSERVE_NAMESPACE, Related
from webhook.core.operators.kserve_config import CONFIG_UNREAD


def cluster_facts(config: Config, kubeconfig: str | None, say: Callable[[str], None], required: bool,
                  version: bool = True, context: str | None = None) -> Facts:
    """``_cluster_facts`` with, unless ``policy.dra: off``, the cluster's DRA objects (``cluster_dra``) whenever
    the run reads the cluster at all (``audit``; ``check --kubeconfig``). What of them cannot be read is a notice
    where the run is set to read the cluster (``audit``, ``policy.numa: auto``, ``policy.deviceClasses: true``);
    a plain ``check --kubeconfig`` says it on stderr only, as a Pod that names a claim is said unknown with the
    reason anyway (``DraSnapshot``): a run of claim-less Pods against a 1.33 API server is not two notices."""
    facts = _cluster_facts(config, kubeconfig, say, required, version, context)
    if config.policy.dra == "off" or not (required or kubeconfig is not None):
        return facts
    configured = required or config.numa_auto or config.policy.device_classes
    # policy.deviceClasses: true and the list refused: a claim of a class other than dra.cpu may ask CPUs (unknown)
    unread = config.policy.device_classes and facts.device_classes is None
    classes = None if unread else facts.device_classes.cpu if facts.device_classes is not None else frozenset()
    dra = cluster_dra(kubeconfig, say if configured else lambda m: say(f"qos-guard: {m}"), context, classes)
    if dra is None:
        return facts
    if unread:
        snapshot = dra
        return replace(facts, dra=classes_unknown(snapshot.anywhere(), CLASSES_UNREAD),
                       dra_of=lambda namespace: classes_unknown(snapshot.for_namespace(namespace), CLASSES_UNREAD))
    return replace(facts, dra=dra.anywhere(), dra_of=dra.for_namespace)


CLASSES_UNREAD = "DeviceClasses not read (said on stderr): {name} may select dra.cpu; grant list on deviceclasses"


def notice_rule(message: str) -> str:
    """The rule a message said here is about (``check`` files it as a notice of that rule): the DRA rule it names
    first, else by its setting."""
    named = message.split(" ", 1)[0].rstrip(":")
    if named.startswith("dra-cpu-") or named == "dra-numa-list-match":
        return named
    return "numa-unfit" if message.startswith("policy.numa") else "dra-unaligned"


def cluster_dra(kubeconfig: str | None, say: Callable[[str], None], context: str | None = None,
                cpu_classes: frozenset[str] | None = frozenset()) -> DraSnapshot | None:
    """The ResourceSlices, the claims and templates kept as the webhook's cache keeps them (by namespace, with
    the specs of those that ask CPUs through ``dra.cpu`` or ``cpu_classes``, the DeviceClasses read with
    ``policy.deviceClasses: true`` that select it; None: not read, a claim of another class keeps its spec) and,
    when some node publishes ``dra.cpu`` devices, every node's CPU Manager policy (configz): what the DRA CPU rules
    judge with, each namespace's view (``for_namespace``) as the webhook's. What cannot be read stays unknown, said
    once (never a reason to fail)."""
    from webhook.cluster.client import Lister
    from webhook.cluster.configz import NodeReader
    from webhook.cluster.dra_lists import read_dra

    try:
        preflight(kubeconfig, context)
        dra, problems = read_dra(Lister(kubeconfig, context=context), cpu_classes)
    except ClusterError:  # no usable kubeconfig, or no API server: the run already said so, once
        return None
    for problem in problems:
        say(f"the DRA CPU rules judge without it: {problem}")
    if not DraFacts(dra.devices).nodes_of(CPU_DRIVER):
        return dra
    try:
        reader = NodeReader(kubeconfig, context)
        configs = reader.read(reader.select(None))
    except ClusterError as exc:
        published = _published(kubeconfig, context, None)
        if not published:
            say(f"dra-cpu-pinner-mismatch is not judged: the kubelets' configz cannot be read: "
                f"{explain(exc, kubeconfig)}")
            return dra
        say(f"dra-cpu-pinner-mismatch: the kubelets' configz cannot be read ({explain(exc, kubeconfig)}): who pins "
            f"is read from {NRT_SOURCE} for {len(published)} nodes")
        return replace(dra, cpu_managers=published, cpu_managers_whole=True)
    managers = {c.node.name: c.pinning.cpu_manager_policy if c.pinning is not None else None for c in configs}
    unread = [name for name, policy in managers.items() if policy is None]
    if unread:
        published = _published(kubeconfig, context, unread)
        if published:
            say(f"dra-cpu-pinner-mismatch: configz unreadable on {len(unread)} nodes: who pins is read from "
                f"{NRT_SOURCE} for {', '.join(sorted(published))}")
            managers.update(published)
    return replace(dra, cpu_managers=managers, cpu_managers_whole=True)


def _published(kubeconfig: str | None, context: str | None, nodes: list[str] | None) -> dict[str, str | None]:
    """The CPU Manager policy each node's agent implies in its NRT ``cpuPinner`` (static or none), for ``nodes``
    (None: all); nothing where it publishes none or the objects cannot be listed (unknown stays unknown)."""
    from webhook.cluster.nrtpinner import read_pinners

    try:
        pinners, _ = read_pinners(Lister(kubeconfig, context=context))
    except ClusterError:
        return {}
    return {name: p.cpu_manager_policy for name, p in (pinners or {}).items() if nodes is None or name in nodes}


def _cluster_facts(config: Config, kubeconfig: str | None, say: Callable[[str], None], required: bool,
                   version: bool = True, context: str | None = None) -> Facts:
    """What the cluster says, for a run of ``config``: its topology when the configuration asks for
    ``numa: auto``, its DeviceClasses with ``policy.deviceClasses: true`` and, with ``version``, its API server's
    minor (said once; else ``NO_FACTS``: nothing is read). ``required``: read them even without ``kubeconfig``
    (``audit`` always talks to a cluster; ``check`` only when given one). ``context``: the kubeconfig's context
    to use (default its current one)."""
    if kubeconfig is None and not required:
        if config.numa_auto:
            say("policy.numa: auto: numa-unfit is not judged; pass --kubeconfig to read the cluster's "
                "NodeResourceTopology objects and node labels")
        if config.policy.device_classes:
            say("policy.deviceClasses: true: DeviceClasses are not read; pass --kubeconfig to see which extended "
                "resources DRA serves")
        return NO_FACTS
    kube = cluster_kubernetes(config, kubeconfig, say, context) if version else None
    related = _related(kubeconfig, say, context, config.policy.kserve_namespace)
    if not config.numa_auto and not config.policy.device_classes:
        known = kube is not None or related.objects or related.config_unknown
        return Facts(kubernetes=kube, related=related) if known else NO_FACTS
    classes = _device_classes(config, kubeconfig, say, context)
    if not config.numa_auto:
        return Facts(device_classes=classes, kubernetes=kube, related=related)
    try:
        preflight(kubeconfig, context)
        topology = read_topology(ApiTransport(kubeconfig, context))
    except ClusterError as exc:
        say(f"policy.numa: auto: numa-unfit is not judged: {explain(exc, kubeconfig)}")
        return Facts(topology=Topology(problem=str(exc)), device_classes=classes, kubernetes=kube, related=related)
    if topology.problem:
        say(f"policy.numa: auto: {topology.problem}; numa-unfit judges only the nodes it can see")
    return Facts(topology=topology, device_classes=classes, kubernetes=kube, memo=Memo(), related=related)


def _related(kubeconfig: str | None, say: Callable[[str], None], context: str | None = None,
             kserve_namespace: str = KSERVE_NAMESPACE) -> Related:
    """The objects the operators' builders read (``webhook.cluster.related``), KServe's ConfigMap from
    ``kserve_namespace``; none when no kubeconfig can be used, and KServe's ConfigMap then not known (the version's
    read says why), never taken as shipped."""
    try:
        preflight(kubeconfig, context)
        return read_related(Lister(kubeconfig, context=context), say, kserve_namespace)
    except ClusterError as exc:
        why = CONFIG_UNREAD.format(namespace=kserve_namespace, why=exc, out="give it in the input")
        return Related({}, CLUSTER, frozenset(), kserve_namespace, why)


def cluster_kubernetes(config: Config, kubeconfig: str | None, say: Callable[[str], None],
                       context: str | None = None) -> Semantics | None:
    """The API server's minor (None: not known, ``kubernetesVersion`` or the newest judges), said once."""
    def read() -> dict[str, object]:  # an unusable kubeconfig named as such ("... does not exist"), not the client's
        preflight(kubeconfig, context)
        return read_version(kubeconfig, context)

    found = served(config.kubernetes_version, read)
    say(f"qos-guard: {found.says}")
    return found.kube


def _device_classes(config: Config, kubeconfig: str | None, say: Callable[[str], None],
                    context: str | None = None) -> DeviceClasses | None:
    """The DeviceClass index with ``policy.deviceClasses: true``; None (said once) when it cannot be read."""
    if not config.policy.device_classes:
        return None
    try:
        classes, problem = read_device_classes(ApiTransport(kubeconfig, context))
    except ClusterError as exc:
        classes, problem = None, str(exc)
    if problem is not None:
        say(f"policy.deviceClasses: true: {problem}")
    return classes
