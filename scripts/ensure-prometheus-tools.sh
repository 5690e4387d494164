#!/usr/bin/env bash
# Install Debian's prometheus (for promtool) and prometheus-alertmanager (for amtool) when missing: the
# tests that hold our exposition and Alertmanager API to the real tools use them. Never fails the build:
# without apt-get, root or sudo, or a reachable archive, those tests skip and say why. The packages'
# services are not started (policy-rc.d answers 101): only the binaries are used.
set -uo pipefail

if command -v promtool >/dev/null && command -v amtool >/dev/null; then exit 0; fi
skip() { echo "promtool/amtool not installed ($1): the tests that use them will skip" >&2; exit 0; }
command -v apt-get >/dev/null || skip "no apt-get here"
if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  skip "not root and no password-less sudo"
fi
policy=/usr/sbin/policy-rc.d
made_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | "${as_root[@]}" tee "$policy" >/dev/null && "${as_root[@]}" chmod +x "$policy" \
    && made_policy=1
fi
install() {
  DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -q --no-install-recommends \
    prometheus prometheus-alertmanager >/dev/null 2>&1
}
echo "installing prometheus and prometheus-alertmanager (apt-get, for promtool and amtool)"
install || { "${as_root[@]}" apt-get update -q >/dev/null 2>&1 && install; } || failed=1
[ "$made_policy" -eq 1 ] && "${as_root[@]}" rm -f "$policy"
[ "${failed:-0}" -eq 0 ] || skip "apt-get install failed"
