#!/usr/bin/env bash
# Builds the GGUF reader fuzz target with clang (libFuzzer, ASan, UBSan) and
# runs it for a bounded time from a seed corpus of GGUF files verity wrote.
# usage: tests/fuzz/run_gguf_fuzz.sh SOURCE_DIR BUILD_DIR [SECONDS] [extra libFuzzer flags...]
set -uo pipefail
src=$1 build=$2 seconds=${3:-20}
shift $(( $# < 3 ? $# : 3 ))
out="$build/fuzz-gguf"
mkdir -p "$out/corpus"
clang=$(command -v clang++ || command -v clang++-14)
[ -n "$clang" ] || { echo "fuzz: clang++ not found verdict=FAIL"; exit 1; }
"$clang" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I"$src" \
  "$src/tests/fuzz/gguf_fuzz.cc" "$src/formats/gguf.cc" -o "$out/gguf_fuzz" 2>"$out/build.log" \
  || { echo "fuzz: build failed (see $out/build.log) verdict=FAIL"; exit 1; }
# Seeds: small whole files (a synthetic dense and MoE model) and the header
# (metadata, tokenizer, tensor infos) of stories260K with its vocabulary.
v="$build/cli/verity"
"$v" synth --out "$out/tiny.bin" --config '{"dim":32,"hidden_dim":32,"n_layers":1,"n_heads":2,"n_kv_heads":1,"vocab_size":16,"seq_len":8,"shared_classifier":true}' 2>/dev/null || exit 1
"$v" convert --to gguf --model "$out/tiny.bin" --out "$out/corpus/tiny.gguf" >/dev/null || exit 1
"$v" convert --to gguf --model "$out/tiny.bin" --out "$out/corpus/tiny-q8.gguf" --dtype q8_0 >/dev/null || exit 1
"$v" synth --out "$out/moe" --config '{"dim":32,"hidden_dim":32,"n_layers":1,"n_heads":2,"n_kv_heads":1,"vocab_size":16,"seq_len":8,"shared_classifier":false,"n_experts":2,"n_experts_per_tok":1}' 2>/dev/null || exit 1
"$v" convert --to gguf --model "$out/moe" --out "$out/corpus/moe.gguf" --dtype bf16 >/dev/null || exit 1
"$v" convert --to gguf --model "$src/models/stories260K.bin" --tokenizer "$src/models/tok512.bin" --out "$out/s.gguf" >/dev/null || exit 1
head -c 14176 "$out/s.gguf" > "$out/corpus/stories-header.gguf"
"$out/gguf_fuzz" -max_total_time="$seconds" -max_len=16384 -rss_limit_mb=2048 -print_final_stats=1 "$@" "$out/corpus" >"$out/fuzz.log" 2>&1
rc=$?
runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$out/fuzz.log" | grep -oE '[0-9]+$')
if [ $rc -eq 0 ] && [ -n "$runs" ]; then
  echo "fuzz: target=gguf_fuzz seconds=$seconds runs=$runs crashes=0 verdict=PASS"
else
  tail -n 30 "$out/fuzz.log"
  echo "fuzz: target=gguf_fuzz exit=$rc runs=${runs:-0} verdict=FAIL"
  exit 1
fi
