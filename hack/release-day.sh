#!/usr/bin/env bash
# Release day: move a minor qos-guard judges from a pre-release to a newer release of it, once the Go module proxy
# serves that release. The mechanical part of the switch, in one step:
#
#   hack/release-day.sh v1.38.0          the GA release: 1.38 stops being a pre-release and becomes the default
#   hack/release-day.sh v1.38.0-rc.0     a later pre-release of the same minor: 1.38 is judged from it instead
#
# It refuses (exit 2, nothing written) a release the proxy does not serve (hack/oracle/pin.sh --served), a minor
# that is not judged from a pre-release, or a pre-release no later than the current one. Otherwise it
#   1. pins the oracle (hack/oracle/pin.sh VERSION: hack/oracle/minors/v1.MINOR.mod and .sum),
#   2. moves the one source of the pre-release, PRERELEASES in webhook/core/kubeversion.py (the GA release takes
#      its line out, which makes the minor the default: kubeversion.DEFAULT is the newest minor without one),
#   3. moves the Makefile's KUBE_VERSIONS (make test-versions) to VERSION and, for the GA release, puts it in
#      place of the newest released one in ORACLE_VERSIONS (the differentials `make test` runs),
#   4. writes the generated tables again (hack/generate.py: the reference pages name the default minor),
# and prints what is left by hand: building and running at the new release, and the docs that record what was
# measured at the old one. Review the result with `git diff`.
#
# QOS_GUARD_PIN replaces hack/oracle/pin.sh (tests/unit/test_release_day.py runs the script on a copy of the tree
# without the network); PYTHON is the interpreter for hack/generate.py (.venv/bin/python when there is one).
set -euo pipefail

