#!/usr/bin/env bash
# The CUDA backend on a real GPU (docs/cuda.md). Run it on a machine with an
# NVIDIA GPU (sized for an H200: under 8 minutes with 16 cores):
#
#   scripts/device-check.sh                    build in build-cuda/ (needs scripts/setup.sh's packages), then check
#   scripts/device-check.sh --prepare DIR      here, without a GPU: build, then copy the binaries and every
#                                              non-system shared library they need into DIR (to carry)
#   scripts/device-check.sh --prebuilt DIR     there: check with the binaries of DIR (no build), or of
#                                              DIR.tgz (what --prepare packs to carry: DIR itself is too big)
#
# --prepare also builds the scored change's base (DIR/base: verity and its
# CUDA plugin at $base_rev, session 20's first build on the H200: before the
# dependent launches and the q8_0 device layout), which step 6b scores this
# build against on the GPU.
#
# Steps, each printing one summary line: build; the GPU unit tests
# (CudaDevice.*, none may be skipped); verity parity --backend cuda against
# the CPU reference on stories260K (f32, bf16 and q8_0, worst of the depths)
# and on a Q4_K_M synth (the Q4_K/Q6_K block kernels, same weights);
# compute-sanitizer memcheck on a short generation (0 errors); the device
# roofline (verity roofline --backend cuda: HBM read GB/s, bf16 TFLOP/s); verity bench
# --backend cuda on stories260K and a ~1B-class synthetic model (bf16, q8_0,
# batched decode of 8 and 32 sequences), decode tok/s also as a fraction of the
# device's peak and measured memory bandwidth; a 7-8B-shaped synthetic model
# (Llama-2-7B's shapes, written in the background) in bf16 and q8_0 and its
# 2048-token prefill against the measured tensor-core throughput; a ledger
# A/A and one scored change (this build over the base) on the GPU; the NCCL collective (--tp-backend nccl: golden text, parity,
# the tp=2 refusal on one GPU, benches with fast and cuda kernels). The last line is
# `device-check: <n> steps, <k> failed, <s>s verdict=PASS|FAIL`; the line
# before it, `check-time`, the whole check's seconds against 8 minutes.
# DEVICE_CHECK_BUDGET_S (560) bounds the ledger steps' time: a device call
# has 600 s; a step that would not fit is skipped by name, one cut says so.
# DEVICE_CHECK_EXPLORE=0 runs the check alone, without the experiments that
# decide the opt-in switches (A/Bs, product benches, profiles).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
mode=build
dir=build-cuda
case "${1:-}" in
  --prepare) mode=prepare; dir=${2:?--prepare DIR}; dir=$(realpath -m "$dir") ;;
  --prebuilt) mode=prebuilt; dir=${2:?--prebuilt DIR}; dir=$(realpath "$dir")
    # DIR.tgz, as --prepare packs it (what fits a device call's carry): unpacked here.
    if [[ -f $dir ]]; then
      packed=$dir dir=$(mktemp -d /tmp/device-bin.XXXXXX)
      tar -xzf "$packed" -C "$dir" || { echo "device-check: cannot unpack $packed" >&2; exit 2; }
    fi ;;
  "") ;;
  *) echo "usage: $0 [--prepare DIR | --prebuilt DIR]" >&2; exit 2 ;;
esac
tests=(cuda_backend_test cuda_plan_test cuda_elementwise_test cuda_flash_test cuda_q8_int_test cuda_checks_test)
base_rev=ffdbf3c  # the scored change's base (step 6b): session 20's first H200 build
start=$SECONDS
steps=0 failed=0
# The whole check's seconds: a device call's 600 s less its start. The
# ledger steps, last, start only where their first look fits (time_left).
budget=${DEVICE_CHECK_BUDGET_S:-560}
# DEVICE_CHECK_EXPLORE=0: only the check itself (tests, parity, the
# sanitizer, every target's figure, NCCL, the ledger steps), the form issue
# 42's 8 minutes are for. By default it also runs the experiments that
# decide the opt-in switches (each switch's A/B, the product benches, the
# profiles: docs/cuda.md, "What the next run's figures decide"), which a
# device session needs and which leave the ledger steps little of the budget.
explore=${DEVICE_CHECK_EXPLORE:-1}
exploring() { [[ $explore != 0 ]]; }
work=$(mktemp -d /tmp/device-check.XXXXXX)
summary() {  # summary NAME ok|FAIL DETAIL
  steps=$((steps + 1))
  [[ $2 == ok ]] || failed=$((failed + 1))
  echo "device-check: step $1: $2 $3 ($((SECONDS - start))s)"
}
# ran NAME FILE PATTERN WHAT: whether an opt-in path's run says it took
# that path (the backend's closing lines), so an A/B cannot silently
# measure the default path twice.
ran() {
  if grep -qE "$3" "$2" 2>/dev/null; then summary "$1" ok "$4: $(grep -m1 -oE "$3" "$2")"
  else summary "$1" FAIL "$4: no line matching '$3' in $2"; fi
}
finish() {
  local verdict=PASS
  [[ $failed -eq 0 && $steps -gt 0 ]] || verdict=FAIL
  echo "device-check: $steps steps, $failed failed, $((SECONDS - start))s verdict=$verdict"
  [[ $verdict == PASS ]]
}

build() {  # build DIR: configure with CUDA required, build the binaries the checks run
  local b=$1
  cmake -S "$root" -B "$b" -DCMAKE_BUILD_TYPE=Release -DVERITY_CUDA=ON >"$work/configure.log" 2>&1 || {
    tail -20 "$work/configure.log"; return 1; }
  grep -q "verity: CUDA backend ON" "$work/configure.log" || { grep "verity: CUDA" "$work/configure.log"; return 1; }
  nice -n 19 cmake --build "$b" -j"$(nproc)" --target verity "${tests[@]}" >"$work/build.log" 2>&1 || {
    grep -E "error|Error" "$work/build.log" | head -20; return 1; }
}

