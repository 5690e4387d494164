#!/usr/bin/env bash
# Install Debian's podman (and runc) when missing, for the podman runner and its tests
# (tests/integration/telemetry/test_podman_runner.py). Never fails the build (see apt-ensure.sh).
# runc too: crun refuses hosts whose cgroups are mounted v1 beside a v2 root (hybrid), runc runs there.
set -uo pipefail
command -v podman >/dev/null && command -v runc >/dev/null && exit 0
. "$(dirname "$0")/apt-ensure.sh"
apt_ensure "the podman runner's tests will skip" podman runc
