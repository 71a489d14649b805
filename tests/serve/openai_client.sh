#!/usr/bin/env bash
# Starts `verity serve` on a free loopback port (stories260K, chatml chosen
# for chat), runs the official openai client's checks against it, stops it
# with SIGTERM, and passes only if the client printed its summary, the server
# exited 0 and said it stopped.
#   tests/serve/openai_client.sh SOURCE_DIR VERITY_BIN
set -euo pipefail
src=$1
bin=$2
node_modules=$src/tests/npm/node_modules
[ -d "$node_modules/openai" ] || { echo "openai client: $node_modules/openai is missing: run scripts/setup.sh" >&2; exit 1; }
source "$src/scripts/lib/serve_up.sh"
dir=$(mktemp -d)
serve_pid=""
trap '[ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null; rm -rf "$dir"' EXIT
serve_up "$dir" "$bin" --model "$src/models/stories260K.bin" --tokenizer "$src/models/tok512.bin" --threads 1 \
  --probe-every 0 --api-key sekret --chat-template chatml || exit 1
url=$serve_url
# Node resolves "openai" from the script's directory: run a copy beside a link to the pinned packages.
ln -s "$node_modules" "$dir/node_modules"
cp "$src/tests/serve/openai_client.mjs" "$dir/"
out=$(node "$dir/openai_client.mjs" "$url" sekret)
echo "$out"
rc=0
serve_down || rc=$?
grep -q '^serve: stopped' "$dir/out" || { echo "openai client: serve did not say it stopped" >&2; exit 1; }
echo "$out" | grep -q '^openai client: 7/7 checks passed' || exit 1
echo "openai client: serve exited $rc after the checks"
exit "$rc"
