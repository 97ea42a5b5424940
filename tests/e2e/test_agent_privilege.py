"""The agent's least privilege, on a real kube-apiserver with the chart's own agent RBAC and admission policy
(``helm template`` of ``templates/agent.yaml`` with ``agent.publishTopology``), and the agent's token made as
kubelet makes it: a bound ServiceAccount token of a Pod bound to a Node (``kubectl create token
--bound-object-kind Pod``), which carries the node's name (``authentication.kubernetes.io/node-name``).

With that token: ``nodes/proxy`` is refused (no kubelet exec or configz through the API server), ``nodes/configz``
is allowed (what kubelet's SubjectAccessReview asks for its /configz), another node's NodeResourceTopology is
refused by the ValidatingAdmissionPolicy (create, apply), a token without a node name writes none, nothing is
deleted (no verb), and the publisher (its real code, over a fake PodResources socket and sysfs: kubelet is the
node tier's) still publishes its own node's object, owned by the Node; a Node created again (a new uid) gets it
owned by the new one. What the API server said is printed in the summary."""

from __future__ import annotations

import base64
import contextlib
import json
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import waiting
from tests.binaries import binary
from tests.e2e.conftest import CHART, Cluster
from tests.nodelogic.fakes import Kubelet, serve
from tests.nodelogic.test_topology_report import sysfs
from webhook.cluster.client import Lister
from webhook.node.kubelet import PodResourcesClient
from webhook.node.topology_publisher import RESYNC, TopologyPublisher

RELEASE = "priv"
NAMESPACE = "e2e-agent-privilege"
AGENT = f"{RELEASE}-qos-guard-agent"  # the chart's agent ServiceAccount, ClusterRole, binding
USER = f"system:serviceaccount:{NAMESPACE}:{AGENT}"
OWN, OTHER = "e2e-priv-a", "e2e-priv-b"
NRT_CRD = CHART / "files" / "topology.node.k8s.io_noderesourcetopologies.yaml"
NRTS = "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies"


def node(name: str) -> dict[str, Any]:
    # Never a place for a Pod (other tiers share this API server).
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "spec": {"taints": [{"key": "e2e.qos-guard.io/no-pods", "effect": "NoSchedule"}]}}


# Not tests/builders.nrt: a bare object (no zones), as only who may write one is tested here.
def nrt(name: str) -> dict[str, Any]:
    return {"apiVersion": "topology.node.k8s.io/v1alpha2", "kind": "NodeResourceTopology",
            "metadata": {"name": name}, "zones": [], "topologyPolicies": ["None"]}


def claims(token: str) -> dict[str, Any]:
    """The JWT's payload (not verified: the API server does that)."""
    payload = token.split(".")[1]
    decoded: dict[str, Any] = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return decoded


def kubeconfig_with(cluster: Cluster, token: str, path: Path) -> Path:
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    config["users"] = [{"name": "agent", "user": {"token": token}}]
    for context in config["contexts"]:
        context["context"]["user"] = "agent"
    path.write_text(yaml.safe_dump(config))
    return path


@dataclass(frozen=True)
class Agent:
    """The chart's agent objects of one release, and kubeconfigs with its tokens."""

    release: str
    namespace: str
    bound: Path  # the token as kubelet makes it for the agent's Pod on ``own``
    unbound: Path  # a token of the same account bound to nothing: no node name

    @property
    def account(self) -> str:
        return f"{self.release}-qos-guard-agent"


