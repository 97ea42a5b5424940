#!/usr/bin/env bash
# `make image` / `make image-push`: the webhook image from the Dockerfile, with whichever builder is here.
#
#   hack/image.sh build IMAGE     BASE_IMAGE=... to build on another base (an ARG of the Dockerfile)
#   hack/image.sh push IMAGE      to the registry IMAGE names (PUSH_FLAGS=--tls-verify=false for a plain-HTTP one)
#
# The builder: IMAGE_TOOL if set (a command, e.g. "buildah --root /var/tmp/store"), else docker when its daemon
# answers, else buildah (daemonless; Debian: apt-get install buildah). BUILD_FLAGS are added to the build.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
what=${1:?usage: $0 build|push IMAGE}
image=${2:?usage: $0 build|push IMAGE}

if [[ -n ${IMAGE_TOOL:-} ]]; then
  read -r -a tool <<< "$IMAGE_TOOL"
elif command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
  tool=(docker)
elif command -v buildah >/dev/null 2>&1; then
  tool=(buildah)
else
  echo "make image: no builder: neither a docker with a running daemon nor buildah is here; install buildah" \
       "(Debian, Ubuntu: apt-get install buildah) or start docker, or name one with IMAGE_TOOL=..." >&2
  exit 2
fi
read -r -a build_flags <<< "${BUILD_FLAGS:-}"
read -r -a push_flags <<< "${PUSH_FLAGS:-}"
base=()
[[ -n ${BASE_IMAGE:-} ]] && base=(--build-arg "BASE_IMAGE=$BASE_IMAGE")

case $what in
  build)
    echo "image: building $image with ${tool[0]}" >&2
    if [[ $(basename "${tool[0]}") == buildah ]]; then
      "${tool[@]}" build --format docker "${base[@]}" "${build_flags[@]}" -t "$image" -f "$ROOT/Dockerfile" "$ROOT"
    else
      "${tool[@]}" build "${base[@]}" "${build_flags[@]}" -t "$image" -f "$ROOT/Dockerfile" "$ROOT"
    fi
    ;;
  push)
    echo "image: pushing $image with ${tool[0]}" >&2
    "${tool[@]}" push "${push_flags[@]}" "$image"
    ;;
  *)
    echo "usage: $0 build|push IMAGE" >&2
    exit 2
    ;;
esac
