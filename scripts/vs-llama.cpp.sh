#!/usr/bin/env bash
# verity against llama.cpp on the same GGUF file: decode and prefill tok/s,
# every dtype both run (f32, bf16, q8_0), 1 and 2 threads, on issue 10's ~110M
# synth and stories260K, and on the ~110M synth quantized by llama.cpp itself
# to Q4_K_M, Q4_0 and Q6_K (its block types, which verity multiplies where
# they lie), as a markdown table of per-round ratios' medians.
#
#   scripts/vs-llama.cpp.sh [ROUNDS]   (default 3)
#   MIN_SECONDS=S (default 2): decode time per measurement; VERITY=path: another verity binary;
#   ONLY="q4_k_m q4_0" (default all): measure only these dtypes
#
# A quick check that it runs: `MIN_SECONDS=0.1 scripts/vs-llama.cpp.sh 1`
# (about 5 min on the busy 2-core box: every measurement prefills 512 tokens
# of the ~110M model at least twice). Its numbers mean nothing while anything
# else runs; take the table on a quiet box.
#
# llama.cpp is the prebuilt libllama of tests/npm (node-llama-cpp's release,
# see tests/npm/package.json) driven by the build's tests/peer/llama_peer.
#
# The same workload on both sides:
# - the same file: each model converted once by `verity convert --to gguf`
#   (no tokenizer), and both engines load that file (verity with --dtype of
#   the file's type, so f32 and bf16 are used in place and q8_0 repacked);
#   f16 is left out because verity computes an F16 file in f32; the block
#   files are the F32 one quantized by llama.cpp (`llama_peer quantize`,
#   llama_model_quantize), verity keeping their blocks (record dtype
#   block_<types>, e.g. block_q4_k_q6_k for Q4_K_M);
# - the same protocol: `verity bench`'s, which llama_peer's bench copies: one
#   process per measurement, warm-up (>= 8 decode tokens and 0.1 s), then
#   whole generations from a fresh cache (the prompt BOS then (1 + 7919 p) mod
#   vocab prefilled as one batch, then greedy decode, each token timed alone)
#   until decode has run MIN_SECONDS; decode tok/s is 1 / the median token
#   time, prefill tok/s the prompt over the median prompt time;
# - the same positions: ~110M 512-token prompt + 32 decoded (as
#   scripts/issue10-targets.sh), stories260K 64 + 64;
# - the same threads, pinned the same way: --threads T on both, each process
#   confined to T CPUs (the one it starts on, then the next allowed) with one
#   compute thread on each (verity pins its pool's threads; llama_peer builds
#   a strict-placement ggml threadpool over the same CPUs, as llama-bench);
# - the same arithmetic: llama.cpp's KV cache in f32 (its default is f16) and
#   no flash attention, as verity computes attention.
# Interleaved: within each round every configuration runs verity and
# llama.cpp back to back, verity first in odd rounds and llama.cpp first in
# even ones (ABBA over rounds), so a slow minute of the shared box hits both.
# The ratio is verity / llama.cpp per round; the table gives each side's median
# and the median ratio with its range over the rounds.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
min_seconds=${MIN_SECONDS:-2}
v=${VERITY:-build/cli/verity}
peer=build/tests/peer/llama_peer
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "vs-llama.cpp: ROUNDS '$rounds' is not a positive integer" >&2; exit 2; }
[ -x "$v" ] || { echo "vs-llama.cpp: $v is missing: build first (scripts/build.sh)" >&2; exit 1; }
[ -x "$peer" ] || { echo "vs-llama.cpp: $peer is missing: scripts/setup.sh installs tests/npm, then build the llama_peer target" >&2; exit 1; }
release=$(/usr/bin/python3 -c 'import json; print(json.load(open("tests/npm/package.json"))["dependencies"]["node-llama-cpp"])')

big=.verity/models/synth-110m-ctx1024.bin
small=models/stories260K.bin
out=out/vs-llama.cpp
files=.verity/models/vs-llama.cpp
mkdir -p "$out" "$files" "$(dirname "$big")"
[ -f "$big" ] || "$v" synth --out "$big" --config \
  '{"dim":768,"hidden_dim":2048,"n_layers":12,"n_heads":12,"n_kv_heads":4,"vocab_size":32000,"seq_len":1024,"shared_classifier":false}'

# name|source|prompt|gen
models=("110m|$big|512|32" "stories260K|$small|64|64")
dtypes=(f32 bf16 q8_0)
# llama.cpp's block types, on the ~110M synth only (stories260K's rows of 64
# are too short for a k-quant).
blocks=(q4_k_m q4_0 q6_k)
threads=(1 2)
for m in "${models[@]}"; do
  IFS='|' read -r name src _ _ <<< "$m"
  for d in "${dtypes[@]}"; do
    g=$files/$name-$d.gguf
    # Rewritten when the source or the verity binary is newer (the writer may have changed).
    if [ ! -f "$g" ] || [ "$src" -nt "$g" ] || [ "$v" -nt "$g" ]; then
      "$v" convert --to gguf --model "$src" --out "$g" --dtype "$d" > "$out/convert.log" 2>&1 ||
        { cat "$out/convert.log" >&2; exit 1; }
    fi
  done
done
for d in "${blocks[@]}"; do
  g=$files/110m-$d.gguf
  if [ ! -f "$g" ] || [ "$files/110m-f32.gguf" -nt "$g" ]; then
    "$peer" quantize "$files/110m-f32.gguf" "$g" "$d" > "$out/quantize.log" 2>&1 ||
      { cat "$out/quantize.log" >&2; exit 1; }
  fi
