#!/usr/bin/env bash
# The part of scripts/device-check.sh that fits a session's last short device
# call (under 4 minutes of device time left): the CudaDevice tests, the scored
# change against DIR/base (the 1B bf16 decode, cut at 70 s), and the 7B decode
# in bf16 and q8_0 (and q8_0 on int16 x) with their ratios over bf16. DIR is what `device-check.sh --prepare`
# made, or the DIR.tgz it packs (carry that):
#
#   scripts/device-quick.sh DIR.tgz
#
# Each step prints one line; the last is `device-quick: <n> steps, <k> failed`.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD dir=$(realpath "${1:?usage: $0 DIR|DIR.tgz}")
if [[ -f $dir ]]; then  # DIR.tgz, as device-check.sh --prepare packs it
  packed=$dir dir=$(mktemp -d /tmp/device-bin.XXXXXX)
  tar -xzf "$packed" -C "$dir" || { echo "device-quick: cannot unpack $packed" >&2; exit 2; }
fi
export LD_LIBRARY_PATH=$dir/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} VERITY_SOURCE_DIR=$root
bin=$dir/verity m=$root/models/stories260K.bin work=$(mktemp -d /tmp/device-quick.XXXXXX)
start=$SECONDS steps=0 failed=0
summary() { steps=$((steps + 1)); [[ $2 == ok ]] || failed=$((failed + 1)); echo "device-quick: step $1: $2 $3 ($((SECONDS - start))s)"; }
decode() { python3 -c 'import json, sys; print("%.1f" % json.load(open(sys.argv[1]))["metrics"]["decode_tok_s"])' "$1" 2>/dev/null; }
# Where a bench's process time went (its record's phases; docs/bench.md).
phases() {
  python3 -c 'import json, sys
p = json.load(open(sys.argv[1])).get("phases") or {}
print("%.1f s: load %.1f, first prompt %.1f, timed %.1f" % (sum(p.values()), p["load_s"], p["first_prompt_s"], p["timed_s"])
      if p else "no phases")' "$1" 2>/dev/null
}

synth7=$work/synth-7b
"$bin" synth --out "$synth7" --dtype bf16 --config '{"dim":4096,"hidden_dim":11008,"n_layers":32,"n_heads":32,"n_kv_heads":32,"vocab_size":32000,"seq_len":2304,"shared_classifier":false}' \
  >"$work/synth-7b.log" 2>&1 &
synth7_pid=$!
if "$dir/cuda_backend_test" --gtest_filter='CudaDevice.*' >"$work/gpu.log" 2>&1; then
  summary gpu-tests ok "$(grep -cE '^\[       OK \] CudaDevice' "$work/gpu.log") CudaDevice tests passed"
else
  grep -E '^\[  FAILED  \]|Failure' "$work/gpu.log" | head -10; summary gpu-tests FAIL "see $work/gpu.log"
fi
synth=$work/synth-1b  # bf16 safetensors: a run loads it in ~1 s where the f32 .bin took 3-4 s to convert (2-core CPU box)
"$bin" synth --out "$synth" --dtype bf16 --config '{"dim":2048,"hidden_dim":5632,"n_layers":22,"n_heads":32,"n_kv_heads":4,"vocab_size":32000,"seq_len":256,"shared_classifier":false}' \
  >"$work/synth.log" 2>&1 || summary synth-1B FAIL "see $work/synth.log"
if [[ -x $dir/base/verity && -e $synth ]]; then
  flags="--model $synth --backend cuda --dtype bf16 --steps 64 --min-seconds 0.5"
  timeout 70 "$bin" submit --ledger "$work/gpu-ledger.db" --title "the 1B bf16 decode path since DIR/base (dependent launches)" \
    --predict 3 --base-cmd "$dir/base/verity bench $flags" --head-cmd "$bin bench $flags" \
    --parity-cmd "$bin parity --model $m --backend cuda --dtype bf16 --json" --json >"$work/scored.json" 2>"$work/scored.err"
  rc=$?
  line=$(python3 -c 'import json, sys
j = json.load(open(sys.argv[1])); p = lambda v: "n/a" if v is None else "%+.2f%%" % (100 * v); ci = j.get("ci") or [None, None]
print("verdict=%s gain=%s ci=[%s, %s] rounds=%s %s" % (j["verdict"], p(j.get("gain")), p(ci[0]), p(ci[1]), j.get("rounds"), j.get("note") or ""))' \
    "$work/scored.json" 2>/dev/null)
  grep -E '^  round' "$work/scored.err" | tail -3
  [[ -n $line ]] && summary ledger-scored ok "1B bf16 decode over DIR/base, predicted +3%: $line" ||
    summary ledger-scored FAIL "no verdict (exit $rc: 124 is the 70 s cut)"
else
  summary ledger-scored FAIL "no $dir/base/verity or no 1B model"
fi
if wait $synth7_pid; then
  for dt in bf16 q8_0; do
    "$bin" bench --model "$synth7" --backend cuda --dtype $dt --steps 64 --min-seconds 1 --output json >"$work/7B-$dt.json" 2>"$work/7B-$dt.err"
    tok=$(decode "$work/7B-$dt.json")
    [[ -n $tok ]] && summary "bench-7B-$dt" ok "7B $dt decode $tok tok/s; $(phases "$work/7B-$dt.json"); weights $(grep -m1 -oE 'uploaded in [0-9.]+ s of the host \([0-9.]+ GB/s\)' "$work/7B-$dt.err" || echo 'upload line missing')" ||
      summary "bench-7B-$dt" FAIL "see $work/7B-$dt.err"
  done
  a=$(decode "$work/7B-q8_0.json") b=$(decode "$work/7B-bf16.json")
  [[ -n $a && -n $b ]] && summary q8_0-over-bf16-7B ok "$(python3 -c "print('%s / %s tok/s = %.2fx (target 1.75x)' % ('$a', '$b', $a / $b))")"
  # q8_0 on int16 x (VERITY_CUDA_Q8_INT16=1, docs/cuda.md), against the same target.
  VERITY_CUDA_Q8_INT16=1 "$bin" bench --model "$synth7" --backend cuda --dtype q8_0 --steps 64 --min-seconds 1 \
    --output json >"$work/7B-q8_0-int16.json" 2>"$work/7B-q8_0-int16.err"
  c=$(decode "$work/7B-q8_0-int16.json")
  [[ -n $c && -n $b ]] && grep -q "q8_0 product launches on int16 x" "$work/7B-q8_0-int16.err" &&
    summary q8_0-int16-over-bf16-7B ok "$(python3 -c "print('%s / %s tok/s = %.2fx (target 1.75x)' % ('$c', '$b', $c / $b))")" ||
    summary q8_0-int16-over-bf16-7B FAIL "see $work/7B-q8_0-int16.err (it must run and say its int16-x launches)"
else
  summary synth-7B FAIL "see $work/synth-7b.log"
fi
rm -rf "$synth7" "$synth"
echo "device-quick: $steps steps, $failed failed, $((SECONDS - start))s; logs in $work"
