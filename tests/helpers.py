"""AdmissionReviews as the API server sends them, and other small helpers of the tests; the objects themselves
(Pods, containers) are built by ``tests.builders``, re-exported here for the files that import them from here."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from tests.builders import container, guaranteed, pod, rl
from webhook.core.kubeversion import NEWEST, PRERELEASES, SUPPORTED, Minor, Semantics

__all__ = ["admission_review", "as_decoded", "container", "guaranteed", "judged_from", "pod", "pre_release_minors",
           "python_calls", "rl"]

T = TypeVar("T")


def admission_review(obj: Any, kind: str | None = None, operation: str = "CREATE",
                     api: str = "admission.k8s.io/v1", namespace: str = "inference",
                     subresource: str | None = None, dry_run: bool = False, username: str = "alice",
                     uid: str = "uid-1", **request: Any) -> dict[str, Any]:
    """The one AdmissionReview builder of the tests: the request the API server sends for ``obj``."""
    if kind is None:
        kind = obj["kind"] if isinstance(obj, dict) and isinstance(obj.get("kind"), str) else "Pod"
    # the group and version the API server names: the object's own apiVersion, else the built-in kind's
    from webhook.core.workloads import BUILTIN
    api_version = obj.get("apiVersion") if isinstance(obj, dict) else None
    if not isinstance(api_version, str) or not api_version:
        api_version = next((k.api_version for k in BUILTIN if k.kind == kind), "v1")
    group, _, version = api_version.rpartition("/")
    req: dict[str, Any] = {
        "uid": uid, "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": kind.lower() + "s"},
        "operation": operation, "namespace": namespace, "dryRun": dry_run, "object": obj,
        "userInfo": {"username": username},
    }
    if subresource:
        req["subResource"] = subresource
    return {"apiVersion": api, "kind": "AdmissionReview", "request": req | request}


def as_decoded(obj: Any) -> Any:
    """``obj`` as the webhook hands it to the engine: sent in an AdmissionReview and decoded by
    webhook/admission/decode.py (only the judged fields kept). The API server sends no Lists: a List's items
    are decoded one by one. Raises ``BadReview`` where the webhook would answer 400."""
    import json

    from webhook.admission.review import parse_review
    if isinstance(obj, dict) and obj.get("kind") == "List" and isinstance(obj.get("items"), list):
        return {**obj, "items": [as_decoded(item) for item in obj["items"]]}
    return parse_review(json.dumps(admission_review(obj)).encode()).obj


def python_calls(call: Callable[[], T]) -> tuple[T, int]:
    """``call()``'s result and how many calls a profile hook saw it make from Python code (``map`` calling
    ``dict.get`` from C is not one): what a test of "no Python per node" counts."""
    calls = 0

    def hook(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        calls += event in ("call", "c_call")

    sys.setprofile(hook)
    try:
        result = call()
    finally:
        sys.setprofile(None)
    return result, calls


def pre_release_minors() -> list[Any]:
    """Parameters (minor, release) of the tests of what an answer at a pre-release says: each minor the live table
    judges from one (``kubeversion.PRERELEASES``), and a stand-in one past the newest supported minor, so that those
    tests run, and can fail, on the days no minor is judged from a pre-release (after hack/release-day.sh)."""
    stand_in = NEWEST.minor + 1
    return [pytest.param(minor, release, id=release) for minor, release in sorted(PRERELEASES.items())] + [
        pytest.param(stand_in, f"v1.{stand_in}.0-rc.1", id="stand-in")]


def judged_from(monkeypatch: pytest.MonkeyPatch, minor: int, release: str) -> Semantics:
    """The semantics of 1.``minor`` judged from ``release``: the live table's, or for this test only a stand-in
    minor that answers as the newest supported one, added to ``kubeversion.SUPPORTED`` (which every lookup reads)."""
    key = Minor(1, minor)
    if PRERELEASES.get(minor) != release:
        monkeypatch.setitem(SUPPORTED, key, dataclasses.replace(SUPPORTED[NEWEST], minor=key, prerelease=release))
    return SUPPORTED[key]
