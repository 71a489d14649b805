#!/usr/bin/env bash
# The project's own ledger: every optimization that lands is scored by
# `verity submit --base <parent> --head <commit>` (the ref flow) into
# reports/ledger.db, and reports/CHANGELOG.md is regenerated from it (the test
# suite checks that the committed changelog is exactly what the ledger says).
#
#   scripts/project-ledger.sh submit BASE HEAD "title" PREDICT_PCT [extra submit flags]
#   scripts/project-ledger.sh report
#
# MODEL=stories260K scores on the shipped models/stories260K.bin (1 thread;
# 512 steps) instead, for changes that show on a small model. THREADS=N
# overrides any workload's thread count (a new workload: its own frontier). MODEL=long
# scores on the same ~110M shape with a 1024-token context, 1 thread, 1024
# steps (a 512-token prompt, then 512 generated), for changes that show at
# long context (attention); pass --dtype q8_0 where attention's share is largest.
# MODEL=gemma2 scores on a Gemma 2 of the same ~110M shape (`verity synth
# --like gemma2` written as a GGUF gemma2 file: head_dim 64, query_pre_attn_scalar
# 64, soft-caps 50 and 3, a window of 128 on even layers, tied; 2 threads),
# for changes to Gemma's own steps (the soft-caps, GeGLU, the output norms).
# MODEL=q4_k_m scores on the default ~110M synth quantized by llama.cpp itself
# to Q4_K_M (`llama_peer quantize`: Q4_K and Q6_K blocks, which the kernels of
# kernels/cpu/block_dot.h multiply where they lie), 2 threads as the default.
#
# The default workload runs 2 threads, whose speed moves with the box's free
# bandwidth (a neighbour takes ~40% of it for tens of seconds at a time), so
# each sample decodes for 2 s (`--min-seconds 2`): `verity calibrate` A/As
# on 2026-12-01 gave a per-round MAD of 0.63-2.76% at 0.5 s per sample and
# 0.55-1.89% at 2 s (docs/bench.md, "Quietness").
#
# The benchmark model is the ~110M-parameter synthetic Llama of issue 10
# (dim 768, hidden 2048, 12 layers, 12 heads on 4 KV heads, vocab 32000, an
# unshared classifier; ~400 MB of f32 weights read per token), with a 256-token
# context so that the reference path's parity run stays short. It is written
# once into .verity/models/ (git-ignored) by this build's `verity synth`.
set -euo pipefail
cd "$(dirname "$0")/.."
v=build/cli/verity
ledger=reports/ledger.db
model=.verity/models/synth-110m-ctx256.bin
config='{"dim":768,"hidden_dim":2048,"n_layers":12,"n_heads":12,"n_kv_heads":4,"vocab_size":32000,"seq_len":256,"shared_classifier":false}'

report() {
  "$v" ledger verify --ledger "$ledger"
  "$v" report --ledger "$ledger" --out reports/CHANGELOG.md --html reports/dashboard
  VERITY="$v" scripts/ci-comments.sh  # docs/ci.md's example PR comments come from this ledger too
}

case "${1:-}" in
  submit)
    [ $# -ge 5 ] || { echo "usage: $0 submit BASE HEAD TITLE PREDICT_PCT [flags]" >&2; exit 2; }
    base=$2 head=$3 title=$4 predict=$5
    shift 5
    [ -x "$v" ] || scripts/build.sh
    if [ "${MODEL:-}" = long ]; then
      model=.verity/models/synth-110m-ctx1024.bin config=${config/\"seq_len\":256/\"seq_len\":1024}
    fi
    if [ "${MODEL:-}" = gemma2 ]; then  # a file, as submit takes: the synth's directory as GGUF gemma2
      model=.verity/models/synth-110m-gemma2.gguf
      if [ ! -f "$model" ]; then
        mkdir -p "$(dirname "$model")"
        "$v" synth --like gemma2 --out "${model%.gguf}" --config '{"dim":768,"hidden_dim":2048,"n_layers":12,
          "n_heads":12,"n_kv_heads":4,"head_dim":64,"query_pre_attn_scalar":64,"vocab_size":32000,"seq_len":256,
          "max_position_embeddings":256,"sliding_window":128,"shared_classifier":true}'
        "$v" convert --to gguf --model "${model%.gguf}" --out "$model" --dtype f32
      fi
    fi
    if [ "${MODEL:-}" != stories260K ] && [ "${MODEL:-}" != gemma2 ] && [ ! -f "$model" ]; then
      mkdir -p "$(dirname "$model")"
      "$v" synth --out "$model" --config "$config"
    fi
    if [ "${MODEL:-}" = q4_k_m ]; then
      quant=${model%.bin}.q4_k_m.gguf peer=build/tests/peer/llama_peer
      [ -x "$peer" ] || cmake --build build --target llama_peer
      if [ ! -f "$quant" ]; then
        "$v" convert --to gguf --model "$model" --out "${model%.bin}.f32.gguf" --dtype f32
        "$peer" quantize "${model%.bin}.f32.gguf" "$quant" q4_k_m
      fi
      model=$quant
    fi
    if [ "${MODEL:-}" = stories260K ]; then
      export VERITY_THREADS=${THREADS:-1}
      "$v" submit --ledger "$ledger" --author "$(git config user.name || echo unknown)" --title "$title" \
        --predict "$predict" --base "$base" --head "$head" --model models/stories260K.bin --steps 512 "$@"
    elif [ "${MODEL:-}" = long ]; then
      export VERITY_THREADS=${THREADS:-1}
      "$v" submit --ledger "$ledger" --author "$(git config user.name || echo unknown)" --title "$title" \
        --predict "$predict" --base "$base" --head "$head" --model "$model" --steps 1024 "$@"
    else
      export VERITY_THREADS=${THREADS:-2}
      "$v" submit --ledger "$ledger" --author "$(git config user.name || echo unknown)" --title "$title" \
        --predict "$predict" --base "$base" --head "$head" --model "$model" --steps 128 --min-seconds 2 "$@"
    fi
    report
    ;;
  report) report ;;
  *) echo "usage: $0 submit BASE HEAD TITLE PREDICT_PCT [flags] | report" >&2; exit 2 ;;
esac
