#!/usr/bin/env bash
# Install Debian's podman (and runc) when missing, for the podman runner and its tests
# (tests/integration/telemetry/test_podman_runner.py). Never fails the build: without apt-get, root or
# sudo, or a reachable archive, the podman tests skip and say why.
set -uo pipefail

if command -v podman >/dev/null && command -v runc >/dev/null; then exit 0; fi
skip() { echo "podman not installed ($1): the podman runner's tests will skip" >&2; exit 0; }
command -v apt-get >/dev/null || skip "no apt-get here"
if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  skip "not root and no password-less sudo"
fi
install() {
  DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -q --no-install-recommends podman runc \
    >/dev/null 2>&1
}
echo "installing podman and runc (apt-get)"
# runc too: crun refuses hosts whose cgroups are mounted v1 beside a v2 root (hybrid), runc runs there.
install || { "${as_root[@]}" apt-get update -q >/dev/null 2>&1 && install; } || skip "apt-get install failed"
