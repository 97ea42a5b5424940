#!/usr/bin/env bash
# The node tests' container images, built here without a registry or a daemon (buildah, chroot isolation):
#   localhost/qos-guard/pause:1       sandbox image: busybox-static sleeping as PID 1 (containerd stops it with SIGKILL)
#   localhost/qos-guard/busybox:1     workload image: busybox-static, exits on SIGTERM
#   localhost/qos-guard/kube-scheduler:VERSION  the cached static kube-scheduler (hack/build-tools.sh at
#                                     KUBE_VERSION) on scratch, at /usr/local/bin as upstream's image has it
#                                     (the chart's scheduler runs `kube-scheduler` from PATH)
#   localhost/qos-guard/qos-guard:TAG the repository's Dockerfile (built by hack/image.sh, as `make image`
#                                     does), on a local base (BASE_IMAGE) that mmdebstrap
#                                     makes from Debian packages of this machine's release (python3 >= 3.11)
#
#   hack/node-images.sh TAG    prints one line per image: NAME<TAB>docker-archive path (cached by content)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TAG=${1:?usage: $0 TAG}
CACHE=${QOS_GUARD_IMAGES:-${XDG_CACHE_HOME:-$HOME/.cache}/qos-guard/images}
STORE=$CACHE/buildah
mkdir -p "$CACHE" "$STORE"
DRIVER=${QOS_GUARD_BUILDAH_DRIVER:-overlay}
B=(buildah --root "$STORE/root-$DRIVER" --runroot "$STORE/run-$DRIVER" --storage-driver "$DRIVER")
PATH_ENV=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
log() { echo "node-images: $*" >&2; }

# export NAME FILE: write the image as a docker-archive (ctr imports its RepoTags as they are)
export_image() {
  rm -f "$2.tmp"
  "${B[@]}" push --quiet "$1" "docker-archive:$2.tmp:$1" >/dev/null
  mv "$2.tmp" "$2"
}

busybox_image() {  # NAME FILE CMD_JSON
  local name=$1 out=$2 cmd=$3
  [[ -s $out ]] && return 0
  log "building $name"
  local rootfs c
  rootfs=$(mktemp -d)
  mkdir -p "$rootfs/bin" "$rootfs/tmp" "$rootfs/etc" "$rootfs/proc" "$rootfs/sys" "$rootfs/dev"
  cp /bin/busybox "$rootfs/bin/busybox"
  for applet in $(/bin/busybox --list); do
    [[ -e $rootfs/bin/$applet ]] || ln -s busybox "$rootfs/bin/$applet"
  done
  echo 'root:x:0:0:root:/:/bin/sh' > "$rootfs/etc/passwd"
  echo 'root:x:0:' > "$rootfs/etc/group"
  c=$("${B[@]}" from --quiet scratch)
  "${B[@]}" copy --quiet "$c" "$rootfs" / >/dev/null
  "${B[@]}" config --env "$PATH_ENV" --cmd "$cmd" --entrypoint '[]' "$c"
  "${B[@]}" commit --quiet --rm "$c" "$name" >/dev/null
  rm -rf "$rootfs"
  export_image "$name" "$out"
}

BB_VERSION=$(dpkg-query -W -f='${Version}' busybox-static | tr -c 'A-Za-z0-9.\n' '_')
busybox_image localhost/qos-guard/pause:1 "$CACHE/pause-$BB_VERSION.tar" '["/bin/sleep", "2147483647"]'
busybox_image localhost/qos-guard/busybox:1 "$CACHE/busybox-$BB_VERSION.tar" \
  '["/bin/sh", "-c", "trap \"exit 0\" TERM; while :; do sleep 1; done"]'
printf 'localhost/qos-guard/pause:1\t%s\n' "$CACHE/pause-$BB_VERSION.tar"
printf 'localhost/qos-guard/busybox:1\t%s\n' "$CACHE/busybox-$BB_VERSION.tar"

