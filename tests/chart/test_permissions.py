"""The chart README's permissions table is what the chart grants: ``helm template`` with every switch on (both
report APIs, in two renders), every rule of every Role and ClusterRole attributed to the component whose
ServiceAccount a binding names, and every upstream role a binding names, against the table's rows, verb by
verb. A grant the table does not list, or a row the chart does not grant, fails the test."""

from __future__ import annotations

import re
from typing import Any

from tests.chart.conftest import CHART, Render, by_kind

NAMESPACE = "platform"
README = CHART / "README.md"
KINDS_TPL = CHART / "templates" / "_kinds.tpl"
# A ServiceAccount's name (after the release's full name) -> the components running as it.
ACCOUNTS = {"": ("webhook",), "-audit-cronjob": ("audit",), "-agent": ("agent",),
            "-scheduler": ("extender", "scheduler")}
SWITCHES = ("rbac.audit=true,rbac.patchWebhooks=true,config.policy.numa=auto,config.policy.deviceClasses=true,"
            "config.policy.operatorObjects=true,config.policy.draObjects=true,"
            "audit.enabled=true,agent.enabled=true,agent.publishTopology=true,scheduler.enabled=true")

Grant = tuple[str, str, str, str]  # account, API group (or the kind of role bound), resource (or role), verb


def judged_kinds() -> list[tuple[str, str]]:
    """(group, resource) of ``qos-guard.kindRBAC`` in _kinds.tpl: what the table calls judged kinds."""
    block = KINDS_TPL.read_text().split('{{- define "qos-guard.kindRBAC" -}}')[1].split("{{- end }}")[0]
    found: list[tuple[str, str]] = []
    for group, resources in re.findall(r'apiGroups: \["([^"]*)"\]\s+resources: \[([^\]]*)\]', block):
        found += [(group, r) for r in re.findall(r'"([^"]+)"', resources)]
    assert ("", "pods") in found and ("apps", "deployments") in found
    return found


def table() -> set[Grant]:
    """The README's rows, one grant per account, group, resource and verb."""
    text = README.read_text().split("## Permissions")[1].split("\n## ")[0]
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| Component")]
    assert len(rows) >= 20, "the permissions table is missing"
    account_of = {c: a for a, components in ACCOUNTS.items() for c in components}
    grants: set[Grant] = set()
    for row in rows:
        component, group, resource, verbs = (cell.strip() for cell in row.strip("|").split("|")[:4])
        account = account_of[component]
        if verbs == "bound":
            grants.add((account, group, resource.strip("`"), "bound"))
            continue
        if group == "judged kinds":
            pairs = judged_kinds()
        else:
            names = re.findall(r"`([^`]+)`", resource.split("(")[0])
            pairs = [(group.strip("`").strip('"'), name) for name in names]
        grants |= {(account, g, r, v.strip()) for g, r in pairs for v in verbs.split(",")}
    return grants


def rendered(objects: list[dict[str, Any]]) -> set[Grant]:
    """What the rendered chart grants, attributed to the ServiceAccounts its bindings name."""
    roles = {(o["kind"], o["metadata"]["name"]): o for o in by_kind(objects, "ClusterRole") + by_kind(objects, "Role")}
    grants: set[Grant] = set()
    bound = set()
    for binding in by_kind(objects, "ClusterRoleBinding") + by_kind(objects, "RoleBinding"):
        ref = binding["roleRef"]
        for subject in binding["subjects"]:
            assert subject["kind"] == "ServiceAccount" and subject["namespace"] == NAMESPACE, subject
            assert subject["name"].startswith("qos-guard"), subject
            account = subject["name"].removeprefix("qos-guard")
            assert account in ACCOUNTS, f"a ServiceAccount the table does not know: {subject['name']}"
            role = roles.get((ref["kind"], ref["name"]))
            if role is None:  # an upstream role
                where = f"Role in `{binding['metadata']['namespace']}`" if binding["kind"] == "RoleBinding" else ""
                grants.add((account, where or ref["kind"], ref["name"], "bound"))
                continue
            bound.add((ref["kind"], ref["name"]))
            for rule in role["rules"]:
                assert set(rule) <= {"apiGroups", "resources", "verbs", "resourceNames"}, rule
                grants |= {(account, g, r, v) for g in rule["apiGroups"] for r in rule["resources"]
                           for v in rule["verbs"]}
    assert bound == set(roles), f"a role no binding uses: {set(roles) - bound}"
    return grants


def test_the_readme_lists_every_permission_the_chart_grants(render: Render) -> None:
    granted = set()
    for report in ("openreports", "policyreport"):
        granted |= rendered(render("--set", f"{SWITCHES},audit.report={report},agent.report={report}",
                                   namespace=NAMESPACE))
    listed = table()
    assert granted - listed == set(), "granted by the chart but not in the README's table"
    assert listed - granted == set(), "in the README's table but not granted by the chart"
    # The rows that matter most, said outright.
    assert ("-agent", "", "nodes/configz", "get") in granted
    assert not {g for g in granted if g[2] in ("nodes/proxy", "*", "nodes/*") or g[3] == "*"}
    assert {g[3] for g in granted if g[0] == "-agent" and g[2] == "noderesourcetopologies"} == {"create", "patch"}


def test_the_table_would_catch_a_grant_it_does_not_list(render: Render) -> None:
    """A grant added to the chart (here, rendered objects with one more verb) is seen."""
    objects = render("--set", f"{SWITCHES},audit.report=openreports,agent.report=openreports", namespace=NAMESPACE)
    (agent,) = [r for r in by_kind(objects, "ClusterRole") if r["metadata"]["name"] == "qos-guard-agent"]
    agent["rules"].append({"apiGroups": [""], "resources": ["nodes/proxy"], "verbs": ["get"]})
    assert ("-agent", "", "nodes/proxy", "get") in rendered(objects) - table()
