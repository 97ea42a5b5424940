"""Seeded random grammars for the differential tests: quantities, Pods and every workload kind, YAML files.

Plain ``random.Random(seed)`` rather than hypothesis: the differential tests need tens of thousands of
objects per run pushed through one oracle process in batches, which hypothesis' one-example-at-a-time
engine cannot do in time. A failing object is shrunk by ``shrink`` before it is printed.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable, Iterator
from typing import Any

# ---- quantities ----

NICE_CPU = ["1", "2", "4", "8", "16", "1000m", "2000m", "500m", "250m", "1500m", "0.5", "1.5", "3", "100m",
            "2.0", "4e0", "40e-1", "1.0001", "0", "0m", "1001m", "999m", "64"]
NICE_MEMORY = ["1Gi", "2Gi", "512Mi", "1G", "128974848", "129e6", "123Mi", "1024Mi", "0.5Gi", "1.5Gi", "4Gi",
               "100M", "1Ki", "0"]
# Corner cases of the quantity grammar (resource.ParseQuantity, suffix.go) the oracle found.
CORNER = ["Gi", "m", "e3", "Ti", "Ki", "Mi", "k", "M", "n", "u", "E", "Pi", "Ei", "+Pi", "-Ei", "e-10", "e-9",
          ".Pi", ".", "-.", "+", "-", "+.", "1e4294967296", "2e4294967297", "1E-4294967295", "1e4294967299",
          "1e-4294967296", "5.", ".5", "1.G", "0.000000000001Ki", "3.001n", "1e-9", "1.1E-9", "9Ei", "12E",
          "9223372036854775807Ki", "1e1000", "1e1500", "1e-1000", "1K", "1ki", "2e3m", "0x10", "1 000", "1e",
          "1.1.M", "Non-Numeric", "", "e", "E+", "1e+", "-1", "-500m", "-0", "+1", "00001", "0.0", "1e18",
          "1e19", "8Ei", "1e9223372036854775807", "1e9223372036854775808", "1e-9223372036854775808",
          "1e2147483647x", "1e-4294967200"]
# Not in the grammar: exponents whose int32 value is near ±2^31 (1e2147483647, 1e-2147483647). Upstream's
# ParseQuantity rounds to nano with exact big integers, so those take the API server (and the oracle)
# effectively forever; qos-guard answers at once (too large / 1m).
SPACES = [" ", "\t", "\n", "\r", "\v", "\f", "\u00a0", "\u0085", "\u2003", "\u3000", "\x1c", "\u200b"]
SUFFIXES = ["", "", "", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "e3",
            "E-2", "e+1", "e0", "e-3", "E6", "e18", "e-12", "e4294967296", "e-4294967293"]
BAD_SUFFIXES = ["mm", "KiB", "g", "K", "%", "i", "ki", "mi", "e", "E+", "em", "e3m", "Mm", "iK"]


def _digits(rng: random.Random, lo: int = 1, hi: int = 6) -> str:
    n = rng.randint(lo, hi)
    if rng.random() < 0.03:
        n = rng.choice([19, 20, 40, 400, 1100, 3990, 4010])  # beyond int64, and around qos-guard's bound
    return "".join(rng.choice("0123456789") for _ in range(n))


def quantity_text(rng: random.Random) -> str:
    """A string from the quantity grammar: mostly well-formed, with every corner case of resource.ParseQuantity's
    grammar."""
    r = rng.random()
    if r < 0.15:
        return rng.choice(CORNER)
    if r < 0.2:
        return rng.choice(SPACES) * rng.randint(0, 2) + quantity_text(rng) + rng.choice(SPACES) * rng.randint(0, 2)
    sign = rng.choice(["", "", "", "", "+", "-"])
    whole = _digits(rng, 0 if rng.random() < 0.1 else 1)
    frac = "" if rng.random() < 0.6 else "." + _digits(rng, 0)
    if rng.random() < 0.05:
        suffix = rng.choice(BAD_SUFFIXES)
    elif rng.random() < 0.1:
        suffix = rng.choice("eE") + rng.choice(["", "+", "-"]) + str(rng.choice(
            [0, 1, 2, 3, 9, 10, 12, 18, 19, 100, 999, 2000, 3996, 4100, 2**32, 2**32 + 3, 2**63 - 1, 2**64]))
    else:
        suffix = rng.choice(SUFFIXES)
    return sign + whole + frac + suffix


def json_number(rng: random.Random) -> str:
    """A JSON number as text, as a manifest may carry one."""
    return rng.choice(["1", "2", "0", "4", "1.0", "2.5", "1e3", "1E0", "0.5", "-1", "1.000", "16", "1e-3",
                       "10e-1", "0.1", "1.0000000000000001", "100000000000000000000", "1e400", "2.0e+0"])


# ---- manifests ----

KINDS = ["Pod"] * 8 + ["Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job", "CronJob",
                       "ReplicationController", "PodTemplate", "List"]
API_VERSION = {"Pod": "v1", "PodTemplate": "v1", "ReplicationController": "v1", "List": "v1",
               "Deployment": "apps/v1", "ReplicaSet": "apps/v1", "StatefulSet": "apps/v1",
               "DaemonSet": "apps/v1", "Job": "batch/v1", "CronJob": "batch/v1"}


class ObjectGrammar:
    """Random Pods and workloads whose resources exercise every rule; mostly valid for the API server."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def quantity(self, resource: str) -> Any:
        rng = self.rng
        r = rng.random()
        if r < 0.7:
            return rng.choice(NICE_CPU if resource == "cpu" else NICE_MEMORY)
        if r < 0.78:  # a number (Python holds 1e400 as inf, which JSON cannot carry: that one stays text)
            number = json.loads(json_number(rng))
            return number if number not in (float("inf"), float("-inf")) else "1e400"
        return quantity_text(rng)

    def resource_list(self, names: list[str]) -> dict[str, Any]:
        return {n: self.quantity(n) for n in names}

    def container_resources(self) -> dict[str, Any] | None:
        rng = self.rng
        shape = rng.choice(["guaranteed"] * 6 + ["none", "empty", "requests-empty", "limits-only", "requests-only",
                                                 "differ", "partial", "hugepages", "gpu", "null-list"])
        if shape == "none":
            return None
        if shape == "empty":
            return {}
        if shape == "requests-empty":
            return {"requests": {}, "limits": self.same_both()[1]} if rng.random() < 0.5 else {"requests": {}}
        if shape == "limits-only":
            return {"limits": self.resource_list(["cpu", "memory"])}
        if shape == "requests-only":
            return {"requests": self.resource_list(rng.sample(["cpu", "memory"], rng.randint(1, 2)))}
        if shape == "differ":
            return {"requests": self.resource_list(["cpu", "memory"]), "limits": self.resource_list(["cpu", "memory"])}
        if shape == "partial":
            req, lim = self.same_both()
            del lim[rng.choice(["cpu", "memory"])]
            return {"requests": req, "limits": lim}
        if shape == "null-list":
            return {"requests": None, "limits": self.same_both()[1]}
        req, lim = self.same_both()
        if shape == "hugepages":
            lim["hugepages-2Mi"] = req["hugepages-2Mi"] = rng.choice(["2Mi", "4Mi", "1Gi"])
        if shape == "gpu":
            lim["nvidia.com/gpu"] = req["nvidia.com/gpu"] = rng.choice(["1", "2", 1])
        if rng.random() < 0.2:
            return {"limits": lim}  # requests defaulted from limits
        return {"requests": req, "limits": lim}

    def same_both(self) -> tuple[dict[str, Any], dict[str, Any]]:
        lim = self.resource_list(["cpu", "memory"])
        req = dict(lim)
        if self.rng.random() < 0.1:  # the same value, spelled differently
            req["memory"] = {"1Gi": "1024Mi", "2Gi": "2048Mi", "1G": "1000M"}.get(str(req["memory"]), req["memory"])
            req["cpu"] = {"1": "1000m", "2": "2000m", "4": "4e0"}.get(str(req["cpu"]), req["cpu"])
        return req, lim

    def container(self, name: str, sidecar: bool = False) -> dict[str, Any]:
        c: dict[str, Any] = {"name": name, "image": "registry.example/app:1"}
        res = self.container_resources()
        if res is not None:
            c["resources"] = res
        if sidecar:
            c["restartPolicy"] = "Always"
        return c

    def pod_level(self) -> dict[str, Any]:
        rng = self.rng
        shape = rng.choice(["empty", "requests-empty", "limits-empty", "hugepages", "guaranteed", "requests-only",
                            "limits-only", "differ"])
        if shape == "empty":
            return {}
        if shape == "requests-empty":
            return {"requests": {}}
        if shape == "limits-empty":
            return {"limits": {}}
        if shape == "hugepages":
            v = rng.choice(["2Mi", "4Mi"])
            return {"requests": {"hugepages-2Mi": v}, "limits": {"hugepages-2Mi": v}}
        req, lim = self.same_both()
        if shape == "requests-only":
            return {"requests": req}
        if shape == "limits-only":
            return {"limits": lim}
        if shape == "differ":
            return {"requests": self.resource_list(["cpu", "memory"]), "limits": lim}
        return {"requests": req, "limits": lim}

    def pod_spec(self, restart_policy: str | None) -> dict[str, Any]:
        rng = self.rng
        spec: dict[str, Any] = {"containers": [self.container(f"app{i}") for i in range(rng.randint(1, 3))]}
        if rng.random() < 0.4:
            spec["initContainers"] = [self.container(f"init{i}", sidecar=rng.random() < 0.5)
                                      for i in range(rng.randint(1, 2))]
        if rng.random() < 0.15:
            spec["resources"] = self.pod_level()
        if restart_policy is not None:
            spec["restartPolicy"] = restart_policy
        if rng.random() < 0.02:  # an invalid spec (duplicate container name)
            spec["containers"].append(copy.deepcopy(spec["containers"][0]))
        return spec

    def template(self, restart_policy: str | None) -> dict[str, Any]:
        return {"metadata": {"labels": {"app": "x"}}, "spec": self.pod_spec(restart_policy)}

    def manifest(self, kind: str | None = None) -> dict[str, Any]:
        rng = self.rng
        kind = kind or rng.choice(KINDS)
        obj: dict[str, Any] = {"apiVersion": API_VERSION[kind], "kind": kind,
                               "metadata": {"name": f"obj{rng.randint(0, 999)}"}}
        if rng.random() < 0.3:
            obj["metadata"]["namespace"] = "team-a"
        selector = {"matchLabels": {"app": "x"}}
        if kind == "Pod":
            obj["spec"] = self.pod_spec(None)
            if rng.random() < 0.12:
                obj["status"] = {"qosClass": rng.choice(["Guaranteed", "Burstable", "BestEffort"])}
        elif kind == "PodTemplate":
            obj["template"] = self.template(None)
        elif kind == "ReplicationController":
            obj["spec"] = {"replicas": 1, "template": self.template(None)}
        elif kind in ("Deployment", "ReplicaSet", "DaemonSet"):
            obj["spec"] = {"selector": selector, "template": self.template("Always" if rng.random() < 0.3 else None)}
        elif kind == "StatefulSet":
            obj["spec"] = {"selector": selector, "serviceName": "svc", "template": self.template(None)}
        elif kind == "Job":
            obj["spec"] = {"template": self.template(rng.choice(["Never", "OnFailure"]))}
        elif kind == "CronJob":
            obj["spec"] = {"schedule": "*/5 * * * *",
                           "jobTemplate": {"spec": {"template": self.template(rng.choice(["Never", "OnFailure"]))}}}
        elif kind == "List":
            obj.pop("metadata")
            obj["items"] = [self.manifest(rng.choice(KINDS[:-1])) for _ in range(rng.randint(1, 3))]
        return obj


