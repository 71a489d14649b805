#!/usr/bin/env bash
# The CUDA backend on a real GPU (docs/cuda.md). Run it on a machine with an
# NVIDIA GPU (sized for an H200: under 8 minutes with 16 cores):
#
#   scripts/device-check.sh                    build in build-cuda/ (needs scripts/setup.sh's packages), then check
#   scripts/device-check.sh --prepare DIR      here, without a GPU: build, then copy the binaries and every
#                                              non-system shared library they need into DIR (to carry)
#   scripts/device-check.sh --prebuilt DIR     there: check with the binaries of DIR (no build)
#
# Steps, each printing one summary line: build; the GPU unit tests
# (CudaDevice.*, none may be skipped); verity parity --backend cuda against
# the CPU reference on stories260K (f32 and bf16, worst of the depths);
# compute-sanitizer memcheck on a short generation (0 errors); verity bench
# --backend cuda on stories260K and a ~1B-class synthetic model, decode tok/s
# also as a fraction of the device's peak memory bandwidth. The last line is
# `device-check: <n> steps, <k> failed, <s>s verdict=PASS|FAIL`.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
mode=build
dir=build-cuda
case "${1:-}" in
  --prepare) mode=prepare; dir=${2:?--prepare DIR}; dir=$(realpath -m "$dir") ;;
  --prebuilt) mode=prebuilt; dir=${2:?--prebuilt DIR}; dir=$(realpath "$dir") ;;
  "") ;;
  *) echo "usage: $0 [--prepare DIR | --prebuilt DIR]" >&2; exit 2 ;;