@contextlib.contextmanager
def installed_agent(cluster: Cluster, folder: Path, release: str, namespace: str, own: str,
                    other: str) -> Iterator[Agent]:
    """The NRT CRD, the chart's agent objects (``helm template`` with ``agent.publishTopology``), Nodes ``own`` and
    ``other``, a Pod of the agent's account bound to ``own``, and its tokens; removed on exit."""
    cluster.kubectl("apply", "--server-side", "-f", str(NRT_CRD), check=True)
    cluster.kubectl("wait", "--for=condition=Established", "crd/noderesourcetopologies.topology.node.k8s.io",
                    "--timeout=60s", check=True)
    proc = subprocess.run([binary("helm"), "template", release, str(CHART), "--namespace", namespace, "--set",
                           "agent.enabled=true,agent.publishTopology=true", "--show-only", "templates/agent.yaml"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    wanted = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy",
              "ValidatingAdmissionPolicyBinding")
    objects = [d for d in yaml.safe_load_all(proc.stdout) if d and d["kind"] in wanted]
    assert sorted(o["kind"] for o in objects) == sorted(wanted)
    account = f"{release}-qos-guard-agent"
    cluster.namespace(namespace)
    cluster.kubectl("apply", "-f", "-", stdin=objects, check=True)
    cluster.kubectl("apply", "-f", "-", stdin=[node(own), node(other)], check=True)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "agent", "namespace": namespace},
           "spec": {"nodeName": own, "serviceAccountName": account, "tolerations": [{"operator": "Exists"}],
                    "containers": [{"name": "agent", "image": "registry.invalid/qos-guard:1"}]}}
    cluster.kubectl("apply", "-f", "-", stdin=pod, check=True)
    try:
        bound = cluster.kubectl("create", "token", account, "-n", namespace, "--bound-object-kind", "Pod",
                                "--bound-object-name", "agent", "--duration", "1h", check=True).stdout.strip()
        assert claims(bound)["kubernetes.io"]["node"]["name"] == own  # as kubelet's token for the agent's Pod
        unbound = cluster.kubectl("create", "token", account, "-n", namespace, "--duration", "1h",
                                  check=True).stdout.strip()
        agent = Agent(release, namespace, kubeconfig_with(cluster, bound, folder / "bound"),
                      kubeconfig_with(cluster, unbound, folder / "unbound"))
        # The policy is in force once the API server has compiled it: wait for a refusal it alone makes.
        waiting.eventually("the agent's admission policy in force", lambda: "carries no node name" in cluster.kubectl(
            "--kubeconfig", str(agent.unbound), "create", "--dry-run=server", "-f", "-",
            stdin=nrt(f"{own}-probe")).stderr, 30)
        yield agent
    finally:
        cluster.kubectl("delete", "noderesourcetopologies", own, other, "--ignore-not-found")
        cluster.kubectl("delete", "node", own, other, "--ignore-not-found")
        cluster.kubectl("delete", "namespace", namespace, "--ignore-not-found", "--wait=false")
        cluster.kubectl("delete", "clusterrole,clusterrolebinding", account, "--ignore-not-found")
        cluster.kubectl("delete", "validatingadmissionpolicy,validatingadmissionpolicybinding",
                        f"{account}-own-node-topology", "--ignore-not-found")


@pytest.fixture(scope="module")
def agent(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    with installed_agent(cluster, tmp_path_factory.mktemp("agent-privilege"), RELEASE, NAMESPACE, OWN,
                         OTHER) as a:
        yield a.bound, a.unbound


def as_agent(cluster: Cluster, kubeconfig: Path, *args: str, stdin: Any = None) -> subprocess.CompletedProcess[str]:
    return cluster.kubectl("--kubeconfig", str(kubeconfig), *args, stdin=stdin)


def test_the_token_carries_the_node_and_cannot_reach_kubelets(cluster: Cluster, agent: tuple[Path, Path],
                                                              measured: Callable[[str], None]) -> None:
    bound, _ = agent
    who = json.loads(as_agent(cluster, bound, "auth", "whoami", "-o", "json").stdout)
    assert who["status"]["userInfo"]["username"] == USER
    assert who["status"]["userInfo"]["extra"]["authentication.kubernetes.io/node-name"] == [OWN]
    # Through the API server's node proxy: refused (it would reach kubelet's exec, attach, logs and configz).
    proxied = as_agent(cluster, bound, "get", "--raw", f"/api/v1/nodes/{OWN}/proxy/configz")
    assert proxied.returncode != 0
    assert (f'nodes "{OWN}" is forbidden: User "{USER}" cannot get resource "nodes/proxy" in API group "" at the '
            "cluster scope") in proxied.stderr, proxied.stderr
    measured(f"GET /api/v1/nodes/{OWN}/proxy/configz as the agent: {proxied.stderr.strip()}")
    # What kubelet's SubjectAccessReview asks for /configz (fine-grained authz): allowed; its fallback is not.
    can = {sub: as_agent(cluster, bound, "auth", "can-i", "get", "nodes", f"--subresource={sub}").stdout.strip()
           for sub in ("configz", "proxy", "log", "stats", "metrics")}
    assert can == {"configz": "yes", "proxy": "no", "log": "no", "stats": "no", "metrics": "no"}
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
        "user": USER, "groups": ["system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}",
                                 "system:authenticated"],
        "extra": {"authentication.kubernetes.io/node-name": [OWN]},
        "resourceAttributes": {"verb": "get", "resource": "nodes", "subresource": "configz", "name": OWN,
                               "version": "v1"}}}
    answer = json.loads(cluster.kubectl("create", "-o", "json", "-f", "-", stdin=review, check=True).stdout)
    assert answer["status"]["allowed"] is True, answer
    measured(f"SubjectAccessReview as kubelet sends it for GET /configz: allowed ({answer['status']['reason']})")
    # No verb the agent does not use.
    for verb in ("delete", "update", "get", "list"):
        assert as_agent(cluster, bound, "auth", "can-i", verb, "noderesourcetopologies").stdout.strip() == "no", verb


