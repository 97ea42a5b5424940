#!/usr/bin/env bash
# usage: apt-ensure.sh LABEL PACKAGE...: installs the Debian packages of the list that are not installed yet, the
# one way the project's scripts bring in Debian packages (node-deps.sh, browser-deps.sh). Idempotent; installing
# needs root (elsewhere it says what is missing, under LABEL, and fails).
set -euo pipefail
label=$1
shift
missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
((${#missing[@]})) || exit 0
if [[ $(id -u) != 0 ]]; then
  echo "$label: not root; cannot install ${missing[*]}" >&2
  exit 1
fi
echo "$label: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
