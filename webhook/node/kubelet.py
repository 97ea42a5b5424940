"""kubelet's PodResources API v1 over its unix socket (``/var/lib/kubelet/pod-resources/kubelet.sock``):
``List``, ``GetAllocatableResources`` and ``Get`` (where served), with the stubs generated from upstream's
``api.proto`` (hack/podresources_stubs.py).

Every failure is a ``PodResourcesError`` whose message says what to do; replies are bounded
(``MAX_REPLY_BYTES``) and checked (``MAX_PODS``, CPU and NUMA ids within ``cpulist.MAX_ID``) before anything
uses them, so a broken or hostile socket cannot make the agent build an unbounded structure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc

from webhook.node.allocation import Allocatable, ContainerAllocation, DeviceGroup, DraDevice, MemoryBlock, PodAllocation
from webhook.node.cpulist import MAX_ID
from webhook.node.podresources import api_pb2, api_pb2_grpc

SOCKET = Path("/var/lib/kubelet/pod-resources/kubelet.sock")
MAX_REPLY_BYTES = 16 * 1024 * 1024  # kubelet's own reply for 110 Pods with devices is a few KiB
MAX_PODS = 10_000  # kubelet's maxPods is 110 by default; more than this is not a kubelet
# What kubelet answers Get with while its KubeletPodResourcesGet gate is off (pkg/kubelet/apis/podresources/
# server_v1.go, v1.33.13: fmt.Errorf, so gRPC code UNKNOWN).
GET_DISABLED = "PodResources API Get method disabled"
MAX_IDS_PER_LIST = 65_536
TIMEOUT = 10.0


class PodResourcesError(RuntimeError):
    """The PodResources API could not be reached or answered something malformed."""


class PodResourcesClient:
    """One connection to kubelet's PodResources socket; use as a context manager."""

    def __init__(self, socket: Path = SOCKET, timeout: float = TIMEOUT) -> None:
        self.socket = socket
        self.timeout = timeout
        if not socket.exists():
            raise PodResourcesError(f"{socket}: no such socket: is kubelet running, and is its pod-resources "
                                    "folder mounted here (--pod-resources-socket names another path)?")
        if not socket.is_socket():
            raise PodResourcesError(f"{socket}: not a unix socket")
        options = [("grpc.max_receive_message_length", MAX_REPLY_BYTES),
                   ("grpc.max_send_message_length", 1024 * 1024), ("grpc.enable_retries", 0)]
        self._channel = grpc.insecure_channel(f"unix://{socket}", options=options)
        self._stub = api_pb2_grpc.PodResourcesListerStub(self._channel)

    def __enter__(self) -> PodResourcesClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self._channel.close()

    def _call(self, name: str, method: Any, request: Any) -> Any:
        try:
            return method(request, timeout=self.timeout)
        except grpc.RpcError as exc:
            raise PodResourcesError(_rpc_message(self.socket, name, exc, self.timeout)) from None

    def list(self) -> list[PodAllocation]:
        """Every Pod kubelet knows on this node, with what each container was allocated."""
        reply = self._call("List", self._stub.List, api_pb2.ListPodResourcesRequest())
        if len(reply.pod_resources) > MAX_PODS:
            raise PodResourcesError(f"List replied {len(reply.pod_resources)} Pods (more than {MAX_PODS})")
        return [_pod(p, f"List reply, Pod {i}") for i, p in enumerate(reply.pod_resources)]

    def get(self, namespace: str, name: str) -> PodAllocation | None:
        """One Pod (``Get``, GA in Kubernetes 1.36); None when this kubelet does not serve ``Get``: an older
        kubelet without the method (UNIMPLEMENTED), or one whose ``KubeletPodResourcesGet`` gate is off (alpha
        and off through 1.33: kubelet's server_v1.go answers a plain error, so UNKNOWN with ``GET_DISABLED``)."""
        request = api_pb2.GetPodResourcesRequest(pod_name=name, pod_namespace=namespace)
        try:
            reply = self._stub.Get(request, timeout=self.timeout)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.UNIMPLEMENTED or (
                    exc.code() == grpc.StatusCode.UNKNOWN and exc.details() == GET_DISABLED):
                return None
            raise PodResourcesError(_rpc_message(self.socket, "Get", exc, self.timeout)) from None
        return _pod(reply.pod_resources, f"Get reply for {namespace}/{name}")

    def allocatable(self) -> Allocatable:
        reply = self._call("GetAllocatableResources", self._stub.GetAllocatableResources,
                           api_pb2.AllocatableResourcesRequest())
        where = "GetAllocatableResources reply"
        return Allocatable(_cpus(reply.cpu_ids, where), tuple(_memory(m, where) for m in reply.memory),
                           tuple(_devices(d, where) for d in reply.devices))


