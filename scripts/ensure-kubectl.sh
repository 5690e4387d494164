#!/usr/bin/env bash
# Install Debian's kubectl (package kubernetes-client) when missing, for the test that builds deploy/k8s and
# its overlays with `kubectl kustomize` (tests/unit/test_deploy_manifests.py). Never fails the build.
set -uo pipefail
command -v kubectl >/dev/null && exit 0
. "$(dirname "$0")/apt-ensure.sh"
apt_ensure "the kustomize build tests will skip" kubernetes-client
