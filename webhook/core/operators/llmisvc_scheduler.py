"""The managed scheduler's Pod as KServe v0.20.0 finishes it (``expectedSchedulerDeployment``,
``pkg/controller/v1alpha2/llmisvc/scheduler.go``): after the model is attached for its ``tokenizer`` container,
``main`` gets its scheduler config as ``--config-text`` (``preserveSchedulerConfig``: ``config.inline``, a
``config.ref`` ConfigMap's text, none when ``main``'s args already carry a config flag, else KServe's default
config), and for a scheduler of version 0.9.0 or later (the pod's ``app.kubernetes.io/version`` annotation, from
``spec.router.scheduler.annotations``: KServe's preset says 0.9.0) ``schedulerTransform`` drops the ``tokenizer``
when a config text's ``plugins`` list has no ``precise-prefix-cache-scorer`` (``withRemoveUnnecessaryTokenizer``).
KServe's default config has none: the shipped scheduler runs without the tokenizer, but keeps the
storage-initializer or modelcar attached for it.

A config text is read as ``mutateSchedulerConfig`` reads it, into an ``Unstructured`` (a mapping with a ``kind``;
any other text stops the reading there). Text from a ConfigMap or from ``main``'s own args is YAML, which the pure
core does not parse (JSON is read): the tokenizer is then unknown and the scheduler Pod judged without it, as a part
(``Built.partial``). The current Deployment's config, which KServe keeps when the object names none, is taken to be
the default one it made."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from webhook.core.operators import Related
from webhook.core.operators.kserve_config import CONFIG_MAP
from webhook.core.operators.llmisvc_base import KIND, Unknown, get

TOKENIZER = "tokenizer"  # scheduler.go tokenizerContainerName
VERSION = "app.kubernetes.io/version"
PRECISE = "precise-prefix-cache-scorer"
_TEXT_FLAGS = frozenset({"--config-text", "-config-text", "--configText", "-configText"})
_FLAGS = _TEXT_FLAGS | {"--config-file", "-config-file", "--configFile", "-configFile"}
# schedulerConfigText: KServe's default config (both its forms, with or without a prefill), what is read of it.
_DEFAULT: Mapping[str, Any] = {"kind": "EndpointPickerConfig", "plugins": [
    {"type": t} for t in ("queue-scorer", "kv-cache-utilization-scorer", "prefix-cache-scorer", "max-score-picker")]}
# coreos/go-semver NewVersion: major.minor.patch, then "-" pre-release, "+" metadata (dot-separated identifiers).
_ID = r"[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*"
_SEMVER = re.compile(rf"(\d+)\.(\d+)\.(\d+)(?:-({_ID}))?(?:\+{_ID})?")


def transforms(scheduler: Any) -> bool | str:
    """Whether ``schedulerTransform`` removes unneeded tokenizers (version 0.9.0 or later; "0.0.0" when unset),
    or why KServe makes no scheduler Deployment (a version ``semver.NewVersion`` refuses)."""
    annotations = get(scheduler, "annotations")
    version = get(annotations, VERSION) or "0.0.0"
    found = _SEMVER.fullmatch(version) if isinstance(version, str) else None
    if found is None:
        return (f"{KIND} spec.router.scheduler: annotation {VERSION} {version!r} is not a version KServe reads "
                "(major.minor.patch), so it makes no scheduler Deployment")
    release = tuple(int(found.group(i)) for i in (1, 2, 3))
    return release > (0, 9, 0) or (release == (0, 9, 0) and found.group(4) is None)


def _config_map_text(ref: Mapping[str, Any], related: Related, namespace: str | None) -> str | None:
    """The ``config.ref`` ConfigMap's text (config_merge.go): the object's namespace, then KServe's for a
    ``config-scheduler-*`` name; key ``epp`` unless named. None when it is not given."""
    name, key = str(ref.get("name")), ref.get("key") or "epp"
    found = related.named(*CONFIG_MAP, name, namespace)
    if found is None and name.startswith("config-scheduler-"):
        found = related.named(*CONFIG_MAP, name, related.kserve_namespace)
    if found is None:
        return None
    text = get(found, "data", key)
    if not isinstance(text, str):
        raise Unknown(f'{KIND} spec.router.scheduler.config.ref: ConfigMap "{name}" has no key "{key}", so KServe '
                      "builds no Pods")
    return text


def check_config_ref(scheduler: Any, related: Related, namespace: str | None) -> None:
    """combineBaseRefsConfig resolves a ``config.ref`` before any Pod: a given ConfigMap without its key means
    no Pods at all (``Unknown``)."""
    ref = get(scheduler, "config", "ref")
    if get(scheduler, "config", "inline") is None and isinstance(ref, Mapping) and ref.get("name"):
        _config_map_text(ref, related, namespace)


def _texts(main: Mapping[str, Any], scheduler: Any, related: Related, namespace: str | None) -> list[Any]:
    """Each config text ``main`` ends with, in order: the ones in its args, then the one KServe appends; a
    decoded text is a mapping (or what else it is), an unreadable one a string saying where it is."""
    args = [a for a in main.get("args") or [] if isinstance(a, str)]
    texts: list[Any] = [_decode(args[i + 1], "a --config-text in spec.router.scheduler.template's main args")
                        for i in range(len(args) - 1) if args[i] in _TEXT_FLAGS]
    inline, ref = get(scheduler, "config", "inline"), get(scheduler, "config", "ref")
    if inline is not None:
        texts.append(inline)
    elif isinstance(ref, Mapping) and ref.get("name"):
        text = _config_map_text(ref, related, namespace)
        where = f'the ConfigMap "{ref["name"]}" (spec.router.scheduler.config.ref)'
        texts.append(f"{where}, not given" if text is None else _decode(text, where))
    elif not any(args[j] in _FLAGS for j in range(len(args) - 1)):
        texts.append(_DEFAULT)
    return texts


def _decode(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return f"{where}, YAML qos-guard does not read"


def drops_tokenizer(pod: Mapping[str, Any], scheduler: Any, related: Related, namespace: str | None) -> bool | str:
    """Whether KServe drops the tokenizer of this (version 0.9.0 or later) scheduler Pod; a string saying what
    is not known where that cannot be said."""
    main = next((c for c in pod.get("containers") or [] if get(c, "name") == "main"), None)
    if not isinstance(main, Mapping):
        return False  # mutateSchedulerConfig reads main's config only
    drops = False
    for text in _texts(main, scheduler, related, namespace):
        if isinstance(text, str):
            if drops:
                return True  # an earlier config already dropped it
            return (f"{KIND} spec.router.scheduler: KServe drops the {TOKENIZER} container unless its scheduler "
                    f"config's plugins name {PRECISE}, and that config is {text}: the scheduler Pod is judged "
                    f"without the {TOKENIZER}")
        if not isinstance(text, Mapping) or not isinstance(text.get("kind"), str) or not text["kind"]:
            break  # not an Unstructured: mutateSchedulerConfig stops reading
        plugins = text.get("plugins")
        if isinstance(plugins, list) and not any(get(p, "type") == PRECISE for p in plugins):
            drops = True
    return drops


def without_tokenizer(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The pod spec with its first ``tokenizer`` container removed."""
    containers = list(pod.get("containers") or [])
    at = next(i for i, c in enumerate(containers) if get(c, "name") == TOKENIZER)
    return {**pod, "containers": containers[:at] + containers[at + 1:]}


__all__ = ["TOKENIZER", "VERSION", "check_config_ref", "drops_tokenizer", "transforms", "without_tokenizer"]
