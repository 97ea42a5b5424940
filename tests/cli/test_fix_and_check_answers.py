"""What ``check`` and ``fix`` answer a user, run as the real command: the pre-commit hooks on any repository, what
a change costs (from the Pod's effective request), invalid objects said as the API server would refuse them, values
spelled as YAML spells them, merge keys, comments, folders and links as an operator expects."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests import inprocess
from tests.cli.conftest import Run

HOOKS = Path(__file__).resolve().parents[2] / ".pre-commit-hooks.yaml"


def test_the_shipped_hooks_pass_over_files_without_a_pod(qos_guard: Run, tmp_path: Path) -> None:
    """Each hook's own ``entry`` over the hook file itself (a top-level list), a CI file and a list of strings:
    nothing to judge, passed over as the hook's header promises (it was ``document is a list, not an object``,
    exit 2). The skipped documents are still counted, so ``check`` says what it passed over."""
    hooks = yaml.safe_load(HOOKS.read_text(encoding="utf-8"))
    ci = tmp_path / "ci.yaml"
    ci.write_text("- run: make test\n- run: make lint\n---\n[a, b]\n---\nplain words\n", encoding="utf-8")
    for hook in hooks:
        command, *args = hook["entry"].split()
        assert command == "qos-guard"
        out = qos_guard(*args, str(HOOKS), str(ci))
        assert out.returncode == 0, (hook["id"], out.stdout, out.stderr)
        assert "not an object" not in out.stdout
    out = qos_guard("check", str(HOOKS), str(ci))
    assert out.returncode == 2 and "nothing to judge" in out.stderr, out.stderr
    assert "3 documents that is a list" not in out.stderr
    assert "skipped: 3 documents that are a list, not a Kubernetes object" in out.stderr, out.stderr
    mixed = tmp_path / "mixed.yaml"
    mixed.write_text("[a]\n---\n" + ABOVE.replace('cpu: "4"', 'cpu: "1"'), encoding="utf-8")
    out = qos_guard("check", str(mixed))
    assert out.returncode == 1 and "requests-not-equal-limits" in out.stdout, out.stdout + out.stderr
    out = qos_guard("fix", str(mixed))
    assert out.returncode == 0, out.stdout + out.stderr
    assert mixed.read_text(encoding="utf-8").startswith("[a]\n---\n")


INIT = """apiVersion: v1
kind: Pod
metadata: {name: a}
spec:
  initContainers:
  - name: init
    image: i
    resources:
      requests: {cpu: 200m, memory: 1Gi}
      limits: {cpu: 500m, memory: 2Gi}
  containers:
  - name: app
    image: i
    resources:
      requests: {cpu: "2", memory: 4Gi}
      limits: {cpu: "2", memory: 4Gi}
"""
SIDECAR = """apiVersion: v1
kind: Pod
metadata: {name: b}
spec:
  containers:
  - name: app
    image: i
    resources:
      requests: {cpu: "8", memory: 4Gi}
      limits: {cpu: "24", memory: 4Gi}
  - name: sidecar
    image: i
    resources:
      requests: {cpu: 100m}
"""
FRACTION = """apiVersion: v1
kind: Pod
metadata: {name: c}
spec:
  containers:
  - name: app
    image: i
    resources:
      requests: {cpu: 200m, memory: 1Gi}
      limits: {cpu: 500m, memory: 1Gi}
"""


def test_fix_prices_raises_from_the_pods_effective_request(qos_guard: Run, tmp_path: Path) -> None:
    """(a) An init container's raise under the app containers' sum reserves nothing (the Pod's request is
    max(init, sum of apps)); it was "+0.3 CPU reserved" and "+1Gi memory reserved". (b) A Pod that stays
    Burstable (its sidecar has no memory limit) gets no exclusive CPUs; it was "+16 CPU reserved exclusively".
    (c) What a setting would add is counted after the fix made: +0.5, not +0.8 again."""
    for name, text in (("a", INIT), ("b", SIDECAR), ("c", FRACTION)):
        (tmp_path / f"{name}.yaml").write_text(text, encoding="utf-8")
    out = qos_guard("fix", "--dry-run", str(tmp_path / "a.yaml")).stderr
    assert "+0.3 CPU" not in out and "+1Gi" not in out, out
    assert out.count("nothing more reserved (the Pod still requests 2 CPU") == 2, out  # the fix and the remedy
    assert "nothing more reserved (the Pod still requests 4Gi memory" in out, out
    out = qos_guard("fix", "--dry-run", str(tmp_path / "b.yaml")).stderr
    assert "exclusively" not in out, out
    assert "set resources.requests.cpu to 24 (its limit): +16 CPU reserved (shared: the Pod stays Burstable)" in out
    out = qos_guard("fix", "--dry-run", str(tmp_path / "c.yaml")).stderr
    assert "set resources.requests.cpu to 500m (its limit): +0.3 CPU reserved\n" in out, out
    assert "mutation.cpuRounding: up would set it to 1: +0.5 CPU reserved exclusively" in out, out


ABOVE = """apiVersion: v1
kind: Pod
metadata: {name: d}
spec:
  containers:
  - name: app
    image: i
    resources:
      requests: {cpu: "4", memory: 1Gi}
      limits: {cpu: "2", memory: 1Gi}