done

records=$out/records.jsonl
: > "$records"
# One measurement: appends {"round", "engine", "config", "record"} to $records.
measure() {
  local r=$1 engine=$2 config=$3 g=$4 d=$5 t=$6 p=$7 n=$8 rec
  if [ "$engine" = verity ]; then
    case $d in f32|bf16|q8_0) ;; *) d=f32 ;; esac  # a block file: --dtype is its plain matrices'
    rec=$("$v" bench --model "$g" --dtype "$d" --threads "$t" --prompt-tokens "$p" --gen-tokens "$n" \
          --min-seconds "$min_seconds" --output json 2>/dev/null)
  else
    rec=$("$peer" bench "$g" --threads "$t" --prompt-tokens "$p" --gen-tokens "$n" --min-seconds "$min_seconds")
  fi
  echo "{\"round\":$r,\"engine\":\"$engine\",\"config\":\"$config\",\"record\":$rec}" >> "$records"
}
for r in $(seq 1 "$rounds"); do
  order=(verity llama.cpp)
  [ $((r % 2)) -eq 0 ] && order=(llama.cpp verity)
  for m in "${models[@]}"; do
    IFS='|' read -r name _ p n <<< "$m"
    ds=("${dtypes[@]}")
    [ "$name" = 110m ] && ds+=("${blocks[@]}")
    for d in "${ds[@]}"; do
      [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $d "* ]] || continue
      for t in "${threads[@]}"; do
        config="$name|$d|$t|pp$p+tg$n"
        for e in "${order[@]}"; do measure "$r" "$e" "$config" "$files/$name-$d.gguf" "$d" "$t" "$p" "$n"; done
      done
    done
  done
  echo "vs-llama.cpp: round $r/$rounds done ($(grep -c . "$records") measurements)" >&2
done

/usr/bin/python3 - "$records" "$rounds" "$release" "$min_seconds" <<'PY' | tee "$out/table.md"
import json, statistics, sys, collections
path, rounds, release, min_seconds = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
recs = [json.loads(l) for l in open(path) if l.strip()]
by = collections.defaultdict(dict)  # (config, round) -> engine -> record
configs = []
for x in recs:
    by[(x["config"], x["round"])][x["engine"]] = x["record"]
    if x["config"] not in configs:
        configs.append(x["config"])
def metric(rec, engine, key):
    return rec["metrics"][key] if engine == "verity" else rec[key]
# Both sides ran what the configuration says: positions, threads, one pinned CPU per thread.
for x in recs:
    name, dtype, threads, workload = x["config"].split("|")
    rec, t = x["record"], int(threads)
    cpus = rec["affinity"]["cpus"] if x["engine"] == "verity" else rec["cpus"]
    ran = (f"pp{rec['prompt_tokens']}+tg{rec['gen_tokens']}", rec["threads"], len(cpus))
    if x["engine"] == "verity":  # on llama.cpp's block files verity names their types
        block = dtype not in ("f32", "bf16", "q8_0")
        wrong_dtype = not rec["dtype"].startswith("block_") if block else rec["dtype"] != dtype
    else:
        wrong_dtype = False
    if ran != (workload, t, t) or wrong_dtype:
        sys.exit(f"vs-llama.cpp: {x['engine']} in round {x['round']} of {x['config']} ran {ran} "
                 f"(dtype {rec.get('dtype', dtype)}), not {workload} on {t} pinned threads")
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "unknown CPU")
first = lambda e: next(x["record"] for x in recs if x["engine"] == e)
print(f"verity vs llama.cpp (node-llama-cpp {release} prebuilt libllama, CPU variant "
      f"{first('llama.cpp').get('cpu_backend', '?')}; verity kernels {first('verity')['kernels']['simd_target']}) "
      f"on {cpu}, {rounds} interleaved rounds, {min_seconds} s of decode per measurement; ratio = verity / llama.cpp, "
      f"median [min, max] over rounds.")
print()
print("| model | dtype | threads | workload | verity decode tok/s | llama.cpp decode tok/s | decode ratio "
      "| verity prefill tok/s | llama.cpp prefill tok/s | prefill ratio |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
def fmt_ratio(rs):
    return f"{statistics.median(rs):.2f}x [{min(rs):.2f}, {max(rs):.2f}]"
for c in configs:
    name, dtype, threads, workload = c.split("|")
    cells = [name, dtype, threads, workload]
    for key in ("decode_tok_s", "prefill_tok_s"):
        ours, theirs, ratios = [], [], []
        for r in range(1, rounds + 1):
            pair = by.get((c, r), {})
            if "verity" not in pair or "llama.cpp" not in pair:
                sys.exit(f"vs-llama.cpp: round {r} of {c} lacks a measurement")
            a, b = metric(pair["verity"], "verity", key), metric(pair["llama.cpp"], "llama.cpp", key)
            ours.append(a); theirs.append(b); ratios.append(a / b)
        cells += [f"{statistics.median(ours):.1f}", f"{statistics.median(theirs):.1f}", fmt_ratio(ratios)]
    print("| " + " | ".join(cells) + " |")
print()
print(f"vs-llama.cpp: {len(configs)} configurations x {rounds} rounds, {len(recs)} measurements "
      f"(records: {path})")
PY
