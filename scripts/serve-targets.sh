#!/usr/bin/env bash
# Issue 25's serving targets on this box: aggregate generated tok/s at 1, 8
# and 16 concurrent streams (each with its own slot), the server's decode
# steps alone (rows per second of step time, from its /metrics: the decode
# throughput, prefills apart), TTFT and inter-chunk p50/p99, as a markdown
# table, on stories260K and on a ~110M-shaped synth.
# Rounds interleave the concurrencies, so a slow minute of the shared box
# hits them all; the ratio is each round's N-stream rate over its 1-stream
# rate, and the table gives medians over the rounds.
#
# The synth has issue 10's ~110M shape but stories260K's 512-token
# vocabulary, so that tok512.bin tokenizes it; its probes file holds the
# greedy continuations `verity generate` (fast backend) gives three prompts,
# so the server must reproduce the engine's own answers to start.
#
#   scripts/serve-targets.sh [ROUNDS]   (default 3; THREADS (1), GEN (64), REQUESTS per stream (4))
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3} threads=${THREADS:-1} gen=${GEN:-64} per=${REQUESTS:-4}
v=${VERITY:-build/cli/verity}
synth=.verity/models/synth-110m-v512.bin
if [ ! -f "$synth" ]; then
  mkdir -p "$(dirname "$synth")"
  "$v" synth --out "$synth" --config '{"dim":768,"hidden_dim":2048,"n_layers":12,"n_heads":12,"n_kv_heads":4,"vocab_size":512,"seq_len":1024,"shared_classifier":false}'
fi
probes=${synth%.bin}.probes.json
if [ ! -f "$probes" ]; then
  python3 - "$v" "$synth" "$probes" <<'EOF'
import json, subprocess, sys
v, model, out = sys.argv[1:]
probes = []
# A random model may end a continuation at once (BOS): keep the first three
# prompts whose greedy text runs long enough to probe.
for prompt in ["Once upon a time", "The cat was very", "One day, Tom went to the", "Lily and Ben", "The sun was",
               "Mom said", "There was a big"]:
    text = subprocess.run([v, "generate", "--model", model, "--tokenizer", "models/tok512.bin", "--temperature", "0",
                           "--steps", "16", "--prompt", prompt], check=True, capture_output=True, text=True).stdout
    assert text.startswith(prompt), text
    expect = text[len(prompt):].rstrip("\n")[:6]
    if len(expect) == 6 and len(probes) < 3:
        probes.append({"prompt": prompt, "expect": expect})
assert len(probes) == 3, f"only {len(probes)} prompts of the synth continue long enough to probe"
json.dump(probes, open(out, "w"), indent=1)
EOF
fi
declare -A rate ttft50 ttft99 itl99 decode
for r in $(seq 1 "$rounds"); do
  for model in models/stories260K.bin "$synth"; do
    for c in 1 8 16; do
      rec=$(scripts/bench-serve.sh "$v" "$model" models/tok512.bin concurrency=$c parallel=16 requests=$((c * per)) \
            gen="$gen" threads="$threads" 2>/dev/null)
      read -r tok t50 t99 i99 dec < <(printf '%s' "$rec" | python3 -c 'import json,sys; r=json.load(sys.stdin); m=r["metrics"]; print(m["serve_tok_s"], m["ttft_p50_ms"], m["ttft_p99_ms"], m["itl_p99_ms"], r["engine"]["decode_rows_per_s"])')
      key="$(basename "$model" .bin) $c"
      rate[$key]+="$tok " ttft50[$key]+="$t50 " ttft99[$key]+="$t99 " itl99[$key]+="$i99 " decode[$key]+="$dec "
      echo "round $r: $key streams: $tok tok/s, TTFT p50 $t50 ms p99 $t99 ms, inter-chunk p99 $i99 ms, decode steps $dec rows/s" >&2
    done
  done
done
median() { printf '%s\n' $1 | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
echo "| model | streams | tok/s (all streams) | x one stream | decode-step rows/s | x one stream | TTFT p50 ms | TTFT p99 ms | inter-chunk p99 ms |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for model in stories260K "$(basename "$synth" .bin)"; do
  for c in 1 8 16; do
    key="$model $c"
    ratios="" dratios=""
    one=(${rate["$model 1"]}) many=(${rate[$key]}) done1=(${decode["$model 1"]}) donen=(${decode[$key]})
    for i in "${!one[@]}"; do
      ratios+="$(python3 -c "print(${many[$i]} / ${one[$i]})") "
      dratios+="$(python3 -c "print(${donen[$i]} / ${done1[$i]})") "
    done
    printf '| %s | %d | %.0f | %.2fx | %.0f | %.2fx | %.1f | %.1f | %.1f |\n' "$model" "$c" "$(median "${rate[$key]}")" \
      "$(median "$ratios")" "$(median "${decode[$key]}")" "$(median "$dratios")" \
      "$(median "${ttft50[$key]}")" "$(median "${ttft99[$key]}")" "$(median "${itl99[$key]}")"
  done
done
echo "($rounds rounds, $threads thread(s), pp16+tg$gen, $per requests per stream, $(date -u +%Y-%m-%dT%H:%MZ), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"
