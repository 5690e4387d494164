#!/usr/bin/env bash
# Install Debian's Chromium (and a font, for legible screenshots) when missing: the console's browser tests
# (Playwright's playwright-core driving it) and its benchmark use it. Never fails the build: without it the
# browser tests skip and say why.
set -uo pipefail
command -v chromium >/dev/null && exit 0
. "$(dirname "$0")/apt-ensure.sh"
apt_ensure "the console's browser tests will skip" chromium fonts-dejavu-core fonts-noto-cjk
