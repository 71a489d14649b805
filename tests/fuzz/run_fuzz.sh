#!/usr/bin/env bash
# Builds the safetensors/index parser fuzz target with clang (libFuzzer, ASan,
# UBSan) and runs it for a bounded time from a seed corpus of real headers.
# usage: tests/fuzz/run_fuzz.sh SOURCE_DIR BUILD_DIR [SECONDS]
set -uo pipefail
src=$1 build=$2 seconds=${3:-20}
out="$build/fuzz"
mkdir -p "$out/corpus"
clang=$(command -v clang++ || command -v clang++-14)
[ -n "$clang" ] || { echo "fuzz: clang++ not found verdict=FAIL"; exit 1; }
"$clang" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I"$src" \
  "$src/tests/fuzz/safetensors_fuzz.cc" "$src/engine/safetensors.cc" -o "$out/safetensors_fuzz" 2>"$out/build.log" \
  || { echo "fuzz: build failed (see $out/build.log) verdict=FAIL"; exit 1; }
# Seeds: real shard headers and an index, written by verity's converter.
"$build/cli/verity" convert --model "$src/models/stories260K.bin" --out "$out/seed-hf" --shards 2 >/dev/null || exit 1
for f in "$out"/seed-hf/*.safetensors; do head -c 4096 "$f" > "$out/corpus/$(basename "$f").head"; done
cp "$out/seed-hf/model.safetensors.index.json" "$out/corpus/index.json"
"$out/safetensors_fuzz" -max_total_time="$seconds" -max_len=8192 -print_final_stats=1 "$out/corpus" >"$out/fuzz.log" 2>&1
rc=$?
runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$out/fuzz.log" | grep -oE '[0-9]+$')
if [ $rc -eq 0 ] && [ -n "$runs" ]; then
  echo "fuzz: target=safetensors_fuzz seconds=$seconds runs=$runs crashes=0 verdict=PASS"
else
  tail -n 30 "$out/fuzz.log"
  echo "fuzz: target=safetensors_fuzz exit=$rc runs=${runs:-0} verdict=FAIL"
  exit 1
fi
