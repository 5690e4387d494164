#!/usr/bin/env bash
# Build the web console: `npm ci` from the committed lockfile (again only when the lockfile changed), the
# API types from the services' own OpenAPI, then `vite build` into console/dist, which the gateway serves.
# Skips the build when nothing under console/ or the services' APIs changed since the last one.
set -euo pipefail
cd "$(dirname "$0")/../console"
command -v npm >/dev/null || { echo "npm is missing: the console needs Node.js 20 and npm" >&2; exit 1; }
if [ ! -f node_modules/.ci-stamp ] || [ package-lock.json -nt node_modules/.ci-stamp ]; then
  npm ci --no-audit --no-fund --loglevel=error
  touch node_modules/.ci-stamp
fi
if [ -f dist/index.html ] && [ -z "$(find src index.html public package-lock.json vite.config.ts ../services/*/api \
    ../services/*/app.py -newer dist/index.html -print -quit)" ]; then
  exit 0
fi
npm run --silent gen
npm run --silent build