esac
tests=(cuda_backend_test cuda_plan_test cuda_elementwise_test cuda_checks_test)
start=$SECONDS
steps=0 failed=0
work=$(mktemp -d /tmp/device-check.XXXXXX)
summary() {  # summary NAME ok|FAIL DETAIL
  steps=$((steps + 1))
  [[ $2 == ok ]] || failed=$((failed + 1))
  echo "device-check: step $1: $2 $3 ($((SECONDS - start))s)"
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
    { grep -vE '/(libc|libm|libpthread|libdl|librt|ld-linux|libgcc_s|libstdc\+\+|libcuda|libcudart|libcublas|libcublasLt)\.so' || true; } |
    xargs -r -I{} cp -L {} "$dir/lib/"
  summary prepare ok "$(ls "$dir" | wc -l) files, $(du -sh "$dir" | cut -f1) in $dir (carry it; run --prebuilt $dir there)"
  finish
  exit $?
fi

if [[ $mode == build ]]; then
  build "$root/$dir" && summary build ok "CUDA backend ON in $dir" || { summary build FAIL "see $work"; finish; exit 1; }
  bin=$root/$dir/cli/verity; [[ -x $bin ]] || bin=$root/$dir/verity
  tdir=$root/$dir/tests
else
  export LD_LIBRARY_PATH=$dir/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  bin=$dir/verity tdir=$dir
  missing=$(ldd "$bin" "$dir"/libverity_*.so "$dir/cuda_backend_test" | grep -c "not found" || true)
  [[ $missing -eq 0 ]] && summary libraries ok "every shared library found" ||
    { ldd "$bin" "$dir"/libverity_*.so | grep "not found"; summary libraries FAIL "$missing not found"; finish; exit 1; }
fi
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
export VERITY_SOURCE_DIR=$root

# 1. Unit tests: the CPU ones, and the GPU ones (none may skip: a skip means no device).
for t in cuda_plan_test cuda_elementwise_test cuda_checks_test; do
  (cd "$root" && "$tdir/$t" >"$work/$t.log" 2>&1) && summary "$t" ok "$(grep -cE '^\[       OK \]' "$work/$t.log") passed" ||
    { tail -20 "$work/$t.log"; summary "$t" FAIL "see $work/$t.log"; }
done
if (cd "$root" && "$tdir/cuda_backend_test" --gtest_filter='CudaDevice.*' >"$work/gpu.log" 2>&1); then
  passed=$(grep -cE '^\[       OK \] CudaDevice' "$work/gpu.log" || true)
  skipped=$({ grep -oE '^\[  SKIPPED \] CudaDevice\.[A-Za-z0-9_]+' "$work/gpu.log" || true; } | sort -u | wc -l)
  grep "^cuda device:" "$work/gpu.log" || true
  [[ $passed -ge 5 && $skipped -eq 0 ]] && summary gpu-tests ok "$passed CudaDevice tests passed, 0 skipped" ||
    summary gpu-tests FAIL "$passed passed, $skipped skipped (a skip means no device)"
else
  tail -30 "$work/gpu.log"; summary gpu-tests FAIL "see $work/gpu.log"
fi

# 2. Parity against the CPU reference, worst of the depths.
m=$root/models/stories260K.bin tok=$root/models/tok512.bin
for dt in f32 bf16; do
  if "$bin" parity --model "$m" --backend cuda --dtype "$dt" >"$work/parity-$dt.log" 2>&1; then :; fi
  line=$(grep -E '^parity: worst_top1=' "$work/parity-$dt.log" | tail -1 || true)
  [[ $line == *verdict=PASS* ]] && summary "parity-$dt" ok "$line" ||
    { tail -15 "$work/parity-$dt.log"; summary "parity-$dt" FAIL "${line:-no summary line}"; }
done

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

# 4. Bench: stories260K and a ~1B-class synthetic model (TinyLlama's shape), bf16.
peak=$("$bin" generate --model "$m" --tokenizer "$tok" --steps 2 --backend cuda 2>&1 >/dev/null |
  grep -oE 'peak memory bandwidth [0-9.]+' | grep -oE '[0-9.]+$' || true)
bench() {  # bench NAME MODEL DTYPE STEPS
  if "$bin" bench --model "$2" --backend cuda --dtype "$3" --steps "$4" --min-seconds 1 --output json \
      >"$work/bench-$1.json" 2>"$work/bench-$1.err"; then
    /usr/bin/env python3 - "$work/bench-$1.json" "${peak:-0}" "$1" "$3" <<'EOF' && summary "bench-$1" ok "$(cat "$work/bench-$1.line")" ||
import json, sys
j = json.load(open(sys.argv[1]))
m, roof = j["metrics"], j["roofline"]
peak = float(sys.argv[2])
frac = roof["achieved_gb_s"] / peak if peak > 0 else float("nan")
line = (f"{sys.argv[3]} {sys.argv[4]}: decode {m['decode_tok_s']:.1f} tok/s, prefill {m['prefill_tok_s']:.1f} tok/s, "
        f"{roof['bytes_per_token'] / 1e6:.1f} MB/token, {roof['achieved_gb_s']:.1f} GB/s = {100 * frac:.2f}% of "
        f"{peak:.0f} GB/s peak memory bandwidth")
open(sys.argv[1][:-len(".json")] + ".line", "w").write(line)
sys.exit(0 if m["decode_tok_s"] > 0 and peak > 0 else 1)
EOF
      summary "bench-$1" FAIL "bad result: $(head -c 300 "$work/bench-$1.json")"
  else
    tail -10 "$work/bench-$1.err"; summary "bench-$1" FAIL "see $work/bench-$1.err"
  fi
}
before=$failed
bench stories260K "$m" f32 64
synth=$work/synth-1b.bin
if [[ $failed -ne $before ]]; then
  summary bench-synth-1B FAIL "not run: the stories260K bench failed"
elif "$bin" synth --out "$synth" --config '{"dim":2048,"hidden_dim":5632,"n_layers":22,"n_heads":32,"n_kv_heads":4,"vocab_size":32000,"seq_len":256,"shared_classifier":false}' \
    >"$work/synth.log" 2>&1; then
  bench synth-1B "$synth" bf16 64
else
  tail -5 "$work/synth.log"; summary bench-synth-1B FAIL "verity synth failed"
fi
rm -f "$synth"
echo "device-check: logs in $work"
finish
