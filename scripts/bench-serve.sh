#!/usr/bin/env bash
# The serving benchmark as one bench-protocol command, for `verity submit
# --base-cmd/--head-cmd`: starts `VERITY serve` on a free loopback port,
# waits until it listens (the startup probe passed), drives it with `verity
# loadgen`, stops it with SIGTERM, and prints loadgen's verity.bench/1 record
# (serve_tok_s; ttft_p50_ms, ttft_p99_ms, itl_p99_ms, peak_rss_mb as guards).
# It fails (non-zero, the record's "ok" false, or no record) when the server
# does not start, any request fails, or the server does not exit 0.
#
#   scripts/bench-serve.sh VERITY MODEL TOKENIZER [key=value ...]
#   keys: parallel (8), concurrency (8), requests (64), prompt (16), gen (64),
#         threads (1), dtype (f32), probes (beside the model), seed (1)
#   e.g. scripts/bench-serve.sh build/cli/verity models/stories260K.bin models/tok512.bin concurrency=1 parallel=1
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 VERITY MODEL TOKENIZER [key=value ...]" >&2; exit 2; }
bin=$1 model=$2 tok=$3
shift 3
parallel=8 concurrency=8 requests=64 prompt=16 gen=64 threads=1 dtype=f32 probes="" seed=1
for kv in "$@"; do
  case "$kv" in
    parallel=*|concurrency=*|requests=*|prompt=*|gen=*|threads=*|dtype=*|probes=*|seed=*) eval "${kv%%=*}=\${kv#*=}" ;;
    *) echo "bench-serve: unknown setting '$kv'" >&2; exit 2 ;;
  esac
done
source "$(dirname "$0")/lib/serve_up.sh"
dir=$(mktemp -d)
serve_pid=""
trap '[ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null; rm -rf "$dir"' EXIT
serve_up "$dir" "$bin" --model "$model" --tokenizer "$tok" --threads "$threads" --parallel "$parallel" --dtype "$dtype" \
  --queue "$concurrency" --probe-every 0 ${probes:+--probes "$probes"} || exit 1
rc=0
"$bin" loadgen --url "$serve_url" --concurrency "$concurrency" --requests "$requests" --prompt-tokens "$prompt" \
  --gen-tokens "$gen" --seed "$seed" >"$dir/record" 2>"$dir/loadgen.err" || rc=$?
src=0
serve_down || src=$?
cat "$dir/record"
cat "$dir/loadgen.err" >&2
[ "$src" -eq 0 ] || { echo "bench-serve: the server exited $src on SIGTERM" >&2; exit 1; }
exit "$rc"
