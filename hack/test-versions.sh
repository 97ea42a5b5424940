#!/usr/bin/env bash
# make test-versions: the tiers at each Kubernetes release, one after the other, then one line per release and
# tier (hack/versions_summary.py): counts passed, failed and skipped, each skip's reason, each failed test.
#
#   hack/test-versions.sh v1.33.13 v1.37.2 ...       (make test-versions KUBE_VERSIONS="...")
#   TIERS="e2e fidelity node"                        which tiers (default: e2e fidelity; node needs root)
#   E2E_TESTS="tests/e2e/test_admission.py ..."      a part of the e2e tier (default: all of tests/e2e)
#   OUT=folder                                       where the JUnit files and the log of each run go
#
# Each release's kube-apiserver, kubectl and kube-scheduler (kubelet and its neighbours for the node tier, the
# oracle for the fidelity tier) are built once by hack/build-tools.sh, cached by version; the time each build
# took is printed (0 s: cached). The tests pick the release from QOS_GUARD_KUBE_VERSION (tests/binaries.py), the oracle of tests/fidelity too.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTEST=${PYTEST:-.venv/bin/pytest}
TIERS=${TIERS:-e2e fidelity}
E2E_TESTS=${E2E_TESTS:-tests/e2e}
OUT=${OUT:-$(mktemp -d -t qos-guard-versions.XXXX)}
(( $# )) || { echo "usage: $0 KUBE_VERSION... (e.g. v1.33.13 v1.37.2)" >&2; exit 2; }
for v in "$@"; do
  [[ $v =~ ^v1\.[0-9]+\.[0-9]+(-(alpha|beta|rc)\.[0-9]+)?$ ]] ||
    { echo "test-versions: $v is not a Kubernetes release (e.g. v1.37.2, v1.38.0-beta.0)" >&2; exit 2; }
done
mkdir -p "$OUT"
rm -f "$OUT"/*.xml "$OUT"/build-*.txt

for v in "$@"; do
  tools=(kube-apiserver kubectl kube-scheduler)
  [[ " $TIERS " == *" node "* ]] && tools+=(kubelet kube-controller-manager)
  # The fidelity tier's oracle: hack/oracle built against this release (its build is timed with the others).
  [[ " $TIERS " == *" fidelity "* ]] && tools+=(oracle)
  times=()
  for t in "${tools[@]}"; do
    started=$(date +%s)
    if ! KUBE_VERSION=$v bash hack/build-tools.sh "$t" >/dev/null 2>>"$OUT/build-$v.log"; then
      echo "test-versions: building $t $v failed (log: $OUT/build-$v.log)" >&2
      times+=("$t FAILED")
      continue
    fi
    times+=("$t $(( $(date +%s) - started )) s")
  done
  (IFS=,; echo "${times[*]}" | sed 's/,/, /g') > "$OUT/build-$v.txt"
  for tier in $TIERS; do
    case $tier in
      e2e) args=(-m e2e $E2E_TESTS) ;;
      fidelity) args=(-m slow tests/fidelity) ;;
      node) args=(-m node tests/node) ;;
      *) echo "test-versions: unknown tier $tier (e2e, fidelity, node)" >&2; exit 2 ;;
    esac
    echo "test-versions: $tier at $v" >&2
    # The differentials (tests/fidelity) compare with this release's oracle, whatever the caller exported.
    QOS_GUARD_KUBE_VERSION=$v QOS_GUARD_ORACLE_VERSIONS=$v "$PYTEST" "${args[@]}" -q -p no:cacheprovider -rfEs \
      --junit-xml="$OUT/$tier-$v.xml" >"$OUT/$tier-$v.log" 2>&1
    tail -n 1 "$OUT/$tier-$v.log" >&2
  done
done
echo "test-versions: logs and JUnit files in $OUT"
.venv/bin/python hack/versions_summary.py "$OUT"
