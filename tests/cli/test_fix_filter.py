"""``qos-guard fix -``: a filter from standard input to standard output, as an editor runs one (the fixed
manifest, or on an error the input unchanged, on stdout; what was done on stderr), idempotent, and given alone."""

from __future__ import annotations

from pathlib import Path

from tests.cli.conftest import LIMIT_ABOVE_REQUEST, Run, refused


def test_fix_dash_is_a_stdin_to_stdout_filter(qos_guard: Run) -> None:
    out = qos_guard("fix", "-", stdin=LIMIT_ABOVE_REQUEST)
    assert out.returncode == 0, out.stderr
    assert out.stdout == LIMIT_ABOVE_REQUEST.replace('requests: {cpu: "1"', 'requests: {cpu: "2"')
    assert '<stdin>:8: Pod/p: fixed: container "a": set resources.requests.cpu to 2 (its limit)' in out.stderr
    again = qos_guard("fix", "-", stdin=out.stdout)
    assert again.returncode == 0 and again.stdout == out.stdout  # idempotent
    diff = qos_guard("fix", "-", "--dry-run", stdin=LIMIT_ABOVE_REQUEST)
    assert diff.returncode == 0 and diff.stdout.startswith("--- a/stdin\n+++ b/stdin\n")
    assert '+        requests: {cpu: "2", memory: 1Gi}' in diff.stdout


def test_fix_dash_gives_its_input_back_when_it_cannot_fix_it(qos_guard: Run) -> None:
    """An editor replaces its buffer with a filter's output: on an error that output is the input, unchanged."""
    broken = "kind: [\n"
    out = qos_guard("fix", "-", stdin=broken)
    assert out.returncode == 2 and out.stdout == broken
    assert "<stdin>:2: error: YAML does not parse" in out.stderr and "Traceback" not in out.stderr
    fractional = LIMIT_ABOVE_REQUEST.replace('cpu: "2"', "cpu: 1500m")
    left = qos_guard("fix", "-", stdin=fractional)
    assert left.returncode == 1 and "cpu-not-integer" in left.stderr
    assert left.stdout.startswith("apiVersion: v1\nkind: Pod   # kept\n")


def test_fix_dash_is_given_alone(qos_guard: Run, tmp_path: Path) -> None:
    for args in (["-", str(tmp_path)], ["-", "--output", str(tmp_path)]):
        refused(qos_guard("fix", *args, stdin=LIMIT_ABOVE_REQUEST),
                "fix: - (standard input to standard output, a filter) is given alone")
