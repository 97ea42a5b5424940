"""Per-request cost of the admission path by body size: microseconds and bytes for the bodies users send.

Three AdmissionReviews as the API server sends them (managedFields included): the small Pod of
``examples/admission-review.json`` (under 1 KB), a realistic inference Pod (~35 KB: three containers with a
hundred environment variables each, thirty volumes, annotations) and a 1 MB Pod; the 3 MiB one (the largest
body served) is measured for memory only. Each goes through the admission application's WSGI entry point as a
worker calls it (body read from the request stream, decoded, judged, answered), in-process, so what is timed
is qos-guard's own work without TLS or the network.

``us`` is CPU time per request (the machine is shared: time spent waiting for a core is not the webhook's).
``bytes`` is the peak of memory allocated while one request is handled (``tracemalloc``), from the first body
byte read off the request stream (a stream that, like a socket, hands out new bytes) to the answer: the body's
own bytes included, so "beyond the body" is that peak less the body's size.

Run against another checkout for a before/after table: ``python -m bench.bodies --source DIR`` (``DIR`` holds
that checkout's ``webhook`` package); ``make bench`` does it against ``main``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "admission-review.json"
MIB = 1024 * 1024


def _env(container: str, n: int, width: int) -> list[dict[str, Any]]:
    """Environment variables as inference servers carry them: plain values and a few from Secrets."""
    out: list[dict[str, Any]] = []
    for i in range(n):
        name = f"{container.upper()}_SETTING_{i:03d}"
        if i % 10 == 9:
            out.append({"name": name, "valueFrom": {"secretKeyRef": {"name": f"{container}-secrets",
                                                                      "key": f"key-{i}"}}})
        else:
            out.append({"name": name, "value": (f"value-{i}-" + "x" * width)[:width]})
    return out


def _container(name: str, image: str, cpu: str, memory: str, env: int, width: int, gpus: int = 0,
               mounts: int = 10) -> dict[str, Any]:
    limits: dict[str, Any] = {"cpu": cpu, "memory": memory}
    if gpus:
        limits["nvidia.com/gpu"] = str(gpus)
    return {
        "name": name, "image": image, "imagePullPolicy": "IfNotPresent",
        "command": ["python3", "-m", "vllm.entrypoints.openai.api_server"],
        "args": ["--model", "/models/llama-3-8b-instruct", "--tensor-parallel-size", str(max(gpus, 1)),
                 "--max-model-len", "8192", "--gpu-memory-utilization", "0.92", "--port", "8000"],
        "env": _env(name, env, width),
        "ports": [{"name": "http", "containerPort": 8000, "protocol": "TCP"},
                  {"name": "metrics", "containerPort": 9090, "protocol": "TCP"}],
        "resources": {"requests": dict(limits), "limits": limits},
        "volumeMounts": [{"name": f"vol-{i:02d}", "mountPath": f"/mnt/{name}/vol-{i:02d}", "readOnly": i % 2 == 0}
                         for i in range(mounts)],
        "livenessProbe": {"httpGet": {"path": "/health", "port": 8000, "scheme": "HTTP"}, "initialDelaySeconds": 60,
                          "periodSeconds": 10, "timeoutSeconds": 5, "failureThreshold": 3, "successThreshold": 1},
        "readinessProbe": {"httpGet": {"path": "/v1/models", "port": 8000, "scheme": "HTTP"},
                           "periodSeconds": 5, "timeoutSeconds": 3, "failureThreshold": 3, "successThreshold": 1},
        "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True, "runAsUser": 1000,
                            "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}},
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
    }


def inference_pod(env: int = 100, width: int = 20, annotation: int = 0, containers: int = 3) -> dict[str, Any]:
    """An LLM inference Pod: the server, a proxy sidecar and a metrics exporter (``containers`` in all), ``env``
    variables each, thirty volumes, annotations (one of ``annotation`` bytes, as a last-applied
    configuration), and the managedFields the API server adds."""
    specs = [("vllm", "vllm/vllm-openai:v0.9.1", "8", "64Gi", 1), ("proxy", "envoyproxy/envoy:v1.34.1", "1", "1Gi", 0),
             ("metrics", "prom/statsd-exporter:v0.28.0", "1", "512Mi", 0)]
    specs += [(f"worker-{i}", "vllm/vllm-openai:v0.9.1", "2", "8Gi", 0) for i in range(containers - len(specs))]
    annotations = {"prometheus.io/scrape": "true", "prometheus.io/port": "9090", "prometheus.io/path": "/metrics",
                   "sidecar.istio.io/inject": "false", "cluster-autoscaler.kubernetes.io/safe-to-evict": "false",
                   "kubectl.kubernetes.io/default-container": "vllm", "example.com/owner": "inference-platform",
                   "example.com/model": "llama-3-8b-instruct", "example.com/cost-center": "ml-serving-42"}
    if annotation:
        annotations["kubectl.kubernetes.io/last-applied-configuration"] = ("{" + "\"k\": \"" + "v" * annotation)[
            :annotation]
    volumes: list[dict[str, Any]] = []
    for i in range(30):
        kind = i % 4
        vol: dict[str, Any] = {"name": f"vol-{i:02d}"}
        if kind == 0:
            vol["configMap"] = {"name": f"inference-config-{i}", "defaultMode": 420}
        elif kind == 1:
            vol["secret"] = {"secretName": f"inference-secret-{i}", "defaultMode": 420}
        elif kind == 2:
            vol["emptyDir"] = {"medium": "Memory", "sizeLimit": "1Gi"}
        else:
            vol["persistentVolumeClaim"] = {"claimName": f"model-cache-{i}", "readOnly": True}
        volumes.append(vol)
    containers_ = [_container(n, img, cpu, mem, env, width, gpus=g) for n, img, cpu, mem, g in specs]
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": "llama-3-8b-0", "namespace": "inference", "uid": "0b0c5a5e-6c1f-4b59-9d5e-1f3f7c2a9a11",
            "labels": {"app.kubernetes.io/name": "vllm", "app.kubernetes.io/instance": "llama-3-8b",
                       "app.kubernetes.io/component": "server", "example.com/team": "ml-serving"},
            "annotations": annotations,
            "managedFields": [{"manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "v1",
                               "time": "2026-11-30T12:00:00Z", "fieldsType": "FieldsV1",
                               "fieldsV1": {"f:metadata": {"f:annotations": {".": {}, **{
                                   f"f:{k}": {} for k in annotations}}},
                                   "f:spec": {"f:containers": {f'k:{{"name":"{c["name"]}"}}': {
                                       ".": {}, "f:env": {f'k:{{"name":"{e["name"]}"}}': {".": {}, "f:name": {}}
                                                          for e in c["env"][:20]}} for c in containers_}}}}],
        },
        "spec": {
            "containers": containers_,
            "volumes": volumes,
            "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "runtimeClassName": "nvidia", "priorityClassName": "inference-critical", "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 120, "dnsPolicy": "ClusterFirst", "schedulerName": "default-scheduler",
            "serviceAccountName": "inference", "enableServiceLinks": False,
            "securityContext": {"fsGroup": 1000, "runAsNonRoot": True},
        },
    }


def review(obj: dict[str, Any], uid: str = "705ab4f5-6393-11e8-b7cc-42010a800002") -> bytes:
    """The AdmissionReview the API server sends for creating ``obj`` in its namespace."""
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
        "requestResource": {"group": "", "version": "v1", "resource": "pods"},
        "name": obj["metadata"]["name"], "namespace": obj["metadata"]["namespace"], "operation": "CREATE",
        "userInfo": {"username": "system:serviceaccount:inference:deployer", "uid": "4c1a", "groups": [
            "system:serviceaccounts", "system:serviceaccounts:inference", "system:authenticated"]},
        "object": obj, "oldObject": None, "dryRun": False,
        "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1",
                    "fieldManager": "kubectl-client-side-apply", "fieldValidation": "Strict"}}}).encode()


def _sized(size: int) -> bytes:
    """An inference review of about ``size`` bytes: its annotation grows to fill (a large last-applied
    configuration is what makes real Pods this big) and its containers' environment grows with it."""
    env = 100 if size < 2 * MIB else 400
    base = len(review(inference_pod(env=env, width=64)))
    return review(inference_pod(env=env, width=64, annotation=max(0, size - base - 64)))


