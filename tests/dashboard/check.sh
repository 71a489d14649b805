#!/usr/bin/env bash
# Runs check.mjs over a dashboard directory in headless Chromium.
#   tests/dashboard/check.sh SOURCE_DIR DASHBOARD_DIR SCREENSHOT_DIR
set -euo pipefail
src=$1 dash=$2 shots=$3
node_modules=$src/tests/npm/node_modules
[ -d "$node_modules/puppeteer-core" ] || { echo "dashboard-check: $node_modules/puppeteer-core is missing: run scripts/setup.sh" >&2; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# Node resolves packages from the script's directory: run a copy beside a link to the pinned packages.
ln -s "$node_modules" "$dir/node_modules"
cp "$src/tests/dashboard/check.mjs" "$dir/"
node "$dir/check.mjs" "$dash" "$shots"
