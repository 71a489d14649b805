#!/usr/bin/env bash
# Builds one libFuzzer target with clang (libFuzzer, ASan, UBSan), seeds it
# from real files verity reads or writes, runs it for a bounded time and
# prints one summary line:
#   fuzz: target=TARGET seconds=S runs=N crashes=0 verdict=PASS
# (verdict=FAIL, the log's tail and exit 1 on a crash, a failed invariant, a
# leak, a timeout or a build failure). docs/fuzzing.md lists the targets.
# usage: tests/fuzz/run_fuzz.sh SOURCE_DIR BUILD_DIR SECONDS TARGET [libFuzzer flags...]
#   TARGET: safetensors | gguf | llama2c | hf_config | tokenizer_bin | tokenizer_json | sentencepiece | llama_bench | text_adapter
#           | jinja | project_config
#   e.g. a long run: nice -n 19 tests/fuzz/run_fuzz.sh . build 600 llama2c -runs=1000000
set -uo pipefail
[ $# -ge 4 ] || { echo "usage: $0 SOURCE_DIR BUILD_DIR SECONDS TARGET [libFuzzer flags...]" >&2; exit 2; }
src=$1 build=$2 seconds=$3 target=$4
shift 4
fail() { echo "fuzz: target=$target $* verdict=FAIL"; exit 1; }
v="$build/cli/verity"
[ -x "$v" ] || fail "(no verity binary at $v to write seeds)"

# What each target compiles (besides tests/fuzz/<target>_fuzz.cc), the
# compiler and linker flags it needs and its input size limit.
tokenizers=(formats/tokenizer.cc formats/llama2c_tokenizer.cc formats/hf_tokenizer.cc
            formats/sentencepiece_tokenizer.cc formats/regex.cc base/utf8.cc)
cflags=() libs=()
# pkg-config's compile and link flags for the packages named, into cflags and libs.
package_flags() {
  local c l
  c=$(pkg-config --cflags "$@") && l=$(pkg-config --libs "$@") || fail "(pkg-config found no $*)"
  read -ra cflags <<<"$c"
  read -ra libs <<<"$l"
}
case "$target" in
  safetensors) sources=(formats/safetensors.cc) max_len=8192 ;;
  gguf) sources=(formats/gguf.cc formats/quants.cc formats/safetensors.cc) max_len=16384 ;;
  llama2c) sources=(formats/checkpoint_config.cc formats/model_config.cc) max_len=16384 ;;
  hf_config) sources=(formats/checkpoint_config.cc formats/model_config.cc) max_len=4096 ;;
  llama_bench) sources=(measure/llama_bench.cc protocol/json_object.cc) max_len=8192 ;;
  text_adapter) sources=(measure/text_adapter.cc protocol/json_object.cc) max_len=8192 ;;
  jinja) sources=(serve/jinja_parse.cc serve/jinja_render.cc base/utf8.cc) max_len=8192 ;;
  project_config)
    sources=(measure/project_config.cc) max_len=4096
    package_flags tomlplusplus ;;
  tokenizer_bin | tokenizer_json | sentencepiece)
    sources=("${tokenizers[@]}") max_len=16384
    package_flags sentencepiece libpcre2-8 libutf8proc ;;
  *) fail "(unknown target; see the usage line)" ;;
esac

mkdir -p "$build/fuzz-$target" || fail "(cannot create $build/fuzz-$target)"
out=$(cd "$build/fuzz-$target" && pwd)  # absolute: the build below runs in the source directory
mkdir -p "$out/corpus" && rm -rf "$out/seeds" && mkdir -p "$out/seeds" || fail "(cannot create $out)"
clang=$(command -v clang++ || command -v clang++-14)
[ -n "$clang" ] || fail "(clang++ not found)"
bin="$out/${target}_fuzz"
inputs=("tests/fuzz/${target}_fuzz.cc" "${sources[@]}")
# Rebuild only when a source or any project header is newer than the binary.
stale=1
if [ -x "$bin" ]; then
  changed=$(cd "$src" && { find "${inputs[@]}" -newer "$bin"; find base engine formats kernels measure serve -name '*.h' -newer "$bin"; } 2>/dev/null)
  [ -z "$changed" ] && stale=0
