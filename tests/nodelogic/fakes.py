"""A kubelet PodResources server (the generated servicer, real gRPC over a unix socket) that answers what a
test sets, and an in-memory stand-in for the API server's list/create calls the agent makes."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

from webhook.cluster.client import ClusterError, Reply
from webhook.node.podresources import api_pb2, api_pb2_grpc

SLICES = "/apis/resource.k8s.io/v1/resourceslices"


def topology(*nodes: int) -> api_pb2.TopologyInfo:
    return api_pb2.TopologyInfo(nodes=[api_pb2.NUMANode(ID=n) for n in nodes])


def container(name: str, cpus: list[int] = (), devices: list[tuple[str, list[str], list[int]]] = (),  # type: ignore[assignment]
              memory: list[tuple[str, int, list[int]]] = (),  # type: ignore[assignment]
              dra: list[tuple[str, str, list[tuple[str, str, str]]]] = ()) -> api_pb2.ContainerResources:  # type: ignore[assignment]
    """``dra``: (claim namespace, claim name, [(driver, pool, device)]), as kubelet fills dynamic_resources."""
    return api_pb2.ContainerResources(
        name=name, cpu_ids=cpus,
        devices=[api_pb2.ContainerDevices(resource_name=r, device_ids=ids, topology=topology(*n))
                 for r, ids, n in devices],
        memory=[api_pb2.ContainerMemory(memory_type=t, size=s, topology=topology(*n)) for t, s, n in memory],
        dynamic_resources=[api_pb2.DynamicResource(
            claim_namespace=ns, claim_name=claim, claim_resources=[
                api_pb2.ClaimResource(driver_name=d, pool_name=p, device_name=n,
                                      cdi_devices=[api_pb2.CDIDevice(name=f"{d}/gpu={n}")]) for d, p, n in found])
            for ns, claim, found in dra])


class Kubelet(api_pb2_grpc.PodResourcesListerServicer):
    def __init__(self) -> None:
        self.pods: list[api_pb2.PodResources] = []
        self.allocatable_cpus: list[int] = [1]
        self.serve_get = True
        self.calls: list[str] = []

    def List(self, request: Any, context: Any) -> api_pb2.ListPodResourcesResponse:
        self.calls.append("List")
        return api_pb2.ListPodResourcesResponse(pod_resources=self.pods)

    def GetAllocatableResources(self, request: Any, context: Any) -> api_pb2.AllocatableResourcesResponse:
        self.calls.append("GetAllocatableResources")
        return api_pb2.AllocatableResourcesResponse(cpu_ids=self.allocatable_cpus)

    def Get(self, request: Any, context: Any) -> api_pb2.GetPodResourcesResponse:
        self.calls.append("Get")
        if not self.serve_get:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "method Get not implemented")
        for p in self.pods:
            if (p.namespace, p.name) == (request.pod_namespace, request.pod_name):
                return api_pb2.GetPodResourcesResponse(pod_resources=p)
        context.abort(grpc.StatusCode.UNKNOWN, f"pod {request.pod_name} in namespace {request.pod_namespace} "
                      "not found")
        raise AssertionError


def serve(socket: Path, servicer: Kubelet | None = None, raw: bytes | None = None) -> grpc.Server:
    """Start a server on ``socket``: the servicer, or (``raw``) one answering every call with these bytes."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    if raw is not None:
        handler = grpc.unary_unary_rpc_method_handler(lambda req, ctx: raw, request_deserializer=lambda b: b,
                                                      response_serializer=lambda b: b)
        names = ("List", "GetAllocatableResources", "Get")
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(
            "v1.PodResourcesLister", {n: handler for n in names})])
    else:
        api_pb2_grpc.add_PodResourcesListerServicer_to_server(servicer or Kubelet(), server)
    server.add_insecure_port(f"unix://{socket}")
    server.start()
    return server


class Watch:
    """An open watch's response: ``shutdown`` ends its stream (as the agent does when it stops)."""

    def __init__(self) -> None:
        self.closed = threading.Event()

    def shutdown(self) -> None:
        self.closed.set()

    def release_conn(self) -> None:
        self.closed.set()


