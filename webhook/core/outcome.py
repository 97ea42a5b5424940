"""``ExitCode`` and ``fold``: the one place a run's results become its exit code
(docs/contract.md#commands-and-exit-codes), so ``check``, ``audit``, ``fix``, ``nodes`` and ``verify`` cannot
drift apart. Violations outrank errors: a run that found both says it found violations (1), since what it did
judge is the answer CI acts on."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0  # everything judged is compliant
    VIOLATIONS = 1  # a violation was found (a node that cannot pin, a container not aligned)
    USAGE = 2  # wrong usage, bad configuration, an input that could not be read, nothing to judge


class Refused(Exception):
    """A run that could not be made (exit 2: no cluster to reach, no kubelet socket, a flag that does not fit):
    raised by a command's use-case function (``batch.audit.audit_cluster``, ``batch.nodes.read_nodes``,
    ``node.verify.verify``) with its message complete, kubeconfig hints included, for the CLI to print after the
    command's name."""


def fold(*, violations: bool, errors: bool) -> ExitCode:
    """What results earned: 1 with violations (those that count: never in ``--mode warn``), else 2 with errors,
    else 0."""
    if violations:
        return ExitCode.VIOLATIONS
    return ExitCode.USAGE if errors else ExitCode.OK


__all__ = ["ExitCode", "Refused", "fold"]
