"""The container image recipe. No Docker engine runs here, so the Dockerfile is checked as text and its build
context (what .dockerignore lets through) is built into a wheel, as the image's first stage does."""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import requests

from tests.binaries import binary
from tests.serving import free_port

ROOT = Path(__file__).resolve().parents[2]


def _final_stage() -> list[str]:
    lines = [ln.strip() for ln in (ROOT / "Dockerfile").read_text().splitlines() if ln.strip()
             and not ln.lstrip().startswith("#")]
    last_from = max(i for i, ln in enumerate(lines) if ln.startswith("FROM "))
    return lines[last_from:]


def test_runtime_stage_is_slim_non_root_with_serve_entrypoint() -> None:
    stage = _final_stage()
    # The base is an ARG (tests/node builds a local one, no registry there); users get python:3.11-slim.
    assert stage[0] == "FROM ${BASE_IMAGE}"
    args = [ln for ln in (ROOT / "Dockerfile").read_text().splitlines() if ln.startswith("ARG BASE_IMAGE=")]
    assert args == ["ARG BASE_IMAGE=python:3.11-slim-bookworm"]
    users = [ln.split(None, 1)[1] for ln in stage if ln.startswith("USER ")]
    assert users, "the runtime stage must set USER"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0  # numeric, so kubelet can enforce runAsNonRoot
    assert uid == "65532"  # the chart's runAsUser
    entry = next(ln for ln in stage if ln.startswith("ENTRYPOINT "))
    assert json.loads(entry.split(None, 1)[1]) == ["qos-guard"]
    cmd = next(ln for ln in stage if ln.startswith("CMD "))
    assert json.loads(cmd.split(None, 1)[1]) == ["serve"]
    text = "\n".join(stage)
    assert "[test]" not in text and "pytest" not in text  # runtime dependencies only
    assert "--no-index" in text  # only the wheels built in the first stage


def _allowed(rel: str, patterns: list[str]) -> bool:
    """Docker's .dockerignore semantics for the patterns used: the last matching pattern wins."""
    keep = True
    for pattern in patterns:
        negate = pattern.startswith("!")
        pat = pattern[1:] if negate else pattern
        pat = pat.rstrip("/")
        if any(fnmatch.fnmatch(rel, p) for p in (pat, pat + "/*", pat.replace("**/", "*/"))):
            keep = negate
    return keep


def _context(patterns: list[str]) -> list[str]:
    tracked = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.split()
    return [f for f in tracked if _allowed(f, patterns)]