def _rpc_message(socket: Path, name: str, exc: grpc.RpcError, timeout: float) -> str:
    code = exc.code() if isinstance(exc, grpc.Call) else None
    details = (exc.details() if isinstance(exc, grpc.Call) else None) or str(exc)
    details = details[:300]
    if code == grpc.StatusCode.UNAVAILABLE:
        return (f"kubelet's PodResources API at {socket} is not answering {name} ({details}): is kubelet running "
                "and may this process open the socket (root, or the agent's hostPath mount)?")
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return f"kubelet's PodResources API at {socket}: no answer to {name} within {timeout:g} s"
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        return (f"kubelet's PodResources API at {socket}: {name} refused or too large ({details}); kubelet allows "
                f"100 calls a second and this reader {MAX_REPLY_BYTES // 2**20} MiB a reply")
    if code == grpc.StatusCode.INTERNAL and "deserializ" in details.lower():
        return f"kubelet's PodResources API at {socket}: the {name} reply is not a PodResources v1 message"
    return f"kubelet's PodResources API at {socket}: {name} failed: {code.name if code else 'error'}: {details}"


def _check_id(value: int, what: str, where: str) -> int:
    if not 0 <= value <= MAX_ID:
        raise PodResourcesError(f"{where}: {what} {value} is out of range 0-{MAX_ID}")
    return value


def _cpus(ids: Any, where: str) -> frozenset[int]:
    if len(ids) > MAX_IDS_PER_LIST:
        raise PodResourcesError(f"{where}: {len(ids)} CPU ids (more than {MAX_IDS_PER_LIST})")
    return frozenset(_check_id(int(c), "CPU id", where) for c in ids)


def _numa(topology: Any, where: str) -> frozenset[int]:
    if len(topology.nodes) > MAX_IDS_PER_LIST:
        raise PodResourcesError(f"{where}: {len(topology.nodes)} NUMA nodes")
    return frozenset(_check_id(int(n.ID), "NUMA node", where) for n in topology.nodes)


def _memory(m: Any, where: str) -> MemoryBlock:
    if not m.memory_type:
        raise PodResourcesError(f"{where}: a memory block without memory_type")
    return MemoryBlock(m.memory_type[:64], int(m.size), _numa(m.topology, f"{where}, memory {m.memory_type[:64]}"))


def _devices(d: Any, where: str) -> DeviceGroup:
    if not d.resource_name:
        raise PodResourcesError(f"{where}: a device group without resource_name")
    if len(d.device_ids) > MAX_IDS_PER_LIST:
        raise PodResourcesError(f"{where}: {len(d.device_ids)} device ids for {d.resource_name[:100]}")
    name = d.resource_name[:253]
    return DeviceGroup(name, tuple(i[:253] for i in d.device_ids), _numa(d.topology, f"{where}, {name}"))


def _dynamic(resources: Any, where: str) -> tuple[DraDevice, ...]:
    """The devices DRA gave a container: one per claim resource (driver/pool/device), with its claim and CDI
    ids; their NUMA nodes are found later, from the ResourceSlices (``webhook/node/dra_locality.py``)."""
    found: list[DraDevice] = []
    for r in resources:
        claim = f"{r.claim_namespace[:63]}/{r.claim_name[:253]}"
        for c in r.claim_resources:
            if len(found) >= MAX_IDS_PER_LIST:
                raise PodResourcesError(f"{where}: more than {MAX_IDS_PER_LIST} DRA devices")
            if not c.driver_name:
                raise PodResourcesError(f"{where}: a DRA device of claim {claim} without driver_name")
            found.append(DraDevice(c.driver_name[:63], c.pool_name[:253], c.device_name[:253], claim,
                                   tuple(d.name[:253] for d in list(c.cdi_devices)[:64])))
    return tuple(found)


def _pod(p: Any, where: str) -> PodAllocation:
    if not p.name or not p.namespace:
        raise PodResourcesError(f"{where}: a Pod without name or namespace")
    where = f"{where} ({p.namespace[:63]}/{p.name[:253]})"
    containers = []
    for c in p.containers:
        if not c.name:
            raise PodResourcesError(f"{where}: a container without a name")
        here = f"{where}, container {c.name[:63]}"
        containers.append(ContainerAllocation(c.name[:63], _cpus(c.cpu_ids, here),
                                              tuple(_memory(m, here) for m in c.memory),
                                              tuple(_devices(d, here) for d in c.devices),
                                              _dynamic(c.dynamic_resources, here)))
    return PodAllocation(p.namespace[:63], p.name[:253], tuple(containers))
