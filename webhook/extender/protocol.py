"""kube-scheduler's extender protocol (k8s.io/kube-scheduler/extender/v1, types.go), the one place that knows it:
``ExtenderArgs`` in (``Pod``, and ``NodeNames`` with ``nodeCacheCapable: true`` or else ``Nodes``, a NodeList),
``ExtenderFilterResult`` (``NodeNames`` or ``Nodes``, ``FailedNodes``, ``FailedAndUnresolvableNodes``,
``Error``) and ``HostPriorityList`` (``Host``, ``Score`` 0..``MaxExtenderPriority``) out.

The Go types carry no json tags: the fields are spelled as Go names them, and encoding/json reads keys
case-insensitively, so this reader does too. What cannot be read is ``BadArgs`` (HTTP 400 with the reason).
"""

from __future__ import annotations

import itertools
import json
import operator
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from webhook.core.names import namespace_problem, shown, subdomain_problem
from webhook.extender.scorer import MAX_SCORE
from webhook.extender.verdicts import Verdict

_KEPT = operator.attrgetter("kept")
_SCORE = operator.attrgetter("score")
_REASON = operator.attrgetter("reason")
_UNRESOLVABLE = operator.attrgetter("unresolvable")
_TAILS = [f', "Score": {s}}}' for s in range(MAX_SCORE + 1)]

MAX_NODES = 100_000
MAX_UID = 128  # the API server's UIDs are 36 characters; more is not one, and would go into the log


class BadArgs(ValueError):
    """An ExtenderArgs this extender cannot answer; the message names the field."""


@dataclass(frozen=True)
class Args:
    """One call: the Pod, the candidate node names, and the NodeList when the scheduler sent whole Nodes."""

    pod: Mapping[str, Any]
    names: tuple[str, ...]
    nodes: Sequence[Mapping[str, Any]] | None = None  # nodeCacheCapable: false

    @property
    def uid(self) -> str:
        meta = self.pod.get("metadata")
        uid = meta.get("uid") if isinstance(meta, Mapping) else None
        return uid if isinstance(uid, str) else ""

    @property
    def pod_name(self) -> str:
        meta = self.pod.get("metadata")
        if not isinstance(meta, Mapping):
            return ""
        return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def _field(body: Mapping[str, Any], name: str) -> Any:
    """``body[name]`` as encoding/json finds it: an exact match first, else one that differs only in case."""
    if name in body:
        return body[name]
    lowered = name.lower()
    for key, value in body.items():
        if isinstance(key, str) and key.lower() == lowered:
            return value
    return None


def _decode(raw: bytes | bytearray) -> Any:
    """The body as JSON-like objects, decoded in C (msgspec: a third of ``json.loads``'s time over thousands of
    node names); what kube-scheduler's encoding/json writes, UTF-8."""
    return msgspec.json.decode(raw)


def _json_object(raw: bytes | bytearray, what: str) -> Mapping[str, Any]:
    """The body decoded (``_decode``), which must be one JSON object (``what``: the type kube-scheduler sends)."""
    try:
        body = _decode(raw)
    except (msgspec.DecodeError, ValueError, UnicodeDecodeError) as exc:
        raise BadArgs(f"the body is not JSON: {exc}") from None
    if not isinstance(body, Mapping):
        raise BadArgs(f"{what} must be a JSON object, not {type(body).__name__}")
    return body


def parse_args(raw: bytes | bytearray) -> Args:
    body = _json_object(raw, "ExtenderArgs")
    pod = _field(body, "Pod")
    if not isinstance(pod, Mapping):
        raise BadArgs("Pod: missing or not an object (kube-scheduler sends the Pod being scheduled)")
    if not isinstance(pod.get("spec"), Mapping):
        raise BadArgs("Pod.spec: missing or not an object")
    names = _field(body, "NodeNames")
    nodes = _field(body, "Nodes")
    if names is not None:
        if not isinstance(names, list) or not set(map(type, names)) <= {str}:  # C loops: thousands of names
            raise BadArgs("NodeNames: must be a list of node names")
        if len(names) > MAX_NODES:
            raise BadArgs(f"NodeNames: over {MAX_NODES} nodes")
        return Args(pod, tuple(names))
    if nodes is not None:
        items = nodes.get("items") if isinstance(nodes, Mapping) else None
        if not isinstance(items, list):
            raise BadArgs("Nodes.items: must be a list of Node objects")
        found = []
        for i, item in enumerate(items):
            meta = item.get("metadata") if isinstance(item, Mapping) else None
            name = meta.get("name") if isinstance(meta, Mapping) else None
            if not isinstance(name, str) or not name:
                raise BadArgs(f"Nodes.items[{i}].metadata.name: missing")
            found.append(name)
        return Args(pod, tuple(found), items)
    raise BadArgs("NodeNames (nodeCacheCapable: true) or Nodes: one is required")


@dataclass(frozen=True)
class Binding:
    """``ExtenderBindingArgs``: the Pod (name, namespace, UID) and the node the scheduler chose."""

    name: str
    namespace: str
    uid: str
    node: str


