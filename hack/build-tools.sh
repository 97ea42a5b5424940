#!/usr/bin/env bash
# Build the real binaries the test suite runs (helm, etcd, kube-apiserver, kubectl) from the Go module proxy and
# cache them outside the repository, keyed by version. Idempotent: a cached binary is reused.
#
#   hack/build-tools.sh [helm|etcd|kube-apiserver|kubectl|kube-score|oracle|promtool|oci-registry|all]
#   hack/build-tools.sh kyverno      (make bench's peer: admission controller and CLI; not part of `all`)
#   hack/build-tools.sh [kubelet|kube-controller-manager|kube-scheduler|containerd|containerd-shim-runc-v2|ctr|
#                        cni-bridge|cni-host-local|cni-loopback|deviceplugin|dradriver|lws-controller|node]
#                                                    (the node tests' tools; `node` = all of them)
#   hack/build-tools.sh dracpu   (kubernetes-sigs/dra-driver-cpu, tests/node/test_dra_cpu.py; not part of `node`)
#
# `oracle` is built from this repository's hack/oracle (its own go.mod/go.sum pin k8s.io/kubernetes at
# KUBE_VERSION) and cached by KUBE_VERSION plus a hash of its sources.
#
# Prints the path of each binary on stdout (progress on stderr); fails loudly (non-zero exit) if a build fails.
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.22.0}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
KUBE_VERSION="${KUBE_VERSION:-v1.36.3}"
KUBE_SCORE_VERSION="${KUBE_SCORE_VERSION:-v1.20.0}"
# go-containerregistry's registry (pkg/registry, the OCI distribution API in memory): `make image-push`'s
# target in tests/chart/test_image.py.
GGCR_VERSION="${GGCR_VERSION:-v0.22.1}"
CONTAINERD_VERSION="${CONTAINERD_VERSION:-v2.4.2}"
CNI_PLUGINS_VERSION="${CNI_PLUGINS_VERSION:-v1.9.1}"
# Prometheus 3.x is published as Go module versions v0.3MM.P (v0.316.0 is Prometheus 3.16.0).
PROMTOOL_VERSION="${PROMTOOL_VERSION:-v0.316.0}"
KYVERNO_VERSION="${KYVERNO_VERSION:-v1.14.4}"
# LeaderWorkerSet's controller (sigs.k8s.io/lws cmd, its manager): the node tests roll a LeaderWorkerSet out
# with it. Its CRD is the one vendored in tests/fixtures/crds, from the same release.
LWS_VERSION="${LWS_VERSION:-v0.7.0}"
# kubernetes-sigs' DRA CPU driver (its kubelet plugin and NRI plugin are one binary, cmd/dracpu): the node tests
# pin a Pod's CPUs on the GPU's NUMA node through one ResourceClaim with it. Not part of `node` (tests/node/
# test_dra_cpu.py builds it on demand).
DRA_CPU_VERSION="${DRA_CPU_VERSION:-v0.2.0}"
# Bumped when a tool's build flags change, so a stale cached binary is not reused.
declare -A TOOL_REV=([helm]=.2)
TOOLS_DIR="${QOS_GUARD_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/qos-guard/tools}"

export CGO_ENABLED=0 GOFLAGS="-mod=mod" GOTOOLCHAIN=local
# Kubernetes' own binaries and the oracle are built with the Go their release asks for (KUBE_GOTOOLCHAIN: the
# installed Go up to 1.37, go1.27.1 fetched from the module proxy for 1.38); everything else with the local one.
HACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$HACK_DIR/go-toolchain.sh"
KUBE_GOTOOLCHAIN=$(go_toolchain "$KUBE_VERSION")
mkdir -p "$TOOLS_DIR"

log() { echo "build-tools: $*" >&2; }

# cached OUT: print OUT and succeed when it is built; otherwise hold OUT's lock (released by `unlock`) and fail,
# so two runs at once (two test sessions, a test and `make tools`) build each tool once, the second waiting.
LOCK_FD=
cached() {
  [[ -x "$1" ]] && { echo "$1"; return 0; }
  exec {LOCK_FD}>"$1.lock"
  flock "$LOCK_FD"
  if [[ -x "$1" ]]; then
    unlock
    echo "$1"
    return 0
  fi
  return 1
}
unlock() { [[ -n $LOCK_FD ]] && exec {LOCK_FD}>&- && LOCK_FD=; return 0; }

