"""hack/versions_summary.py, the per-minor lines of ``make test-versions``: counts from pytest's own JUnit files,
skip reasons grouped, failures named, and an exit status that fails the target when a test failed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.binaries import ROOT

SCRIPT = str(ROOT / "hack" / "versions_summary.py")


# As pytest --junit-xml writes them (pytest 8): a skip's message is "Skipped: " or the reason, its text the location.
JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests"><testsuite name="pytest" errors="0"
failures="1" skipped="2" tests="5" time="61.5"><testcase classname="tests.e2e.test_x" name="test_ok" time="0.1"/>
<testcase classname="tests.e2e.test_x" name="test_also" time="0.1"/><testcase classname="tests.e2e.test_x"
name="test_broken" time="0.1"><failure message="assert False">def test_broken(): ...</failure></testcase>
<testcase classname="tests.e2e.test_x" name="test_dra[1]" time="0.0"><skipped type="pytest.skip"
message="DRA: kube-apiserver v1.33.13 does not serve resourceslices">tests/e2e/test_x.py:5: DRA: kube-apiserver
v1.33.13 does not serve resourceslices</skipped></testcase><testcase classname="tests.e2e.test_x" name="test_dra[2]"
time="0.0"><skipped type="pytest.skip" message="DRA: kube-apiserver v1.33.13 does not serve resourceslices">
</skipped></testcase><testcase classname="tests.e2e.test_y" name="test_setup" time="0.0"><error message="failed on
setup">...</error></testcase></testsuite></testsuites>"""


def test_one_line_per_minor_and_tier_with_the_skip_reasons_and_failures(tmp_path: Path) -> None:
    (tmp_path / "e2e-v1.33.13.xml").write_text(JUNIT)
    (tmp_path / "e2e-v1.37.2.xml").write_text(JUNIT.replace("v1.33.13", "v1.37.2"))
    (tmp_path / "notes.xml").write_text("not a run")
    (tmp_path / "build-v1.33.13.txt").write_text("kube-apiserver 812 s, kubectl 95 s\n")
    proc = subprocess.run([sys.executable, SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr  # a failure fails the target
    lines = proc.stdout.splitlines()
    assert lines[0] == "v1.33.13 build: kube-apiserver 812 s, kubectl 95 s"
    assert lines[1] == ("v1.33.13 e2e: 2 passed, 2 failed, 2 skipped in 1.0 min -- failed: test_x::test_broken, "
                        "test_y::test_setup -- skipped: 2 x DRA: kube-apiserver v1.33.13 does not serve resourceslices")
    assert lines[2].startswith("v1.37.2 e2e: 2 passed") and len(lines) == 3  # by version, 1.33 before 1.37


def test_a_folder_without_runs_is_refused(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and f"no <tier>-<version>.xml in {tmp_path}" in proc.stderr
    proc = subprocess.run([sys.executable, SCRIPT], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "usage:" in proc.stderr


def test_a_pre_release_is_summarized_before_its_release(tmp_path: Path) -> None:
    # make test-versions runs v1.38.0-beta.0 (hack/test-versions.sh accepts -alpha.N, -beta.N, -rc.N): its JUnit
    # file was once not matched, so the target said "no <tier>-<version>.xml" or left 1.38 out of the summary.
    ok = JUNIT.replace('failures="1"', 'failures="0"').replace(
        '<failure message="assert False">def test_broken(): ...</failure>', "").replace(
        '<error message="failed on\nsetup">...</error>', "")
    for version in ("v1.38.0-beta.0", "v1.38.0", "v1.38.0-rc.1", "v1.38.0-alpha.3", "v1.37.2"):
        (tmp_path / f"node-{version}.xml").write_text(ok)
    (tmp_path / "build-v1.38.0-beta.0.txt").write_text("kubelet 0 s\n")
    (tmp_path / "node-v1.38.0-gamma.1.xml").write_text(ok)  # not a release hack/test-versions.sh runs
    proc = subprocess.run([sys.executable, SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert [line.split(":")[0] for line in proc.stdout.splitlines()] == [
        "v1.37.2 node", "v1.38.0-alpha.3 node", "v1.38.0-beta.0 build", "v1.38.0-beta.0 node",
        "v1.38.0-rc.1 node", "v1.38.0 node"]
    assert "v1.38.0-beta.0 node: 4 passed, 0 failed, 2 skipped" in proc.stdout
