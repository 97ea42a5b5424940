"""How a refusal and a warning are worded, and how much of one is shown: the one place, for the webhook's
AdmissionReview answers (``admission/review.py``), ``check``'s and ``audit``'s lines (``batch/report.py``) and
the generated admission policies' CEL (``policies/``), so that a user reads the same words whichever of them
refused. As Pod Security Admission formats its refusal in one place.

A finding is ``rule: message`` everywhere, with the mutation setting that would have fixed it in parentheses
(``remedied``). A refusal is ``REFUSED`` (``REFUSED_CLAIM`` for a claim) then the findings, at most
``DENIAL_LINES`` of them, then ``MORE``. Each cap below is stated once, with the limit it keeps under; the
policies' caps differ from the webhook's only where the API server leaves CEL no choice (said at each).
"""

from __future__ import annotations

import re

from webhook.core.rules.base import Text, Violation, cel_string

# The words.
REFUSED = Text('{kind} "{name}" would not get exclusive CPUs (Guaranteed QoS, whole CPUs) from kubelet:')
REFUSED_CLAIM = Text('{kind} "{name}" would let the scheduler spread its devices over NUMA nodes:')
MORE = Text("... and {count} more (see qos-guard check)")
# What a policy says where its messageExpression cannot be used (the API server then shows ``message``).
POLICY_REFUSED = ("the Pod would not get exclusive CPUs (Guaranteed QoS, whole CPUs) from kubelet; "
                  "run qos-guard check on the manifest for details")
POLICY_WARNED = "qos-guard: the Pod would not get exclusive CPUs from kubelet"
POLICY_MORE = "qos-guard: more violations (see qos-guard check)"
# What the webhook could not judge (the Pod is not known: ``ObjectVerdict.unknown``): a warning, never a pass.
NOT_JUDGED = Text("qos-guard: not judged: {reason}")

# The caps.
# admission.k8s.io/v1 AdmissionResponse.warnings: "Limit warnings to 120 characters if possible. Warnings over
# 256 characters and large numbers of warnings may be truncated."
WARNING_CHARS = 120
# The API server's warning recorder (KEP-1693) caps the warnings of one response at 4 KiB in all: past it they
# are dropped unseen, so the webhook stops short and says how many it left out.
WARNINGS_BYTES = 4096
# A refusal lists this many findings, then ``MORE``: the first ones say what to do, and a kubectl error of
# hundreds of lines hides the way out (a Deployment with many containers, a hostile request of thousands).
DENIAL_LINES = 20
LINE_CHARS = 3 * WARNING_CHARS  # one finding in a refusal: a long template path and the advice still fit
NAME_CHARS = 253  # the longest object name (a DNS subdomain); a longer one comes from a bad request
# A ValidatingAdmissionPolicy warns once per failed validation, so its warnings are a fixed number of slots
# (one validation each) and then the count; the webhook warns once per finding up to ``WARNINGS_BYTES``.
WARN_SLOTS = 10
# The API server drops a messageExpression result over 5 KiB (MaxEvaluatedMessageExpressionSizeBytes) and
# shows ``POLICY_REFUSED`` instead: the policy's refusal is cut below it.
POLICY_MESSAGE_CHARS = 4000

# Between the head and the findings: one a line in the webhook's refusal; the API server discards a
# messageExpression result that holds a line break, so the policies put them on one line.
LINE_BREAK = "\n"
HEAD_SEPARATOR_CEL = " "
FINDING_SEPARATOR_CEL = "; "


def remedied(message: str, remedy: str | None) -> str:
    """``message`` with the mutation setting that would have fixed it (``mutate`` mode), where one would."""
    return f"{message} ({remedy})" if remedy else message


def finding(rule: str, message: str, remedy: str | None = None) -> str:
    """One finding as every output names it: ``rule: message``."""
    return f"{rule}: {remedied(message, remedy)}"


def note(text: str) -> str:
    """A remark about the whole answer (the minor judged from its pre-release): in parentheses, so that no
    reader of the ``rule: message`` lines takes it for a rule's."""
    return f"({text})"


def not_judged(reason: str) -> str:
    """A warning saying what is not judged and why (``NOT_JUDGED``): unknown is its own answer, never silent."""
    return NOT_JUDGED(reason=reason)


