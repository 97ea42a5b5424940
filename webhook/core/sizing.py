"""How the object a user writes sets the resources of a container an operator builds, where that is not a
``resources`` block of the container's own (``webhook.core.operators.Built.sizing``): the rules' advice names
that instead of "set resources.limits.cpu", a field the object does not have."""

from __future__ import annotations

from dataclasses import dataclass, replace

from webhook.core.fieldpath import FieldPath


@dataclass(frozen=True, slots=True)
class Sizing:
    """One of: ``one_value``, a field whose ``cpu`` and ``memory`` keys are each both the container's request and
    its limit (VLLMRuntime's ``spec.deploymentConfig.resources``); or ``way_out``, said where no field of the
    object sets them (NIMService's NIMContainerSpec has none): what the user can do instead."""

    one_value: FieldPath = ()
    way_out: str = ""

    def __post_init__(self) -> None:
        if bool(self.one_value) == bool(self.way_out):  # neither would advise "set cpu"; both, one of them unsaid
            raise ValueError("a Sizing is exactly one of one_value and way_out")

    def rebased(self, root: FieldPath) -> Sizing:
        """As named from the document's root (a List's item) rather than the object's."""
        return replace(self, one_value=(*root, *self.one_value)) if self.one_value else self


__all__ = ["Sizing"]
