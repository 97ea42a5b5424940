"""A refusal reads the same from the webhook, the generated admission policies and ``check``: the policies' CEL
(``messageExpression``s as ``qos-guard policy`` prints them) is evaluated here by a small evaluator of the part
of CEL they use, against the webhook's answer for the same Pod. A change to the words or to a cap in one of
them and not the others fails here; tests/e2e/test_policy.py shows the same on a real API server."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import inprocess
from tests.helpers import admission_review, container, pod, rl
from webhook.core.config import Config, parse_config
from webhook.core.engine import Mode, evaluate
from webhook.core.refusal import (
    DENIAL_LINES,
    LINE_BREAK,
    LINE_CHARS,
    MORE,
    POLICY_MESSAGE_CHARS,
    POLICY_REFUSED,
    WARN_SLOTS,
    finding,
)
from webhook.policies.objects import policy_objects
from webhook.serving.app import create_app

# --- the part of CEL the policies' messages are written in --------------------------------------------------

_TOKEN = re.compile(r"\s*(?:(?P<str>'(?:[^'\\]|\\.)*')|(?P<int>\d+)|(?P<name>[A-Za-z_]\w*)"
                    r"|(?P<op>\.\?|==|!=|<=|>=|[-+<>?:.()\[\],]))")


class _Absent:
    """An optional with no value (CEL ``optional.none()``)."""


_NONE = _Absent()


class _Cel:
    """Recursive descent over: literals, names, ``a.b``, ``a.?b``, ``.orValue()``, ``.join()``, ``.substring()``,
    ``x[i]``, ``size()``, ``string()``, ``+ -``, comparisons and ``?:``."""

    def __init__(self, text: str, env: dict[str, Any]) -> None:
        self.tokens: list[tuple[str, str]] = []
        pos = 0
        while pos < len(text.rstrip()):
            m = _TOKEN.match(text, pos)
            assert m, f"not in the CEL this test reads: {text[pos:pos + 40]!r}"
            kind = m.lastgroup
            assert kind is not None
            self.tokens.append((kind, m.group(kind)))
            pos = m.end()
        self.i = 0
        self.env = env

    def value(self) -> Any:
        out = self.ternary()
        assert self.i == len(self.tokens), self.tokens[self.i:]
        return out

    def peek(self) -> str | None:
        return self.tokens[self.i][1] if self.i < len(self.tokens) else None

    def take(self, want: str | None = None) -> tuple[str, str]:
        token = self.tokens[self.i]
        assert want is None or token[1] == want, (want, token)
        self.i += 1
        return token

    def ternary(self) -> Any:
        cond = self.compare()
        if self.peek() != "?":
            return cond
        self.take("?")
        yes = self.ternary()
        self.take(":")
        no = self.ternary()
        return yes if cond else no

    def compare(self) -> Any:
        left = self.additive()
        ops: dict[str, Callable[[Any, Any], bool]] = {
            "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<=": lambda a, b: a <= b,
            ">=": lambda a, b: a >= b, "<": lambda a, b: a < b, ">": lambda a, b: a > b}
        op = self.peek()
        if op in ops:
            self.take()
            return ops[op](left, self.additive())
        return left

    def additive(self) -> Any:
        out = self.postfix()
        while self.peek() in ("+", "-"):
            op = self.take()[1]
            right = self.postfix()
            assert type(out) is type(right), (out, right)  # CEL adds a string to a string only
            out = out + right if op == "+" else out - right
        return out

    def args(self) -> list[Any]:
        self.take("(")
        out: list[Any] = []
        while self.peek() != ")":
            out.append(self.ternary())
            if self.peek() == ",":
                self.take(",")
        self.take(")")
        return out

    def postfix(self) -> Any:
        out = self.primary()
        while self.peek() in (".", ".?", "["):
            op = self.take()[1]
            if op == "[":
                index = self.ternary()
                self.take("]")
                out = out[index]
                continue
            name = self.take()[1]
            if op == ".?":
                out = out.get(name, _NONE) if isinstance(out, dict) else _NONE
            elif self.peek() == "(":
                args = self.args()
                if name == "orValue":
                    out = args[0] if out is _NONE else out
                elif name == "join":
                    out = args[0].join(out)
                elif name == "substring":
                    out = out[args[0]:args[1]]
                else:
                    raise AssertionError(f"method {name}")
            else:
                out = out[name]
        return out

    def primary(self) -> Any:
        kind, text = self.take()
        if kind == "str":
            return re.sub(r"\\(.)", r"\1", text[1:-1])
        if kind == "int":
            return int(text)
        if text == "(":
            out = self.ternary()
            self.take(")")
            return out
        if kind == "name" and self.peek() == "(":
            (arg,) = self.args()
            functions: dict[str, Callable[[Any], Any]] = {"size": len, "string": str}
            return functions[text](arg)
        return self.env[text]


def cel(text: str, env: dict[str, Any]) -> Any:
    return _Cel(text, env).value()


# --- the two answers -----------------------------------------------------------------------------------------

def _policy(mode: str) -> dict[str, Any]:
    (vap,) = [o for o in policy_objects([mode]) if o["kind"] == "ValidatingAdmissionPolicy"
              and o["metadata"]["name"].endswith(f"-{mode}")]
    return vap


ENFORCE, WARN = _policy("enforce"), _policy("warn")


def _env(obj: dict[str, Any], findings: list[str]) -> dict[str, Any]:
    """What the API server binds, with ``variables.violations`` as the rules' CEL gives it: the engine's
    ``rule: message`` for each finding (held equal to the CEL's on a real API server by
    tests/e2e/test_policy.py)."""
    variables: dict[str, Any] = {"violations": findings}
    env = {"request": {"kind": {"group": "", "kind": obj["kind"]}}, "object": obj, "variables": variables}
    (message,) = [v["expression"] for v in ENFORCE["spec"]["variables"] if v["name"] == "message"]
    variables["message"] = cel(message, env)
    return env


def policy_refusal(obj: dict[str, Any], findings: list[str]) -> str:
    (validation,) = ENFORCE["spec"]["validations"]
    env = _env(obj, findings)
    assert cel(validation["expression"], env) is False
    text = cel(validation["messageExpression"], env)
    assert isinstance(text, str)
    return text


def policy_warnings(obj: dict[str, Any], findings: list[str]) -> list[str]:
    env = _env(obj, findings)
    return [cel(v["messageExpression"], env) for v in WARN["spec"]["validations"] if not cel(v["expression"], env)]


def engine_findings(obj: dict[str, Any]) -> list[str]:
    return [finding(v.rule, v.message) for _, v in evaluate(obj, Config(), Mode.ENFORCE).violations]


APP = create_app(Config()).test_client()


def webhook(path: str, obj: dict[str, Any]) -> dict[str, Any]:
    answer = APP.post(path, data=json.dumps(admission_review(obj, namespace="ns")), content_type="application/json")
    assert answer.status_code == 200, answer.get_data(as_text=True)
    response: dict[str, Any] = answer.get_json()["response"]
    return response


def fractional(n: int, name: str = "p", cpu: str = "1500m") -> dict[str, Any]:
    """A Pod whose ``n`` containers each break one rule once (cpu-not-integer)."""
    return pod(*[container(f"c{i}", rl(cpu, "1Gi"), rl(cpu, "1Gi")) for i in range(n)], name=name)


# --- the tests -----------------------------------------------------------------------------------------------

names = st.from_regex(r"[a-z0-9]([-a-z0-9.]{0,40}[a-z0-9])?", fullmatch=True)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, DENIAL_LINES), name=names)
def test_the_policy_refuses_in_the_webhook_words(n: int, name: str) -> None:
    """The same head and the same findings in the same order; the policy puts them on one line (the API server
    discards a message with a line break)."""
    obj = fractional(n, name)
    head, *lines = webhook("/validate", obj)["status"]["message"].split(LINE_BREAK)
    assert len(lines) == n
    assert policy_refusal(obj, engine_findings(obj)) == _cut(f"{head} {'; '.join(lines)}")


def _cut(message: str) -> str:
    return message if len(message) <= POLICY_MESSAGE_CHARS else message[:POLICY_MESSAGE_CHARS] + " ..."


def test_a_generated_name_is_named_alike() -> None:
    obj = fractional(1)
    obj["metadata"] = {"generateName": "job-"}
    head = webhook("/validate", obj)["status"]["message"].split(LINE_BREAK)[0]
    assert head.startswith('Pod "job-" would not get')
    assert policy_refusal(obj, engine_findings(obj)).startswith(f"{head} ")


@pytest.mark.parametrize("n", [WARN_SLOTS - 1, WARN_SLOTS, WARN_SLOTS + 1, DENIAL_LINES + 3, 60])
def test_what_did_not_fit_is_counted_in_the_same_words(n: int) -> None:
    """Past its cap each lists what fits, then ``MORE`` with how many it left out: the policy's warnings after
    ``WARN_SLOTS``, the webhook's warnings after 4 KiB and its refusal after ``DENIAL_LINES``; what they show
    are the same findings in the same order (the webhook's warnings shortened to what a client shows)."""
    obj = fractional(n)
    findings = engine_findings(obj)
    warned = policy_warnings(obj, findings)
    *shown, last = webhook("/warn", obj)["warnings"]
    if len(shown) + 1 < n:
        assert last == MORE(count=n - len(shown))
    else:
        shown.append(last)
    assert [w.split(" (")[0].split(": ")[:2] for w in shown] == [
        ["cpu-not-integer", f'container "c{i}"'] for i in range(len(shown))]
    if n > WARN_SLOTS:
        assert warned == [*findings[:WARN_SLOTS], MORE(count=n - WARN_SLOTS)]
    else:
        assert warned == findings
    _, *lines = webhook("/validate", obj)["status"]["message"].split(LINE_BREAK)
    if n > DENIAL_LINES:
        assert lines == [*findings[:DENIAL_LINES], MORE(count=n - DENIAL_LINES)]
    else:
        assert lines == findings


def test_the_policy_cuts_a_long_refusal_under_what_the_api_server_keeps() -> None:
    """The API server drops a messageExpression result over 5 KiB (then shows the static message): the policy
    cuts its refusal at ``POLICY_MESSAGE_CHARS``, after the same words as the webhook's."""
    obj = fractional(60)
    findings = engine_findings(obj)
    said = policy_refusal(obj, findings)
    head, *lines = webhook("/validate", obj)["status"]["message"].split(LINE_BREAK)
    whole = f"{head} {'; '.join(findings)}"
    assert len(whole) > POLICY_MESSAGE_CHARS
    assert said == whole[:POLICY_MESSAGE_CHARS] + " ..."
    assert len(said.encode()) < 5 * 1024
    assert whole.startswith(f"{head} {'; '.join(lines[:DENIAL_LINES])}")
    assert all(len(line) <= LINE_CHARS for line in lines)
    assert POLICY_REFUSED.startswith("the Pod would not get exclusive CPUs (Guaranteed QoS, whole CPUs) from kubelet")


def test_check_names_a_finding_as_the_webhook_refuses_it(tmp_path: Path) -> None:
    """In ``mutate`` mode the webhook's refusal and ``check``'s line carry the same ``rule: message (remedy)``."""
    obj = fractional(2)
    path = tmp_path / "pod.yaml"
    path.write_text(json.dumps(obj))
    _, *lines = webhook("/validate/mutate", obj)["status"]["message"].split(LINE_BREAK)
    assert lines and all(line.endswith("reserved exclusively)") for line in lines), lines  # with the remedy
    out = inprocess.run(["check", str(path), "--mode", "mutate"])
    assert out.returncode == 1, out.stdout + out.stderr
    shown = [line for line in out.stdout.splitlines() if "cpu-not-integer: " in line]
    assert [line.split("Pod/p: ", 1)[1] for line in shown] == lines, out.stdout


def test_the_evaluator_reads_cel_as_the_api_server_does() -> None:
    """The evaluator above, on what it reads: optionals, escapes, ternaries, string arithmetic."""
    env = {"object": {"metadata": {"generateName": "g-"}}, "variables": {"violations": ["a", "b"]}}
    assert cel("object.metadata.?name.orValue(object.metadata.?generateName.orValue('<unnamed>'))", env) == "g-"
    assert cel(r"'it\'s ' + string(size(variables.violations) - 1)", env) == "it's 1"
    assert cel("size(variables.violations) <= 1 ? 'few' : variables.violations.join('; ')", env) == "a; b"
    assert cel("variables.violations[1].substring(0, 1)", env) == "b"
    with pytest.raises(AssertionError):
        cel("'a' + 1", env)  # CEL has no such overload


def test_a_changed_config_changes_no_wording() -> None:
    """The words do not depend on the configuration the policies are printed for (only the findings do)."""
    config = parse_config({"policy": {"smtAlignment": 2}})
    obj = fractional(1)
    findings = [finding(v.rule, v.message) for _, v in evaluate(obj, config, Mode.ENFORCE).violations]
    app = create_app(config).test_client()
    answer = app.post("/validate", data=json.dumps(admission_review(obj, namespace="ns")),
                      content_type="application/json").get_json()["response"]
    head, *lines = answer["status"]["message"].split(LINE_BREAK)
    assert policy_refusal(obj, findings) == f"{head} {'; '.join(lines)}"
