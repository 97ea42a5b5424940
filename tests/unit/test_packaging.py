"""What a user outside the repository needs: the Apache-2.0 text the metadata names, the README's install of the
CLI and its wheel, and a first ``make install`` without setuptools' editable-install banner."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_license_is_the_apache_2_0_text_the_metadata_names() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License\n                           Version 2.0, January 2004")
    assert "END OF TERMS AND CONDITIONS" in text and "APPENDIX: How to apply the Apache License" in text
    assert 'license = "Apache-2.0"' in (ROOT / "pyproject.toml").read_text()
    assert yaml.safe_load((ROOT / "charts" / "qos-guard" / "Chart.yaml").read_text())["annotations"][
        "artifacthub.io/license"] == "Apache-2.0"


def test_readme_says_how_to_install_the_cli_outside_the_repository() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "python3 -m pip install ./qos-guard" in readme
    version = re.search(r'__version__ = "(.*)"', (ROOT / "webhook" / "__init__.py").read_text())
    assert version is not None
    wheel = f"dist/qos_guard-{version.group(1)}-py3-none-any.whl"
    assert f"python3 -m pip wheel --no-deps -w dist ./qos-guard      # {wheel}" in readme
    assert f"python3 -m pip install {wheel}" in readme


@pytest.mark.slow
def test_make_install_prints_no_editable_install_banner() -> None:
    """`make run` on a fresh clone printed setuptools' "Editable installation ... Please be careful with folders
    in your working directory" banner. The Makefile's own pip line is run (without dependencies or build
    isolation, so no download), with and without its warning filter."""
    dry = subprocess.run(["make", "-n", "-B", "--no-print-directory", "-C", str(ROOT), "install"],
                         capture_output=True, text=True, timeout=60, check=False)
    (line,) = [ln for ln in dry.stdout.splitlines() if "pip install" in ln and " -e " in ln]
    assert line.startswith("PYTHONWARNINGS="), line
    command, replaced = re.subn(r"-e '\.\[[a-z,]+\]'", "--no-deps --no-build-isolation -e .", line)
    assert replaced == 1, line  # else the run below would install every extra's dependencies
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    quiet = subprocess.run(["bash", "-c", command], cwd=ROOT, capture_output=True, text=True, timeout=300,
                           env=env, check=False)
    assert quiet.returncode == 0, quiet.stderr
    assert "Editable installation" not in quiet.stdout + quiet.stderr, quiet.stderr
    loud = subprocess.run(["bash", "-c", command[command.index('" ') + 2:]], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env=env, check=False)
    assert loud.returncode == 0 and "Editable installation" in loud.stderr  # the control: the filter is the fix
