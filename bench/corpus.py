"""Inputs built from the vendored corpus (``tests/corpus``): AdmissionReviews for the webhook, replicated files
for the CLI."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

from webhook.core.config import parse_config
from webhook.core.engine import Mode, evaluate
from webhook.core.resourceblock import ManifestError
from webhook.core.workloads import KINDS
from webhook.manifests.reader import Document, expand_paths, read_documents

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "corpus"
DEFAULT = parse_config(None)

# AdmissionReview request.kind / resource for each judged kind.
_RESOURCES = {(k.group, k.kind): k.plural for k in KINDS.values()}  # by group: apps.kruise.io DaemonSet is not one


def _group(obj: dict[str, Any]) -> str:
    api = str(obj.get("apiVersion") or "v1")
    return api.rsplit("/", 1)[0] if "/" in api else ""


def corpus_objects() -> list[dict[str, Any]]:
    """Every Pod and workload in the corpus (the realistic mix users apply)."""
    found = []
    for path in expand_paths([str(CORPUS)]):
        if not isinstance(path, str):
            continue
        for doc in read_documents(path):
            obj = doc.obj if isinstance(doc, Document) else None
            if isinstance(obj, dict) and (_group(obj), obj.get("kind")) in _RESOURCES:
                try:
                    evaluate(obj, DEFAULT, Mode.ENFORCE)
                except ManifestError:
                    continue  # the API server would not have decoded it, so it never reaches a webhook
                found.append(obj)
    return found


def admission_review(obj: dict[str, Any], namespace: str = "bench") -> bytes:
    group = _group(obj)
    resource = _RESOURCES[(group, obj["kind"])]
    version = obj.get("apiVersion", "v1").rsplit("/", 1)[-1]
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": str(uuid.uuid4()), "kind": {"group": group, "version": version, "kind": obj["kind"]},
        "resource": {"group": group, "version": version, "resource": resource},
        "requestKind": {"group": group, "version": version, "kind": obj["kind"]},
        "name": (obj.get("metadata") or {}).get("name", ""), "namespace": namespace, "operation": "CREATE",
        "userInfo": {"username": "bench", "groups": ["system:authenticated"]},
        "object": obj, "oldObject": None, "dryRun": False, "options": None}}
    return json.dumps(review, default=str).encode()  # YAML timestamps: strings, as the API server sends


def replicate(target: Path, documents: int) -> int:
    """Copy corpus files into ``target`` (round after round) until about ``documents`` documents."""
    files: list[tuple[Path, int]] = []
    for item in expand_paths([str(CORPUS)]):
        if isinstance(item, str):
            count = sum(1 for _ in read_documents(item))
            if count:
                files.append((Path(item), count))
    target.mkdir(parents=True, exist_ok=True)
    total, round_ = 0, 0
    while total < documents:
        for path, count in files:
            if total >= documents:
                break
            dest = target / f"r{round_:04d}" / path.relative_to(CORPUS)
            dest.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(path, dest)  # same bytes, no disk: 100k documents would be ~1 GB of copies
            except OSError:
                shutil.copyfile(path, dest)
            total += count
        round_ += 1
    return total
