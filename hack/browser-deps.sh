#!/usr/bin/env bash
# The headless browser `make docs-browser` opens the documentation site with (hack/docs_browser.py): Debian's
# chromium, so the check runs the same engine users read the site with, with no download outside the package
# archive. Idempotent; needs root to install (elsewhere it says what is missing and fails).
set -euo pipefail
PKGS=(chromium fonts-dejavu-core)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) != 0 ]]; then
    echo "browser-deps: not root; cannot install ${missing[*]}" >&2
    exit 1
  fi
  echo "browser-deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
command -v chromium