# ---- YAML files ----

YAML_SCALARS = ["1:00", "0o10", "010", "0x10", "1_000", "yes", "no", "on", "off", "~", "null", "1e3", "1.5e3",
                ".5", "+1", "0b11", "1.0", "1", "2Gi", "'2'", '"2"', "!!str 2", "!!int '2'", "2 # comment",
                "1:30:00", "-1", "0.", "'1:00'", ".inf", "1e-3", "5e", "0777", "12e03"]


def yaml_file(rng: random.Random) -> str:
    """A manifest file as people write them: several documents, flow and block styles, YAML 1.1 and 1.2
    scalar spellings, repeated keys, content on ``---`` lines, JSON streams and arrays."""
    r = rng.random()
    if r < 0.1:  # JSON: one object, several concatenated objects, or a top-level array
        objs = [_small_pod(rng, json.dumps(rng.choice(["1", "2", "500m"]))) for _ in range(rng.randint(1, 3))]
        texts = [json.dumps(o, indent=rng.choice([None, 2])) for o in objs]
        if rng.random() < 0.3:
            return json.dumps(objs)
        return rng.choice(["\n", "", " "]).join(texts) + rng.choice(["", "\n"])
    docs = []
    for _ in range(rng.randint(1, 3)):
        cpu = rng.choice(YAML_SCALARS)
        mem = rng.choice(["1Gi", "1Gi", "0o10", "010", "1:00", "~"])
        doc = ("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: app\n"
               f"    image: x\n    resources:\n      limits:\n        cpu: {cpu}\n        memory: {mem}\n")
        if rng.random() < 0.1:
            doc += f"      requests:\n        cpu: {rng.choice(YAML_SCALARS)}\n"
        if rng.random() < 0.1:
            doc = doc.replace("  name: p\n", "  name: p\n  name: q\n")  # a repeated key
        if rng.random() < 0.1:
            doc = "{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: app, image: x, " \
                  f"resources: {{limits: {{cpu: {cpu}, memory: {mem}}}}}}}]}}}}\n"
        docs.append(doc)
    seps = ["---\n", "---\n", "--- \n", "---\n\n", "--- # c\n", "--- a: 1\n", "---\n---\n", "...\n---\n"]
    text = rng.choice(["", "---\n", "%YAML 1.1\n---\n"]) if rng.random() < 0.2 else ""
    text += docs[0]
    for d in docs[1:]:
        text += rng.choice(seps) + d
    return text + rng.choice(["", "---\n", "\n"])