"""


def test_a_request_above_its_limit_is_invalid_and_never_lowered(qos_guard: Run, tmp_path: Path) -> None:
    """The API server refuses it ("must be less than or equal to cpu limit of 2"): it was reported as
    requests-not-equal-limits with "set resources.requests.cpu to 2", and fix lowered 4 to 2 without a word."""
    path = tmp_path / "above.yaml"
    path.write_text(ABOVE, encoding="utf-8")
    out = qos_guard("check", str(path))
    assert out.returncode == 1
    assert "invalid-quantity" in out.stdout and "cpu request 4 is above its limit 2" in out.stdout, out.stdout
    assert "requests-not-equal-limits" not in out.stdout
    out = qos_guard("fix", str(path))
    assert out.returncode == 1, out.stderr
    assert path.read_text(encoding="utf-8") == ABOVE
    assert "cpu request 4 is above its limit 2" in out.stdout and "(cannot be fixed automatically)" in out.stdout


def test_a_pod_without_containers_is_refused_not_compliant(qos_guard: Run, tmp_path: Path) -> None:
    """The API server refuses it (``spec.containers: Required value``); it was "1 object checked, 0 violations"."""
    pod = tmp_path / "pod.yaml"
    pod.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: e}\nspec: {containers: []}\n", encoding="utf-8")
    deployment = tmp_path / "deploy.yaml"
    deployment.write_text("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: e}\nspec:\n  template:\n"
                          "    spec: {}\n", encoding="utf-8")
    out = qos_guard("check", str(pod), str(deployment))
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"{pod}:4: error: invalid object: spec.containers: Required value" in out.stdout, out.stdout
    assert f"{deployment}:6: error: invalid object: spec.template.spec.containers: Required value" in out.stdout
    assert "0 objects checked" in out.stderr
    out = qos_guard("fix", str(pod))
    assert out.returncode == 2 and "spec.containers: Required value" in out.stdout and "not changed" in out.stdout


PYTHONIC = """apiVersion: v1
kind: Pod
metadata: {name: g}
spec:
  containers:
  - name: a
    image: i
    resources:
      requests: {cpu: null, memory: 1Gi}
      limits: {cpu: "1", memory: 1Gi}
  - name: b
    image: i
    resources:
      limits: {cpu: true, memory: 1Gi}
  - name: c
    image: i
    resources:
      limits: {cpu: {a: 1}, memory: 1Gi}
---
apiVersion: v1
kind: Pod
metadata: {name: h}
spec:
  resources:
    limits: {cpu: "2", memory: 8Gi}
  containers:
  - name: a
    image: i
    resources:
      requests: {cpu: "1", memory: 1Gi}
---
apiVersion: 1
kind: Pod
metadata: {name: i}
spec:
  containers:
  - name: a
    image: i
