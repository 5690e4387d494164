#!/usr/bin/env bash
# Install Debian's prometheus (for promtool) and prometheus-alertmanager (for amtool) when missing: the
# tests that hold our exposition and Alertmanager API to the real tools use them. Never fails the build.
set -uo pipefail
command -v promtool >/dev/null && command -v amtool >/dev/null && exit 0
. "$(dirname "$0")/apt-ensure.sh"
apt_ensure "the tests using promtool and amtool will skip" prometheus prometheus-alertmanager
