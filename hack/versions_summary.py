"""One line per Kubernetes release and tier from the JUnit files ``hack/test-versions.sh`` writes: the counts
passed, failed and skipped, then each skip reason with how many tests it skipped and each failed test.

    python hack/versions_summary.py DIR    # DIR/<tier>-<version>.xml, e.g. e2e-v1.37.2.xml; DIR/build-<version>.txt
"""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

# A release as hack/test-versions.sh accepts it: v1.37.2, or a pre-release such as v1.38.0-beta.0.
NAME = re.compile(r"(?P<tier>[a-z0-9]+)-(?P<version>v\d+\.\d+\.\d+(?:-(?:alpha|beta|rc)\.\d+)?)\.xml")
STAGES = {"alpha": 0, "beta": 1, "rc": 2}


@dataclass
class Tally:
    """What one tier's run at one release came to."""

    passed: int = 0
    failed: list[str] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0

    def line(self) -> str:
        skips = "; ".join(f"{n} x {reason}" for reason, n in self.skipped.most_common())
        text = f"{self.passed} passed, {len(self.failed)} failed, {sum(self.skipped.values())} skipped " \
               f"in {self.seconds / 60:.1f} min"
        if self.failed:
            text += " -- failed: " + ", ".join(self.failed)
        return text + (f" -- skipped: {skips}" if skips else "")


def _reason(message: str) -> str:
    """A skip's reason without pytest's location prefix ("tests/x.py:12: ...") or its "Skipped: "."""
    reason = re.sub(r"^\S+:\d+: ", "", message.strip())
    return reason.removeprefix("Skipped: ")


def tally(path: Path) -> Tally:
    """The counts of one JUnit file (pytest's ``--junit-xml``): an error counts as a failure."""
    t = Tally()
    root = ET.parse(path).getroot()
    for suite in root.iter("testsuite"):
        t.seconds += float(suite.get("time", 0))
    for case in root.iter("testcase"):
        name = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        if case.find("failure") is not None or case.find("error") is not None:
            t.failed.append(name)
        elif (skip := case.find("skipped")) is not None:
            t.skipped[_reason(skip.get("message", "") or skip.text or "")] += 1
        else:
            t.passed += 1
    return t


def release_order(version: str) -> tuple[int, ...]:
    """Releases oldest first, a pre-release before its release (v1.38.0-beta.0 < v1.38.0-rc.1 < v1.38.0)."""
    release, _, pre = version[1:].partition("-")
    stage, _, n = pre.partition(".")
    return (*(int(x) for x in release.split(".")), STAGES.get(stage, len(STAGES)), int(n or 0))


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not Path(argv[0]).is_dir():
        print("usage: python hack/versions_summary.py DIR (the folder hack/test-versions.sh wrote)", file=sys.stderr)
        return 2
    folder = Path(argv[0])
    runs = sorted((m["version"], m["tier"], p) for p in folder.glob("*.xml") if (m := NAME.fullmatch(p.name)))
    if not runs:
        print(f"versions_summary: no <tier>-<version>.xml in {folder}", file=sys.stderr)
        return 2
    failed = False
    for version in sorted({v for v, _, _ in runs}, key=release_order):
        build = folder / f"build-{version}.txt"
        if build.is_file():
            print(f"{version} build: {build.read_text().strip()}")
        for v, tier, path in runs:
            if v == version:
                t = tally(path)
                failed = failed or bool(t.failed)
                print(f"{version} {tier}: {t.line()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
