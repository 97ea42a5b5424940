"""LeaderWorkerSet's own controller beside the node: the manager of ``sigs.k8s.io/lws`` (``hack/build-tools.sh
lws-controller``, pinned) run out of cluster against the node's API server, with its own admission webhooks
served and registered as its release registers them, so its Pods are what the project's users get (LWS labels,
environment, the worker StatefulSet owned by the leader Pod).

Out of cluster, its cert rotation (which signs for the in-cluster Service and patches the configurations it
finds there) has nothing to sign for: it is turned off in its configuration file and the webhook server gets a
certificate for 127.0.0.1 from ``webhook.serving.certs``, as ``qos-guard serve`` does. The configurations are
the module's own ``config/webhook`` manifests with its kustomize patches (the Pod webhooks' object selector)
applied, the ``lws-`` name prefix its default overlay adds, and a URL instead of the Service.
"""

from __future__ import annotations

import base64
import contextlib
import socket
import subprocess
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.binaries import ROOT, go_module
from tests.e2e.conftest import Cluster, stop_process, wait_until_ready
from tests.serving import free_port
from tests.waiting import eventually
from webhook.serving.certs import write_bundle

MODULE = "sigs.k8s.io/lws"
CRD_NAME = "leaderworkersets.leaderworkerset.x-k8s.io"
CRD_FILE = "leaderworkerset.x-k8s.io_leaderworkersets.yaml"
VENDORED_CRD = ROOT / "tests" / "fixtures" / "crds" / CRD_FILE
CONFIGURATIONS = (("mutatingwebhookconfiguration", "lws-mutating-webhook-configuration"),
                  ("validatingwebhookconfiguration", "lws-validating-webhook-configuration"))


@dataclass
class LwsController:
    """The running controller: its process, log and the release it was built from."""

    process: subprocess.Popen[bytes]
    log: Path
    version: str

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]


def version_of(binary_path: str) -> str:
    """The release a cached ``lws-controller-<version>`` was built from (hack/build-tools.sh names it so)."""
    name = Path(binary_path).name
    assert name.startswith("lws-controller-v"), binary_path
    return name.removeprefix("lws-controller-")


def _patched(doc: dict[str, Any], patch: list[dict[str, Any]]) -> dict[str, Any]:
    """The module's JSON 6902 patches as its kustomization applies them; only the one shape they use (replace a
    webhook by index), so a release that patches otherwise fails here rather than being half applied."""
    for op in patch:
        kind, _, index = op["path"].rpartition("/")
        assert op["op"] == "replace" and kind == "/webhooks" and index.isdigit(), op
        doc["webhooks"][int(index)] = op["value"]
    return doc


def webhook_configurations(module: Path, url: str, ca: bytes) -> list[dict[str, Any]]:
    """The release's webhook configurations (``config/webhook``: manifests.yaml, then mutating-patch.yaml and
    validating-patch.yaml, then the default overlay's ``lws-`` prefix) calling ``url`` with ``ca``."""
    folder = module / "config" / "webhook"
    docs = [d for d in yaml.safe_load_all((folder / "manifests.yaml").read_text()) if d]
    patches = {"MutatingWebhookConfiguration": "mutating-patch.yaml",
               "ValidatingWebhookConfiguration": "validating-patch.yaml"}
    out = []
    for doc in docs:
        doc = _patched(doc, yaml.safe_load((folder / patches[doc["kind"]]).read_text()))
        doc["metadata"]["name"] = "lws-" + doc["metadata"]["name"]
        for hook in doc["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": url + path, "caBundle": base64.b64encode(ca).decode()}
        out.append(doc)
    assert sorted(d["metadata"]["name"] for d in out) == sorted(name for _, name in CONFIGURATIONS)
    return out


def _config(folder: Path, webhook_port: int, health_port: int) -> dict[str, Any]:
    """Its Configuration (config.lws.x-k8s.io/v1alpha1): one replica, so no leader election; no metrics
    endpoint (it would bind :8443 on the host); no internal cert rotation (see the module docstring)."""
    return {"apiVersion": "config.lws.x-k8s.io/v1alpha1", "kind": "Configuration",
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(folder / "certs")},
            "metrics": {"bindAddress": "0"},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"}}


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


@contextlib.contextmanager
def running_lws_controller(cluster: Cluster, binary_path: str, folder: Path) -> Iterator[LwsController]:
    """The module's CRD installed (the vendored file, checked to be the module's own), the controller started
    and Ready, its webhooks registered; on exit all removed again, webhooks first (their failurePolicy is Fail),
    so the node is left as it was. The caller deletes its LeaderWorkerSets before leaving the block."""
    version = version_of(binary_path)
    module = go_module(MODULE, version)
    own_crd = module / "config" / "crd" / "bases" / CRD_FILE
    assert VENDORED_CRD.read_bytes() == own_crd.read_bytes(), f"{VENDORED_CRD} is not {MODULE}@{version}'s"
    folder.mkdir(parents=True, exist_ok=True)
    paths = write_bundle(folder / "certs", ["127.0.0.1"], days=1, keep_ca_key=False)
    webhook_port, health_port = free_port(), free_port()
    (folder / "config.yaml").write_text(yaml.safe_dump(_config(folder, webhook_port, health_port)))
    with contextlib.ExitStack() as stack:
        # server-side: the CRD is over the client-side last-applied annotation's 256 KiB
        cluster.kubectl("apply", "--server-side", "-f", str(VENDORED_CRD), check=True)
        stack.callback(cluster.kubectl, "delete", "crd", CRD_NAME, "--ignore-not-found", "--wait=true")
        # (kubectl wait fails outright while the new CRD has no status yet)
        eventually(f"{CRD_NAME} Established", lambda: cluster.kubectl(
            "get", "crd", CRD_NAME, "-o", "jsonpath={.status.conditions[?(@.type=='Established')].status}",
        ).stdout == "True", within=60, every=0.5)
        log = folder / "lws-controller.log"
        with log.open("wb") as out:
            process = subprocess.Popen([binary_path, f"--config={folder / 'config.yaml'}",
                                        f"--kubeconfig={cluster.kubeconfig}", "--zap-log-level=2"],
                                       stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        stack.callback(stop_process, process)

        def ready() -> bool:
            with urllib.request.urlopen(f"http://127.0.0.1:{health_port}/readyz", timeout=2) as answer:
                return bool(answer.status == 200) and _listening(webhook_port)

        wait_until_ready("LeaderWorkerSet controller", ready, process, log, timeout=60)
        configs = webhook_configurations(module, f"https://127.0.0.1:{webhook_port}", paths.ca.read_bytes())
        for kind, name in CONFIGURATIONS:
            stack.callback(cluster.kubectl, "delete", kind, name, "--ignore-not-found")
        cluster.kubectl("apply", "-f", "-", stdin=configs, check=True)
        yield LwsController(process, log, version)