# The chart's second scheduler (scheduler.image.registry=localhost/qos-guard, its tag the control plane's
# version): the binary the tiers run, keyed by its content.
SCHEDULER_BIN=$(bash "$ROOT/hack/build-tools.sh" kube-scheduler | tail -n 1)
SCHEDULER_VERSION=$("$SCHEDULER_BIN" --version | awk '{print $2}')
[[ $SCHEDULER_VERSION == v1.* ]] || { log "$SCHEDULER_BIN --version: no v1.x version"; exit 1; }
key=$(sha256sum "$SCHEDULER_BIN" | cut -c1-16)
out=$CACHE/kube-scheduler-$SCHEDULER_VERSION-$key.tar
name=localhost/qos-guard/kube-scheduler:$SCHEDULER_VERSION
if [[ ! -s $out ]]; then
  log "building $name"
  rootfs=$(mktemp -d)
  mkdir -p "$rootfs/usr/local/bin" "$rootfs/tmp"
  chmod 755 "$rootfs" && chmod 1777 "$rootfs/tmp"
  cp "$SCHEDULER_BIN" "$rootfs/usr/local/bin/kube-scheduler"
  c=$("${B[@]}" from --quiet scratch)
  "${B[@]}" copy --quiet "$c" "$rootfs" / >/dev/null
  "${B[@]}" config --env "$PATH_ENV" --user 65532:65532 --entrypoint '["/usr/local/bin/kube-scheduler"]' --cmd '[]' "$c"
  "${B[@]}" commit --quiet --rm "$c" "$name" >/dev/null
  rm -rf "$rootfs"
  export_image "$name" "$out"
fi
printf '%s\t%s\n' "$name" "$out"

# The base: a minimal Debian root of this machine's release with python3 and pip; Debian marks its python
# "externally managed" (PEP 668), which an image's only python need not be, as in the python:*-slim images.
. /etc/os-release
BASE=localhost/qos-guard/python-base:$VERSION_CODENAME
if ! "${B[@]}" inspect --type image "$BASE" >/dev/null 2>&1; then
  log "building $BASE with mmdebstrap (this machine's apt sources)"
  sources=/etc/apt/sources.list.d/debian.sources
  [[ -s $sources ]] || sources=/etc/apt/sources.list
  tarball=$(mktemp --suffix=.tar)
  mmdebstrap --quiet --variant=minbase --aptopt='APT::Install-Recommends "false"' \
    --include=python3,python3-pip,passwd,ca-certificates \
    --customize-hook='rm -f "$1"/usr/lib/python3*/EXTERNALLY-MANAGED' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*' \
    "$VERSION_CODENAME" "$tarball" "$sources" >&2
  c=$("${B[@]}" from --quiet scratch)
  "${B[@]}" add --quiet "$c" "$tarball" / >/dev/null
  "${B[@]}" config --env "$PATH_ENV" --env LANG=C.UTF-8 --cmd '["python3"]' "$c"
  "${B[@]}" commit --quiet --rm "$c" "$BASE" >/dev/null
  rm -f "$tarball"
fi

# The webhook: the Dockerfile as users build it, keyed by everything it copies.
key=$(cd "$ROOT" && cat Dockerfile .dockerignore pyproject.toml README.md hack/image.sh \
      $(git ls-files --cached --others --exclude-standard webhook | grep -v __pycache__ | sort) \
      <(echo "$BASE") | sha256sum | cut -c1-16)
out=$CACHE/qos-guard-$key.tar
name=localhost/qos-guard/qos-guard:$TAG
if [[ ! -s $out ]]; then
  log "building $name from the Dockerfile on $BASE"
  # RUN steps reach PyPI as this machine does: its CA bundle (and pip.conf, if any) lent read-only, not copied in.
  lend=(--volume /etc/ssl/certs:/etc/ssl/certs:ro)
  [[ -f /etc/pip.conf ]] && lend+=(--volume /etc/pip.conf:/etc/pip.conf:ro)
  # `make image`'s own script (hack/image.sh), with this store and a daemonless, registry-less build.
  IMAGE_TOOL="${B[*]}" BASE_IMAGE=$BASE BUILD_FLAGS="${lend[*]} --quiet --isolation chroot --pull=never --layers=false" \
    bash "$ROOT/hack/image.sh" build "$name" >&2
  export_image "$name" "$out"
  find "$CACHE" -maxdepth 1 -name "qos-guard-*.tar" ! -path "$out" -delete  # keep one webhook image
fi
printf '%s\t%s\n' "$name" "$out"