class FakeAPI:
    """What the agent asks of the API server: namespaces and Pods listed (``pages``) or listed and watched (a
    ``Transport``: ``get``, ``stream``; ``change`` makes an event), Events and reports written."""

    def __init__(self) -> None:
        self.namespaces: list[dict[str, Any]] = []
        self.pods: list[dict[str, Any]] = []
        self.slices: list[dict[str, Any]] = []  # ResourceSlices (resource.k8s.io/v1), filtered by spec.nodeName
        self.sent: list[tuple[str, str, dict[str, Any] | None]] = []
        self.existing: set[str] = set()
        self.listed: list[tuple[str, dict[str, str]]] = []  # every list: pages() and get(), with its query
        self.watched: list[tuple[str, dict[str, str]]] = []
        self.rv = 1
        self.events: list[tuple[int, str, str, dict[str, Any]]] = []  # (rv, path, type, object)
        self.refuse: dict[str, int] = {}  # path -> HTTP status of its lists
        self.claims: dict[str, dict[str, Any]] = {}  # ResourceClaim objects by API path (GET)
        self._cond = threading.Condition()

    def get(self, path: str, query: list[tuple[str, str]], accept: str) -> tuple[int, Any]:
        self.listed.append((path, dict(query)))
        if path in self.refuse:
            return self.refuse[path], {"kind": "Status", "message": f"{path} is forbidden"}
        if "/resourceclaims/" in path:
            return (200, self.claims[path]) if path in self.claims else (404, {"message": "not found"})
        with self._cond:
            items = self.namespaces if path == "/api/v1/namespaces" else self.pods if path == "/api/v1/pods" else \
                self._slices(dict(query).get("fieldSelector")) if path == SLICES else []
            return 200, {"items": [dict(o) for o in items], "metadata": {"resourceVersion": str(self.rv)}}

    def _slices(self, selector: str | None) -> list[dict[str, Any]]:
        if selector is None:
            return list(self.slices)
        node = selector.removeprefix("spec.nodeName=")  # "": the slices that name no node, as the API selects
        return [s for s in self.slices if (s["spec"].get("nodeName") or "") == node]

    def stream(self, path: str, query: list[tuple[str, str]], accept: str) -> tuple[int, Iterator[bytes], Any]:
        self.watched.append((path, dict(query)))
        response = Watch()
        return 200, self._events(path, int(dict(query)["resourceVersion"]), response), response

    def _events(self, path: str, since: int, response: Watch) -> Iterator[bytes]:
        while not response.closed.is_set():
            with self._cond:
                fresh = [(rv, kind, obj) for rv, p, kind, obj in self.events if p == path and rv > since]
                if not fresh:
                    self._cond.wait(0.05)
            for rv, kind, obj in fresh:
                since = rv
                yield json.dumps({"type": kind, "object": obj}).encode()

    def change(self, kind: str, obj: dict[str, Any]) -> None:
        """A Pod or namespace ``ADDED``, ``MODIFIED`` or ``DELETED``: in the lists and as a watch event."""
        pod = "namespace" in obj["metadata"]
        path = "/api/v1/pods" if pod else "/api/v1/namespaces"
        with self._cond:
            self.rv += 1
            obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self.rv)}}
            kept = self.pods if pod else self.namespaces
            kept[:] = [o for o in kept if (o["metadata"]["name"], o["metadata"].get("namespace")) !=
                       (obj["metadata"]["name"], obj["metadata"].get("namespace"))]
            if kind != "DELETED":
                kept.append(obj)
            self.events.append((self.rv, path, kind, obj))
            self._cond.notify_all()

    def list_objects(self, path: str, label_selector: str | None = None,
                     field_selector: str | None = None) -> list[dict[str, Any]]:
        self.listed.append((path, {"labelSelector": label_selector or "", "fieldSelector": field_selector or ""}))
        if path in self.refuse:
            raise ClusterError(f"GET {path}: HTTP {self.refuse[path]} {path} is forbidden")
        if path == SLICES:
            return self._slices(field_selector)
        if path == "/api/v1/namespaces":
            return list(self.namespaces)
        if path.endswith("/pods"):
            return [p for p in self.pods if path == "/api/v1/pods" or
                    path == f"/api/v1/namespaces/{p['metadata']['namespace']}/pods"]
        return []

    def request(self, method: str, path: str, query: list[tuple[str, str]], body: Any,
                content_type: str | None) -> Reply:
        """``Lister.request``: ``send``'s answer (no Retry-After)."""
        return Reply(*self.send(method, path, query, body, content_type))

    def send(self, method: str, path: str, query: list[tuple[str, str]], body: str | dict[str, Any] | None,
             content_type: str | None) -> tuple[int, dict[str, Any]]:
        # As the kubernetes client does: a JSON body must be an object (a str is sent as a JSON string), any
        # other content type is sent as the text given.
        if content_type == "application/json":
            assert isinstance(body, dict), f"{method} {path}: a JSON body given as {type(body).__name__}"
            decoded: dict[str, Any] | None = body
        else:
            assert body is None or isinstance(body, str)
            decoded = json.loads(body) if body else None
        self.sent.append((method, path, decoded))
        if method == "GET" and "/resourceclaims/" in path:
            if path in self.refuse:
                return self.refuse[path], {"message": f"{path} is forbidden"}
            return (200, self.claims[path]) if path in self.claims else (404, {"message": "not found"})
        if method == "POST" and decoded is not None:
            key = f"{path}/{decoded['metadata']['name']}"
            if key in self.existing:
                return 409, {"message": "already exists"}
            self.existing.add(key)
            return 201, {}
        return 200, {}