def bodies() -> dict[str, bytes]:
    """The bodies measured, by name: ``small``, ``inference`` (~35 KB), ``1 MB`` and ``3 MiB``."""
    small = EXAMPLE.read_bytes()
    return {"small": small, "inference": review(inference_pod()), "1 MB": _sized(1_000_000),
            "3 MiB": _sized(3 * MIB - 4096)}


class Stream:
    """The request body as a socket delivers it: each read returns new bytes (a copy), so the body's own
    memory is part of what a request is measured to hold."""

    def __init__(self, body: bytes) -> None:
        self._view, self._pos = memoryview(body), 0

    def read(self, size: int = -1) -> bytes:
        end = len(self._view) if size is None or size < 0 else min(len(self._view), self._pos + size)
        data = bytes(self._view[self._pos:end])
        self._pos = end
        return data

    def readinto(self, buffer: Any) -> int:
        n = min(len(buffer), len(self._view) - self._pos)
        buffer[:n] = self._view[self._pos:self._pos + n]
        self._pos += n
        return n


def _environ(body: bytes, path: str) -> dict[str, Any]:
    return {"REQUEST_METHOD": "POST", "PATH_INFO": path, "QUERY_STRING": "", "SERVER_NAME": "localhost",
            "SERVER_PORT": "8443", "SERVER_PROTOCOL": "HTTP/1.1", "wsgi.url_scheme": "https",
            "wsgi.input": Stream(body), "wsgi.errors": sys.stderr, "wsgi.multithread": True,
            "wsgi.multiprocess": True, "wsgi.run_once": False, "wsgi.version": (1, 0),
            "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": str(len(body))}