"""


def test_messages_spell_values_as_yaml_does(qos_guard: Run, tmp_path: Path) -> None:
    """No Python in messages: ``None``, ``"True"``, ``"{'a': 1}"``, a pod-level memory request in bytes beside
    ``8Gi``, a numeric apiVersion called "not set"."""
    path = tmp_path / "p.yaml"
    path.write_text(PYTHONIC, encoding="utf-8")
    out = qos_guard("check", str(path)).stdout
    for python in ("None", "True", "{'a': 1}", "1073741824", "dict", "not set"):
        assert python not in out, (python, out)
    assert "cpu request null (0) differs from its limit 1" in out, out
    assert "cpu limit true is not a valid Kubernetes quantity" in out
    assert 'cpu limit {"a":1} is not a valid Kubernetes quantity (expected a quantity string, got a mapping)' in out
    assert "memory request 1Gi differs from its limit 8Gi" in out
    assert "apiVersion: 1 is not a string, so kubectl apply refuses the Pod; use apiVersion: v1" in out


def test_audit_says_qos_guard_once(tmp_path: Path) -> None:
    """``audit`` printed ``qos-guard: qos-guard: judging with ...``."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text('apiVersion: v1\nkind: Config\nclusters:\n- name: down\n  cluster: {server: '
                          '"https://127.0.0.1:1"}\nusers:\n- name: u\n  user: {token: abc}\ncontexts:\n- name: here\n'
                          '  context: {cluster: down, user: u}\ncurrent-context: here\n', encoding="utf-8")
    config = tmp_path / "config.yaml"
    config.write_text("policy:\n  numa: auto\n", encoding="utf-8")
    out = inprocess.run(["audit", "--kubeconfig", str(kubeconfig), "--config", str(config)],
                        env={"HOME": str(tmp_path)})
    assert out.returncode == 2, out.stderr
    assert "qos-guard: judging with Kubernetes" in out.stderr, out.stderr
    assert "qos-guard: qos-guard:" not in out.stderr


MERGED = """apiVersion: v1
kind: Pod
metadata: {name: m}
spec:
  containers:
  - name: a
    image: i
    resources: &c
      requests: {cpu: "1", memory: 1Gi}
      limits: {cpu: "2", memory: 1Gi}
  - name: b
    image: i
    resources:
      <<: *c
"""
MERGED_FROM_ASIDE = """x-common: &c
  cpu: "1"
  memory: 1Gi
apiVersion: v1
kind: Pod
metadata: {name: m}
spec:
  containers:
  - name: a
    image: i
    resources:
      requests:
        <<: *c
      limits: {cpu: "2", memory: 1Gi}
"""


def test_a_merge_key_whose_every_use_needs_the_change_is_fixed_at_its_anchor(qos_guard: Run, tmp_path: Path) -> None:
    """``<<: *c`` brings the anchor's requests to container b: both need cpu 2, so the anchor is edited once (it
    was "not fixed ... not every use needs this change"). Where the anchor has a use that must not change (a
    top-level ``x-common``), the key is added after the merge (go-yaml applies ``<<`` where it stands, so a key
    before it would be overridden)."""
    path = tmp_path / "merged.yaml"
    path.write_text(MERGED, encoding="utf-8")
    out = qos_guard("fix", str(path))
    assert out.returncode == 0, out.stdout + out.stderr
    assert path.read_text(encoding="utf-8") == MERGED.replace('requests: {cpu: "1"', 'requests: {cpu: "2"')
    assert "written at the YAML anchor &c" in out.stdout and "not fixed" not in out.stdout
    aside = tmp_path / "aside.yaml"
    aside.write_text(MERGED_FROM_ASIDE, encoding="utf-8")
    out = qos_guard("fix", str(aside))
    assert out.returncode == 0, out.stdout + out.stderr
    assert aside.read_text(encoding="utf-8") == MERGED_FROM_ASIDE.replace(
        "        <<: *c\n", '        <<: *c\n        cpu: "2"\n')


def test_fix_puts_a_new_key_above_the_comment_of_the_key_it_precedes(qos_guard: Run, tmp_path: Path) -> None:
    """A new ``limits:`` went between ``# sized for the model`` and the ``requests:`` it describes."""
    text = ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: a\n    image: i\n"
            "    resources:\n      # sized for the model\n      requests:\n        cpu: \"2\"\n        memory: 1Gi\n")
    path = tmp_path / "p.yaml"
    path.write_text(text, encoding="utf-8")
    out = qos_guard("fix", str(path))
    assert out.returncode == 0, out.stdout + out.stderr
    fixed = path.read_text(encoding="utf-8")
    assert "      # sized for the model\n      requests:\n" in fixed, fixed
    assert "    resources:\n      limits:\n" in fixed, fixed


