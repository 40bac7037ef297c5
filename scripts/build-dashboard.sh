#!/usr/bin/env bash
# Rebuild the dashboard's files (mqttq/admin/dashboard/static/) from frontend/: install the
# pinned packages of frontend/package-lock.json (npm ci), lint the sources (eslint), bundle
# them (esbuild: app.js, app.css, index.html, login.html, the libraries' licences).
# The built files are committed, so a machine without node still serves the dashboard;
# run this after changing anything under frontend/ and commit the result.
set -euo pipefail
cd "$(dirname "$0")/../frontend"
if ! command -v npm >/dev/null 2>&1; then
    echo "mqttq: error: npm is not installed; install Node.js 18 or later (Debian: apt-get install nodejs npm)" >&2
    exit 1
fi
npm ci --no-audit --no-fund
npm run --silent lint
npm run --silent build