def parse_binding(raw: bytes | bytearray) -> Binding:
    """``ExtenderBindingArgs`` (``PodName``, ``PodNamespace``, ``PodUID``, ``Node``), read as encoding/json does."""
    body = _json_object(raw, "ExtenderBindingArgs")
    found = {}
    for name in ("PodName", "PodNamespace", "PodUID", "Node"):
        value = _field(body, name)
        if value is None:
            value = ""
        if not isinstance(value, str):
            raise BadArgs(f"{name}: must be a string")
        found[name] = value
    for name in ("PodName", "PodNamespace", "Node"):
        if not found[name]:
            raise BadArgs(f"{name}: missing (kube-scheduler sends the Pod and the node it chose)")
    # The names go into the Binding's URL and the log: checked as the API server checks them (a Pod's and a
    # Node's name are DNS-1123 subdomains, a namespace's a label), so no other path and no megabyte line is made.
    for field, problem in (("PodName", subdomain_problem(found["PodName"], "Pod")),
                           ("PodNamespace", namespace_problem(found["PodNamespace"])),
                           ("Node", subdomain_problem(found["Node"], "Node"))):
        if problem is not None:
            raise BadArgs(f"{field}: {problem}")
    if len(found["PodUID"]) > MAX_UID:
        raise BadArgs(f"PodUID: {shown(found['PodUID'])} ({len(found['PodUID'])} characters) is not a UID (the API "
                      f"server's are 36 characters)")
    return Binding(found["PodName"], found["PodNamespace"], found["PodUID"], found["Node"])


def filter_result(args: Args, verdicts: Sequence[Verdict]) -> dict[str, Any]:
    """``ExtenderFilterResult`` (``verdicts``: one per node name, in order): the kept nodes (as names, or as
    Nodes when the scheduler sent Nodes) and each left-out node with why; those no preemption could help in
    ``FailedAndUnresolvableNodes``."""
    if len(args.names) != len(verdicts):
        raise ValueError("one verdict per node name")
    failed: dict[str, str] = {}
    unresolvable: dict[str, str] = {}
    # Over thousands of nodes, no Python per node: the flags, the kept and the left-out picked out in C.
    flags = list(map(_KEPT, verdicts))
    everywhere = all(flags)
    if not everywhere:
        refused = list(map(operator.not_, flags))
        refused_names = list(itertools.compress(args.names, refused))
        left_out = list(itertools.compress(verdicts, refused))
        hopeless = list(map(_UNRESOLVABLE, left_out))
        helped = list(map(operator.not_, hopeless))
        failed = dict(zip(itertools.compress(refused_names, helped),
                          map(_REASON, itertools.compress(left_out, helped)), strict=True))
        unresolvable = dict(zip(itertools.compress(refused_names, hopeless),
                                map(_REASON, itertools.compress(left_out, hopeless)), strict=True))
    out: dict[str, Any] = {"FailedNodes": failed, "FailedAndUnresolvableNodes": unresolvable, "Error": ""}
    if args.nodes is None:
        names = args.names
        out["NodeNames"] = list(names) if everywhere else list(itertools.compress(names, flags))
    else:
        out["Nodes"] = {"apiVersion": "v1", "kind": "NodeList", "metadata": {},
                        "items": list(itertools.compress(args.nodes, flags))}
    return out


def priority_list(args: Args, verdicts: Sequence[Verdict]) -> list[dict[str, Any]]:
    """``HostPriorityList``: a verdict per node name, in order."""
    return [{"Host": name, "Score": v.score} for name, v in zip(args.names, verdicts, strict=True)]


def encode(body: Any) -> bytes:
    """A JSON answer (an ``ExtenderFilterResult`` over thousands of names), encoded in C."""
    return msgspec.json.encode(body)


# The last call's node names and their entries' heads (``{"Host": "<name>"``): kube-scheduler asks again and
# again with the same candidates, so a prioritize call encodes no name it encoded the call before.
_HEADS: tuple[tuple[str, ...], list[str]] = ((), [])
_HEADS_LOCK = threading.Lock()


def _heads(names: tuple[str, ...]) -> list[str] | None:
    global _HEADS
    with _HEADS_LOCK:
        known, heads = _HEADS
    if known == names:
        return heads
    encoded = json.dumps(list(names))[1:-1].split(", ") if names else []
    if len(encoded) != len(names):  # a name with ", " in it: the slow, sure way
        return None
    heads = list(map(operator.add, itertools.repeat('{"Host": '), encoded))
    with _HEADS_LOCK:
        _HEADS = (names, heads)
    return heads


def priority_json(args: Args, verdicts: Sequence[Verdict]) -> str:
    """``priority_list`` as JSON text, written directly (a call over thousands of nodes spends most of its time
    encoding dictionaries otherwise); node names are encoded as JSON strings, once per list of candidates."""
    if len(args.names) != len(verdicts):
        raise ValueError("one verdict per node name")
    heads = _heads(args.names)
    if heads is None:
        return json.dumps(priority_list(args, verdicts))
    # Each entry is the encoded name's head and a tail per score (0 to 10): joined in C.
    tails = map(_TAILS.__getitem__, map(_SCORE, verdicts))
    return "[" + ", ".join(map(operator.add, heads, tails)) + "]"
