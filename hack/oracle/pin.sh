#!/usr/bin/env bash
# Pin the oracle to another Kubernetes release: writes hack/oracle/minors/v1.MINOR.mod and .sum, the go.mod
# and go.sum `go build -modfile` uses for that minor (hack/build-tools.sh oracle with KUBE_VERSION=v1.MINOR.P).
# The default minor's files are hack/oracle/go.mod and go.sum themselves.
#
#   hack/oracle/pin.sh v1.37.2
#
# As hack/build-tools.sh's setup_kube: k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces
# them with ./staging paths that only work inside its own repository, so each is replaced with the published
# v0.MINOR.PATCH of the same release. Run again after a source change that needs a new import.
set -euo pipefail
v=${1:?usage: pin.sh v1.MINOR.PATCH}
[[ $v =~ ^v1\.([0-9]+)\.[0-9]+$ ]] || { echo "pin.sh: $v is not v1.MINOR.PATCH" >&2; exit 2; }
minor=${BASH_REMATCH[1]}
staging=v0.${v#v1.}
cd "$(dirname "$0")"
mod=minors/v1.$minor.mod
export GOFLAGS=-mod=mod GOTOOLCHAIN=local
# Start from the default minor's direct requirements only: tidy finds the rest for this release.
{
  echo "module qos-guard.dev/oracle"
  echo
  echo "go $(go mod edit -json go.mod | sed -n 's/^\t"Go": "\(.*\)",*$/\1/p')"
} > "$mod"
rm -f "minors/v1.$minor.sum"
gomod=$(go mod download -json "k8s.io/kubernetes@$v" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
go mod edit -modfile="$mod" -require="k8s.io/kubernetes@$v"
grep -oE '^\s*k8s\.io/[a-z0-9-]+ => \./staging' "$gomod" | awk '{print $1}' | while read -r m; do
  go mod edit -modfile="$mod" -replace="$m=$m@$staging"
done
go mod tidy -modfile="$mod"
echo "pinned the oracle to k8s.io/kubernetes $v: hack/oracle/$mod"