def _small_pod(rng: random.Random, cpu: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{rng.randint(0, 9)}"},
            "spec": {"containers": [{"name": "app", "image": "x",
                                     "resources": {"limits": {"cpu": json.loads(cpu), "memory": "1Gi"}}}]}}


# ---- shrinking ----

def _smaller(value: Any) -> Iterator[Any]:
    """Candidate one-step simplifications of a JSON value."""
    if isinstance(value, dict):
        for key in value:
            rest = {k: v for k, v in value.items() if k != key}
            yield rest
        for key, v in value.items():
            for smaller in _smaller(v):
                yield {**value, key: smaller}
    elif isinstance(value, list):
        for i in range(len(value)):
            yield value[:i] + value[i + 1:]
        for i, v in enumerate(value):
            for smaller in _smaller(v):
                yield [*value[:i], smaller, *value[i + 1:]]
    elif isinstance(value, str) and len(value) > 1:
        yield value[: len(value) // 2]
        yield value[1:]


def shrink(value: Any, still_fails: Callable[[Any], bool], budget: int = 400) -> Any:
    """Greedy shrinking: keep taking the first simplification that still fails, within ``budget`` tries."""
    current = value
    tries = 0
    improved = True
    while improved and tries < budget:
        improved = False
        for candidate in _smaller(current):
            tries += 1
            if tries >= budget:
                break
            if still_fails(candidate):
                current = candidate
                improved = True
                break
    return current
