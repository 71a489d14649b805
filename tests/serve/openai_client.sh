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
dir=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
"$bin" serve --model "$src/models/stories260K.bin" --tokenizer "$src/models/tok512.bin" --port 0 --threads 1 \
  --probe-every 0 --api-key sekret --chat-template chatml >"$dir/out" 2>"$dir/err" &
pid=$!
for _ in $(seq 1 600); do
  grep -q '^serve: listening on ' "$dir/out" && break
  kill -0 "$pid" 2>/dev/null || { cat "$dir/out" "$dir/err" >&2; echo "openai client: serve exited before listening" >&2; exit 1; }
  sleep 0.1
done
url=$(sed -n 's/^serve: listening on \(http:[^ ]*\).*/\1/p' "$dir/out")
[ -n "$url" ] || { echo "openai client: serve never said where it listens" >&2; exit 1; }
# Node resolves "openai" from the script's directory: run a copy beside a link to the pinned packages.
ln -s "$node_modules" "$dir/node_modules"
cp "$src/tests/serve/openai_client.mjs" "$dir/"
out=$(node "$dir/openai_client.mjs" "$url" sekret)
echo "$out"
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
grep -q '^serve: stopped' "$dir/out" || { echo "openai client: serve did not say it stopped" >&2; exit 1; }
echo "$out" | grep -q '^openai client: 7/7 checks passed' || exit 1
echo "openai client: serve exited $rc after the checks"
exit "$rc"
