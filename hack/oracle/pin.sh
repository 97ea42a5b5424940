#!/usr/bin/env bash
# Pin the oracle to another Kubernetes release: writes hack/oracle/minors/v1.MINOR.mod and .sum, the go.mod
# and go.sum `go build -modfile` uses for that minor (hack/build-tools.sh oracle with KUBE_VERSION=v1.MINOR.P).
# The default minor's files are hack/oracle/go.mod and go.sum themselves.
#
#   hack/oracle/pin.sh v1.37.2
#   hack/oracle/pin.sh v1.38.0-beta.0     (a pre-release, until its minor's v1.MINOR.0 is served)
#   hack/oracle/pin.sh --behind           which pins (go.mod, minors/*.mod) a newer release of their minor
#                                         replaces; exit 1 when one is behind
#   hack/oracle/pin.sh --served v1.38.0   exit 0 when the proxy serves that release, 1 when not (hack/release-day.sh)
#
# A release the proxy does not serve is refused (exit 2) before anything is written.
#
# hack/oracle/go.mod stays at the tools' default KUBE_VERSION (hack/build-tools.sh), whose build `make test`
# caches; minors/v1.MINOR.mod may pin a newer patch of the same minor (make test-versions' KUBE_VERSIONS).
#
# As hack/build-tools.sh's setup_kube: k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces
# them with ./staging paths that only work inside its own repository, so each is replaced with the published
# v0.MINOR.PATCH of the same release. Run again after a source change that needs a new import.
set -euo pipefail

# served VERSION: whether the Go module proxy serves k8s.io/kubernetes at VERSION (its list, `go list -m
# -versions`, leaves out some patches it serves, so each candidate is asked for by name).
# A release that needs a newer Go than the local one is served all the same: go exits 1 ("requires go >= ...")
# after fetching its go.mod, so the answer is read, not the exit status (which pipefail would pass on).
served() {
  local answer
  answer=$(GOFLAGS=-mod=mod GOTOOLCHAIN=local go mod download -json "k8s.io/kubernetes@$1" 2>/dev/null) || true
  grep -q '"GoMod"' <<<"$answer"
}

# unserved VERSION: the proxy's answer for a release it does not serve (or the network error that kept it from
# answering), on stderr.
unserved() {
  GOFLAGS=-mod=mod GOTOOLCHAIN=local go mod download -json "k8s.io/kubernetes@$1" 2>&1 |
    sed -n 's/^\t"Error": "\(.*\)",*$/\1/p' | sed 's/\\n\\t/: /g; s/^/  /' >&2 || true
}

# behind: for each pinned release, the next patches (and for a pre-release, the next pre-releases and the
# minor's .0) asked for one by one until one is not served.
behind() {
  local file pinned minor patch next found=0 newest
  for file in "$(dirname "$0")"/go.mod "$(dirname "$0")"/minors/v1.*.mod; do
    pinned=$(sed -n 's/^\tk8s.io\/kubernetes \(v[^ ]*\)$/\1/p; s/^require k8s.io\/kubernetes \(v[^ ]*\)$/\1/p' "$file")
    [[ $pinned =~ ^v1\.([0-9]+)\.([0-9]+)(-(alpha|beta|rc)\.([0-9]+))?$ ]] || continue
    minor=${BASH_REMATCH[1]} patch=${BASH_REMATCH[2]} newest=$pinned
    if [[ -n ${BASH_REMATCH[3]} ]]; then  # a pre-release: the later ones of the same minor, then .0
      for next in "v1.$minor.0-rc.0" "v1.$minor.0-rc.1" "v1.$minor.0-rc.2" "v1.$minor.0"; do
        [[ $next > $pinned || $next == "v1.$minor.0" ]] && served "$next" && newest=$next
      done
    else
      next=$((patch + 1))
      while served "v1.$minor.$next"; do newest=v1.$minor.$next; next=$((next + 1)); done
    fi
    if [[ $newest != "$pinned" ]]; then
      if [[ $file == */go.mod ]]; then  # the tools' default: moving it rebuilds what `make test` caches
        echo "go.mod: k8s.io/kubernetes $pinned is behind $newest (the tools' default KUBE_VERSION, which" \
             "make test builds; minors/v1.$minor.mod may pin $newest for make test-versions)"
      else
        echo "${file#"$(dirname "$0")"/}: k8s.io/kubernetes $pinned is behind $newest (hack/oracle/pin.sh $newest)"
      fi
      found=1
    else
      echo "${file#"$(dirname "$0")"/}: k8s.io/kubernetes $pinned is the newest served"
    fi
  done
  return $found
}
if [[ ${1:-} == --behind ]]; then
  behind
  exit
fi
if [[ ${1:-} == --served ]]; then
  served "${2:?usage: pin.sh --served v1.MINOR.PATCH}" && exit 0
  unserved "$2"
  exit 1
fi

v=${1:?usage: pin.sh v1.MINOR.PATCH | --behind | --served v1.MINOR.PATCH}
[[ $v =~ ^v1\.([0-9]+)\.[0-9]+(-(alpha|beta|rc)\.[0-9]+)?$ ]] || { echo "pin.sh: $v is not v1.MINOR.PATCH" >&2; exit 2; }
if ! served "$v"; then
  echo "pin.sh: the Go module proxy does not serve k8s.io/kubernetes $v (yet): nothing pinned" >&2
  unserved "$v"
  exit 2
fi
minor=${BASH_REMATCH[1]}
staging=v0.${v#v1.}
cd "$(dirname "$0")"
source ../go-toolchain.sh
mod=minors/v1.$minor.mod
# The release's own Go where the installed one is too old (hack/go-toolchain.sh).
GOTOOLCHAIN=$(go_toolchain "$v")
export GOFLAGS=-mod=mod GOTOOLCHAIN
# Start from the default minor's direct requirements only: tidy finds the rest for this release.
{
  echo "module qos-guard.dev/oracle"
  echo
  echo "go $(GOTOOLCHAIN=local go mod edit -json go.mod | sed -n 's/^\t"Go": "\(.*\)",*$/\1/p')"
} > "$mod"
rm -f "minors/v1.$minor.sum"
gomod=$(go mod download -json "k8s.io/kubernetes@$v" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
go mod edit -modfile="$mod" -require="k8s.io/kubernetes@$v"
grep -oE '^\s*k8s\.io/[a-z0-9-]+ => \./staging' "$gomod" | awk '{print $1}' | while read -r m; do
  go mod edit -modfile="$mod" -replace="$m=$m@$staging"
done
go mod tidy -modfile="$mod"
echo "pinned the oracle to k8s.io/kubernetes $v: hack/oracle/$mod"
