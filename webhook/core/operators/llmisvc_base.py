"""What the LLMInferenceService builder's modules share (``webhook.core.operators.llmisvc`` and the ``llmisvc_*``
beside it): the kind, reading the object, the strategic merge KServe v0.20.0's llmisvc controller makes of specs
and containers (``mergeSpecs``, ``MergeContainerWithPatch``), and ``Unknown``, what the builder cannot know."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

KIND = "LLMInferenceService"
# Lists a strategic merge of a PodSpec merges by name (patchMergeKey); every other list is replaced.
_BY_NAME = frozenset({"containers", "initContainers", "ephemeralContainers", "resourceClaims"})


class Unknown(Exception):
    """What the builder cannot know (an object it was not given), or KServe building no Pods: said, never
    judged."""


def merge(base: Any, override: Any) -> Any:
    """``override`` strategically merged over ``base`` (KServe's ``mergeSpecs`` and ``MergeContainerWithPatch``):
    mappings key by key, containers by name, other lists and values replaced; an absent or null value keeps the
    base's (the patch is made from the typed override, which drops them)."""
    if not isinstance(base, Mapping) or not isinstance(override, Mapping):
        return base if override is None else override
    out = dict(base)
    for key, value in override.items():
        if value is None:
            continue
        before = out.get(key)
        if key in _BY_NAME and isinstance(before, list) and isinstance(value, list):
            out[key] = _by_name(before, value)
        else:
            out[key] = merge(before, value) if isinstance(before, Mapping) else value
    return out


def _by_name(base: list[Any], override: list[Any]) -> list[Any]:
    merged = list(base)
    for item in override:
        name = item.get("name") if isinstance(item, Mapping) else None
        at = next((i for i, b in enumerate(merged) if isinstance(b, Mapping) and b.get("name") == name), None)
        if at is None or name is None:
            merged.append(item)
        else:
            merged[at] = merge(merged[at], item)
    return merged


def get(node: Any, *keys: str) -> Any:
    """``node[keys[0]][keys[1]]...``, None where a step is missing or not a mapping."""
    for key in keys:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def positive(node: Any, key: str) -> bool:
    """``ptr.Deref(node.key, 0) > 0`` for an int32 pointer field."""
    value = get(node, key)
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def scheme(uri: str) -> str:
    """The scheme KServe cuts from ``URI.String()`` (``strings.Cut(uri, "://")``): a model or adapter URI is an
    ``apis.URL``, and Go's ``url.Parse`` lowercases its scheme (``HF://org/m`` is ``hf``)."""
    return uri.split("://", 1)[0].lower()


__all__ = ["KIND", "Unknown", "get", "merge", "positive", "scheme"]