def test_another_nodes_topology_is_refused_and_its_own_published(cluster: Cluster, agent: tuple[Path, Path],
                                                                   tmp_path: Path,
                                                                   measured: Callable[[str], None]) -> None:
    bound, unbound = agent
    # Another node's object: refused by the chart's policy, whether created or applied (server-side apply).
    created = as_agent(cluster, bound, "create", "-f", "-", stdin=nrt(OTHER))
    applied = as_agent(cluster, bound, "apply", "--server-side", "--field-manager", "qos-guard-agent", "-f", "-",
                       stdin=nrt(OTHER))
    for proc in (created, applied):
        assert proc.returncode != 0
        assert (f"ValidatingAdmissionPolicy '{AGENT}-own-node-topology' with binding '{AGENT}-own-node-topology' "
                f"denied request: the agent of node {OWN} may write only its own node's NodeResourceTopology, not "
                f"{OTHER}") in proc.stderr, proc.stderr
    measured(f"server-side apply of NodeResourceTopology {OTHER} with {OWN}'s agent token: "
                f"{applied.stderr.strip()}")
    # A token of the agent's account without a node name (not a Pod's) writes none, not even a matching name.
    nameless = as_agent(cluster, unbound, "create", "-f", "-", stdin=nrt(OWN))
    assert nameless.returncode != 0 and "the agent's token carries no node name" in nameless.stderr, nameless.stderr
    measured(f"create of NodeResourceTopology {OWN} with a token bound to no Pod: {nameless.stderr.strip()}")

    # The publisher, with the bound token: its own node's object, owned by the Node.
    socket = tmp_path / "kubelet.sock"
    logged: list[str] = []
    server = serve(socket, Kubelet())
    try:
        publisher = TopologyPublisher(Lister(str(bound)), OWN, socket, sysfs(tmp_path / "sys"), logged.append,
                                      policy="single-numa-node", scope="container")
        with PodResourcesClient(socket) as kubelet:
            assert publisher.step(kubelet, 0.0), logged
            uid = cluster.get("node", OWN)["metadata"]["uid"]
            got = cluster.get("noderesourcetopologies", OWN)
            assert got["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Node", "name": OWN,
                                                           "uid": uid}]
            assert {"name": "topologyManagerPolicy", "value": "single-numa-node"} in got["attributes"]
            # Deleting it (its own) is no verb of the agent's.
            deleted = as_agent(cluster, bound, "delete", "noderesourcetopologies", OWN)
            assert deleted.returncode != 0 and 'cannot delete resource "noderesourcetopologies"' in deleted.stderr
            # The Node created again: a new uid, which the next resync's object is owned by.
            cluster.kubectl("delete", "node", OWN, check=True)
            cluster.kubectl("apply", "-f", "-", stdin=node(OWN), check=True)
            new_uid = cluster.get("node", OWN)["metadata"]["uid"]
            assert new_uid != uid
            assert publisher.step(kubelet, RESYNC + 1), logged
            owners = cluster.get("noderesourcetopologies", OWN)["metadata"]["ownerReferences"]
            assert owners == [{"apiVersion": "v1", "kind": "Node", "name": OWN, "uid": new_uid}]
            assert any(f"uid {uid} -> {new_uid}" in line for line in logged), logged
    finally:
        server.stop(None)
    measured(f"the publisher with {OWN}'s agent token: NodeResourceTopology {OWN} applied, owned by Node uid "
                f"{uid}; after the Node was created again, by {new_uid}")
