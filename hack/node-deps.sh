#!/usr/bin/env bash
# Debian packages the node tests (tests/node) need beside the tools hack/build-tools.sh compiles:
#   runc            the OCI runtime containerd calls. Debian's, because runc's nsenter is C (cgo + libseccomp):
#                   the Go module proxy alone cannot build it with CGO_ENABLED=0 like every other tool here.
#   buildah         daemonless image builder for the project's Dockerfile (no docker engine, no registry).
#   mmdebstrap      a minimal Debian root with python3: the local base image the Dockerfile's BASE_IMAGE takes.
#   busybox-static  one static binary: the rootfs of the sandbox (pause) image and of the workload image.
#   iptables, iproute2, mount, util-linux, kmod: used by kubelet, containerd and the CNI bridge plugin.
# Idempotent; needs root (it is only run when the node tests can run at all).
set -euo pipefail
PKGS=(runc buildah mmdebstrap busybox-static iptables iproute2 mount util-linux kmod ca-certificates)
bash "$(dirname "$0")/apt-ensure.sh" node-deps "${PKGS[@]}"