# build NAME VERSION PACKAGE MODULE_SETUP_FUNCTION [LDFLAGS]
build() {
  local name=$1 version=$2 package=$3 setup=$4 ldflags=${5:-}
  local out="$TOOLS_DIR/$name-$version${TOOL_REV[$name]:-}"
  cached "$out" && return 0
  log "building $name $version (once; cached in $TOOLS_DIR)"
  local work
  work=$(mktemp -d)
  trap 'rm -rf "$work"; unlock' RETURN
  (
    cd "$work"
    go mod init "qos-guard.tools/$name" >/dev/null 2>&1
    "$setup" "$version"
    go mod tidy >/dev/null 2>&1 || true
    if [[ $ldflags == @* ]]; then  # @function: flags computed from the resolved modules
      ldflags=$("${ldflags#@}" "$version")
    fi
    go build -trimpath -ldflags "-s -w $ldflags" -o "$out.tmp" "$package"
  )
  mv "$out.tmp" "$out"
  log "built $out"
  echo "$out"
}

setup_helm() {
  cat > tools.go <<GO
//go:build tools
package tools
import _ "helm.sh/helm/v3/cmd/helm"
GO
  go get "helm.sh/helm/v3@$1" >/dev/null
}

setup_kube_score() {
  cat > tools.go <<GO
//go:build tools
package tools
import _ "github.com/zegl/kube-score/cmd/kube-score"
GO
  go get "github.com/zegl/kube-score@$1" >/dev/null
}

setup_oci_registry() {
  cat > tools.go <<GO
//go:build tools
package tools
import _ "github.com/google/go-containerregistry/cmd/registry"
GO
  go get "github.com/google/go-containerregistry@$1" >/dev/null
}

setup_promtool() {
  cat > tools.go <<GO
//go:build tools
package tools
import _ "github.com/prometheus/prometheus/cmd/promtool"
GO
  go get "github.com/prometheus/prometheus@$1" >/dev/null
}

setup_etcd() {
  # server/v3 is the etcd main package; its sibling modules must be the same release.
  local v=$1
  cat > tools.go <<GO
//go:build tools
package tools
import _ "go.etcd.io/etcd/server/v3"
GO
  go get "go.etcd.io/etcd/server/v3@$v" "go.etcd.io/etcd/api/v3@$v" "go.etcd.io/etcd/client/v3@$v" \
    "go.etcd.io/etcd/client/pkg/v3@$v" "go.etcd.io/etcd/pkg/v3@$v" >/dev/null
}

