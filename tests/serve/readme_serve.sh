#!/usr/bin/env bash
# The README's serving commands, as written there: its `verity serve` line
# (optional [..] flags dropped, port 8080 swapped for a free one) must start
# the shipped model, its curl completion must answer 200 with text, its
# /health must say 200, and SIGTERM must stop it with exit 0.
#   tests/serve/readme_serve.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
cd "$src"
line=$(grep -m1 '^build/cli/verity serve ' README.md) || { echo "readme serve: README has no 'build/cli/verity serve' line" >&2; exit 1; }
cmd=$(printf '%s' "$line" | sed -E 's/ \[[^]]*\]//g; s/--port 8080/--port 0/; s#^build/#'"$build"'/#')
curl_line=$(grep -m1 '^curl -s localhost:8080/v1/completions' README.md) || { echo "readme serve: no curl completion line" >&2; exit 1; }
dir=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
echo "readme serve: $cmd"
bash -c "exec $cmd" >"$dir/out" 2>"$dir/err" &
pid=$!
for _ in $(seq 1 600); do
  grep -q '^serve: listening on ' "$dir/out" && break
  kill -0 "$pid" 2>/dev/null || { cat "$dir/out" "$dir/err" >&2; echo "readme serve: exited before listening" >&2; exit 1; }
  sleep 0.1
done
port=$(sed -n 's/^serve: listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$dir/out")
[ -n "$port" ] || { echo "readme serve: never listened" >&2; exit 1; }
body=$(bash -c "${curl_line//localhost:8080/127.0.0.1:$port} -w '\n%{http_code}'")
code=$(printf '%s' "$body" | tail -n 1)
text=$(printf '%s' "$body" | head -n -1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["choices"][0]["text"])')
[ "$code" = 200 ] && [ -n "$text" ] || { echo "readme serve: completion answered $code: $body" >&2; exit 1; }
health=$(curl -s -o /dev/null -w '%{http_code}' "127.0.0.1:$port/health")
[ "$health" = 200 ] || { echo "readme serve: /health answered $health" >&2; exit 1; }
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=""
[ $rc -eq 0 ] || { echo "readme serve: exit $rc on SIGTERM" >&2; exit 1; }
echo "readme serve: completion 200 (\"${text:0:40}...\"), /health 200, exit 0 on SIGTERM"
