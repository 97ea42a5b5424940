"""Template paths: where a kind keeps its pod specs (``spec.replicatedJobs[*].template.spec``), parsed, walked,
and how a template is named in findings. ``webhook.core.workloads`` holds the table of kinds that use them.

Template paths are dotted field names with two wildcards: ``[*]`` for every item of a list and ``*`` for every
value of a map.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.core.fieldpath import FieldPath, dotted
from webhook.core.resourceblock import ManifestError

LIST = "[*]"  # every item of a list
MAP = "*"  # every value of a map
# What names a list item in a message (``spec.replicatedJobs[1] (workers)``): JobSet's and LWS's ``name``,
# Ray's ``groupName``.
ITEM_NAMES = ("name", "groupName")
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


class PathError(ValueError):
    """A template path that cannot be read; the message says what is wrong with it."""


def parse_path(text: str) -> tuple[str, ...]:
    """``spec.replicatedJobs[*].template.spec`` -> ``("spec", "replicatedJobs", "[*]", "template", "spec")``.

    Keys are field names (letters, digits, ``_``, ``-``); ``[*]`` follows a key, ``*`` stands alone."""
    if not isinstance(text, str) or not text:
        raise PathError("expected a dotted field path such as spec.template.spec")
    out: list[str] = []
    for part in text.split("."):
        key, star = (part[:-3], True) if part.endswith(LIST) else (part, False)
        if key == MAP and not star:
            if not out:
                raise PathError(f"{text!r}: a path cannot start with *")
            out.append(MAP)
            continue
        if not _KEY.match(key):
            raise PathError(f"{text!r}: {part!r} is not a field name (letters, digits, _ and -; [*] for every "
                            "item of a list, * for every value of a map)")
        out.append(key)
        if star:
            out.append(LIST)
    if out[-1] in (LIST, MAP):
        raise PathError(f"{text!r}: a path ends at a pod spec (a mapping with containers), not at a wildcard")
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Unused:
    """When a template makes no Pods, read in its holder, the mapping ``up`` fields above it: ``present`` is set
    there and the integer ``count`` is ``equals`` (``default`` when absent). The same test everywhere a template
    is read: the engine's walk (``unused``) and the policies' CEL (``unused_cel``)."""

    up: int
    present: str
    count: str
    equals: int
    default: int


# sigs.k8s.io/lws (v0.7.0 and v0.10.0, pkg/controllers/pod_controller.go:137/138): with size 1 (the CRD's default)
# the leader Pod's reconcile returns before it makes the worker StatefulSet, so the worker template makes no Pod;
# without a leader template it is still the leader's (constructLeaderStatefulSetApplyConfiguration).
LWS_SIZE_ONE = Unused(up=2, present="leaderTemplate", count="size", equals=1, default=1)


@dataclass(frozen=True, slots=True)
class Template:
    """One place a kind keeps a pod spec: ``path`` (with wildcards), and what a fixed one is called in
    messages (``leader``, ``head``); list items and map values are named by their own name or key. ``unused``:
    when the template makes no Pods (then not judged)."""

    path: str
    name: str | None = None
    unused: Unused | None = None
    segments: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "segments", parse_path(self.path))

    @property
    def wild(self) -> bool:
        return any(s in (LIST, MAP) for s in self.segments)


def _items(template: Template) -> tuple[str, ...]:
    """The template's path up to its last wildcard: the list or map whose items hold it."""
    last = max(i for i, s in enumerate(template.segments) if s in (LIST, MAP))
    return template.segments[:last + 1]


def role(templates: tuple[Template, ...], template: Template) -> str | None:
    """The name said after a list item's (``spec.roles[0] (prefill) leader``): a wild template's own name, where
    another of the kind's ``templates`` sits in the same items (DisaggregatedSet's leader and worker of each
    role), so that findings tell them apart; else None (the item's name is enough)."""
    if not template.wild or template.name is None:
        return None
    items = _items(template)
    return template.name if any(t is not template and t.wild and _items(t) == items for t in templates) else None


