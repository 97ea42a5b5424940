"""The CEL of the generated admission policies: each parameter read from the ConfigMap, where each kind keeps
its pod specs (``variables.templates``), the rules' own CEL in the engine's order, the requests judged, and the
MutatingAdmissionPolicy's ApplyConfiguration."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.core.config import RUNTIME_CLASSES, SCHEMA
from webhook.core.refusal import refusal_cel
from webhook.core.rules import RULES, cel
from webhook.core.rules.base import cel_string
from webhook.core.settings import Setting
from webhook.core.templatepaths import unused_cel
from webhook.core.workloads import KINDS, LIST, MAP, POD, Kind, Template, role, template_label


def read_param(key: str) -> str:
    """CEL reading the parameter ``key`` (typed; its default when the ConfigMap lacks it)."""
    setting = SCHEMA.find(key)
    assert isinstance(setting, Setting)
    text = f"params.?data.orValue({{}})[?'{key}'].orValue({cel_string(setting.kind.text(setting.default))})"
    return setting.kind.cel(text)


PARAM_VARIABLES: list[tuple[str, str]] = [(cel.param_name(key), read_param(key)) for key, s in SCHEMA.settings()
                                          if s.param]


def _literal(text: str) -> str:
    return cel_string(text)


def _template_cel(kind: Kind, template: Template) -> str:
    """CEL for the list of ``{path, prefix, spec}`` records of ``template`` in ``object``, the path and the
    template's name (``prefix``) spelled as the engine spells them (``workloads.template_label``); none where the
    template makes no Pods (``Template.unused``, tested on its holder, the node ``unused.up`` fields above)."""
    segments = template.segments
    holder_at = len(segments) - template.unused.up if template.unused is not None else -1
    holder: list[str] = []
    wild = [i for i, s in enumerate(segments) if s in (LIST, MAP)]
    last = wild[-1] if wild else -1
    part = role(kind.templates, template)
    after = f" + {_literal(' ' + part)}" if part else ""  # as ``template_label``: the template's role

    def build(i: int, node: str, path: str, label: str, depth: int) -> str:
        # node: CEL of an optional value (after ``.?key``) or a plain one (a list item / map value)
        if i == holder_at:
            holder[:] = [node]
        if i == len(segments):
            if not template.wild:
                fixed = template_label(template, tuple(segments), None, kind.single)
                label = _literal(f"{fixed}: ") if fixed else "''"
            record = "[" + cel.cel_map({"path": path, "prefix": label, "spec": f"{node}.orValue({{}})"}) + "]"
            return f"({unused_cel(template.unused, holder[0])} ? [] : {record})" if template.unused else record
        seg = segments[i]
        x, n = f"x{depth}", f"i{depth}"
        if seg == LIST:
            item_path = f"{path} + '[' + string({n}) + ']'"
            item_label = label
            if i == last:
                name = f"({x}.?name.orValue('') != '' ? {x}.?name.orValue('') : {x}.?groupName.orValue(''))"
                item_label = f"{item_path} + ({name} != '' ? ' (' + {name} + ')' : ''){after} + ': '"
            inner = build(i + 1, x, item_path, item_label, depth + 1)
            return f"{node}.orValue([]).transformList({n}, {x}, {inner}).flatten()"
        if seg == MAP:
            item_path = f"{path} + '.' + {n}"
            item_label = f"{item_path}{after} + ': '" if i == last else label
            inner = build(i + 1, x, item_path, item_label, depth + 1)
            return f"{node}.orValue({{}}).transformList({n}, {x}, {x} != null, {inner}).flatten()"
        step = f"{node}.?{seg}" if i else f"object.?{seg}"
        longer = f"{path[:-1]}.{seg}'" if path.endswith("'") else f"{path} + '.{seg}'"
        return build(i + 1, step, longer if i else f"'{seg}'", label, depth)

    return build(0, "object", "''", "''", 0)


def _kind_templates(kind: Kind) -> str:
    return " + ".join(_template_cel(kind, t) for t in kind.templates)


def cel_kinds(kinds: Mapping[tuple[str, str], Kind] = KINDS) -> dict[tuple[str, str], Kind]:
    """The kinds the policies judge: not those whose Pods an operator builds (``Kind.build``: KServe's
    InferenceService). Their Pod is the operator's merge of the object with others (a ServingRuntime chosen
    among the cluster's, KServe's defaults, Knative's queue-proxy) that CEL cannot read in an admission request;
    judging the object as written would pass Pods that fail and refuse Pods that pass. The webhook judges them
    (``enforcement: webhook``); ``NOT_IN_POLICIES`` says so in the output."""
    return {key: kind for key, kind in kinds.items() if kind.build is None}


def not_in_policies(kinds: Mapping[tuple[str, str], Kind] = KINDS) -> list[str]:
    """The kinds ``cel_kinds`` leaves out, as ``kind (group)``."""
    return [f"{k.kind} ({k.group})" for k in kinds.values() if k.build is not None]


def spec_variables(kinds: Mapping[tuple[str, str], Kind] = KINDS) -> list[tuple[str, str]]:
    """Where the pod specs live in each kind (``KINDS`` and the configuration's ``workloads``): the records of
    ``variables.templates`` (``webhook.core.rules.cel``); the templates most kinds share are the fallback."""
    groups: dict[tuple[Template, ...], list[Kind]] = {}
    for kind in cel_kinds(kinds).values():
        groups.setdefault(kind.templates, []).append(kind)
    *special, (_, common) = sorted(groups.items(), key=lambda group: len(group[1]))
    expr = _kind_templates(common[0])
    for _, members in reversed(special):
        cond = " || ".join(f"(request.kind.group == '{k.group}' && request.kind.kind == '{k.kind}')"
                           for k in members)
        expr = f"({cond}) ? {_kind_templates(members[0])} : {expr}"
    return [("templates0", expr),
            ("templates", "variables.templates0.filter(t, "
                          f"!(t.spec.?runtimeClassName.orValue('') in {cel.setting(RUNTIME_CLASSES)}))"),
            ("exempt", "size(variables.templates) == 0")]


SPEC_VARIABLES = spec_variables()


def violation_variables(mutated: bool) -> list[tuple[str, str]]:
    """The rules' CEL, in the engine's order (``RULES``), each a list of 'rule-id: message', then all of them.

    ``mutated``: judge what the mutation would leave (templates in ``mutate`` namespaces, which are not
    patched).
    """
    pairs = [(cel.variable(rule.id), rule.cel(mutated)) for rule in RULES if rule.cel is not None]
    every = " + ".join(f"variables.{name}" for name, _ in pairs)
    return [*pairs, ("violations", f"variables.exempt ? [] : {every}")]


# The refusal, worded by ``webhook.core.refusal`` as the webhook words it (``object_name``'s fallbacks in CEL).
MESSAGE = refusal_cel(kind="request.kind.kind",
                      name="object.metadata.?name.orValue(object.metadata.?generateName.orValue('<unnamed>'))",
                      findings="variables.violations")


def variables(pairs: list[tuple[str, str]]) -> list[dict[str, str]]:
    names = [name for name, _ in pairs]
    # A variable defined twice refers to itself: kube-apiserver v1.36 then recurses until its stack overflows.
    twice = sorted({n for n in names if names.count(n) > 1})
    assert not twice, f"CEL variables defined twice: {twice}"
    return [{"name": name, "expression": expr} for name, expr in pairs]


def match_conditions() -> list[dict[str, str]]:
    return [
        {"name": "exempt-namespace", "expression": f"!(request.namespace in {read_param('exemptions.namespaces')})"},
        {"name": "exempt-username",
         "expression": f"!(request.userInfo.username in {read_param('exemptions.usernames')})"},
    ]


def pod_rules(mutating: bool, kinds: Mapping[tuple[str, str], Kind] = KINDS) -> list[dict[str, Any]]:
    """The requests judged (``KINDS``: the webhook's; the policies pass ``cel_kinds``), one rule per API group,
    versions and operations; the mutation patches Pods only. A rule for a resource the API server does not
    serve (a CRD not installed) matches nothing."""
    merged: dict[tuple[str, tuple[str, ...], tuple[str, ...]], list[str]] = {}
    for kind in kinds.values():
        if mutating and kind.key != ("", POD):
            continue
        ops = ("CREATE",) if mutating else kind.operations
        merged.setdefault((kind.group, ops, kind.versions), []).append(kind.plural)
        for sub, op in () if mutating else kind.subresources:
            merged.setdefault((kind.group, (op,), kind.versions), []).append(f"{kind.plural}/{sub}")
    # scope spelled out: the API server would default it, and `kubectl apply` would then see a change.
    return [{"apiGroups": [group], "apiVersions": list(versions), "operations": list(ops), "resources": resources,
             "scope": "Namespaced"} for (group, ops, versions), resources in merged.items()]


def mutation_apply() -> str:
    """ApplyConfiguration merging the fixed requests/limits into each container (by name) that needs it."""
    lc = "(f.eff != '' && f.eff != f.l)"
    rc = "(f.eff != '' && f.q != '' && quantity(f.q).compareTo(quantity(f.eff)) != 0)"

    def entries(change: str) -> str:
        return ", ".join(f"?'{r}': {change.replace('f.', f'fs[{i}].')} ? optional.of(fs[{i}].eff) : optional.none()"
                         for i, r in enumerate(("cpu", "memory")))

    def group(field: str) -> str:
        item = (f"Object.spec.{field}{{name: fs[0].b.name, resources: Object.spec.{field}.resources{{"
                f"?limits: fs.exists(f, {lc}) ? optional.of({{{entries(lc)}}}) : optional.none(), "
                f"?requests: fs.exists(f, {rc}) ? optional.of({{{entries(rc)}}}) : optional.none()}}}}")
        return f"variables.facts.filter(fs, fs[0].b.group == '{field}' && fs.exists(f, {lc} || {rc})).map(fs, {item})"

    return ("Object{spec: Object.spec{"
            f"?containers: size({group('containers')}) > 0 ? optional.of({group('containers')}) : optional.none(), "
            f"?initContainers: size({group('initContainers')}) > 0 ? optional.of({group('initContainers')}) "
            ": optional.none()}}")