usage="usage: hack/release-day.sh v1.MINOR.PATCH[-rc.N] (a release the Go module proxy serves)"
v=${1:-}
[[ -n $v && $# -eq 1 ]] || { echo "$usage" >&2; exit 2; }
[[ $v =~ ^v1\.([0-9]+)\.([0-9]+)(-(alpha|beta|rc)\.([0-9]+))?$ ]] ||
  { echo "release-day: $v is not a Kubernetes release (v1.38.0, or a pre-release such as v1.38.0-rc.0)" >&2; exit 2; }
minor=${BASH_REMATCH[1]}

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
pin=${QOS_GUARD_PIN:-$root/hack/oracle/pin.sh}
if [[ -z ${PYTHON:-} ]]; then
  PYTHON=python3
  [[ -x .venv/bin/python ]] && PYTHON=.venv/bin/python
fi

# The current pre-release of the minor (PRERELEASES), and whether VERSION is later: refused before the network.
old=$("$PYTHON" - "$v" "$minor" <<'EOF'
import ast
import re
import sys
from pathlib import Path

version, minor = sys.argv[1], int(sys.argv[2])
line = re.search(r"^PRERELEASES: dict\[int, str\] = (\{.*\})$", Path("webhook/core/kubeversion.py").read_text(),
                 re.MULTILINE)
if not line:
    sys.exit("release-day: no `PRERELEASES: dict[int, str] = {...}` line in webhook/core/kubeversion.py")
table = ast.literal_eval(line.group(1))
if minor not in table:
    shown = ", ".join(f"1.{m} ({r})" for m, r in sorted(table.items())) or "none"
    sys.exit(f"release-day: Kubernetes 1.{minor} is not judged from a pre-release (PRERELEASES in "
             f"webhook/core/kubeversion.py: {shown}): nothing to move; a newer patch of a released minor is "
             f"hack/oracle/pin.sh {version} and its entry in the Makefile's KUBE_VERSIONS")


def order(release: str) -> tuple[int, int, int, int]:
    """v1.38.0-beta.0 < v1.38.0-rc.1 < v1.38.0 (alpha, beta, rc, then the release)."""
    m = re.fullmatch(r"v1\.(\d+)\.(\d+)(?:-(alpha|beta|rc)\.(\d+))?", release)
    assert m
    stage = {"alpha": 0, "beta": 1, "rc": 2, None: 3}[m[3]]
    return int(m[1]), int(m[2]), stage, int(m[4] or 0)


if order(version) <= order(table[minor]):
    sys.exit(f"release-day: 1.{minor} is judged from {table[minor]} already, which {version} does not follow")
print(table[minor])
EOF
) || exit 2

if ! answer=$("$pin" --served "$v" 2>&1); then
  echo "release-day: the Go module proxy does not serve k8s.io/kubernetes $v (yet): nothing changed; 1.$minor" \
       "stays judged from $old (hack/oracle/pin.sh --behind lists what is served)" >&2
  [[ -z $answer ]] || echo "$answer" >&2
  exit 2
fi

# PRERELEASES, KUBE_VERSIONS and (the GA release) ORACLE_VERSIONS, each checked to change exactly once: all
# checked first (nothing written; exit 2 on a mismatch), then the pin, then written.
edits() {
"$PYTHON" - "$v" "$minor" "$old" "$1" <<'EOF'
import ast
import re
import sys
from pathlib import Path

version, minor, old, write = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] == "write"
ga = "-" not in version
texts: dict[str, str] = {}  # each file as edited so far: nothing is written until every edit is known to apply


def edit(path: str, pattern: str, change: "Callable[[re.Match[str]], str]") -> str:
    """One line of ``path`` matching ``pattern`` rewritten; what it was and is, printed."""
    text = texts.setdefault(path, Path(path).read_text())
    found = list(re.finditer(pattern, text, re.MULTILINE))
    if len(found) != 1:
        sys.exit(f"release-day: {len(found)} lines of {path} match {pattern!r} (one expected): edit it by hand")
    new = change(found[0])
    texts[path] = text[:found[0].start()] + new + text[found[0].end():]
    if write:
        print(f"  {path}: {found[0].group(0)}\n  {' ' * len(path)}  -> {new}")
    return new


def prereleases(m: "re.Match[str]") -> str:
    table = ast.literal_eval(m.group(1))
    if ga:
        del table[minor]
    else:
        table[minor] = version
    return "PRERELEASES: dict[int, str] = {" + ", ".join(f'{k}: "{r}"' for k, r in sorted(table.items())) + "}"


def kube_versions(m: "re.Match[str]") -> str:
    versions = m.group(1).split()
    if old not in versions:
        sys.exit(f"release-day: the Makefile's KUBE_VERSIONS ({m.group(1)}) does not name {old}: edit it by hand")
    return "KUBE_VERSIONS ?= " + " ".join(version if r == old else r for r in versions)


def oracle_versions(m: "re.Match[str]") -> str:
    versions = m.group(1).split(",")
    newest = re.fullmatch(r"v1\.(\d+)\..*", versions[-1])
    if newest and int(newest.group(1)) < minor:  # the newest released one gives way to the new release
        versions[-1] = version
    return "ORACLE_VERSIONS ?= " + ",".join(versions)


edit("webhook/core/kubeversion.py", r"^PRERELEASES: dict\[int, str\] = (\{.*\})$", prereleases)
edit("Makefile", r"^KUBE_VERSIONS \?= (.*)$", kube_versions)
if ga:
    edit("Makefile", r"^ORACLE_VERSIONS \?= (.*)$", oracle_versions)
if write:
    for path, text in texts.items():
        Path(path).write_text(text)
EOF
}
edits check || exit 2

echo "release-day: 1.$minor from $old to $v"
"$pin" "$v"
edits write

"$PYTHON" hack/generate.py
default=$("$PYTHON" -c 'import sys; sys.path.insert(0, "."); from webhook.core import kubeversion as k; print(k.DEFAULT)')
echo "release-day: done; the default minor is now $default (webhook.core.kubeversion.DEFAULT). Review: git diff"

cat <<EOF

Left by hand (release-day does not build or measure):
  - build and prove at $v: make test-versions KUBE_VERSIONS=$v (its kube-apiserver, kubectl, kube-scheduler and
    oracle are built once, minutes of CPU each; docs/contributing.md "What a run costs"), and as root
    VERSION_TIERS=node for its kubelet
  - the differentials at $v: QOS_GUARD_ORACLE_VERSIONS=$v .venv/bin/pytest tests/fidelity
  - make lint, make test-fast, .venv/bin/pytest tests/unit/test_kubeversion.py tests/cli/test_prerelease.py
  - the docs and comments that name $old: each either records what was measured there (keep it, or measure
    again at $v and write the new figures) or says what is judged now (move it to $v):
EOF
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git grep -n -F "$old" -- . ':!hack/oracle/minors'
else
  grep -rnIF --exclude-dir=.git --exclude-dir=.venv --exclude-dir=minors "$old" .
fi | sed 's/^/      /' | grep . || echo "      (none)"