def _app() -> Callable[[str, bytes], bytes]:
    import logging

    from webhook.core.config import parse_config
    from webhook.serving.app import create_app
    logging.getLogger("qos_guard.decisions").disabled = True  # the log line is not part of what is measured
    wsgi = create_app(parse_config(None)).wsgi_app

    def call(path: str, body: bytes) -> bytes:
        status: list[str] = []

        def start_response(line: str, headers: Any, exc_info: Any = None) -> Callable[[bytes], object]:
            status.append(line)
            return lambda data: None

        out = b"".join(wsgi(_environ(body, path), start_response))
        assert status[0].startswith("200"), (status, out[:300])
        return out

    return call


def measure(iterations: int, repeats: int, paths: tuple[str, ...] = ("/validate", "/mutate")) -> dict[str, Any]:
    """``{body: {path: {"us": [...], "bytes": peak, "size": body bytes}}}`` for the ``webhook`` package this
    interpreter imports (``source`` in ``in_tree``)."""
    import webhook
    print(f"bench.bodies: webhook from {Path(webhook.__file__).parent}", file=sys.stderr)
    call = _app()
    made = bodies()
    out: dict[str, Any] = {}
    for name, body in made.items():
        for path in paths:
            call(path, body)  # warm: imports, caches
            entry = out.setdefault(name, {}).setdefault(path, {"size": len(body), "us": []})
            gc.collect()
            tracemalloc.start()
            before = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            call(path, body)
            entry["bytes"] = tracemalloc.get_traced_memory()[1] - before
            tracemalloc.stop()
    for _ in range(repeats):
        for name, body in made.items():
            if name == "3 MiB":
                continue  # memory only: its time is the 1 MB one's three times over
            n = max(3, iterations * 1000 // max(len(body) // 1000, 1) // 40) if len(body) > 100_000 else iterations
            for path in paths:
                started = time.process_time()  # CPU: the machine is shared, and waiting for it is not our cost
                for _ in range(n):
                    call(path, body)
                out[name][path]["us"].append((time.process_time() - started) / n * 1e6)
    return out


def in_tree(source: Path | None, iterations: int, repeats: int) -> dict[str, Any]:
    """``measure`` in a fresh interpreter running ``source``'s ``webhook`` package (this tree when None)."""
    tree = source or ROOT
    # This file run as a script (another checkout's bench/ may not have it), ``webhook`` from ``tree``.
    env = dict(os.environ, PYTHONPATH=str(tree))
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--json", "--iterations", str(iterations),
                           "--repeats", str(repeats)], capture_output=True, text=True, cwd=tree, env=env,
                          timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"bench.bodies in {source or ROOT} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def before_after(source: Path, rounds: int, iterations: int) -> dict[str, Any]:
    """``source``'s tree ("before") and this one ("after") in alternating fresh interpreters, ``rounds`` times
    (the machine is shared: neither always runs first); ``{"before": runs, "after": runs}``."""
    out: dict[str, Any] = {}
    for i in range(rounds):
        order = [("before", source), ("after", None)]
        for label, tree in order if i % 2 == 0 else order[::-1]:
            run = in_tree(tree, iterations, 1)
            merged = out.setdefault(label, run)
            if merged is not run:
                for name, by_path in run.items():
                    for path, e in by_path.items():
                        merged[name][path]["us"] += e["us"]
                        merged[name][path]["bytes"] = min(merged[name][path]["bytes"], e["bytes"])
    return out


def summary(runs: dict[str, Any]) -> dict[str, Any]:
    """Medians per body and path."""
    return {name: {path: {"size": e["size"], "bytes": e["bytes"],
                          "us": statistics.median(e["us"]) if e["us"] else None,
                          "us_spread": [min(e["us"]), max(e["us"])] if e["us"] else None}
                   for path, e in by_path.items()} for name, by_path in runs.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.bodies")
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print this tree's raw measurements as JSON")
    parser.add_argument("--write", metavar="FILE", help="write the bodies to FILE.<name>.json and exit")
    parser.add_argument("--before", metavar="DIR", help="compare with the webhook package under DIR, interleaved")
    args = parser.parse_args(argv)
    if args.before:
        both = before_after(Path(args.before), args.repeats, args.iterations)
        print(json.dumps({k: summary(v) for k, v in both.items()}, indent=2))
        return 0
    if args.write:
        for name, body in bodies().items():
            Path(f"{args.write}.{name.replace(' ', '')}.json").write_bytes(body)
        return 0
    result = measure(args.iterations, args.repeats)
    if args.json:
        print(json.dumps(result))
    else:
        print(json.dumps(summary(result), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
