"""The YAML node walker ``check`` and ``fix`` share (composed YAML nodes; Kubernetes nodes are ``batch/nodes.py``
and ``node/``): from a composed document down a field path, to point at the line of a field (or where a missing
one belongs) or to edit it in place."""

from __future__ import annotations

from dataclasses import dataclass

import yaml

from webhook.core.fieldpath import Segment
from webhook.manifests.goyaml import PLAIN, DecodeError, Loader, construct, is_merge, merge_items, resolve_plain


@dataclass(frozen=True, slots=True)
class Walked:
    """Where ``walk`` stopped: the deepest node on the path, the segments left below it, the 1-based line of
    the last key or item it went through, and the column of the last key."""

    node: yaml.Node
    rest: tuple[Segment, ...]
    line: int
    key_column: int


def walk(node: yaml.Node, segments: tuple[Segment, ...], merges: bool = True) -> Walked:
    """Follow ``segments`` (map keys, list indexes) down from ``node`` as far as the nodes go. A repeated key:
    the last one holds the value, as go-yaml v2 decodes it; with ``merges``, into what ``<<`` merges too."""
    line, column = node.start_mark.line + 1, 0
    for i, seg in enumerate(segments):
        child = None
        if isinstance(node, yaml.MappingNode) and isinstance(seg, str):
            found = _lookup(node, seg, 0 if merges else -1)
            if found is not None:
                key, child = found
                line, column = key.start_mark.line + 1, key.start_mark.column
        elif isinstance(node, yaml.SequenceNode) and isinstance(seg, int) and 0 <= seg < len(node.value):
            child = node.value[seg]
            line = child.start_mark.line + 1
        if child is None:
            return Walked(node, segments[i:], line, column)
        node = child
    return Walked(node, (), line, column)


def _lookup(node: yaml.MappingNode, seg: str, depth: int) -> tuple[yaml.Node, yaml.Node] | None:
    """The key and value that hold ``seg`` as go-yaml v2 decodes ``node``: keys and ``<<`` merges apply where
    they stand, so the last of them that has ``seg`` wins (a value merged from an anchor is the anchor's node)."""
    if depth > 32:
        return None
    for key, value in reversed(node.value):
        if isinstance(key, yaml.ScalarNode) and is_merge(key):
            if depth < 0:  # merges not followed
                continue
            try:
                merged = merge_items(value)
            except DecodeError:
                return None
            for _, item in reversed(merged):
                found = _lookup(item, seg, depth + 1)
                if found is not None:
                    return found
        elif isinstance(key, yaml.ScalarNode) and key.value == seg:
            return key, value
    return None


def is_null(node: yaml.ScalarNode) -> bool:
    """The scalar decodes to null (``~``, ``null``, nothing, or ``!!null``)."""
    if node.tag == PLAIN:
        return not node.value or resolve_plain(node.value) is None
    return bool(node.tag == "tag:yaml.org,2002:null")


def plain_reads_back(value: str) -> bool:
    """``value`` written as a plain scalar (``key: value``) decodes as exactly that string."""
    if not value or value.strip() != value or resolve_plain(value) != value:
        return False
    loader = Loader(f"k: {value}\n")
    try:
        node = loader.get_single_node()
        return node is not None and construct(node, "*" in value) == {"k": value}
    except (yaml.YAMLError, DecodeError):
        return False
    finally:
        loader.dispose()
