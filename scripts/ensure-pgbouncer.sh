#!/usr/bin/env bash
# Install Debian's pgbouncer when missing: the tests that run services behind a transaction pooler start
# their own from it (the package's service is never started). Never fails the build.
set -uo pipefail
command -v pgbouncer >/dev/null || [ -x /usr/sbin/pgbouncer ] && exit 0
. "$(dirname "$0")/apt-ensure.sh"
apt_ensure "the tests behind PgBouncer will skip" pgbouncer
