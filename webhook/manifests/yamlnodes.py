"""The YAML node walker ``check`` and ``fix`` share (composed YAML nodes; Kubernetes nodes are ``batch/nodes.py``
and ``node/``): from a composed document down a field path, to point at the line of a field (or where a missing
one belongs) or to edit it in place."""

from __future__ import annotations

from dataclasses import dataclass

import yaml

from webhook.core.fieldpath import Segment
from webhook.manifests.goyaml import PLAIN, DecodeError, Loader, construct, resolve_plain


@dataclass(frozen=True, slots=True)
class Walked:
    """Where ``walk`` stopped: the deepest node on the path, the segments left below it, the 1-based line of
    the last key or item it went through, and the column of the last key."""

    node: yaml.Node
    rest: tuple[Segment, ...]
    line: int
    key_column: int


def walk(node: yaml.Node, segments: tuple[Segment, ...]) -> Walked:
    """Follow ``segments`` (map keys, list indexes) down from ``node`` as far as the nodes go. A repeated key:
    the last one holds the value, as go-yaml v2 decodes it."""
    line, column = node.start_mark.line + 1, 0
    for i, seg in enumerate(segments):
        child = None
        if isinstance(node, yaml.MappingNode) and isinstance(seg, str):
            for key, value in reversed(node.value):
                if isinstance(key, yaml.ScalarNode) and key.value == seg:
                    child, line, column = value, key.start_mark.line + 1, key.start_mark.column
                    break
        elif isinstance(node, yaml.SequenceNode) and isinstance(seg, int) and 0 <= seg < len(node.value):
            child = node.value[seg]
            line = child.start_mark.line + 1
        if child is None:
            return Walked(node, segments[i:], line, column)
        node = child
    return Walked(node, (), line, column)


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