def test_build_context_is_only_the_package(tmp_path: Path) -> None:
    patterns = [ln.strip() for ln in (ROOT / ".dockerignore").read_text().splitlines()
                if ln.strip() and not ln.startswith("#")]
    files = _context(patterns)
    assert "pyproject.toml" in files and "webhook/cli/__main__.py" in files
    assert not [f for f in files if f.split("/")[0] in ("tests", "charts", "certs", ".git", "bench", "docs")]
    # The first stage's `pip wheel .` works on exactly that context.
    ctx = tmp_path / "ctx"
    for rel in files:
        (ctx / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, ctx / rel)
    out = tmp_path / "wheels"
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ctx)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    (wheel,) = out.glob("qos_guard-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "webhook/core/rules/__init__.py" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "qos-guard = webhook.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def _builder_here() -> bool:
    return shutil.which("buildah") is not None and os.geteuid() == 0


@pytest.mark.skipif(not _builder_here() and os.environ.get("CI") != "true",
                    reason="make image-push is proven with buildah as root (hack/node-deps.sh installs it)")
def test_make_image_push_reaches_a_registry_under_the_name_the_chart_runs(tmp_path: Path) -> None:
    """The chart README's steps: `make image REGISTRY=...` names the image, `make image-push REGISTRY=...` puts it
    in a real registry (go-containerregistry's, on loopback), and `--set image.registry=...` makes the chart
    run exactly that name. The build itself is hack/image.sh too: the node tests build their webhook image
    with it (hack/node-images.sh) and run it on a real kubelet."""
    port = free_port()
    registry = f"127.0.0.1:{port}"
    log = (tmp_path / "registry.log").open("wb")
    server = subprocess.Popen([binary("oci-registry"), "-port", str(port)], stdout=log, stderr=subprocess.STDOUT)
    store = ["buildah", "--root", str(tmp_path / "root"), "--runroot", str(tmp_path / "run"),
             "--storage-driver", "vfs"]
    env = dict(os.environ, IMAGE_TOOL=" ".join(store), PUSH_FLAGS="--tls-verify=false")
    try:
        named = subprocess.run(["make", "-s", "-n", "-C", str(ROOT), "image", f"REGISTRY={registry}"],
                               capture_output=True, text=True, timeout=60, check=True).stdout
        image = f"{registry}/qos-guard/qos-guard:{_app_version()}"
        assert named.strip() == f'bash hack/image.sh build "{image}"'
        # A small image under that name (the webhook's own build takes minutes; the node tests pay for it).
        rootfs = tmp_path / "rootfs"
        (rootfs / "bin").mkdir(parents=True)
        shutil.copy("/bin/busybox", rootfs / "bin" / "busybox")
        container = subprocess.run([*store, "from", "--quiet", "scratch"], capture_output=True, text=True,
                                   timeout=120, check=True).stdout.strip()
        subprocess.run([*store, "copy", "--quiet", container, str(rootfs), "/"], check=True, timeout=120,
                       capture_output=True)
        subprocess.run([*store, "config", "--user", "65532:65532", "--entrypoint", '["/bin/busybox"]', container],
                       check=True, timeout=60, capture_output=True)
        subprocess.run([*store, "commit", "--quiet", "--rm", container, image], check=True, timeout=300,
                       capture_output=True)
        pushed = subprocess.run(["make", "-s", "-C", str(ROOT), "image-push", f"REGISTRY={registry}"], env=env,
                                capture_output=True, text=True, timeout=600, check=False)
        assert pushed.returncode == 0, pushed.stdout + pushed.stderr
        assert f"image: pushing {image} with buildah" in pushed.stderr
        manifest = requests.get(f"http://{registry}/v2/qos-guard/qos-guard/manifests/{_app_version()}", timeout=10,
                                headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json, "
                                                   "application/vnd.oci.image.manifest.v1+json"})
        assert manifest.status_code == 200, manifest.text
        layers = manifest.json()["layers"]
        assert layers and all(requests.head(f"http://{registry}/v2/qos-guard/qos-guard/blobs/{layer['digest']}",
                                            timeout=10).status_code == 200 for layer in layers)
        rendered = subprocess.run([binary("helm"), "template", "qos-guard", str(ROOT / "charts" / "qos-guard"),
                                   "--set", f"image.registry={registry}", "--show-only", "templates/deployment.yaml"],
                                  capture_output=True, text=True, timeout=60, check=True).stdout
        assert f"image: {json.dumps(image)}" in rendered or f"image: {image}" in rendered
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def _app_version() -> str:
    chart = (ROOT / "charts" / "qos-guard" / "Chart.yaml").read_text()
    return next(line.split(":", 1)[1].strip().strip('"') for line in chart.splitlines()
                if line.startswith("appVersion:"))


def test_make_image_names_a_missing_builder(tmp_path: Path) -> None:
    """Without docker or buildah, `make image` says what to install, not a shell's "command not found"."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "make", "dirname", "basename", "cat"):
        found = shutil.which(tool)
        assert found
        (bin_dir / tool).symlink_to(found)
    out = subprocess.run(["make", "-s", "-C", str(ROOT), "image"], env={"PATH": str(bin_dir)},
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode != 0
    assert "neither a docker with a running daemon nor buildah is here; install buildah" in out.stderr
