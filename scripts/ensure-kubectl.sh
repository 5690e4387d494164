#!/usr/bin/env bash
# Install Debian's kubectl (package kubernetes-client) when missing, for the test that builds deploy/k8s and
# its overlays with `kubectl kustomize` (tests/unit/test_deploy_manifests.py). Never fails the build:
# without apt-get, root or sudo, or a reachable archive, those tests skip and say why.
set -uo pipefail

if command -v kubectl >/dev/null; then exit 0; fi
skip() { echo "kubectl not installed ($1): the kustomize build tests will skip" >&2; exit 0; }
command -v apt-get >/dev/null || skip "no apt-get here"
if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  skip "not root and no password-less sudo"
fi
install() {
  DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -q --no-install-recommends kubernetes-client \
    >/dev/null 2>&1
}
echo "installing kubectl (apt-get, kubernetes-client)"
install || { "${as_root[@]}" apt-get update -q >/dev/null 2>&1 && install; } || skip "apt-get install failed"
