"""What the operators' builders read from the input itself (``webhook.core.operators.Related``): ``check`` and
``fix`` read every document first, and hand the ServingRuntimes (and the rest of ``Kind.related``) they hold to the
engine, as the cluster's would be."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from webhook.core.config import Config
from webhook.core.facts import Facts
from webhook.core.operators import collect, merge
from webhook.core.workloads import related_kinds, table


def with_input(facts: Facts, objects: Iterable[Any], config: Config) -> Facts:
    """``facts`` with the input's own objects of the kinds the operators' builders read (KServe's
    ServingRuntimes...) added to what the cluster said (``webhook.core.operators.Related``): the input is what
    will be applied, so its objects come first."""
    wanted = related_kinds(table(config.workloads))
    if not wanted:
        return facts
    found = collect(objects, wanted)
    if not found.objects:
        return facts
    return replace(facts, related=merge(found, facts.related))


__all__ = ["with_input"]
