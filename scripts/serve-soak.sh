#!/usr/bin/env bash
# Issue 25's soak: `verity serve` under closed-loop load for SECONDS (default
# 600) at CLIENTS (default 16), sampling the server's resident memory and
# open file descriptors every 10 s. Passes only with 0 failed requests, peak
# RSS within 5% of its value after the first minute (or the first sample of
# a shorter run), and no more open descriptors at the end than after the
# first minute; prints one summary line either way.
#
#   scripts/serve-soak.sh [SECONDS] [CLIENTS]      (MODEL, TOKENIZER, PARALLEL env)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600} clients=${2:-16}
v=${VERITY:-build/cli/verity}
model=${MODEL:-models/stories260K.bin} tok=${TOKENIZER:-models/tok512.bin} parallel=${PARALLEL:-16}
source scripts/lib/serve_up.sh
dir=$(mktemp -d)
serve_pid=""
trap '[ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null; rm -rf "$dir"' EXIT
serve_up "$dir" "$v" --model "$model" --tokenizer "$tok" --threads 1 --parallel "$parallel" --queue "$clients" \
  --probe-every 10 || { echo "serve-soak: the server did not start verdict=FAIL"; exit 1; }
pid=$serve_pid url=$serve_url
"$v" loadgen --url "$url" --concurrency "$clients" --duration "$seconds" \
  --prompt-tokens 16 --gen-tokens 64 >"$dir/record" 2>"$dir/loadgen.err" &
lg=$!
echo "t_s rss_mb fds healthy" >"$dir/samples"
start=$(date +%s)
while kill -0 "$lg" 2>/dev/null; do
  rss=$(awk '/^VmRSS:/ { printf "%.2f", $2 / 1024 }' "/proc/$pid/status")
  fds=$(ls "/proc/$pid/fd" | wc -l)
  health=$(curl -s -o /dev/null -w '%{http_code}' "$url/health")
  echo "$(( $(date +%s) - start )) $rss $fds $health" >>"$dir/samples"
  sleep 10
done
wait "$lg" || true
src=0
serve_down || src=$?
cat "$dir/samples"
cat "$dir/loadgen.err" >&2
python3 - "$dir/record" "$dir/samples" "$src" <<'EOF'
import json, sys
rec = json.loads(open(sys.argv[1]).readline())
rows = [l.split() for l in open(sys.argv[2]).read().splitlines()[1:]]
rows = [(int(t), float(r), int(f), h) for t, r, f, h in rows]
# The reference: the first sample a minute in (or halfway through a shorter run), under load.
base = next((r for r in rows if r[0] >= min(60, rows[-1][0] / 2)), rows[-1])
peak = max(r[1] for r in rows)
growth = (peak - base[1]) / base[1] * 100
fd_end = rows[-1][2]
failed = rec["errors"]["failed"] if "errors" in rec else -1
unhealthy = sum(1 for r in rows if r[3] != "200")
ok = failed == 0 and growth <= 5 and fd_end <= base[2] and int(sys.argv[3]) == 0 and unhealthy == 0
print(f"serve-soak: {rec['wall_s']:.0f} s at {rec['concurrency']} clients, {rec['completed']} requests, {failed} failed, "
      f"{rec['metrics']['serve_tok_s']:.0f} tok/s; RSS {base[1]:.1f} MiB at {base[0]} s, peak {peak:.1f} MiB ({growth:+.2f}%); "
      f"fds {base[2]} at {base[0]} s, {fd_end} at the end; /health non-200 in {unhealthy} of {len(rows)} samples; "
      f"server exit {sys.argv[3]} verdict={'PASS' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
EOF