def template_label(template: Template, path: FieldPath, item_name: str | None, single: bool,
                   part: str | None = None) -> str:
    """How a template is named in findings: ``spec.replicatedJobs[1] (workers)`` (up to its last wildcard,
    and the item's name; ``part``, the template's ``role``, after it), ``spec.leaderWorkerTemplate.leaderTemplate
    (leader)`` (without the trailing ``template.spec``/``spec``); empty for a kind with one fixed template."""
    if single:
        return ""
    if template.wild:
        # the concrete path has one segment per pattern segment, list wildcards included (as the index)
        shown = dotted(path[:len(_items(template))])
        label = f"{shown} ({item_name})" if item_name else shown
        return f"{label} {part}" if part else label
    cut = len(path)
    for tail in (("template", "spec"), ("spec",)):
        if tuple(path[-len(tail):]) == tail and len(path) > len(tail):
            cut = len(path) - len(tail)
            break
    shown = dotted(path[:cut])
    return f"{shown} ({template.name})" if template.name else shown


def unused(template: Template, obj: Mapping[str, Any], path: FieldPath) -> bool:
    """``template.unused`` holds for the pod spec at ``path`` (from ``obj``'s root, as ``walk_template`` walked
    it). A null is absent (the API server prunes it); a count that is not an integer does not hold."""
    test = template.unused
    if test is None:
        return False
    holder: Any = obj
    for key in path[:len(path) - test.up]:
        holder = holder[key]
    if not isinstance(holder, Mapping) or holder.get(test.present) is None:
        return False
    count = holder.get(test.count)
    count = test.default if count is None else count
    return isinstance(count, int) and not isinstance(count, bool) and count == test.equals


def unused_cel(test: Unused, holder: str) -> str:
    """``unused`` in CEL, over ``holder`` (CEL of the holder, optional or plain)."""
    return f"{holder}.?{test.present}.hasValue() && {holder}.?{test.count}.orValue({test.default}) == {test.equals}"


def walk_template(node: Any, segments: tuple[str, ...], walked: FieldPath,
                   item_name: str | None) -> Iterator[tuple[FieldPath, Mapping[str, Any] | None, str | None]]:
    """Each pod spec ``segments`` reaches from ``node`` (None where a fixed key is missing), with the name of
    the innermost list item or map key it passed."""
    if not segments:
        yield walked, node, item_name
        return
    head, rest = segments[0], segments[1:]
    if head == LIST:
        if not isinstance(node, list):
            raise ManifestError(walked, "expected a list")
        for i, item in enumerate(node):
            if not isinstance(item, Mapping):
                raise ManifestError((*walked, i), "expected a mapping")
            named = next((item[k] for k in ITEM_NAMES if isinstance(item.get(k), str) and item[k]), None)
            yield from walk_template(item, rest, (*walked, i), named)
        return
    if head == MAP:
        if not isinstance(node, Mapping):
            raise ManifestError(walked, "expected a mapping")
        for key, value in node.items():
            if value is None:
                continue
            if not isinstance(value, Mapping):
                raise ManifestError((*walked, str(key)), "expected a mapping")
            yield from walk_template(value, rest, (*walked, str(key)), None)  # the key is in the path
        return
    value = node.get(head)
    here = (*walked, head)
    if value is None:
        yield here, None, item_name
        return
    if rest and rest[0] == LIST:
        if not isinstance(value, list):
            raise ManifestError(here, "expected a list")
    elif not isinstance(value, Mapping):
        raise ManifestError(here, "expected a mapping")
    yield from walk_template(value, rest, here, item_name)


__all__ = ["ITEM_NAMES", "LIST", "LWS_SIZE_ONE", "MAP", "PathError", "Template", "Unused", "parse_path", "role",
           "template_label", "unused", "unused_cel", "walk_template"]
