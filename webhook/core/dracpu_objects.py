"""Reading the DRA CPU driver's objects (``dra.cpu``, kubernetes-sigs/dra-driver-cpu v0.2.0) for
``webhook.core.dracpu``: a device's ``dra.cpu/cpu`` capacity, and which DeviceClasses ask its devices: besides the
class its chart installs (``dra.cpu``, ``dracpu.CPU_CLASS``), a class of another name whose selectors read exactly
``device.driver == "dra.cpu"``. Pure; nothing looser is read, so a class this cannot read stays what any other
class is to the DRA CPU rules (not CPUs): they never guess from a name or a partial expression.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from webhook.core.quantity import QuantityError, parse_quantity

CPU_DRIVER = "dra.cpu"
CPU_CAPACITY = "dra.cpu/cpu"
CLASS_KIND = "DeviceClass"
# A CEL selector that picks the CPU driver's devices and nothing else: ``device.driver == "dra.cpu"`` (either side,
# either quote, any spacing). Nothing looser is read: a selector this does not match leaves its class unknown.
_DRIVER_SELECTOR = re.compile(r"""\s*(?:device\.driver\s*==\s*(["'])dra\.cpu\1"""
                              r"""|(["'])dra\.cpu\2\s*==\s*device\.driver)\s*""")


def cpu_class(obj: Mapping[str, Any]) -> str | None:
    """The name of a DeviceClass object whose selectors pick only the CPU driver's devices: it has some, each a
    CEL expression that reads exactly ``device.driver == "dra.cpu"``; None for any other (a selector read
    loosely would guess: such a class stays what it was, not CPUs)."""
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    spec = obj.get("spec")
    selectors = spec.get("selectors") if isinstance(spec, Mapping) else None
    if obj.get("kind", CLASS_KIND) != CLASS_KIND or not isinstance(name, str) or not name or \
            not isinstance(selectors, list) or not selectors:
        return None
    for selector in selectors:
        cel = selector.get("cel") if isinstance(selector, Mapping) else None
        expression = cel.get("expression") if isinstance(cel, Mapping) else None
        if not isinstance(expression, str) or not _DRIVER_SELECTOR.fullmatch(expression):
            return None
    return name


def cpu_capacity(driver: str, raw: Mapping[str, Any]) -> tuple[int | None, str]:
    """A CPU driver's device's ``dra.cpu/cpu`` capacity (a whole number of CPUs; None when absent), and what an
    entry that is there but not a whole number of CPUs holds ('' when absent or read): absent is individual mode
    (one CPU), unreadable is a group of unknown size."""
    capacity = raw.get("capacity")
    if driver != CPU_DRIVER or capacity is None:
        return None, ""
    if not isinstance(capacity, Mapping):
        return None, f"capacity {_shown(capacity)} (not a mapping)"
    if CPU_CAPACITY not in capacity:
        return None, ""
    entry = capacity[CPU_CAPACITY]
    value = entry.get("value") if isinstance(entry, Mapping) else None
    if value is None or isinstance(value, bool | list | Mapping):
        return None, f"{CPU_CAPACITY} {_shown(entry)} (no quantity value)"
    try:
        q = parse_quantity(str(value))
    except QuantityError:
        return None, f"{CPU_CAPACITY} {_shown(value)} (not a quantity)"
    if q.milli <= 0 or q.milli % 1000:
        return None, f"{CPU_CAPACITY} {_shown(value)} (not a whole number of CPUs)"
    return q.milli // 1000, ""


def _shown(value: Any) -> str:
    """A slice's value as a message quotes it, cut short."""
    text = json.dumps(value, default=str) if not isinstance(value, str) else f"'{value}'"
    return text if len(text) <= 40 else text[:37] + "..."