def refusal(kind: str, name: str, lines: list[str], *, claim: bool = False) -> str:
    """The webhook's refusal: the head, then one finding a line, at most ``DENIAL_LINES``, then ``MORE``."""
    head = (REFUSED_CLAIM if claim else REFUSED)(kind=kind, name=name[:NAME_CHARS])
    shown = [line[:LINE_CHARS] for line in lines[:DENIAL_LINES]]
    if len(lines) > DENIAL_LINES:
        shown.append(MORE(count=len(lines) - DENIAL_LINES))
    return LINE_BREAK.join([head, *shown])


def refusal_cel(kind: str, name: str, findings: str) -> str:
    """CEL for the policies' refusal: ``REFUSED`` with the CEL ``kind`` and ``name``, then ``findings`` (a CEL
    list of ``rule: message``) on the same line."""
    return (f"{REFUSED.cel(kind=kind, name=name)} + {cel_string(HEAD_SEPARATOR_CEL)} + "
            f"{findings}.join({cel_string(FINDING_SEPARATOR_CEL)})")


def capped_cel(message: str) -> str:
    """CEL for ``message`` (a CEL string) cut to ``POLICY_MESSAGE_CHARS``."""
    return (f"size({message}) > {POLICY_MESSAGE_CHARS} ? "
            f"{message}.substring(0, {POLICY_MESSAGE_CHARS}) + ' ...' : {message}")


def warn_slots_cel(findings: str) -> list[dict[str, str]]:
    """The policies' warnings as validations: one a finding of ``findings`` (a CEL list) for the first
    ``WARN_SLOTS``, then ``MORE`` with how many are left."""
    out = [{"expression": f"size({findings}) <= {k}", "messageExpression": f"{findings}[{k}]",
            "message": POLICY_WARNED} for k in range(WARN_SLOTS)]
    out.append({"expression": f"size({findings}) <= {WARN_SLOTS}",
                "messageExpression": MORE.cel(count=f"string(size({findings}) - {WARN_SLOTS})"),
                "message": POLICY_MORE})
    return out


def warning(v: Violation) -> str:
    """``rule: message``; where that is over the ``WARNING_CHARS`` a client shows, the block's field path goes
    (``container "x" (spec...containers[0])`` is ``container "x"``), and if that is not enough what to do comes
    first (``rule: container "x": set ...; <what is wrong>``), so the cut never takes the way out (a
    LeaderWorkerSet's or RayCluster's template path alone filled the line)."""
    line = finding(v.rule, v.message)
    if len(line) < WARNING_CHARS:
        return line
    who = f'container "{v.container}"' if v.container else "pod"
    short = _LABEL.match(v.message)
    message = f"{who}: {v.message[short.end():]}" if short else v.message
    line = finding(v.rule, message)
    head, sep, advice = message.partition("; ")
    if len(line) < WARNING_CHARS or not sep or not short:
        return line
    return finding(v.rule, f"{who}: {advice}; {head.removeprefix(who + ': ')}")


# A block's label: an optional template name, then ``container "NAME" (path)`` or ``pod (path)``, then ": ".
_LABEL = re.compile(r'^(?:[^"]*?: )?(?:container "[^"]*"|pod) \([^)]*\): ')


# What the API server refuses in a warning's text (apimachinery net.NewWarningHeader: ``unicode.IsControl``, the
# Cc runes): ``AddWarning`` then drops that warning unseen, so each is shown escaped instead.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def shown(text: str) -> str:
    """``text`` with each control character escaped (``\\n``, ``\\x1b``): a warning the API server keeps."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode(), text)


def fit_warnings(lines: list[str]) -> list[str]:
    """Each warning under ``WARNING_CHARS`` (its control characters escaped, ``shown``) and all of them under
    ``WARNINGS_BYTES``, the last one saying how many did not fit (``MORE``)."""
    out: list[str] = []
    total = 0
    for i, line in enumerate(map(shown, lines)):
        text = line if len(line) < WARNING_CHARS else line[: WARNING_CHARS - 4] + "..."
        more = MORE(count=len(lines) - i)
        if total + len(text.encode()) + len(more) + 2 > WARNINGS_BYTES:
            out.append(more)
            break
        out.append(text)
        total += len(text.encode())
    return out


__all__ = ["DENIAL_LINES", "LINE_BREAK", "LINE_CHARS", "MORE", "NAME_CHARS", "NOT_JUDGED", "POLICY_MESSAGE_CHARS",
           "REFUSED", "REFUSED_CLAIM", "WARNINGS_BYTES", "WARNING_CHARS", "WARN_SLOTS", "capped_cel", "finding",
           "fit_warnings", "not_judged", "note", "refusal", "refusal_cel", "remedied", "warn_slots_cel", "warning"]
