"""The Kubernetes API, through the ``kubernetes`` client: one raw request (``call``, the watch's transport uses it
too), the caBundle of webhook configurations, and the listing behind ``qos-guard audit`` (paged by the one
pager, ``webhook/cluster/pager.py``)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import urllib3
from kubernetes import client, config

from webhook.cluster.backoff import retry_after
from webhook.cluster.reach import unreachable
from webhook.core.claims import CLAIM_KINDS, made_for_pod
from webhook.core.engine import MODE_SELECTOR
from webhook.core.workloads import KINDS, Kind, group_of

if TYPE_CHECKING:
    from webhook.cluster.pager import Page


class ClusterError(RuntimeError):
    """The API could not be reached, refused the change, or answered with what is not an API object."""


class Unreachable(ClusterError):
    """The API server could not be reached at all (refused, reset, TLS, timeout): every other request would fail
    the same way, so a caller stops rather than report each one."""

    def __init__(self, exc: BaseException, server: str | None = None) -> None:
        super().__init__(unreachable(exc, server))


def server_of(api: Any) -> str | None:
    """The API server's URL a client talks to (its kubeconfig's ``server``), for messages."""
    host = getattr(getattr(api, "configuration", None), "host", None)
    return host if isinstance(host, str) and host else None


class BadAnswer(ClusterError):
    """A successful (2xx) answer whose body is not a JSON object: never read as an empty one, which would pass
    for an empty list (a proxy's HTML page, a truncated body)."""

    def __init__(self, method: str, path: str, status: int, data: bytes) -> None:
        shown = data[:80].decode("utf-8", "replace")
        super().__init__(f"{method} {path}: HTTP {status} with a body that is not a JSON object "
                         f"({len(data)} bytes: {shown!r}); is something other than the API server answering?")


def decode_body(method: str, path: str, status: int, data: bytes | None) -> Any:
    """The decoded JSON of an answer: a 2xx must be a JSON object (``BadAnswer``; a 204 has no body: ``{}``);
    an error status's body is only its message, and anything but JSON is read as none (``{}``)."""
    try:
        decoded = json.loads(data) if data else None
    except (ValueError, TypeError):
        decoded = None
    if 200 <= status < 300 and not isinstance(decoded, dict):
        if status == 204 and not data:
            return {}
        raise BadAnswer(method, path, status, data or b"")
    return decoded if decoded is not None else {}


def _configuration() -> Any:
    """A client configuration with urllib3's own retries off: every caller has its retry policy (the write loops'
    ``backoff.Backoff`` with jitter and Retry-After, the reflectors' relist backoff, a command's one attempt), and
    urllib3's default (three more connections at once after a failed one) multiplied each attempt by four against
    an API server that was down or overloaded. A connection the server closed while idle is found before reuse
    (urllib3 checks a pooled connection), so nothing a retry used to hide is left to it. Built without the
    client's process-wide default (``Configuration()`` would copy it), as the kubeconfig loader builds one."""
    configuration = type.__call__(client.Configuration)
    configuration.retries = False
    return configuration


def _api_client(kubeconfig: str | None, context: str | None = None) -> Any:
    """In-cluster credentials unless a kubeconfig (or a context of one) is asked for; then ``kubeconfig``,
    else ``$KUBECONFIG`` or ``~/.kube/config``, as kubectl chooses. urllib3 retries nothing (``_configuration``)."""
    try:
        if kubeconfig:
            return config.new_client_from_config(  # type: ignore[no-untyped-call]
                config_file=kubeconfig, context=context, client_configuration=_configuration())
        if context is None:
            try:
                configuration = _configuration()
                config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
                return client.ApiClient(configuration)
            except config.ConfigException:
                pass
        return config.new_client_from_config(  # type: ignore[no-untyped-call]
            context=context, client_configuration=_configuration())
    except (config.ConfigException, OSError, ValueError) as exc:
        raise ClusterError(f"no usable kubeconfig: {exc}") from None


def call(api: Any, method: str, path: str, query: list[tuple[str, str]], headers: dict[str, str],
         timeout: tuple[float, float], body: str | dict[str, Any] | None = None) -> Any:
    """One request through the ``kubernetes`` client's connection, its body not read yet (the one raw-HTTP helper
    of ``Lister`` and the watch's transport): a connection that fails is ``Unreachable``."""
    request = api.param_serialize(method, path, query_params=query, header_params=headers, body=body,
                                  auth_settings=["BearerToken"])
    try:
        return api.call_api(*request, _request_timeout=timeout)
    except (OSError, urllib3.exceptions.HTTPError) as exc:
        raise Unreachable(exc, server_of(api)) from None


_WEBHOOK_KINDS = (("ValidatingWebhookConfiguration", "read_validating_webhook_configuration",
                   "patch_validating_webhook_configuration"),
                  ("MutatingWebhookConfiguration", "read_mutating_webhook_configuration",
                   "patch_mutating_webhook_configuration"))


def find_webhooks(names: list[str], kubeconfig: str | None = None) -> dict[str, list[tuple[str, Any]]]:
    """Each named Validating/MutatingWebhookConfiguration as the API server has it: name -> [(kind, object)].
    Read before anything is written (``qos-guard certs --patch-webhooks``): an API server that cannot be reached,
    or a name that is neither, is a ``ClusterError`` while nothing has changed yet."""
    api_client = _api_client(kubeconfig)
    api = client.AdmissionregistrationV1Api(api_client)
    found: dict[str, list[tuple[str, Any]]] = {}
    for name in names:
        for kind, read, _ in _WEBHOOK_KINDS:
            try:
                found.setdefault(name, []).append((kind, getattr(api, read)(name)))
            except client.ApiException as exc:
                if exc.status == 404:
                    continue
                raise ClusterError(f"reading {kind} {name}: HTTP {exc.status} {exc.reason}") from None
            except (OSError, urllib3.exceptions.HTTPError) as exc:
                raise Unreachable(exc, server_of(api_client)) from None
        if not found.get(name):
            raise ClusterError(f"no ValidatingWebhookConfiguration or MutatingWebhookConfiguration named {name} "
                               "(kubectl get validatingwebhookconfigurations,mutatingwebhookconfigurations)")
    return found


def patch_ca_bundle(bundle: str, names: list[str], kubeconfig: str | None = None) -> list[str]:
    """Set ``caBundle`` on every webhook of the named Validating/MutatingWebhookConfigurations."""
    api_client = _api_client(kubeconfig)
    api = client.AdmissionregistrationV1Api(api_client)
    patched: list[str] = []
    for name, objects in find_webhooks(names, kubeconfig).items():
        for kind, current in objects:
            patch = getattr(api, dict((k, p) for k, _, p in _WEBHOOK_KINDS)[kind])
            body = {"webhooks": [{"name": w.name, "clientConfig": {"caBundle": bundle}}
                                 for w in current.webhooks or []]}
            try:
                patch(name, body)
            except client.ApiException as exc:
                raise ClusterError(f"patching {kind} {name}: HTTP {exc.status} {exc.reason}") from None
            except (OSError, urllib3.exceptions.HTTPError) as exc:
                raise Unreachable(exc, server_of(api_client)) from None
            patched.append(f"{kind}/{name}")
    return patched


@dataclass(frozen=True, slots=True)
class Reply:
    """One answer: its status, its decoded body, and the seconds its ``Retry-After`` asks to wait (None: none)."""

    status: int
    body: dict[str, Any]
    retry_after: float | None = None


@dataclass(frozen=True, slots=True)
class Listed:
    """One object from the API (``obj``), or a listing that failed (``error``), in ``namespace``."""

    namespace: str
    kind: str
    obj: dict[str, Any] | None = None
    error: str | None = None


class Lister:
    """Paginated, raw-JSON listing: no model classes, so objects reach the engine exactly as stored."""

    def __init__(self, kubeconfig: str | None = None, page_size: int = 500, context: str | None = None) -> None:
        self._api = _api_client(kubeconfig, context)
        self._page_size = page_size
        self._discovered: dict[tuple[str, str], frozenset[str]] = {}

    def get_raw(self, path: str, limit: int, timeout: tuple[float, float] = (10, 60),
                query: list[tuple[str, str]] | None = None) -> tuple[int, bytes]:
        """``GET path`` as it comes: the status and at most ``limit + 1`` bytes of the body (so a caller
        tells a body over ``limit`` from one at it without reading all of it)."""
        response = call(self._api, "GET", path, query or [], {"Accept": "application/json"}, timeout)
        try:
            raw = response.response  # urllib3's, not read yet
            data = raw.read(limit + 1)
            if len(data) > limit:
                raw.close()  # the rest is never read: the connection cannot be reused
            else:
                raw.release_conn()
        except (OSError, urllib3.exceptions.HTTPError) as exc:
            raise Unreachable(exc, server_of(self._api)) from None
        return int(response.status), bytes(data)

    def send(self, method: str, path: str, query: list[tuple[str, str]], body: str | dict[str, Any] | None,
             content_type: str | None) -> tuple[int, dict[str, Any]]:
        """One raw request; the HTTP status and the decoded body (``decode_body``: a 2xx that is not a JSON object
        is ``BadAnswer``; an error's body that is not one reads as ``{}``). A JSON body is given as a dict (the
        client serializes it; a str would be sent as a JSON string), any other as text."""
        reply = self.request(method, path, query, body, content_type)
        return reply.status, reply.body

    def request(self, method: str, path: str, query: list[tuple[str, str]], body: str | dict[str, Any] | None,
                content_type: str | None) -> Reply:
        """``send``, with the answer's ``Retry-After`` (seconds) for a write loop's backoff."""
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        response = call(self._api, method, path, query, headers, (10, 60), body)
        try:
            response.read()
        except (OSError, urllib3.exceptions.HTTPError) as exc:
            raise Unreachable(exc, server_of(self._api)) from None
        decoded = decode_body(method, path, response.status, response.data)
        return Reply(int(response.status), decoded if isinstance(decoded, dict) else {},
                     retry_after(dict(response.headers or {})))

    def pages(self, path: str, label_selector: str | None = None,
              field_selector: str | None = None) -> Iterator[Page]:
        """Each page of a list, through the one pager (``webhook/cluster/pager.py``): pages within its body cap,
        and after an expired continue token a new list pinned not older than the last (its first page is
        ``restart``: what came before is void)."""
        from webhook.cluster import pager  # the pager imports this module's errors

        def get(query: list[tuple[str, str]]) -> tuple[int, Any]:
            status, data = self.get_raw(path, pager.BODY_CAP, query=query)
            if len(data) > pager.BODY_CAP:
                raise pager.TooLarge(f"GET {path}: the answer is over {pager.BODY_CAP} bytes")
            return status, decode_body("GET", path, status, data)

        return pager.pages(get, path, pager.selectors_of(label_selector, field_selector), self._page_size)

    def list_objects(self, path: str, label_selector: str | None = None,
                     field_selector: str | None = None) -> list[dict[str, Any]]:
        """The objects of one whole list, read page by page; after an expired continue token only the new
        list's, so nothing deleted in between is kept."""
        from webhook.cluster.pager import whole
        return [dict(o) for o in whole(self.pages(path, label_selector, field_selector))]

    def opted_in_namespaces(self) -> list[str]:
        """The namespaces labelled with a mode, less those being deleted: their objects are going, and the API
        server refuses new content in them (a namespace whose finalizers hang stays so for ever)."""
        return sorted(ns["metadata"]["name"] for ns in self.list_objects("/api/v1/namespaces", MODE_SELECTOR)
                      if not being_deleted(ns))

    def served_version(self, kind: Kind) -> str | None:
        """The first of ``kind``'s versions the API server serves it at (discovery, once per group version);
        None when none does (its CRD is not installed): such a kind is not listed, and costs nothing."""
        if kind.core:
            return kind.versions[0]
        for version in kind.versions:
            found = self._discovered.get((kind.group, version))
            if found is None:
                status, body = self.send("GET", f"/apis/{kind.group}/{version}", [], None, None)
                found = frozenset(r.get("name", "") for r in body.get("resources") or []
                                  if isinstance(r, dict)) if status == 200 else frozenset()
                self._discovered[(kind.group, version)] = found
            if kind.plural in found:
                return version
        return None

    def objects(self, namespaces: list[str] | None,
                kinds: Mapping[tuple[str, str], Kind] = KINDS) -> Iterator[Listed]:
        """Every judged object in ``namespaces`` (None: all namespaces), controllers' children left out.

        A kind that cannot be listed (no RBAC) is one ``error`` and the rest still listed; a custom resource
        the cluster does not serve is not listed at all.
        """
        scopes: list[str | None] = list(namespaces) if namespaces is not None else [None]
        controllers = frozenset(k.key for k in kinds.values() if k.controller)
        served = {key: self.served_version(k) for key, k in kinds.items()}
        for scope in scopes:
            listed: list[tuple[str, str, str, bool]] = []  # apiVersion, plural, kind, whether DRA's claim
            for judged in kinds.values():
                version = served[judged.key]
                if version is not None and (judged.namespaced or scope is None):  # cluster-scoped: listed once
                    api_version = f"{judged.group}/{version}" if judged.group else version
                    listed.append((api_version, judged.plural, judged.kind, False))
            listed += [(k.api_version, k.plural, k.kind, True) for k in CLAIM_KINDS.values()]
            for api_version, plural, kind, claim in listed:
                prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
                path = f"{prefix}/{plural}" if scope is None else f"{prefix}/namespaces/{scope}/{plural}"
                seen: set[str] = set()
                try:
                    for page in self.pages(path):
                        for found in page.items:
                            # A new list after an expired token: what was judged already is not judged twice.
                            if page.restart and _identity(found) in seen:
                                continue
                            seen.add(_identity(found))
                            item = dict(found)
                            if _controlled(item, claim, controllers):
                                continue
                            item["apiVersion"], item["kind"] = api_version, kind  # list items carry neither
                            yield Listed((item.get("metadata") or {}).get("namespace", scope or ""), kind, obj=item)
                except Unreachable:
                    raise  # every other kind would fail the same way
                except ClusterError as exc:
                    if claim and "HTTP 404" in str(exc):
                        continue  # no DRA API on this cluster: no claims to judge
                    yield Listed(scope or "", kind, error=str(exc))


def being_deleted(obj: Any) -> bool:
    """An object with a deletion timestamp (for a namespace: phase Terminating) is on its way out."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    status = obj.get("status") if isinstance(obj, dict) else None
    return bool(isinstance(meta, dict) and meta.get("deletionTimestamp")) or (
        isinstance(status, dict) and status.get("phase") == "Terminating")


def _identity(obj: Any) -> str:
    """What tells one listed object from another across two lists: its uid, else namespace/name."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if not isinstance(meta, dict):
        return ""
    return str(meta.get("uid") or f"{meta.get('namespace') or ''}/{meta.get('name') or ''}")


def _controlled(obj: dict[str, Any], claim: bool, controllers: frozenset[tuple[str, str]]) -> bool:
    """Made by a judged controller (a JobSet's Jobs, a LeaderWorkerSet's StatefulSets and Pods): judged
    through it, once; and the claims made for a Pod (from its ResourceClaimTemplate, reported once, or by the
    scheduler for a DRA extended resource)."""
    if claim and made_for_pod(obj):
        return True
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        group = group_of(ref.get("apiVersion"))
        if ref.get("controller") and group is not None and (group, ref.get("kind")) in controllers:
            return True
    return False
