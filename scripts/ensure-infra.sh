#!/usr/bin/env bash
# Make sure the local PostgreSQL and Redis answer; start them when installed but stopped.
# Skipped for a dependency whose URL points elsewhere (DATABASE_URL / REDIS_URL set to a non-local host).
set -euo pipefail

is_local() { [[ -z "${1:-}" || "$1" == *"127.0.0.1"* || "$1" == *"localhost"* ]]; }

ensure_postgres() {
  if pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then return 0; fi
  if ! command -v pg_ctlcluster >/dev/null || [ ! -d /etc/postgresql ]; then
    echo "PostgreSQL is not installed and DATABASE_URL points at this machine." >&2
    echo "Install it (apt-get install -y postgresql, trust auth for 127.0.0.1) or set DATABASE_URL." >&2
    return 1
  fi
  echo "starting PostgreSQL"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -n1)" main start
  for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && return 0; sleep 1; done
  echo "PostgreSQL did not become ready on 127.0.0.1:5432" >&2
  return 1
}

ensure_redis() {
  if redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then return 0; fi
  if ! command -v redis-server >/dev/null; then
    echo "Redis is not installed and REDIS_URL points at this machine." >&2
    echo "Install it (apt-get install -y redis-server) or set REDIS_URL." >&2
    return 1
  fi
  echo "starting Redis"
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
  for _ in $(seq 1 30); do redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && return 0; sleep 0.5; done
  echo "Redis did not become ready on 127.0.0.1:6379" >&2
  return 1
}

if is_local "${DATABASE_URL:-}"; then ensure_postgres; fi
if is_local "${REDIS_URL:-}"; then ensure_redis; fi
