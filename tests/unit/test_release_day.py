"""hack/release-day.sh, run on a copy of the tree without the network: the Go module proxy's answer and the pin come
from a stand-in for hack/oracle/pin.sh (QOS_GUARD_PIN) that serves only the releases it is told to."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from webhook.core.kubeversion import DEFAULT, NEWEST, PRERELEASES, SUPPORTED

ROOT = Path(__file__).resolve().parents[2]
# The stand-in: `--served V` answers from $SERVED (space-separated), `V` logs the pin and writes the minor's go.mod
# as hack/oracle/pin.sh would (the line tests/unit/test_kubeversion.py reads).
PIN = """#!/usr/bin/env bash
set -eu
if [[ $1 == --served ]]; then
  [[ " $SERVED " == *" $2 "* ]] && exit 0
  echo "  k8s.io/kubernetes@$2: 403 Forbidden (stand-in)" >&2; exit 1
fi
echo "$1" >> "$PIN_LOG"
minor=${1#v1.}; minor=${minor%%.*}
printf 'module qos-guard.dev/oracle\\n\\nrequire (\\n\\tk8s.io/kubernetes %s\\n)\\n' "$1" \\
  > hack/oracle/minors/v1.$minor.mod
"""
# The minor judged from a pre-release (the live table's, else a stand-in one, so these tests outlive release day).
MINOR, OLD = next(iter(PRERELEASES.items()), (NEWEST.minor + 1, f"v1.{NEWEST.minor + 1}.0-beta.0"))
# What the GA release makes the default: the minor, or (a stand-in minor past the table) the default of today.
GA_DEFAULT = f"1.{MINOR}" if MINOR in {m.minor for m in SUPPORTED} else str(DEFAULT.minor)
PRERELEASES_LINE = re.compile(r"^PRERELEASES: dict\[int, str\] = .*$", re.MULTILINE)


def _tree(tmp_path: Path, files: list[str]) -> Path:
    """A copy of ``files`` of the tree, with this minor judged from ``OLD`` whatever the live table says."""
    tree = tmp_path / "tree"
    for name in files:
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, tree / name)
    version = tree / "webhook" / "core" / "kubeversion.py"
    version.write_text(PRERELEASES_LINE.sub(f'PRERELEASES: dict[int, str] = {{{MINOR}: "{OLD}"}}',
                                            version.read_text()))
    makefile = tree / "Makefile"
    text = makefile.read_text()
    if OLD not in text:
        text = re.sub(r"^(KUBE_VERSIONS \?= .*)$", rf"\1 {OLD}", text, flags=re.MULTILINE)
    makefile.write_text(text)
    return tree


@pytest.fixture
def small(tmp_path: Path) -> Path:
    """The files release-day.sh edits, and a hack/generate.py that says it ran."""
    tree = _tree(tmp_path, ["hack/release-day.sh", "Makefile", "webhook/__init__.py", "webhook/core/__init__.py",
                            "webhook/core/kubeversion.py"])
    (tree / "hack" / "oracle" / "minors").mkdir(parents=True)
    (tree / "hack" / "generate.py").write_text("from pathlib import Path\nPath('generated').write_text('yes')\n")
    return tree


def _run(tree: Path, version: str, served: str) -> subprocess.CompletedProcess[str]:
    pin = tree.parent / "pin.sh"
    pin.write_text(PIN)
    pin.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "QOS_GUARD_PIN": str(pin), "SERVED": served, "PIN_LOG": str(tree.parent / "log"),
           "PYTHON": sys.executable}
    return subprocess.run(["bash", str(tree / "hack" / "release-day.sh"), version], capture_output=True, text=True,
                          env=env, timeout=300)


def _snapshot(tree: Path) -> dict[str, str]:
    return {str(p.relative_to(tree)): p.read_text() for p in sorted(tree.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(("version", "served", "says"), [
    (f"v1.{MINOR}.0", f"{OLD} v1.{MINOR + 1}.0", f"does not serve k8s.io/kubernetes v1.{MINOR}.0 (yet): nothing "
                                                  f"changed; 1.{MINOR} stays judged from {OLD}"),
    (f"v1.{MINOR - 1}.99", f"v1.{MINOR - 1}.99", f"Kubernetes 1.{MINOR - 1} is not judged from a pre-release"),
    (f"v1.{MINOR}.0-alpha.9", f"v1.{MINOR}.0-alpha.9", f"1.{MINOR} is judged from {OLD} already"),
    (OLD, OLD, f"1.{MINOR} is judged from {OLD} already"),
    (f"1.{MINOR}", "", "is not a Kubernetes release"),
    ("", "", "usage: hack/release-day.sh"),
])
def test_a_release_it_cannot_move_to_is_refused_and_nothing_changes(small: Path, version: str, served: str,
                                                                    says: str) -> None:
    before = _snapshot(small)
    out = _run(small, version, served)
    assert out.returncode == 2 and says in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and out.stdout == ""
    assert _snapshot(small) == before and not (small.parent / "log").exists()


def test_a_makefile_it_cannot_edit_is_refused_before_anything_is_pinned_or_written(small: Path) -> None:
    """Every edit is checked before the pin and before any file is written: a KUBE_VERSIONS that does not name the
    pre-release leaves the tree as it was (exit 2), not PRERELEASES moved and the Makefile not."""
    makefile = small / "Makefile"
    makefile.write_text(makefile.read_text().replace(f" {OLD}", ""))
    before = _snapshot(small)
    out = _run(small, f"v1.{MINOR}.0", f"v1.{MINOR}.0")
    assert out.returncode == 2 and "does not name" in out.stderr and "edit it by hand" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
    assert _snapshot(small) == before and not (small.parent / "log").exists()


def test_an_unserved_release_shows_the_proxy_answer(small: Path) -> None:
    out = _run(small, f"v1.{MINOR}.0", "")
    assert out.returncode == 2 and f"k8s.io/kubernetes@v1.{MINOR}.0: 403 Forbidden (stand-in)" in out.stderr


def test_the_ga_release_moves_the_pin_the_table_the_makefile_and_the_default(small: Path) -> None:
    out = _run(small, f"v1.{MINOR}.0", f"v1.{MINOR}.0")
    assert out.returncode == 0, out.stderr
    assert (small.parent / "log").read_text() == f"v1.{MINOR}.0\n"
    assert f"\tk8s.io/kubernetes v1.{MINOR}.0\n" in (small / "hack/oracle/minors" / f"v1.{MINOR}.mod").read_text()
    assert "PRERELEASES: dict[int, str] = {}\n" in (small / "webhook/core/kubeversion.py").read_text()
    makefile = (small / "Makefile").read_text()
    kube = re.search(r"^KUBE_VERSIONS \?= (.*)$", makefile, re.MULTILINE)
    oracle = re.search(r"^ORACLE_VERSIONS \?= (.*)$", makefile, re.MULTILINE)
    assert kube and oracle
    assert kube.group(1).split()[-1] == f"v1.{MINOR}.0" and OLD not in kube.group(1).split()
    live = re.search(r"^ORACLE_VERSIONS \?= (.*)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert live and oracle.group(1).split(",") == [*live.group(1).split(",")[:-1], f"v1.{MINOR}.0"]
    assert (small / "generated").read_text() == "yes"
    assert f"the default minor is now {GA_DEFAULT}" in out.stdout
    assert f"make test-versions KUBE_VERSIONS=v1.{MINOR}.0" in out.stdout
    assert f"the docs and comments that name {OLD}" in out.stdout


def test_a_later_pre_release_moves_the_table_and_keeps_the_default(small: Path) -> None:
    rc = f"v1.{MINOR}.0-rc.0"
    out = _run(small, rc, rc)
    assert out.returncode == 0, out.stderr
    assert f'PRERELEASES: dict[int, str] = {{{MINOR}: "{rc}"}}\n' in (small / "webhook/core/kubeversion.py").read_text()
    makefile = (small / "Makefile").read_text()
    assert rc in makefile and OLD not in makefile.split("KUBE_VERSIONS ?=")[1].splitlines()[0]
    live = (ROOT / "Makefile").read_text()
    assert re.findall(r"^ORACLE_VERSIONS.*$", makefile, re.MULTILINE) == re.findall(r"^ORACLE_VERSIONS.*$", live,
                                                                                      re.MULTILINE)
    if MINOR in PRERELEASES:  # the default stays the newest released minor
        assert f"the default minor is now {DEFAULT.minor}" in out.stdout


@pytest.mark.slow
def test_release_day_on_a_whole_copy_leaves_the_tree_generated_and_its_tests_passing(tmp_path: Path) -> None:
    """The whole tree, moved to the GA release: the generated files are written again (generate.py --check
    passes), the version tests pass there as they are (none names the pre-release), and the default is the minor."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split("\n")
    tree = _tree(tmp_path, [name for name in listed if name and (ROOT / name).is_file()])
    out = _run(tree, f"v1.{MINOR}.0", f"v1.{MINOR}.0")
    assert out.returncode == 0, out.stderr
    assert f"the default minor is now {GA_DEFAULT}" in out.stdout
    check = subprocess.run([sys.executable, "hack/generate.py", "--check"], cwd=tree, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    if NEWEST.minor >= MINOR:  # a stand-in minor past the table has no tests of its own to run
        tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                "tests/unit/test_kubeversion.py", "tests/cli/test_prerelease.py"],
                               cwd=tree, capture_output=True, text=True, timeout=600)
        assert tests.returncode == 0, tests.stdout[-4000:]
