"""A memory cgroup for a server under test: the chart's memory limit enforced by the kernel, as in a Pod.

As root with the memory controller (cgroup v1 or v2), ``MemoryCgroup`` makes a child group with a limit; a
process started through ``prefix()`` runs inside it with all its children (gunicorn's master and workers).
``usage()`` then reads what the kernel counted: the peak, and the OOM kills (a worker killed for memory is what
a Pod at its limit sees). Elsewhere ``available()`` says why not, and the tests that need it skip.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from tests import waiting

V1 = Path("/sys/fs/cgroup/memory")
V2 = Path("/sys/fs/cgroup")
CHART_VALUES = Path(__file__).resolve().parents[1] / "charts" / "qos-guard" / "values.yaml"


def chart_memory_limit() -> int:
    """The chart's default memory limit of the webhook container, in bytes (``resources.limits.memory``)."""
    import yaml
    text = yaml.safe_load(CHART_VALUES.read_text())["resources"]["limits"]["memory"]
    number, unit = re.fullmatch(r"(\d+)(Mi|Gi)", text).groups()  # type: ignore[union-attr]
    return int(number) << (20 if unit == "Mi" else 30)


def chart_workers() -> int:
    """The chart's default gunicorn workers per replica (``server.workers``)."""
    import yaml
    return int(yaml.safe_load(CHART_VALUES.read_text())["server"]["workers"])


def available() -> str | None:
    """``None`` when a memory cgroup can be made here, else why not."""
    if os.geteuid() != 0:
        return "not root: cannot make a memory cgroup"
    if (V1 / "memory.limit_in_bytes").exists():
        return None
    children = V2 / "cgroup.subtree_control"  # v2: the controller must be enabled for child groups
    if children.exists() and "memory" in children.read_text().split():
        return None
    return "no cgroup memory controller for child groups (v1, or v2's subtree_control) on this machine"


@dataclass
class Usage:
    limit: int
    peak: int
    now: int
    oom_kills: int


class MemoryCgroup:
    """One child memory cgroup with ``limit`` bytes; ``remove()`` once its processes have exited."""

    def __init__(self, name: str, limit: int) -> None:
        self.v1 = (V1 / "memory.limit_in_bytes").exists()
        self.path = (V1 if self.v1 else V2) / name
        self.limit = limit
        self.path.mkdir()
        if self.v1:
            (self.path / "memory.limit_in_bytes").write_text(str(limit))
        else:
            (self.path / "memory.max").write_text(str(limit))
            (self.path / "memory.swap.max").write_text("0")

    def prefix(self) -> list[str]:
        """A command prefix that moves the command into this group before it starts."""
        return ["sh", "-c", f'echo $$ > {self.path}/cgroup.procs && exec "$@"', "sh"]

    def usage(self) -> Usage:
        if self.v1:
            oom = dict(line.split() for line in (self.path / "memory.oom_control").read_text().splitlines())
            return Usage(self.limit, int((self.path / "memory.max_usage_in_bytes").read_text()),
                         int((self.path / "memory.usage_in_bytes").read_text()), int(oom.get("oom_kill", 0)))
        events = dict(line.split() for line in (self.path / "memory.events").read_text().splitlines())
        peak_file = self.path / "memory.peak"
        now = int((self.path / "memory.current").read_text())
        return Usage(self.limit, int(peak_file.read_text()) if peak_file.exists() else now, now,
                     int(events.get("oom_kill", 0)))

    def remove(self) -> None:
        """Remove the group once the kernel lets go of it (its processes exited; rmdir is EBUSY until then)."""
        refused: list[OSError] = []

        def removed() -> bool:
            if not self.path.exists():
                return True
            try:
                self.path.rmdir()
            except OSError as exc:
                refused[:] = [exc]
                return False
            return True

        def seen() -> str:
            procs = self.path / "cgroup.procs"
            return (f"{refused[0] if refused else 'no error'}; cgroup.procs: "
                    f"{procs.read_text().split() if procs.exists() else '(gone)'}")

        waiting.eventually(f"memory cgroup {self.path} removed", removed, within=10, seen=seen)