def test_folders_paths_and_links_as_an_operator_expects(qos_guard: Run, tmp_path: Path) -> None:
    """``check .`` went into ``.venv`` (16,995 site-packages documents); a path given twice was judged twice;
    ``--exclude 'kimi*'`` did not match a file name; a dangling link said only "No such file or directory"."""
    for folder in (".venv/lib", "venv", "app", ".git"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "venv" / "pyvenv.cfg").write_text("home = /usr\n", encoding="utf-8")
    for where in (".venv/lib/x.yaml", "venv/x.yaml", ".git/x.yaml", "app/kimi-k2.yaml", "app/web.yaml"):
        (tmp_path / where).write_text(FRACTION, encoding="utf-8")
    (tmp_path / "app" / "gone.yaml").symlink_to(tmp_path / "nowhere.yaml")
    app = str(tmp_path / "app")
    out = qos_guard("check", str(tmp_path), str(tmp_path), str(tmp_path / "app" / "web.yaml"), "--format", "json")
    report = json.loads(out.stdout)
    assert sorted({Path(v["file"]).name for v in report["violations"]}) == ["kimi-k2.yaml", "web.yaml"]
    assert report["summary"]["objects"] == 2, report["summary"]  # each file once, nothing from the hidden folders
    (error,) = report["errors"]
    assert "a symbolic link to" in error["message"] and "which does not exist" in error["message"], error
    out = qos_guard("check", app, "--exclude", "kimi*", "--exclude", "gone.yaml")
    assert "kimi" not in out.stdout and "gone" not in out.stdout and "1 object checked" in out.stderr, out.stdout
    out = qos_guard("check", str(tmp_path / ".venv"))  # a hidden folder given by name is read
    assert "1 object checked" in out.stderr, out.stderr


def test_verify_json_says_why_it_cannot_run(tmp_path: Path) -> None:
    """``verify --format json`` printed nothing when it could not run (``audit`` and ``nodes`` print a JSON
    error): a reader got an empty file."""
    out = inprocess.run(["verify", "--format", "json", "--kubeconfig", str(tmp_path / "missing")],
                        env={"HOME": str(tmp_path)})
    assert out.returncode == 2, out.stderr
    body = json.loads(out.stdout)
    assert body["containers"] == [] and body["errors"][0].startswith("verify: "), body


def test_fix_lines_say_where_and_stdin_has_one_name(qos_guard: Run, tmp_path: Path) -> None:
    """``fix`` lines had no line numbers (``check``'s do); standard input is ``<stdin>`` in them, as in check."""
    path = tmp_path / "c.yaml"
    path.write_text(FRACTION, encoding="utf-8")
    out = qos_guard("fix", "--dry-run", str(path))
    assert f"{path}:9: Pod/c: would fix: container \"app\": set resources.requests.cpu to 500m" in out.stderr, out
    assert f"{path}:10: Pod/c: cpu-not-integer:" in out.stderr
    out = qos_guard("fix", "-", stdin=FRACTION)
    assert "<stdin>:9: Pod/c: fixed:" in out.stderr and "<stdin>:10: Pod/c: cpu-not-integer:" in out.stderr, out


def test_fix_fixes_the_documents_it_can_read(qos_guard: Run, tmp_path: Path) -> None:
    """One document that does not parse: ``fix`` changed nothing and said "0 violations left" while ``check``
    reported the other document's violation. Now it fixes the readable one, leaves the broken one byte for byte
    and reports it (exit 2)."""
    broken = "---\nkind: Pod\n  bad: [\n"
    path = tmp_path / "u.yaml"
    path.write_text(ABOVE.replace('"4"', '"1"') + broken, encoding="utf-8")
    out = qos_guard("fix", str(path))
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"{path}:13: error: YAML does not parse" in out.stdout and "this document not changed" in out.stdout
    assert f"{path}:9: Pod/d: fixed:" in out.stdout, out.stdout
    assert path.read_text(encoding="utf-8") == ABOVE.replace('"4"', '"2"') + broken


def test_check_says_the_webhook_never_judges_kube_system(qos_guard: Run, tmp_path: Path) -> None:
    """The webhook never judges kube-system (NEVER_SELECTED); check flagged its objects with no word of that."""
    path = tmp_path / "ks.yaml"
    path.write_text(FRACTION.replace("{name: c}", "{name: c, namespace: kube-system}") + "---\n" + FRACTION,
                    encoding="utf-8")
    out = qos_guard("check", str(path))
    lines = out.stdout.splitlines()
    assert len(lines) == 4, out.stdout
    hint = "; the webhook never judges namespace kube-system: this is what it would say if it did"
    assert [line.endswith(hint) for line in lines] == [True, True, False, False], out.stdout
