"""The peers' correctness (``bench/peers.py``): ``qos-guard check`` and the Kyverno CLI over the objects the
differential generator made and Kubernetes' own code judged (the oracle)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from bench.corpus import ROOT
from bench.kyverno_server import POLICIES, Unavailable, kyverno_tools


def generated_objects(count: int, seed: int) -> list[dict[str, Any]]:
    """Pods and workloads from the differential generator (Lists are taken item by item, as kubectl sends them)."""
    from tests.fidelity.grammar import ObjectGrammar
    grammar = ObjectGrammar(random.Random(seed))
    out: list[dict[str, Any]] = []
    while len(out) < count:
        obj = grammar.manifest()
        items = obj["items"] if obj["kind"] == "List" else [obj]
        for i, item in enumerate(items):
            item = json.loads(json.dumps(item))
            item.setdefault("metadata", {})["name"] = f"o{len(out)}-{i}"
            item["metadata"]["namespace"] = "peer"
            out.append(item)
    return out[:count]


def correctness(count: int, seed: int, with_kyverno: bool = True) -> dict[str, Any]:
    from tests.fidelity.oracle import Oracle
    from tests.fidelity.test_objects import guaranteed_and_pinned, valid
    objects = generated_objects(count, seed)
    with Oracle("objects") as oracle:
        answers = oracle.ask(objects)
    judged = [(obj, guaranteed_and_pinned(a)) for obj, a in zip(objects, answers, strict=True) if valid(a)]
    result: dict[str, Any] = {"objects": len(objects), "accepted_by_api_server": len(judged), "seed": seed,
                              "should_allow": sum(1 for _, ok in judged if ok)}
    with tempfile.TemporaryDirectory(prefix="qos-guard-peers-check-") as tmp:
        folder = Path(tmp)
        names = [f"{o['kind']}/{o['metadata']['name']}" for o, _ in judged]
        files = []
        for i, (obj, _) in enumerate(judged):  # one file per object: kubectl stops a file at its first error
            path = folder / f"o{i:05d}.json"  # the same JSON text the oracle judged (YAML would round numbers)
            path.write_text(json.dumps(obj))
            files.append(path)
        result["qos-guard check"] = _score(names, _qos_guard_denied(files, names), judged)
        if with_kyverno:
            try:
                result["Kyverno CLI"] = _score(names, _kyverno_denied(files, folder), judged)
            except Unavailable as exc:
                result["Kyverno CLI"] = {"error": str(exc)}
        else:
            result["Kyverno CLI"] = {"error": "not run (--no-kyverno)"}
    return result


def _score(names: list[str], denied: set[str], judged: list[tuple[dict[str, Any], bool]]) -> dict[str, Any]:
    """How many answers match Kubernetes', and the misses that are qos-guard's documented divergences
    (tests/fidelity/divergences.py: bounds and one deliberate choice)."""
    from tests.fidelity.test_objects import _known
    right = false_allow = false_deny = documented = 0
    for name, (obj, should_allow) in zip(names, judged, strict=True):
        allows = name not in denied
        if allows == should_allow:
            right += 1
            continue
        documented += _known(obj, None) is not None
        if allows:
            false_allow += 1
        else:
            false_deny += 1
    return {"right": right, "share": right / len(judged) if judged else 0.0, "allowed_wrongly": false_allow,
            "denied_wrongly": false_deny, "misses_on_documented_divergences": documented}


def _qos_guard_denied(files: list[Path], names: list[str]) -> set[str]:
    """What ``check`` reports a violation for, or cannot read (it exits non-zero on both)."""
    proc = subprocess.run([sys.executable, "-m", "webhook.cli", "check", "--format", "json", *map(str, files)],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    report = json.loads(proc.stdout)
    by_file = dict(zip(map(str, files), names, strict=True))
    return {f"{v['kind']}/{v['name']}" for v in report["violations"]} | {
        by_file.get(e.get("file", ""), "") for e in report.get("errors", [])}


def _kyverno_denied(files: list[Path], folder: Path) -> set[str]:
    _controller, cli = kyverno_tools()
    policies = folder / "policies.yaml"
    policies.write_text(yaml.safe_dump_all([d for p in POLICIES for d in yaml.safe_load_all(p.read_text()) if d]))
    denied: set[str] = set()
    for chunk in _chunks(files, 400):
        proc = subprocess.run([cli, "apply", str(policies), "--policy-report", "--output-format", "json",
                               "--continue-on-fail",
                               *(a for f in chunk for a in ("--resource", str(f)))],
                              capture_output=True, text=True, timeout=1200, cwd=folder)
        if not proc.stdout.strip():
            raise Unavailable(f"kyverno apply (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}")
        denied |= _kyverno_failures(proc.stdout)
    return denied


def _chunks(items: list[Path], size: int) -> Iterator[list[Path]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def _kyverno_failures(output: str) -> set[str]:
    """The resources a policy report of ``kyverno apply`` marks fail or error (a denial at admission)."""
    start = output.find("{")
    reports = json.loads(output[start:]) if start >= 0 else {}
    items = reports.get("items", [reports]) if isinstance(reports, dict) else reports
    denied: set[str] = set()
    for report in items:
        for r in report.get("results", []):
            if r.get("result") in ("fail", "error"):
                for res in r.get("resources", []):
                    denied.add(f"{res['kind']}/{res['name']}")
    return denied