setup_kube() {
  # k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them with ./staging paths,
  # which only work inside its own repository: replace each with the published v0.<minor>.<patch>.
  local v=$1 staging=v0.${1#v1.}
  cat > tools.go <<GO
//go:build tools
package tools
import _ "k8s.io/kubernetes/cmd/kube-apiserver"
import _ "k8s.io/kubernetes/cmd/kubectl"
GO
  go mod edit -require="k8s.io/kubernetes@$v"
  local gomod
  gomod=$(go mod download -json "k8s.io/kubernetes@$v" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  grep -oE '^\s*k8s\.io/[a-z0-9-]+ => \./staging' "$gomod" | awk '{print $1}' | while read -r mod; do
    go mod edit -replace="$mod=$mod@$staging"
  done
}

helm_ldflags() {
  # As helm's Makefile: its version, and the Kubernetes version `helm template` assumes (client-go's, +1 major).
  local cg
  cg=$(go list -m -f '{{.Version}}' k8s.io/client-go)
  cg=${cg#v0.}
  printf -- '-X helm.sh/helm/v3/internal/version.version=%s ' "$1"
  printf -- '-X helm.sh/helm/v3/pkg/%s.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/%s.k8sVersionMinor=%s ' \
    lint/rules lint/rules "${cg%%.*}" chartutil chartutil "${cg%%.*}"
}

kube_ldflags() {
  local v=$1 minor=${1#v1.}
  minor=${minor%%.*}
  local pkg
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    printf -- '-X %s.gitVersion=%s -X %s.gitMajor=1 -X %s.gitMinor=%s -X %s.gitTreeState=clean ' \
      "$pkg" "$v" "$pkg" "$pkg" "$minor" "$pkg"
  done
}

# build_local NAME [VERSION_TAG] DESCRIPTION: hack/NAME, a Go program of this repository, at its committed
# go.mod/go.sum (read-only: the build never edits them), cached by a hash of its sources.
build_local() {
  local name=$1 tag=$2 what=$3 src hash out
  src="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$name"
  hash=$(cd "$src" && cat go.mod go.sum ./*.go $(compgen -G './*.s' || true) | sha256sum | cut -c1-12)
  out="$TOOLS_DIR/$name-${tag:+$tag-}$hash"
  cached "$out" && return 0
  log "building $what (once per source change; cached in $TOOLS_DIR)"
  (cd "$src" && GOFLAGS=-mod=readonly go build -trimpath -ldflags "-s -w" -o "$out.tmp" .)
  mv "$out.tmp" "$out"
  unlock
  log "built $out"
  echo "$out"
}

# build_oracle: hack/oracle against KUBE_VERSION's release: its go.mod/go.sum pin the default minor, and
# minors/v1.MINOR.mod/.sum (written by hack/oracle/pin.sh) each other minor, used through `go build -modfile`.
# The file must pin exactly KUBE_VERSION.
build_oracle() {
  local src minor modfile pinned hash out
  src="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/oracle"
  minor=${KUBE_VERSION#v1.}
  minor=${minor%%.*}
  modfile=go.mod
  if ! grep -qE "^(require)?\s*k8s.io/kubernetes $KUBE_VERSION\$" "$src/go.mod"; then
    modfile=minors/v1.$minor.mod
  fi
  if [[ ! -f $src/$modfile ]]; then
    echo "build-tools: the oracle is not pinned to Kubernetes 1.$minor: run hack/oracle/pin.sh $KUBE_VERSION" >&2
    return 1
  fi
  pinned=$(sed -n 's/^require k8s.io\/kubernetes \(v[^ ]*\)$/\1/p; s/^\tk8s.io\/kubernetes \(v[^ ]*\)$/\1/p' "$src/$modfile")
  if [[ $pinned != "$KUBE_VERSION" ]]; then
    echo "build-tools: hack/oracle/$modfile pins k8s.io/kubernetes $pinned, not KUBE_VERSION=$KUBE_VERSION" \
         "(hack/oracle/pin.sh $KUBE_VERSION)" >&2
    return 1
  fi
  hash=$(cd "$src" && cat "$modfile" "${modfile%.mod}.sum" ./*.go $(compgen -G './*.s' || true) | sha256sum | cut -c1-12)
  out="$TOOLS_DIR/oracle-$KUBE_VERSION-$hash"
  cached "$out" && return 0
  log "building the oracle against k8s.io/kubernetes $KUBE_VERSION (once per source change; cached in $TOOLS_DIR)"
  # -tags k8s_1_MINOR picks the kubelet glue written for that release (hack/oracle/*_k8s1MINOR.go).
  (cd "$src" && GOFLAGS=-mod=readonly go build -modfile="$modfile" -tags "k8s_1_$minor" -trimpath -ldflags "-s -w" \
     -o "$out.tmp" .)
  mv "$out.tmp" "$out"
  unlock
  log "built $out"
  echo "$out"
}

# build_kyverno: Kyverno's admission controller (cmd/kyverno) and CLI (cmd/cli/kubectl-kyverno), built inside
# the released module with its own go.mod/go.sum (its replace directive for pod-security-admission only applies
# there), with the version flag its Makefile sets.
build_kyverno() {
  local v=$KYVERNO_VERSION bin name pkg missing=0
  for name in kyverno kubectl-kyverno; do
    [[ -x "$TOOLS_DIR/$name-$v" ]] || missing=1
  done
  if (( missing )); then
    log "building kyverno $v (admission controller and CLI; once; cached in $TOOLS_DIR)"
    local src work
    src=$(go mod download -json "github.com/kyverno/kyverno@$v" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
    work=$(mktemp -d)
    cp -r "$src/." "$work/"
    chmod -R u+w "$work"
    for name in kyverno kubectl-kyverno; do
      bin="$TOOLS_DIR/$name-$v"
      [[ -x "$bin" ]] && continue
      [[ $name == kyverno ]] && pkg=./cmd/kyverno || pkg=./cmd/cli/kubectl-kyverno
      if ! (cd "$work" && GOFLAGS=-mod=readonly go build -trimpath \
              -ldflags "-s -w -X github.com/kyverno/kyverno/pkg/version.BuildVersion=$v" -o "$bin.tmp" "$pkg"); then
        rm -rf "$work"
        return 1
      fi
      mv "$bin.tmp" "$bin"
      log "built $bin"
    done
    rm -rf "$work"
  fi
  echo "$TOOLS_DIR/kyverno-$v"
  echo "$TOOLS_DIR/kubectl-kyverno-$v"
}

# build_lws: LeaderWorkerSet's controller manager (cmd/main.go), built inside the released module with its own
# go.mod/go.sum, with the version flags its Makefile sets (the tag, and the tag's commit as the module proxy
# records it).
build_lws() {
  local v=$LWS_VERSION out="$TOOLS_DIR/lws-controller-$LWS_VERSION" json src commit work
  cached "$out" && return 0
  log "building the LeaderWorkerSet controller $v (once; cached in $TOOLS_DIR)"
  if ! json=$(go mod download -json "sigs.k8s.io/lws@$v"); then  # its error is in the JSON, on stdout
    echo "build-tools: sigs.k8s.io/lws@$v: $(sed -n 's/.*"Error": "\(.*\)".*/\1/p' <<<"$json")" >&2
    return 1
  fi
  src=$(sed -n 's/.*"Dir": "\(.*\)".*/\1/p' <<<"$json")
  commit=$(sed -n 's/.*"Hash": "\(.*\)".*/\1/p' <<<"$json")
  work=$(mktemp -d)
  trap 'rm -rf "$work"; unlock' RETURN
  cp -r "$src/." "$work/"
  chmod -R u+w "$work"
  (cd "$work" && GOFLAGS=-mod=readonly go build -trimpath -o "$out.tmp" -ldflags "-s -w \
     -X sigs.k8s.io/lws/pkg/version.GitVersion=$v -X sigs.k8s.io/lws/pkg/version.GitCommit=$commit" ./cmd)
  mv "$out.tmp" "$out"
  log "built $out"
  echo "$out"
}

# build_dracpu: github.com/kubernetes-sigs/dra-driver-cpu's cmd/dracpu, built inside the released module with
# its own go.mod/go.sum, as its Makefile's build-dracpu does (no version flags: it reads runtime/debug).
build_dracpu() {
  local v=$DRA_CPU_VERSION out="$TOOLS_DIR/dracpu-$DRA_CPU_VERSION" json src work
  cached "$out" && return 0
  log "building the DRA CPU driver $v (once; cached in $TOOLS_DIR)"
  if ! json=$(go mod download -json "github.com/kubernetes-sigs/dra-driver-cpu@$v"); then
    echo "build-tools: github.com/kubernetes-sigs/dra-driver-cpu@$v: $(sed -n 's/.*"Error": "\(.*\)".*/\1/p' <<<"$json")" >&2
    return 1
  fi
  src=$(sed -n 's/.*"Dir": "\(.*\)".*/\1/p' <<<"$json")
  work=$(mktemp -d)
  trap 'rm -rf "$work"; unlock' RETURN
  cp -r "$src/." "$work/"
  chmod -R u+w "$work"
  (cd "$work" && GOFLAGS=-mod=readonly go build -trimpath -ldflags "-s -w" -o "$out.tmp" ./cmd/dracpu)
  mv "$out.tmp" "$out"
  log "built $out"
  echo "$out"
}

# --- node tools (tests/node): kubelet and its neighbours from k8s.io/kubernetes, containerd, CNI plugins ---

setup_kube_node() {
  setup_kube "$1"
  cat > tools.go <<GO
//go:build tools
package tools
import _ "k8s.io/kubernetes/cmd/kubelet"
import _ "k8s.io/kubernetes/cmd/kube-controller-manager"
import _ "k8s.io/kubernetes/cmd/kube-scheduler"
GO
}

setup_containerd() {
  cat > tools.go <<GO
//go:build tools
package tools
import _ "github.com/containerd/containerd/v2/cmd/containerd"
import _ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
import _ "github.com/containerd/containerd/v2/cmd/ctr"
GO
  go get "github.com/containerd/containerd/v2@$1" >/dev/null
}

containerd_ldflags() {
  printf -- '-X github.com/containerd/containerd/v2/version.Version=%s ' "$1"
}

setup_cni() {
  cat > tools.go <<GO
//go:build tools
package tools
import _ "github.com/containernetworking/plugins/plugins/main/bridge"
import _ "github.com/containernetworking/plugins/plugins/main/loopback"
import _ "github.com/containernetworking/plugins/plugins/ipam/host-local"
GO
  go get "github.com/containernetworking/plugins@$1" >/dev/null
}

# kubelet v1.38.0-beta.0 imports sigs.k8s.io/iptables-wrappers (its iptables code moved out of k8s.io/kubernetes'
# pkg/util/iptables), at a version the Go module proxy does not serve ("This module version is not available").
# Only then is kubelet built with hack/kubelet-iptables, the 1.37 code it was moved from behind 1.38's API (that
# file says why this is safe for what the node tier proves), and cached as kubelet-VERSION+iptables-standin.
IPTABLES_STANDIN_FROM=v1.37.2

# iptables_wrappers_unserved VERSION: succeeds when k8s.io/kubernetes VERSION requires sigs.k8s.io/iptables-wrappers
# and the module proxy answers that it does not serve the version required (any other failure is not hidden).
iptables_wrappers_unserved() {
  local gomod want answer
  gomod=$(go mod download -json "k8s.io/kubernetes@$1" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  want=$(sed -n 's/^\tsigs.k8s.io\/iptables-wrappers \(v[^ ]*\)$/\1/p' "$gomod")
  [[ -n $want ]] || return 1
  answer=$(go mod download -json "sigs.k8s.io/iptables-wrappers@$want" 2>&1) && return 1
  grep -qE 'not available|404 Not Found|410 Gone' <<<"$answer"
}

setup_kubelet_iptables_standin() {
  setup_kube_node "$1"
  local legacy
  legacy=$(go mod download -json "k8s.io/kubernetes@$IPTABLES_STANDIN_FROM" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  mkdir -p iptables-wrappers/internal/legacy iptables-wrappers/pkg/iptables
  printf 'module sigs.k8s.io/iptables-wrappers\n\ngo 1.24\n' > iptables-wrappers/go.mod
  cp "$legacy"/pkg/util/iptables/{doc,iptables,save_restore}.go iptables-wrappers/internal/legacy/
  chmod u+w iptables-wrappers/internal/legacy/*.go
  cp "$HACK_DIR/kubelet-iptables/iptables.go" iptables-wrappers/pkg/iptables/
  go mod edit -replace=sigs.k8s.io/iptables-wrappers=./iptables-wrappers
}

build_node_tool() {
  local kube_pkg=k8s.io/kubernetes/cmd cd_pkg=github.com/containerd/containerd/v2/cmd
  local cni_pkg=github.com/containernetworking/plugins/plugins
  case $1 in
    kubelet|kube-controller-manager|kube-scheduler)
      local setup=setup_kube_node
      if [[ $1 == kubelet ]] && GOTOOLCHAIN=$KUBE_GOTOOLCHAIN iptables_wrappers_unserved "$KUBE_VERSION"; then
        log "kubelet $KUBE_VERSION: the module proxy does not serve the sigs.k8s.io/iptables-wrappers it requires;" \
            "building it with hack/kubelet-iptables (k8s.io/kubernetes $IPTABLES_STANDIN_FROM's pkg/util/iptables)"
        setup=setup_kubelet_iptables_standin
        TOOL_REV[kubelet]=+iptables-standin
      fi
      GOTOOLCHAIN=$KUBE_GOTOOLCHAIN build "$1" "$KUBE_VERSION" "$kube_pkg/$1" "$setup" "$(kube_ldflags "$KUBE_VERSION")" ;;
    containerd|containerd-shim-runc-v2|ctr)
      # As containerd's Makefile for static builds: no cgo, so no btrfs snapshotter (the only cgo user).
      GOFLAGS="$GOFLAGS -tags=no_btrfs" \
        build "$1" "$CONTAINERD_VERSION" "$cd_pkg/$1" setup_containerd @containerd_ldflags ;;
    cni-bridge) build "$1" "$CNI_PLUGINS_VERSION" "$cni_pkg/main/bridge" setup_cni ;;
    cni-loopback) build "$1" "$CNI_PLUGINS_VERSION" "$cni_pkg/main/loopback" setup_cni ;;
    cni-host-local) build "$1" "$CNI_PLUGINS_VERSION" "$cni_pkg/ipam/host-local" setup_cni ;;
    # the node tests' device plugin with NUMA topology, against k8s.io/kubelet's deviceplugin/v1beta1
    deviceplugin) build_local deviceplugin "" "the test device plugin" ;;
    # the node tests' DRA driver publishing NUMA/PCIe attributes, against dynamic-resource-allocation's kubeletplugin
    dradriver) build_local dradriver "" "the test DRA driver" ;;
    # LeaderWorkerSet's controller, run out of cluster against the node's API server (tests/node/lws.py)
    lws-controller) build_lws ;;
    # kubernetes-sigs' DRA CPU driver (tests/node/test_dra_cpu.py); not in NODE_TOOLS
    dracpu) build_dracpu ;;
  esac
  trap - RETURN  # build's cleanup trap would fire again when this function returns
}
NODE_TOOLS=(kubelet kube-controller-manager kube-scheduler containerd containerd-shim-runc-v2 ctr
            cni-bridge cni-host-local cni-loopback deviceplugin dradriver lws-controller)

want=${1:-all}
if [[ $want == node ]]; then
  for t in "${NODE_TOOLS[@]}"; do build_node_tool "$t"; done
  exit 0
fi
for t in "${NODE_TOOLS[@]}" dracpu; do
  if [[ $want == "$t" ]]; then
    build_node_tool "$t"
    exit 0
  fi
done

case $want in
  helm|all) build helm "$HELM_VERSION" helm.sh/helm/v3/cmd/helm setup_helm @helm_ldflags ;;&
  etcd|all) build etcd "$ETCD_VERSION" go.etcd.io/etcd/server/v3 setup_etcd ;;&
  kube-apiserver|all)
    GOTOOLCHAIN=$KUBE_GOTOOLCHAIN build kube-apiserver "$KUBE_VERSION" k8s.io/kubernetes/cmd/kube-apiserver setup_kube "$(kube_ldflags "$KUBE_VERSION")" ;;&
  kubectl|all)
    GOTOOLCHAIN=$KUBE_GOTOOLCHAIN build kubectl "$KUBE_VERSION" k8s.io/kubernetes/cmd/kubectl setup_kube "$(kube_ldflags "$KUBE_VERSION")" ;;&
  oracle|all) GOTOOLCHAIN=$KUBE_GOTOOLCHAIN build_oracle ;;&
  promtool|all) build promtool "$PROMTOOL_VERSION" github.com/prometheus/prometheus/cmd/promtool setup_promtool ;;&
  oci-registry|all)
    build oci-registry "$GGCR_VERSION" github.com/google/go-containerregistry/cmd/registry setup_oci_registry ;;&
  kube-score) build kube-score "$KUBE_SCORE_VERSION" github.com/zegl/kube-score/cmd/kube-score setup_kube_score ;;
  kyverno) build_kyverno ;;
  helm|etcd|kube-apiserver|kubectl|oracle|promtool|oci-registry|all) ;;
  *) echo "usage: $0 [helm|etcd|kube-apiserver|kubectl|kube-score|kyverno|oracle|promtool|oci-registry|all|node|dracpu|$(IFS="|"; echo "${NODE_TOOLS[*]}")]" >&2; exit 2 ;;
esac