if [[ $mode == prepare ]]; then
  b=$root/build-cuda
  build "$b" && summary build ok "in $b" || { summary build FAIL "see $work/build.log"; finish; exit 1; }
  rm -rf "$dir"; mkdir -p "$dir/lib"
  cp "$b/cli/verity" "$dir/" 2>/dev/null || cp "$b/verity" "$dir/"
  # The run-time plugins verity dlopens from its own directory (docs/cuda.md).
  cp "$b"/cli/libverity_*.so "$dir/"
  for t in "${tests[@]}"; do cp "$b/tests/$t" "$dir/"; done
  # Shared libraries outside glibc and the CUDA driver/toolkit (the GPU machine has its own).
  { ldd "$dir"/verity "$dir"/libverity_*.so "$dir"/cuda_* 2>/dev/null || true; } | awk '/=> \// {print $3}' | sort -u |
    { grep -vE '/(libc|libm|libpthread|libdl|librt|ld-linux|libgcc_s|libstdc\+\+|libcuda|libcudart|libcublas|libcublasLt|libnccl)\.so' || true; } |
    xargs -r -I{} cp -L {} "$dir/lib/"
  # The scored change's base, built in its own worktree (ccache shares most objects).
  wt=$root/.verity/worktrees/device-base-$base_rev
  if [[ -n ${DEVICE_CHECK_NO_BASE:-} ]]; then
    summary prepare-base ok "skipped: DEVICE_CHECK_NO_BASE is set (step 6b will say so)"
  else
  [[ -d $wt ]] || git -C "$root" worktree add --detach "$wt" "$base_rev" >"$work/base-worktree.log" 2>&1
  if cmake -S "$wt" -B "$wt/build-cuda" -DCMAKE_BUILD_TYPE=Release -DVERITY_CUDA=ON >"$work/base-configure.log" 2>&1 &&
      nice -n 19 cmake --build "$wt/build-cuda" -j"$(nproc)" --target verity verity_cuda >"$work/base-build.log" 2>&1; then
    mkdir -p "$dir/base" && cp "$wt/build-cuda/cli/verity" "$wt"/build-cuda/cli/libverity_cuda.so "$dir/base/"
    summary prepare-base ok "verity at $base_rev in $dir/base (step 6b's base)"
  else
    grep -E "error|Error" "$work/base-build.log" | head -10; summary prepare-base FAIL "see $work/base-build.log"
  fi
  fi
  summary prepare ok "$(ls "$dir" | wc -l) files, $(du -sh "$dir" | cut -f1) in $dir"
  # What travels to a device call is the repository's files and the carried
  # paths, 64 MiB in all (docs/working-here.md): DIR itself (~56 MB of
  # binaries and libraries on 2026-12-07, more with the base) does not fit
  # beside the ~15 MB of tracked files, so it is packed.
  # Untracked files git does not ignore travel too; DIR and DIR.tgz inside the
  # repository must be ignored, or DIR travels unpacked.
  if tar -C "$dir" -czf "$dir.tgz" .; then
    travels=$({ git -C "$root" ls-files -z; git -C "$root" ls-files -z --others --exclude-standard; } |
      { xargs -0 -r stat -c %s 2>/dev/null || true; } | awk '{s += $1} END {print s + 0}')
    packed=$(stat -c %s "$dir.tgz") total=$((travels + packed)) limit=$((64 << 20)) unignored=""
    for p in "$dir" "$dir.tgz"; do
      if [[ $p == "$root"/* ]] && ! git -C "$root" check-ignore -q "$p"; then unignored+=" ${p#"$root"/}"; fi
    done
    if [[ -n $unignored ]]; then
      summary pack FAIL "not ignored by git:$unignored (add them to .git/info/exclude, or they travel unpacked)"
    elif ((total <= limit)); then
      summary pack ok "$dir.tgz: $((packed >> 20)) MiB, with the repository's other files $((total >> 20)) of the 64 MiB a call carries (carry it; run --prebuilt $dir.tgz there)"
    else
      summary pack FAIL "$dir.tgz: $((packed >> 20)) MiB, with the repository's other files $((total >> 20)) MiB: over the 64 MiB a call carries"
    fi
  else
    summary pack FAIL "could not pack $dir into $dir.tgz"
  fi
  finish
  exit $?
fi

if [[ $mode == build ]]; then
  build "$root/$dir" && summary build ok "CUDA backend ON in $dir" || { summary build FAIL "see $work"; finish; exit 1; }
  bin=$root/$dir/cli/verity; [[ -x $bin ]] || bin=$root/$dir/verity
  tdir=$root/$dir/tests
else
  # libnccl (218 MB) does not travel: that machine's own (the toolkit's, or
  # the NCCL wheel beside its PyTorch) is used.
  nccl_dir=$(dirname "$({ ls /usr/local/cuda/lib64/libnccl.so.2 /usr/local/cuda/lib/libnccl.so.2 2>/dev/null;
    find / -xdev -name 'libnccl.so.2' -path '*nvidia/nccl*' 2>/dev/null; } | head -1)" 2>/dev/null || true)
  export LD_LIBRARY_PATH=$dir/lib:/usr/local/cuda/lib64${nccl_dir:+:$nccl_dir}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  bin=$dir/verity tdir=$dir
  missing=$(ldd "$bin" "$dir"/libverity_*.so "$dir/cuda_backend_test" | grep -c "not found" || true)
  echo "device-check: libnccl from ${nccl_dir:-nowhere found}"
  [[ $missing -eq 0 ]] && summary libraries ok "every shared library found" ||
    { ldd "$bin" "$dir"/libverity_*.so | grep "not found"; summary libraries FAIL "$missing not found"; finish; exit 1; }
fi
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
export VERITY_SOURCE_DIR=$root

# 1. Unit tests: the CPU ones, and the GPU ones (none may skip: a skip means no device).
for t in cuda_plan_test cuda_elementwise_test cuda_flash_test cuda_q8_int_test cuda_checks_test; do
  (cd "$root" && "$tdir/$t" >"$work/$t.log" 2>&1) && summary "$t" ok "$(grep -cE '^\[       OK \]' "$work/$t.log") passed" ||
    { tail -20 "$work/$t.log"; summary "$t" FAIL "see $work/$t.log"; }
done
# Each of these must be listed and pass by name (a renamed or dropped test
# is a failure, not a smaller count); any other listed test must pass too.
required_gpu_tests=(MatvecAndBatchedMatmulMatchTheExactProductForEveryDtype RmsnormRopeSwiGLUArgmaxAndMoeMatchTheReference
  AttentionMatchesTheReferencePast64kPositions ABadLaunchIsAnErrorNamingTheKernel
  ForwardAgreesWithTheReferenceAndAFailureIsAnError RowsKernelIsExactEnoughAndBatchInvariant
  FusedProductsGiveTheSeparateCallsBits RotateAndCacheGivesTheSeparateCallsBits EmbedAddAxpyAndDivideMatchTheHost
  SlotStepsAreBatchInvariant Bf16PrefillGemmStatesItsParityCost PrefillBlockSizeIsTakenAndKeepsParity
  SplitDecodeAttentionMatchesTheReferenceAtChunkEdges RecordedDecodeAttentionGivesTheEagerBits
  Q8_0PrefillGemmStatesItsParityCost ArgmaxRowsPickEachRowsLargest ABackendRunsOnTheDeviceItIsGiven
  PrefillAttentionAsGemmsMatchesTheReference AFailedBackendLeavesTheProcessAsItFoundIt
  WindowsAndGemmaScoresMatchTheReference GeGLUScaleAndSoftCapMatchTheHost EveryFamilyAgreesWithTheReference
  TensorCoreRowsAreExactEnoughAndBatchInvariant TensorCoreSlotStepsAreBatchInvariantAndCloseToDecode
  TheProfileSetsEachMatrixsUploadApart FlashPrefillAttentionMatchesTheReference
  NormedProductsGiveTheSeparateCallsBits Q8IntRowsGiveTheFastKernelsBits StagedUploadsGiveTheDeviceTheWholeMatrixsBytes)
if (cd "$root" && "$tdir/cuda_backend_test" --gtest_filter='CudaDevice.*' >"$work/gpu.log" 2>&1); then
  passed=$(grep -cE '^\[       OK \] CudaDevice' "$work/gpu.log" || true)
  listed=$(cd "$root" && "$tdir/cuda_backend_test" --gtest_filter='CudaDevice.*' --gtest_list_tests | grep -c '^  ' || true)
  skipped=$({ grep -oE '^\[  SKIPPED \] CudaDevice\.[A-Za-z0-9_]+' "$work/gpu.log" || true; } | sort -u | wc -l)
  missing=()
  for t in "${required_gpu_tests[@]}"; do grep -qE "^\[       OK \] CudaDevice\.$t " "$work/gpu.log" || missing+=("$t"); done
  grep "^cuda device:" "$work/gpu.log" || true
  [[ ${#missing[@]} -eq 0 && $passed -ge ${#required_gpu_tests[@]} && $passed -eq $listed && $skipped -eq 0 ]] &&
    summary gpu-tests ok "$passed of $listed CudaDevice tests passed (${#required_gpu_tests[@]} required by name), 0 skipped" ||
    summary gpu-tests FAIL "$passed of $listed passed, $skipped skipped (a skip means no device); required but not passed: ${missing[*]:-none}"
else
  tail -30 "$work/gpu.log"; summary gpu-tests FAIL "see $work/gpu.log"
fi

# cuda_bench NAME TEST WHAT: one CudaBench test; its `cuda bench:` lines into
# the log, and a summary of how many it printed.
cuda_bench() {
  if (cd "$root" && "$tdir/cuda_backend_test" --gtest_filter="CudaBench.$2" >"$work/$1.log" 2>&1); then
    grep '^cuda bench:' "$work/$1.log" || true
    summary "$1" ok "$(grep -c '^cuda bench:' "$work/$1.log") $3"
  else
    tail -20 "$work/$1.log"; summary "$1" FAIL "see $work/$1.log"
  fi
}
# 1b. The decode rows kernel's forms (kRowsForms) on the 7B and 1B products:
# timings for the next tuning, and every form's bits those of form 0.
exploring && cuda_bench rows-forms RowsForms "shapes timed, every form the bits of form 0"
# 1c. A batched step's products on the CUDA cores and on the tensor cores
# (VERITY_CUDA_BATCH_MMA, mma_rows.cu), 8 and 32 vectors, bf16 and q8_0, 1B
# and 7B shapes.
exploring && cuda_bench mma-rows BatchedRowsOnTensorCores "shapes timed on CUDA and tensor cores"
# 1d. A prompt block's products (the GEMM, and the same rows as vectors) for
# 16 to 512 rows: where a block should stop being a GEMM.
exploring && cuda_bench prompt-products PromptBlockProductsByRows "shapes timed as GEMMs and as rows"

# The 7-8B-shaped synthetic model (Llama-2-7B's shapes: 6.7B parameters,
# 13.5 GB of bf16) took 99 s to write on 2026-12-04 (before the writer used
# every core; its random stream is still serial): it is written in the
# background now, while the steps below use the GPU, and benched in step 4b.
# Its step line says when it was ready.
synth7=$work/synth-7b
synth7_from=$(date +%s)
{
  "$bin" synth --out "$synth7" --dtype bf16 --config '{"dim":4096,"hidden_dim":11008,"n_layers":32,"n_heads":32,"n_kv_heads":32,"vocab_size":32000,"seq_len":2304,"shared_classifier":false}' \
    >"$work/synth-7b.log" 2>&1 && rc=0 || rc=$?
  echo $(($(date +%s) - synth7_from)) >"$work/synth-7b.seconds"
  exit $rc
} &
synth7_pid=$!

# 2. Parity against the CPU reference, worst of the depths (7 by default).
m=$root/models/stories260K.bin tok=$root/models/tok512.bin
# q8_0 against the reference on the same q8_0 weights (--reference-dtype
# same): the kernels alone, since q8_0's own rounding flips near-ties
# against f32 whatever the backend (docs/dtypes.md).
for dt in f32 bf16 q8_0; do
  ref=f32
  [[ $dt == q8_0 ]] && ref=same
  if "$bin" parity --model "$m" --backend cuda --dtype "$dt" --reference-dtype "$ref" >"$work/parity-$dt.log" 2>&1; then :; fi
  line=$(grep -E '^parity: worst_top1=' "$work/parity-$dt.log" | tail -1 || true)
  [[ $line == *verdict=PASS* ]] && summary "parity-$dt" ok "$line" ||
    { tail -15 "$work/parity-$dt.log"; summary "parity-$dt" FAIL "${line:-no summary line}"; }
done

# 2a. q8_0 with its decode products on int16 x (VERITY_CUDA_Q8_INT16=1: the
# CPU fast kernel's arithmetic, kernels/cuda/q8_int.h) against the reference
# on the same q8_0 weights, whose f32 x it does not share: the parity the
# CPU fast backend passes (docs/dtypes.md).
if VERITY_CUDA_Q8_INT16=1 "$bin" parity --model "$m" --backend cuda --dtype q8_0 --reference-dtype same \
    >"$work/parity-q8_0-int16.log" 2>&1; then :; fi
line=$(grep -E '^parity: worst_top1=' "$work/parity-q8_0-int16.log" | tail -1 || true)
[[ $line == *verdict=PASS* ]] && summary parity-q8_0-int16 ok "$line" ||
  { tail -15 "$work/parity-q8_0-int16.log"; summary parity-q8_0-int16 FAIL "${line:-no summary line}"; }
ran parity-q8_0-int16-ran "$work/parity-q8_0-int16.log" "[1-9][0-9]* q8_0 product launches on int16 x" \
  "the parity run's int16-x launches"

# 2b. llama.cpp's Q4_K_M pair (Q4_K and Q6_K blocks, read where they lie:
# kernels/cuda/block_rows.h) against the reference on the same blocks, on a
# small synth (rows of 256, which stories260K's 64 are not) written as
# Q4_K_M by verity's own quantizer.
qsrc=$work/synth-q4km.bin qgguf=$work/synth-q4km.gguf
if "$bin" synth --out "$qsrc" --config '{"dim":256,"hidden_dim":768,"n_layers":4,"n_heads":8,"n_kv_heads":4,"vocab_size":512,"seq_len":256,"shared_classifier":false}' >"$work/q4km.log" 2>&1 &&
  "$bin" convert --to gguf --model "$qsrc" --out "$qgguf" --dtype q4_k_m >>"$work/q4km.log" 2>&1; then
  "$bin" parity --model "$qgguf" --backend cuda --reference-dtype same --depths 1,32,96 >"$work/parity-q4_k_m.log" 2>&1 || true
  line=$(grep -E '^parity: worst_top1=' "$work/parity-q4_k_m.log" | tail -1 || true)
  [[ $line == *verdict=PASS* ]] && summary parity-q4_k_m ok "$line" ||
    { tail -15 "$work/parity-q4_k_m.log"; summary parity-q4_k_m FAIL "${line:-no summary line}"; }
else
  tail -5 "$work/q4km.log"; summary parity-q4_k_m FAIL "writing the Q4_K_M synth failed: see $work/q4km.log"
fi

# 3. compute-sanitizer on a short generation.
san=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
if [[ -z $san ]]; then
  summary sanitizer FAIL "compute-sanitizer not found"
else
  "$san" --tool memcheck --error-exitcode 9 "$bin" generate --model "$m" --tokenizer "$tok" --steps 24 \
    --backend cuda --temperature 0 >"$work/sanitizer.log" 2>&1 && rc=0 || rc=$?
  errs=$(grep -oE 'ERROR SUMMARY: [0-9]+' "$work/sanitizer.log" | grep -oE '[0-9]+' | tail -1 || true)
  [[ $rc -eq 0 && ${errs:-x} == 0 ]] && summary sanitizer ok "memcheck: 0 errors on a 24-position generation" ||
    { tail -20 "$work/sanitizer.log"; summary sanitizer FAIL "exit $rc, errors=${errs:-unknown}"; }
fi

# 3b. The device's own roofline (HBM read bandwidth, bf16 tensor-core
# throughput), cached in this run's cache dir so the benches below report the
# fraction of the measured bandwidth, not only of the nominal one.
export VERITY_CACHE_DIR=$work/cache
if "$bin" roofline --backend cuda --buffer-mb 4096 --repetitions 20 --json >"$work/roofline.json" 2>"$work/roofline.err" &&
  /usr/bin/env python3 - "$work/roofline.json" >"$work/roofline.line" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
d, r, f = j["box"]["detail"], j["read_gb_s"][0], j["fma_gflops"][0]
print(f"{d['device']}: read {r['best']:.1f} GB/s (median {r['median']:.1f}) = "
      f"{100 * r['best'] / d['nominal_gb_s']:.1f}% of nominal {d['nominal_gb_s']:.0f} GB/s; "
      f"bf16 GEMM {f['best'] / 1e3:.1f} TFLOP/s (median {f['median'] / 1e3:.1f})")
EOF
then
  summary device-roofline ok "$(cat "$work/roofline.line")"
else
  tail -5 "$work/roofline.err"; summary device-roofline FAIL "see $work/roofline.err and $work/roofline.json"
fi

# 4. Bench: stories260K and a ~1B-class synthetic model (TinyLlama's shape), bf16 and q8_0.
peak=$("$bin" generate --model "$m" --tokenizer "$tok" --steps 2 --backend cuda 2>&1 >/dev/null |
  grep -oE 'peak memory bandwidth [0-9.]+' | grep -oE '[0-9.]+$' || true)
bench() {  # bench NAME MODEL DTYPE STEPS [MORE BENCH FLAGS]
  if "$bin" bench --model "$2" --backend cuda --dtype "$3" --steps "$4" --min-seconds 1 --output json "${@:5}" \
      >"$work/bench-$1.json" 2>"$work/bench-$1.err"; then
    /usr/bin/env python3 - "$work/bench-$1.json" "${peak:-0}" "$1" "$3" <<'EOF' && summary "bench-$1" ok "$(cat "$work/bench-$1.line")" ||
import json, sys
j = json.load(open(sys.argv[1]))
m, roof = j["metrics"], j["roofline"]
peak = float(sys.argv[2])
frac = roof["achieved_gb_s"] / peak if peak > 0 else float("nan")
batch = f" x{j['batch']} sequences" if j.get("batch", 1) > 1 else ""
line = (f"{sys.argv[3]} {sys.argv[4]}{batch}: decode {m['decode_tok_s']:.1f} tok/s, prefill {m['prefill_tok_s']:.1f} tok/s "
        f"({m['prefill_gflops']:.0f} GFLOP/s), "
        f"{roof['bytes_per_token'] / 1e6:.1f} MB/token, {roof['achieved_gb_s']:.1f} GB/s = {100 * frac:.2f}% of "
        f"{peak:.0f} GB/s peak memory bandwidth" +
        (f", {100 * roof['fraction']:.2f}% of the measured {roof['read_gb_s']:.0f} GB/s" if roof.get("fraction") else
         ", no measured roofline"))
# Where the process's time went (what a ledger round pays four times beyond
# its timed window; docs/bench.md, "phases").
ph = j.get("phases")
if isinstance(ph, dict):
    line += (f"; {sum(ph.values()):.1f} s: backend {ph['backend_s']:.1f}, load {ph['load_s']:.1f}, "
             f"decoder {ph['decoder_s']:.1f}, first prompt {ph['first_prompt_s']:.1f}, "
             f"warm-up {ph['warmup_s']:.1f}, timed {ph['timed_s']:.1f}")
open(sys.argv[1][:-len(".json")] + ".line", "w").write(line)
sys.exit(0 if m["decode_tok_s"] > 0 and peak > 0 else 1)
EOF
      summary "bench-$1" FAIL "bad result: $(head -c 300 "$work/bench-$1.json")"
  else
    tail -10 "$work/bench-$1.err"; summary "bench-$1" FAIL "see $work/bench-$1.err"
  fi
}
# ratio NAME A.json B.json TARGET WHAT: A's decode tok/s over B's, and whether
# it meets TARGET (a figure, not a verdict: the step fails only without both).
ratio() {
  if [[ -s $2 && -s $3 ]] && python3 - "$2" "$3" "$4" "$5" >"$work/$1.line" <<'EOF'
import json, sys
a = json.load(open(sys.argv[1]))["metrics"]["decode_tok_s"]
b = json.load(open(sys.argv[2]))["metrics"]["decode_tok_s"]
t = float(sys.argv[3])
print(f"{sys.argv[4]}: {a:.1f} / {b:.1f} tok/s = {a / b:.2f}x (target {t:g}x: {'met' if a / b >= t else 'NOT met'})")
EOF
  then summary "$1" ok "$(cat "$work/$1.line")"; else summary "$1" FAIL "a bench it compares did not run"; fi
}
# share NAME A.json TARGET WHAT: A's decode traffic as a share of the
# device's measured read bandwidth, against TARGET (a fraction; a figure,
# not a verdict: the step fails only without a measured share).
share() {
  if [[ -s $2 ]] && python3 - "$2" "$3" "$4" >"$work/$1.line" <<'EOF'
import json, sys
f = json.load(open(sys.argv[1]))["roofline"].get("fraction")
t = float(sys.argv[2])
if f is None:
    sys.exit(1)
print(f"{sys.argv[3]}: {100 * f:.1f}% of the measured read bandwidth (target {100 * t:g}%: {'met' if f >= t else 'NOT met'})")
EOF
  then summary "$1" ok "$(cat "$work/$1.line")"; else summary "$1" FAIL "no measured share in $2"; fi
}
# profile NAME MODEL DTYPE BENCH FLAGS...: the bench again under
# VERITY_CUDA_PROFILE=1 (every call timed on the device, steps as issued:
# docs/cuda.md, "Profile"); its table goes into the log, the largest first.
profile() {
  if VERITY_CUDA_PROFILE=1 "$bin" bench --model "$2" --backend cuda --dtype "$3" --min-seconds 0 \
      --output json "${@:4}" >"$work/profile-$1.json" 2>"$work/profile-$1.err" &&
      grep -q '^verity: cuda profile: .* ms of device time' "$work/profile-$1.err"; then
    grep '^verity: cuda profile:' "$work/profile-$1.err" | head -24 | sed "s/^verity: cuda profile:/profile $1:/"
    summary "profile-$1" ok "$(grep -m1 -oE '[0-9.]+ ms of device time.*' "$work/profile-$1.err")"
  else
    tail -5 "$work/profile-$1.err"; summary "profile-$1" FAIL "see $work/profile-$1.err"
  fi
}
before=$failed
bench stories260K "$m" f32 64
synth=$work/synth-1b  # bf16 safetensors: a run loads it in ~1 s where the f32 .bin took 3-4 s to convert (2-core CPU box)
if [[ $failed -ne $before ]]; then
  summary bench-synth-1B FAIL "not run: the stories260K bench failed"
elif "$bin" synth --out "$synth" --dtype bf16 --config '{"dim":2048,"hidden_dim":5632,"n_layers":22,"n_heads":32,"n_kv_heads":4,"vocab_size":32000,"seq_len":256,"shared_classifier":false}' \
    >"$work/synth.log" 2>&1; then
  bench synth-1B "$synth" bf16 64
  share share-1B "$work/bench-synth-1B.json" 0.70 "1B bf16 decode"
  if exploring; then
  # The same with the 2 KB a row asked of L2 before 2026-12-07 instead of
  # whole rows (docs/cuda.md, "Whole rows into L2"; predicted +6%, 0 to
  # +15%): what they give, same box, minutes apart. (Dependent launches
  # themselves: 1.03x on 2026-12-04, pdl-1B.)
  VERITY_CUDA_L2_PREFETCH=0 bench synth-1B-2kb-prefetch "$synth" bf16 64
  ratio l2-prefetch-1B "$work/bench-synth-1B.json" "$work/bench-synth-1B-2kb-prefetch.json" 1 \
    "1B bf16 decode, whole rows into L2 over 2 KB a row (predicted ~1.06x)"
  # A decode step's norms in its products' launches (VERITY_CUDA_NORM_FUSED=1:
  # the same bits, 2 launches a layer fewer; docs/cuda.md), over separate.
  VERITY_CUDA_NORM_FUSED=1 bench synth-1B-norm-fused "$synth" bf16 64
  ran norm-fused-1B-ran "$work/bench-synth-1B-norm-fused.err" "[1-9][0-9]* norms run in their products' launches" \
    "the 1B's normed launches"
  ratio norm-fused-1B "$work/bench-synth-1B-norm-fused.json" "$work/bench-synth-1B.json" 1 \
    "1B bf16 decode, norms in the products' launches over separate (predicted ~1.04x)"
  fi
  bench synth-1B-q8_0 "$synth" q8_0 64
  if exploring; then
  # The same on int16 x (VERITY_CUDA_Q8_INT16=1): what dp2a gives a
  # launch-bound model (predicted ~1.15x, 0.95x-1.4x: the 1B's products are
  # short, and each block quantizes x first).
  VERITY_CUDA_Q8_INT16=1 bench synth-1B-q8_0-int16 "$synth" q8_0 64
  ran q8-int16-1B-ran "$work/bench-synth-1B-q8_0-int16.err" "[1-9][0-9]* q8_0 product launches on int16 x" \
    "the 1B's int16-x launches"
  ratio q8-int16-1B "$work/bench-synth-1B-q8_0-int16.json" "$work/bench-synth-1B-q8_0.json" 1 \
    "1B q8_0 decode, int16 x over f32 x (predicted ~1.15x)"
  fi
  # Batched decode (a server's continuous batching): 8 and 32 sequences per
  # step, their tokens summed; the target is 32 >= 15x batch 1 (issue 26).
  bench synth-1B-batch8 "$synth" bf16 64 --batch 8
  bench synth-1B-batch32 "$synth" bf16 64 --batch 32
  ratio "batch32-over-batch1" "$work/bench-synth-1B-batch32.json" "$work/bench-synth-1B.json" 15 \
    "1B bf16 aggregate decode, 32 sequences per step over 1"
  if exploring; then
  # The same on tensor cores (VERITY_CUDA_BATCH_MMA=1: rows independent of
  # their batch, not the decode step's bits; docs/cuda.md).
  VERITY_CUDA_BATCH_MMA=1 bench synth-1B-batch32-mma "$synth" bf16 64 --batch 32
  ratio "batch32-mma-over-batch1" "$work/bench-synth-1B-batch32-mma.json" "$work/bench-synth-1B.json" 15 \
    "1B bf16 aggregate decode, 32 sequences per step on tensor cores over 1"
  profile synth-1B "$synth" bf16 --steps 64
  # Where a 32-sequence step's time goes on tensor cores (the 15x target):
  # its products' launches against the step's other kernels.
  VERITY_CUDA_BATCH_MMA=1 profile synth-1B-batch32-mma "$synth" bf16 --steps 64 --batch 32
  fi
else
  tail -5 "$work/synth.log"; summary bench-synth-1B FAIL "verity synth failed"
fi

# 4b. The 7-8B shape: decode in bf16 and q8_0 (targets: bf16 >= 88% of the
# measured read bandwidth, q8_0 >= 1.75x bf16), and a 2048-token prefill in
# bf16 (target: >= 55% of the measured bf16 tensor-core throughput).
if timeout 600 tail --pid=$synth7_pid -f /dev/null && wait $synth7_pid; then
  summary synth-7B ok "$(du -sh "$synth7" | cut -f1) of bf16 safetensors written in $(cat "$work/synth-7b.seconds" 2>/dev/null || echo '?') s (99 s on 2026-12-04), beside the steps before it"
  bench synth-7B "$synth7" bf16 64
  share share-7B "$work/bench-synth-7B.json" 0.88 "7B bf16 decode"
  # The weights' way to the device: through pinned staging buffers since
  # 2026-12-07 (kernels/cuda/staged_upload.h), where pageable memory gave
  # 4.6-5.5 GB/s on 2026-12-04; predicted 10-20 GB/s of the host's time.
  staged_line="[0-9]+ weight matrices, [0-9.]+ GB, uploaded in [0-9.]+ s of the host \([0-9.]+ GB/s\): [0-9]+ staged[^,]*"
  ran staged-uploads-7B "$work/bench-synth-7B.err" "$staged_line" \
    "the 7B bf16 weights' uploads (predicted 10-20 GB/s)"
  if exploring; then
  VERITY_CUDA_L2_PREFETCH=0 bench synth-7B-2kb-prefetch "$synth7" bf16 64
  ratio l2-prefetch-7B "$work/bench-synth-7B.json" "$work/bench-synth-7B-2kb-prefetch.json" 1 \
    "7B bf16 decode, whole rows into L2 over 2 KB a row (predicted ~1.02x)"
  VERITY_CUDA_NORM_FUSED=1 bench synth-7B-norm-fused "$synth7" bf16 64
  ran norm-fused-7B-ran "$work/bench-synth-7B-norm-fused.err" "[1-9][0-9]* norms run in their products' launches" \
    "the 7B's normed launches"
  ratio norm-fused-7B "$work/bench-synth-7B-norm-fused.json" "$work/bench-synth-7B.json" 1 \
    "7B bf16 decode, norms in the products' launches over separate (predicted ~1.01x)"
  fi
  bench synth-7B-q8_0 "$synth7" q8_0 64
  ran staged-uploads-7B-q8_0 "$work/bench-synth-7B-q8_0.err" "$staged_line" \
    "the 7B q8_0 weights' repack and uploads"
  ratio q8_0-over-bf16-7B "$work/bench-synth-7B-q8_0.json" "$work/bench-synth-7B.json" 1.75 "7B decode, q8_0 over bf16"
  if exploring; then
  # The decode products on int16 x (VERITY_CUDA_Q8_INT16=1: dp2a, half an
  # instruction a weight; docs/cuda.md, "q8_0 on int16 x"), predicted
  # ~1.35x the f32-x kernel's decode (1.0x-1.6x), against the same target.
  VERITY_CUDA_Q8_INT16=1 bench synth-7B-q8_0-int16 "$synth7" q8_0 64
  ran q8-int16-7B-ran "$work/bench-synth-7B-q8_0-int16.err" "[1-9][0-9]* q8_0 product launches on int16 x" \
    "the 7B's int16-x launches"
  ratio q8-int16-7B "$work/bench-synth-7B-q8_0-int16.json" "$work/bench-synth-7B-q8_0.json" 1 \
    "7B q8_0 decode, int16 x over f32 x (predicted ~1.35x)"
  ratio q8_0-int16-over-bf16-7B "$work/bench-synth-7B-q8_0-int16.json" "$work/bench-synth-7B.json" 1.75 \
    "7B decode, q8_0 on int16 x over bf16"
  fi
  # prefill7 NAME WHAT: this build's 2048-token bf16 prefill (the
  # environment as the caller sets it) against the measured tensor cores.
  prefill7() {
    if "$bin" bench --model "$synth7" --backend cuda --dtype bf16 --prompt-tokens 2048 --gen-tokens 8 --min-seconds 0 \
        --output json >"$work/$1.json" 2>"$work/$1.err" &&
      python3 - "$work/$1.json" "$work/roofline.json" "$2" >"$work/$1.line" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))["metrics"]
try:
    peak = json.load(open(sys.argv[2]))["fma_gflops"][0]["best"]
except Exception:
    peak = float("nan")
f = m["prefill_gflops"] / peak  # both count 2 flops per multiply-add
print(f"{sys.argv[3]}: {m['prefill_tok_s']:.0f} tok/s, {m['prefill_gflops'] / 1e3:.1f} TFLOP/s = "
      f"{100 * f:.1f}% of the measured {peak / 1e3:.1f} bf16 TFLOP/s (target 55%: {'met' if f >= 0.55 else 'NOT met'})")
EOF
    then summary "$1" ok "$(cat "$work/$1.line")"
    else tail -5 "$work/$1.err"; summary "$1" FAIL "see $work/$1.err"; fi
  }
  prefill7 prefill-7B "7B bf16 prefill of 2048 tokens"
  if exploring; then
  # The same with the attention as flash-style tiles (VERITY_CUDA_FLASH_PREFILL=1:
  # no scores in memory; docs/cuda.md, "Prefill attention as flash tiles"),
  # predicted ~1.15x the GEMM attention's prefill (1.0x-1.3x).
  VERITY_CUDA_FLASH_PREFILL=1 prefill7 prefill-7B-flash "7B bf16 prefill of 2048 tokens, flash attention"
  ran prefill-7B-flash-ran "$work/prefill-7B-flash.err" "[1-9][0-9]* as flash tiles, 0 as GEMMs, 0 tiled" \
    "the 7B prefill's attention"
  # prefill_ratio NAME A B WHAT: prefill A's tok/s over B's (a figure beside
  # its prediction, in WHAT; the step fails only where one did not run).
  prefill_ratio() {
    if [[ -s $work/$2.json && -s $work/$3.json ]] &&
      python3 - "$work/$2.json" "$work/$3.json" "$4" >"$work/$1.line" <<'EOF'
import json, sys
a, b = (json.load(open(p))["metrics"]["prefill_tok_s"] for p in sys.argv[1:3])
print(f"{sys.argv[3].split(' (')[0]}: {a:.0f} / {b:.0f} tok/s = {a / b:.2f}x"
      + (" (" + sys.argv[3].split(" (", 1)[1] if " (" in sys.argv[3] else ""))
EOF
    then summary "$1" ok "$(cat "$work/$1.line")"
    else summary "$1" FAIL "a prefill it compares did not run"; fi
  }
  prefill_ratio flash-over-gemm-attention-7B prefill-7B-flash prefill-7B \
    "7B bf16 prefill, flash attention over the GEMM attention (predicted ~1.15x, 1.0x-1.3x)"
  # The whole 2048-token prompt as one pass (VERITY_CUDA_PREFILL_BLOCK=2048)
  # instead of 4 of 512: GEMMs of 2048 rows fill 4x the tiles of the
  # tensor cores' waves and launch a quarter as often (docs/cuda.md,
  # "Prefill"). Predicted ~1.25x (1.0x-1.6x) with either attention.
  VERITY_CUDA_PREFILL_BLOCK=2048 prefill7 prefill-7B-block2048 "7B bf16 prefill of 2048 tokens in one pass"
  prefill_ratio block2048-over-512-7B prefill-7B-block2048 prefill-7B \
    "7B bf16 prefill, one pass of 2048 over 4 of 512 (predicted ~1.25x, 1.0x-1.6x)"
  VERITY_CUDA_FLASH_PREFILL=1 VERITY_CUDA_PREFILL_BLOCK=2048 prefill7 prefill-7B-flash-block2048 \
    "7B bf16 prefill of 2048 tokens in one pass, flash attention"
  ran prefill-7B-flash-block2048-ran "$work/prefill-7B-flash-block2048.err" \
    "[1-9][0-9]* as flash tiles, 0 as GEMMs, 0 tiled" "the one-pass prefill's attention"
  ran prefill-7B-block2048-said "$work/prefill-7B-flash-block2048.json" '"prefill_block": ?2048' \
    "the record names its pass"
  prefill_ratio flash-block2048-over-512-7B prefill-7B-flash-block2048 prefill-7B-flash \
    "7B bf16 prefill with flash attention, one pass of 2048 over 4 of 512 (predicted ~1.25x, 1.0x-1.6x)"
  # The same prefill by the base build ($base_rev, where a block's attention
  # was 2 x 32 + 1 launches; since 2026-12-07 4), run right after this
  # build's: predicted ~2x (1.6x-2.4x; docs/cuda.md, "Prefill attention as
  # products"). A figure beside its prediction, not a verdict.
  if [[ -x ${dir}/base/verity ]]; then
    if "$dir/base/verity" bench --model "$synth7" --backend cuda --dtype bf16 --prompt-tokens 2048 --gen-tokens 8 \
        --min-seconds 0 --output json >"$work/prefill-7B-base.json" 2>"$work/prefill-7B-base.err" &&
      python3 - "$work/prefill-7B.json" "$work/prefill-7B-base.json" "$base_rev" >"$work/prefill-7B-over-base.line" <<'EOF'
import json, sys
a, b = (json.load(open(p))["metrics"]["prefill_tok_s"] for p in sys.argv[1:3])
print(f"7B bf16 prefill of 2048 tokens, this build over {sys.argv[3]}: {a:.0f} / {b:.0f} tok/s = {a / b:.2f}x "
      f"(predicted ~2x, 1.6x-2.4x)")
EOF
    then summary prefill-7B-over-base ok "$(cat "$work/prefill-7B-over-base.line")"
    else tail -5 "$work/prefill-7B-base.err"; summary prefill-7B-over-base FAIL "see $work/prefill-7B-base.err"; fi
  else
    summary prefill-7B-over-base ok "skipped: no $dir/base (only --prepare builds the base)"
  fi
  profile synth-7B "$synth7" bf16 --steps 64
  # Where a 2048-token prefill's device time goes (issue 42's 55% target):
  # the GEMMs by shape, the attention's products and softmax, the rest.
  profile prefill-7B "$synth7" bf16 --prompt-tokens 2048 --gen-tokens 1
  fi
else
  kill $synth7_pid 2>/dev/null || true
  tail -5 "$work/synth-7b.log"; summary synth-7B FAIL "verity synth did not finish in time"
fi
rm -rf "$synth7"


# 5. The NCCL collective (docs/tensor-parallel.md): --tp-backend nccl, its
# ranks bootstrapped in-process. NCCL refuses two ranks of one communicator on
# one GPU, so on a one-GPU machine tp=1 is what can run (the whole path:
# plugin, communicator, host<->device copies, ncclAllReduce) and tp=2 must be
# refused by name; with 2 or more GPUs tp=2 must print the golden text. Each
# command has 120 s: a collective that hangs fails its step, not the script.
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
golden=$root/models/stories260K.greedy200.txt
gen() {  # gen LOG ARGS...: the golden 200-token generation with extra flags
  local log=$1; shift
  timeout 120 "$bin" generate --model "$m" --tokenizer "$tok" --steps 200 --temperature 0 "$@" >"$work/$log.out" \
    2>"$work/$log.err"
}
if gen nccl-tp1 --tp 1 --tp-backend nccl && cmp -s "$work/nccl-tp1.out" "$golden" &&
    grep -q 'verdict=PASS' <(grep '^tp all-reduce check' "$work/nccl-tp1.err") &&
    grep -q 'verdict=PASS' <(grep '^tp collective guard' "$work/nccl-tp1.err"); then
  summary nccl-generate-tp1 ok "golden 200-token text; $(grep '^nccl:' "$work/nccl-tp1.err" | head -1); $(grep -oE 'counted [0-9]+; 0 rank-step.*' "$work/nccl-tp1.err")"
else
  tail -8 "$work/nccl-tp1.err"; summary nccl-generate-tp1 FAIL "text differs from $golden or a guard did not pass"
fi
for kern in fast cuda; do
  timeout 120 "$bin" parity --model "$m" --tp 1 --tp-backend nccl --backend $kern >"$work/nccl-parity-$kern.log" 2>&1 || true
  line=$(grep -E '^parity: worst_top1=' "$work/nccl-parity-$kern.log" | tail -1 || true)
  [[ $line == *verdict=PASS* ]] && summary "nccl-parity-tp1-$kern" ok "$line (tp=1 nccl vs one rank, $kern kernels)" ||
    { tail -8 "$work/nccl-parity-$kern.log"; summary "nccl-parity-tp1-$kern" FAIL "${line:-no summary line}"; }
done
if [[ $gpus -ge 2 ]]; then
  gen nccl-tp2 --tp 2 --tp-backend nccl && cmp -s "$work/nccl-tp2.out" "$golden" &&
    summary nccl-generate-tp2 ok "golden 200-token text on $gpus GPUs" ||
    { tail -8 "$work/nccl-tp2.err"; summary nccl-generate-tp2 FAIL "text differs or the run failed"; }
else
  gen nccl-tp2 --tp 2 --tp-backend nccl && rc=0 || rc=$?
  msg=$(grep -m1 'need 2 CUDA devices' "$work/nccl-tp2.err" || true)
  [[ $rc -ne 0 && -n $msg ]] && summary nccl-refuses-tp2-on-one-gpu ok "exit $rc: $msg" ||
    { tail -8 "$work/nccl-tp2.err"; summary nccl-refuses-tp2-on-one-gpu FAIL "exit $rc without the named refusal"; }
fi
# With cuda kernels the all-reduce runs on the backend's own state, on its stream.
if timeout 120 "$bin" bench --model "$m" --tp 1 --tp-backend nccl --backend cuda --steps 64 --min-seconds 1 --output json \
    >"$work/nccl-bench-cuda.json" 2>"$work/nccl-bench-cuda.err"; then
  summary nccl-bench-tp1-cuda ok "$(python3 -c 'import json, sys
m = json.load(open(sys.argv[1]))["metrics"]
print("stories260K tp=1 nccl, cuda kernels: decode %.0f tok/s, the all-reduces on the device state" % m["decode_tok_s"])' "$work/nccl-bench-cuda.json")"
else
  tail -5 "$work/nccl-bench-cuda.err"; summary nccl-bench-tp1-cuda FAIL "see $work/nccl-bench-cuda.err"
fi
if timeout 120 "$bin" bench --model "$m" --tp 1 --tp-backend nccl --steps 64 --min-seconds 1 --output json >"$work/nccl-bench.json" \
    2>"$work/nccl-bench.err"; then
  summary nccl-bench-tp1 ok "$(python3 -c 'import json, sys
m = json.load(open(sys.argv[1]))["metrics"]
print("stories260K tp=1 nccl: decode %.0f tok/s, 10 all-reduces per token through the GPU" % m["decode_tok_s"])' "$work/nccl-bench.json")"
else
  tail -5 "$work/nccl-bench.err"; summary nccl-bench-tp1 FAIL "see $work/nccl-bench.err"
fi
# NCCL set up through MPI (--tp-backend mpi-nccl), where this machine's
# mpirun can start this build's MPI (the library travels; mpirun and its
# components are the machine's own). On one GPU: -np 1 prints the golden
# text, -np 2 must stop on every rank with NCCL's own refusal, named.
mpi() { timeout 120 mpirun --allow-run-as-root --oversubscribe "$@"; }
if ! command -v mpirun >/dev/null; then
  echo "device-check: note: no mpirun on this machine: --tp-backend mpi-nccl not run"
elif ! mpi -np 1 "$bin" generate --model "$m" --tokenizer "$tok" --steps 8 --temperature 0 --tp 1 --tp-backend mpi \
    >"$work/mpi-probe.out" 2>"$work/mpi-probe.err"; then
  echo "device-check: note: mpirun ($(mpirun --version 2>&1 | head -1)) cannot start this build's MPI: --tp-backend mpi-nccl not run:"
  tail -5 "$work/mpi-probe.err"
else
  mpi -np 1 "$bin" generate --model "$m" --tokenizer "$tok" --steps 200 --temperature 0 --tp 1 --tp-backend mpi-nccl \
    >"$work/mpi-nccl-tp1.out" 2>"$work/mpi-nccl-tp1.err" && cmp -s "$work/mpi-nccl-tp1.out" "$golden" &&
    grep -q '^tp all-reduce check: tp=1 mpi-nccl.*verdict=PASS' "$work/mpi-nccl-tp1.err" &&
    summary mpi-nccl-generate-tp1 ok "golden 200-token text; $(grep '^nccl:' "$work/mpi-nccl-tp1.err" | head -1)" ||
    { tail -8 "$work/mpi-nccl-tp1.err"; summary mpi-nccl-generate-tp1 FAIL "text differs or a check did not pass"; }
  if [[ $gpus -lt 2 ]]; then
    mpi -np 2 "$bin" generate --model "$m" --tokenizer "$tok" --steps 8 --temperature 0 --tp 2 --tp-backend mpi-nccl \
      >"$work/mpi-nccl-tp2.out" 2>"$work/mpi-nccl-tp2.err" && rc=0 || rc=$?
    msg=$(grep -m1 'verity: error: --tp-backend mpi-nccl: nccl: .*Duplicate GPU' "$work/mpi-nccl-tp2.err" || true)
    [[ $rc -ne 0 && $rc -ne 124 && -n $msg ]] && summary mpi-nccl-refuses-tp2-on-one-gpu ok "exit $rc: $msg" ||
      { tail -8 "$work/mpi-nccl-tp2.err"; summary mpi-nccl-refuses-tp2-on-one-gpu FAIL "exit $rc without NCCL's named refusal"; }
  fi
fi
# 6. The ledger steps last: each submit loads the 1B model 20-60 times, so on
# a device session's 10-minute call they are what a timeout cuts, after every
# target's figure above is already printed.
# A submit's --json result in one line: its verdict, gain and bounds (n/a
# where it has none, as a refused or failed change), rounds and note.
verdict_line() {
  python3 -c 'import json, sys
j = json.load(open(sys.argv[1]))
pct = lambda v: "n/a" if v is None else "%+.2f%%" % (100 * v)
ci = j.get("ci") or [None, None]
print("verdict=%s gain=%s ci=[%s, %s] rounds=%s %s" % (j["verdict"], pct(j.get("gain")), pct(ci[0]), pct(ci[1]),
                                                      j.get("rounds"), j.get("note") or ""))' "$1" 2>/dev/null || true
}

# A submit takes 10 to 30 ABBA rounds (the policy's floors: `--max-rounds`
# may not go below 30), so a ledger step starts only where its first look
# (10 rounds and 15 s of warm-up and parity) fits the budget's time left,
# and runs under `timeout` for at most what is left: cut, it says so by name.
time_left() { echo $((budget - (SECONDS - start))); }
# round_cost ERR SINCE: the ABBA rounds a submit's stderr shows and what each
# cost with its warm-up and parity (the budget checks price them at 8 s and
# 25 s; the bench lines' phases say where a run's time goes).
round_cost() {
  local n
  n=$(grep -cE '^  round +[0-9]+/' "$1" 2>/dev/null || true)
  if ((${n:-0} > 0)); then echo "; $n rounds in $((SECONDS - $2)) s, $(((SECONDS - $2) / n)) s a round"
  else echo "; no round ran in $((SECONDS - $2)) s"; fi
}
cut=0  # ledger steps cut at the budget (timeout's status 124)
# 6a. The ledger on the GPU box: an A/A (the same command as base and head)
# must not find a change. stories260K, whose runs take a second (on the 1B
# the A/A needed 260 s of a device call, 2026-12-04); first, since it is
# cheap and checks the ledger itself: rounds priced at 8 s (unmeasured), at
# most 150 s, so the scored change keeps the rest.
if [[ -n ${DEVICE_CHECK_SKIP_LEDGER:-} ]]; then
  summary ledger-aa ok "skipped: DEVICE_CHECK_SKIP_LEDGER is set"
elif [[ -e $synth ]] && (($(time_left) < 10 * 8 + 15)); then
  summary ledger-aa ok "skipped: $(time_left) s of the ${budget}-s budget left, under its first look's 95 s"
elif [[ -e $synth ]]; then
  cmd="$bin bench --model $m --backend cuda --steps 64 --min-seconds 0.5"
  t=$(time_left)
  ((t > 150)) && t=150
  s0=$SECONDS
  timeout "$t" "$bin" submit --ledger "$work/gpu-ledger.db" --title "A/A: stories260K decode on the GPU" \
    --predict 0 --base-cmd "$cmd" --head-cmd "$cmd" --parity-cmd "$bin parity --model $m --backend cuda --json" \
    --json >"$work/aa.json" 2>"$work/aa.err" && rc=0 || rc=$?
  line=$(verdict_line "$work/aa.json") cost=$(round_cost "$work/aa.err" "$s0")
  if [[ $rc -eq 124 ]]; then
    cut=$((cut + 1)); summary ledger-aa ok "cut after ${t} s of the budget, before a verdict (see $work/aa.err)$cost"
  elif [[ $line == verdict=none* ]]; then
    summary ledger-aa ok "stories260K decode, the same command as base and head: $line$cost"
  else
    tail -8 "$work/aa.err"; summary ledger-aa FAIL "${line:-no verdict in $work/aa.json}"
  fi
fi
# 6b. One scored change on the GPU box: this build against $base_rev
# (DIR/base), the 1B bf16 decode. What changed its path since: the decode
# products as dependent launches (1.03x on the H200, pdl-1B of 2026-12-04)
# that ask L2 for whole rows where a launch's weights fit in half of it
# (l2-prefetch-1B; predicted 1.06x), together +9%; the families' attention
# arguments (no bit of a Llama's decode moved), nothing else that a bf16
# decode runs. Any verdict is a result; none is a FAIL. Rounds priced at
# 25 s (23 s on 2026-12-04: runs dominated by loading the model), so it
# starts with 265 s left.
# Without DIR/base (a build run) it is skipped by name.
if [[ -n ${DEVICE_CHECK_SKIP_LEDGER:-} ]]; then
  summary ledger-scored ok "skipped: DEVICE_CHECK_SKIP_LEDGER is set"
elif [[ -e $synth && -x ${dir}/base/verity ]] && (($(time_left) < 10 * 25 + 15)); then
  summary ledger-scored ok "skipped: $(time_left) s of the ${budget}-s budget left, under its first look's 265 s"
elif [[ -e $synth && -x ${dir}/base/verity ]]; then
  base="$dir/base/verity bench --model $synth --backend cuda --dtype bf16 --steps 64 --min-seconds 0.5"
  head="$bin bench --model $synth --backend cuda --dtype bf16 --steps 64 --min-seconds 0.5"
  t=$(time_left) s0=$SECONDS
  timeout "$t" "$bin" submit --ledger "$work/gpu-ledger.db" \
    --title "the 1B bf16 decode path since $base_rev (dependent launches, whole rows into L2)" \
    --predict 9 --base-cmd "$base" --head-cmd "$head" \
    --parity-cmd "$bin parity --model $m --backend cuda --dtype bf16 --json" --json >"$work/scored.json" \
    2>"$work/scored.err" && rc=0 || rc=$?
  line=$(verdict_line "$work/scored.json") cost=$(round_cost "$work/scored.err" "$s0")
  if [[ $rc -eq 124 ]]; then
    cut=$((cut + 1))
    summary ledger-scored ok "cut after ${t} s of the budget, before a verdict (see $work/scored.err)$cost"
  elif [[ $line == verdict=* && $line != verdict=failed* && $line != verdict=rejected-parity* ]]; then
    summary ledger-scored ok "1B bf16 decode, this build over $base_rev, predicted +9%: $line$cost"
  else
    tail -8 "$work/scored.err"; summary ledger-scored FAIL "${line:-no verdict in $work/scored.json}"
  fi
elif [[ -e $synth ]]; then
  summary ledger-scored ok "skipped: no $dir/base (only --prepare builds the base)"
fi
rm -rf "$synth"

# The whole check against issue 42's 8 minutes (a figure, as the targets).
summary check-time ok "$((SECONDS - start)) s for the whole check, ledger steps included, $cut cut at the budget \
(target 480 s with none cut: $( (((SECONDS - start) <= 480 && cut == 0)) && echo met || echo NOT met); budget ${budget} s; \
$(exploring && echo "with the experiments: DEVICE_CHECK_EXPLORE=0 runs the check alone" || echo "the check alone, DEVICE_CHECK_EXPLORE=0"))"
echo "device-check: logs in $work"
finish
