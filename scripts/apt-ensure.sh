# Sourced by the scripts/ensure-*.sh: install Debian packages the tests need, never failing the build.
# Without apt-get, root or password-less sudo, or a reachable archive, it prints why and exits 0, so the
# tests needing those packages skip and say so. Services the packages ship are not started
# (policy-rc.d answers 101): only their binaries are used.
#
#   apt_ensure "what the tests lose without it" package...

apt_ensure() {
  local without=$1
  shift
  skip() { echo "$* not installed ($reason): $without" >&2; exit 0; }
  local reason
  if ! command -v apt-get >/dev/null; then reason="no apt-get here"; skip "$@"; fi
  local as_root=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
      as_root=(sudo -n)
    else
      reason="not root and no password-less sudo"; skip "$@"
    fi
  fi
  local policy=/usr/sbin/policy-rc.d made_policy=0 failed=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | "${as_root[@]}" tee "$policy" >/dev/null && "${as_root[@]}" chmod +x "$policy" \
      && made_policy=1
  fi
  install() {
    DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -q --no-install-recommends "$@" >/dev/null 2>&1
  }
  echo "installing $* (apt-get)"
  install "$@" || { "${as_root[@]}" apt-get update -q >/dev/null 2>&1 && install "$@"; } || failed=1
  [ "$made_policy" -eq 1 ] && "${as_root[@]}" rm -f "$policy"
  if [ "$failed" -ne 0 ]; then reason="apt-get install failed"; skip "$@"; fi
}
