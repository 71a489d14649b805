#!/usr/bin/env bash
# Builds one tokenizer fuzz target with clang (libFuzzer, ASan, UBSan) and runs
# it for a bounded time, or a bounded number of runs, from a seed corpus.
# usage: tests/fuzz/run_tokenizer_fuzz.sh (tokenizer_json|sentencepiece) SOURCE_DIR BUILD_DIR [SECONDS] [RUNS]
set -uo pipefail
target=$1 src=$2 build=$3 seconds=${4:-20} runs_limit=${5:--1}
name="${target}_fuzz"
out="$build/fuzz-$target"
mkdir -p "$out/corpus"
clang=$(command -v clang++ || command -v clang++-14)
[ -n "$clang" ] || { echo "fuzz: clang++ not found verdict=FAIL"; exit 1; }
flags=$(pkg-config --cflags --libs sentencepiece libpcre2-8) || { echo "fuzz: pkg-config found no sentencepiece/pcre2 verdict=FAIL"; exit 1; }
"$clang" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I"$src" \
  "$src/tests/fuzz/$name.cc" "$src"/formats/{tokenizer,llama2c_tokenizer,hf_tokenizer,sentencepiece_tokenizer,regex}.cc \
  $flags -o "$out/$name" 2>"$out/build.log" \
  || { echo "fuzz: build of $name failed (see $out/build.log) verdict=FAIL"; exit 1; }
case "$target" in
  tokenizer_json)
    cp "$src"/tests/fuzz/tokenizer_seeds/*.json "$out/corpus/" ;;
  sentencepiece)
    # Seed: a real model, trained from the conformance training text (small vocab, so small file).
    /usr/bin/python3 -c "
import sentencepiece as spm, sys
for kind, vocab in (('bpe', 120), ('unigram', 120)):
    spm.SentencePieceTrainer.train(input=sys.argv[1], model_prefix=sys.argv[2] + '/seed-' + kind, model_type=kind,
        vocab_size=vocab, num_threads=1, minloglevel=2, input_sentence_size=0, shuffle_input_sentence=False,
        hard_vocab_limit=False)
" "$src/tests/conformance/spm_train.txt" "$out" || { echo "fuzz: seed training failed verdict=FAIL"; exit 1; }
    cp "$out"/seed-*.model "$out/corpus/" ;;
  *) echo "fuzz: unknown target $target verdict=FAIL"; exit 1 ;;
esac
"$out/$name" -max_total_time="$seconds" -runs="$runs_limit" -max_len=16384 -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="$out/" "$out/corpus" >"$out/fuzz.log" 2>&1
rc=$?
runs=$(grep -aoE 'stat::number_of_executed_units: *[0-9]+' "$out/fuzz.log" | grep -oE '[0-9]+$')
if [ $rc -eq 0 ] && [ -n "$runs" ]; then
  echo "fuzz: target=$name seconds<=$seconds runs=$runs crashes=0 verdict=PASS"
else
  tail -n 30 "$out/fuzz.log"
  echo "fuzz: target=$name exit=$rc runs=${runs:-0} verdict=FAIL"
  exit 1
fi
