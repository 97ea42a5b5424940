#!/usr/bin/env bash
# The headless browser `make docs-browser` opens the documentation site with (hack/docs_browser.py): Debian's
# chromium, so the check runs the same engine users read the site with, with no download outside the package
# archive. Idempotent; needs root to install (elsewhere it says what is missing and fails).
set -euo pipefail
PKGS=(chromium fonts-dejavu-core)
bash "$(dirname "$0")/apt-ensure.sh" browser-deps "${PKGS[@]}"
command -v chromium
