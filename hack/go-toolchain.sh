# Sourced by hack/build-tools.sh and hack/oracle/pin.sh: the Go toolchain a Kubernetes release is built with.
#
#   go_toolchain v1.38.0-beta.0     prints go1.27.1 (or "local": the Go installed here is new enough)
#
# A release's go.mod says the oldest Go it builds with (k8s.io/kubernetes v1.38.0-beta.0: `go 1.27.0`); the Go
# installed here (1.26) builds 1.33 to 1.37. For a newer minor the go command fetches the toolchain named here
# from the Go module proxy (golang.org/toolchain, once, into the module cache), so a machine with Go 1.26 needs
# nothing else. KUBE_GOTOOLCHAIN overrides the table (e.g. KUBE_GOTOOLCHAIN=local where Go 1.27 is installed).
declare -A KUBE_GO_TOOLCHAINS=([38]=go1.27.1)

go_toolchain() {
  if [[ -n ${KUBE_GOTOOLCHAIN:-} ]]; then
    echo "$KUBE_GOTOOLCHAIN"
    return
  fi
  local minor=${1#v1.}
  minor=${minor%%.*}
  echo "${KUBE_GO_TOOLCHAINS[$minor]:-local}"
}