fi
# Each source is compiled alone through ccache (where installed): the targets
# share sources (the three tokenizer targets, llama2c and hf_config), and a
# fresh clone finds the objects an earlier build made. CCACHE_BASEDIR and the
# debug prefix map keep the clone's path out of the objects and their hashes.
if [ $stale = 1 ]; then
  ccache=$(command -v ccache || true)
  root=$(cd "$src" && pwd)
  mkdir -p "$out/obj" || fail "(cannot create $out/obj)"
  : >"$out/build.log"
  objects=()
  for input in "${inputs[@]}"; do
    obj="$out/obj/${input//\//_}.o"
    objects+=("$obj")
    (cd "$src" && CCACHE_BASEDIR="$root" ${ccache:+"$ccache"} "$clang" -std=c++20 -O1 -g -fdebug-prefix-map="$root"=. \
       -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I. ${cflags[@]+"${cflags[@]}"} \
       -c "$input" -o "$obj") 2>>"$out/build.log" || fail "(compiling $input failed, see $out/build.log)"
  done
  "$clang" -fsanitize=fuzzer,address,undefined "${objects[@]}" ${libs[@]+"${libs[@]}"} -o "$bin" 2>>"$out/build.log" ||
    fail "(linking failed, see $out/build.log)"
fi

# Seeds: real files (the shipped model and tokenizer, what verity's converter
# and synthesizer write), so the fuzzer starts inside the formats.
tiny='{"dim":32,"hidden_dim":32,"n_layers":1,"n_heads":2,"n_kv_heads":1,"vocab_size":16,"seq_len":8,"shared_classifier":true}'
moe='{"dim":32,"hidden_dim":32,"n_layers":1,"n_heads":2,"n_kv_heads":1,"vocab_size":16,"seq_len":8,"shared_classifier":false,"n_experts":2,"n_experts_per_tok":1}'
seeds="$out/seeds" work="$out/work"
rm -rf "$work" && mkdir -p "$work"
seed() { "$@" >/dev/null 2>"$work/seed.log" || { cat "$work/seed.log"; fail "(seed command failed: $*)"; }; }
case "$target" in
  safetensors)
    seed "$v" convert --model "$src/models/stories260K.bin" --out "$work/hf" --shards 2
    for f in "$work"/hf/*.safetensors; do head -c 4096 "$f" > "$seeds/$(basename "$f").head"; done
    cp "$work/hf/model.safetensors.index.json" "$seeds/index.json" ;;
  gguf)
    seed "$v" synth --out "$work/tiny.bin" --config "$tiny"
    seed "$v" convert --to gguf --model "$work/tiny.bin" --out "$seeds/tiny.gguf"
    seed "$v" convert --to gguf --model "$work/tiny.bin" --out "$seeds/tiny-q8.gguf" --dtype q8_0
    seed "$v" synth --out "$work/moe" --config "$moe"
    seed "$v" convert --to gguf --model "$work/moe" --out "$seeds/moe.gguf" --dtype bf16
    # The header (metadata, tokenizer, tensor infos) of stories260K with its vocabulary.
    seed "$v" convert --to gguf --model "$src/models/stories260K.bin" --tokenizer "$src/models/tok512.bin" --out "$work/s.gguf"
    head -c 14176 "$work/s.gguf" > "$seeds/stories-header.gguf" ;;
  llama2c)
    # Whole small files (shared and unshared classifier) and the real model's
    # first bytes (its header; the size check rejects the rest).
    seed "$v" synth --out "$seeds/tiny.bin" --config "$tiny"
    seed "$v" synth --out "$seeds/tiny-wcls.bin" --config "${tiny/\"shared_classifier\":true/\"shared_classifier\":false}"
    head -c "$max_len" "$src/models/stories260K.bin" > "$seeds/stories260K.head" ;;
  hf_config)
    seed "$v" convert --model "$src/models/stories260K.bin" --out "$work/hf"
    cp "$work/hf/config.json" "$seeds/stories260K.json"
    seed "$v" synth --out "$work/moe" --config "$moe"
    cp "$work/moe/config.json" "$seeds/moe.json"
    dict=(-dict="$src/tests/fuzz/hf_config.dict") ;;
  tokenizer_bin)
    # The shipped 512-entry tokenizer (6 KB, whole), and a 300-entry one (the
    # format's 3 specials, 256 byte pieces, 41 merges) written here.
    cp "$src/models/tok512.bin" "$seeds/tok512.bin"
    /usr/bin/python3 - "$seeds/tok300.bin" <<'PY' || fail "(could not write the tok300 seed)"
import struct, sys
pieces = [b"<unk>", b"\n<s>\n", b"\n</s>\n"] + [b"<0x%02X>" % i for i in range(256)]
pieces += [w.encode() for w in " t th the e he  a an and o on  on ce ne nce once u up upo upon i im ti tim time".split(" ")][:41]
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<i", max(len(p) for p in pieces)))
    for i, p in enumerate(pieces):
        f.write(struct.pack("<fi", -float(i), len(p)) + p)
PY
    ;;
  tokenizer_json)
    cp "$src"/tests/fuzz/tokenizer_seeds/*.json "$seeds/" || fail "(cannot copy the tokenizer.json seeds)" ;;
  llama_bench)
    cp "$src"/tests/fuzz/llama_bench_seeds/* "$seeds/" || fail "(cannot copy the llama-bench seeds)" ;;
  text_adapter)
    cp "$src"/tests/fuzz/text_adapter_seeds/* "$seeds/" || fail "(cannot copy the text adapter seeds)" ;;
  jinja)
    cp "$src"/tests/fuzz/jinja_seeds/* "$seeds/" || fail "(cannot copy the chat template seeds)" ;;
  project_config)
    cp "$src"/verity.toml "$seeds/" || fail "(cannot copy verity.toml as a seed)" ;;
  sentencepiece)
    # Real models (BPE and unigram) trained from the conformance training
    # text; a small vocabulary keeps the files small.
    /usr/bin/python3 -c "
import sentencepiece as spm, sys
for kind, vocab in (('bpe', 120), ('unigram', 120)):
    spm.SentencePieceTrainer.train(input=sys.argv[1], model_prefix=sys.argv[2] + '/seed-' + kind, model_type=kind,
        vocab_size=vocab, num_threads=1, minloglevel=2, input_sentence_size=0, shuffle_input_sentence=False,
        hard_vocab_limit=False)
" "$src/tests/conformance/spm_train.txt" "$work" >"$work/seed.log" 2>&1 || { cat "$work/seed.log"; fail "(seed training failed)"; }
    cp "$work"/seed-*.model "$seeds/" || fail "(cannot copy the SentencePiece seeds)" ;;
esac

# New inputs go to corpus/ (kept between runs); seeds/ is rewritten each run.
log="$out/fuzz.log"
cmd=("$bin" -max_total_time="$seconds" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
     -artifact_prefix="$out/" ${dict[@]+"${dict[@]}"} "$@" "$out/corpus" "$seeds")
"${cmd[@]}" >"$log" 2>&1
rc=$?
# grep -a: the log can hold raw bytes from an input, and plain grep would then
# only say "binary file matches".
runs=$(grep -aoE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$')
secs=$(grep -aoE 'Done [0-9]+ runs in [0-9]+ second' "$log" | grep -oE 'in [0-9]+' | grep -oE '[0-9]+')
if [ $rc -eq 0 ] && [ -n "$runs" ] && [ "$runs" -gt 0 ]; then
  echo "fuzz: target=$target seconds=${secs:-$seconds} runs=$runs crashes=0 verdict=PASS"
else
  tail -n 40 "$log"
  fail "exit=$rc runs=${runs:-0} (log: $log; crashing input under $out/)"
fi
