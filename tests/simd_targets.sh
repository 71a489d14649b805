#!/usr/bin/env bash
# Every SIMD target this host runs, one at a time under VERITY_SIMD_TARGET's
# cap (base/env.h): the kernel, SIMD and dtype parity suites, and a real
# `verity bench` that must report the capped target as the one it ran. The
# normal suite covers only the best target; a CPU of another kind dispatches
# to another, so each one must pass here. Also: a name the build does not
# hold is refused with exit 2, naming it.
# Usage: simd_targets.sh SOURCE_DIR BUILD_DIR. Exits 0 only after its summary line.
set -uo pipefail
src=$1 build=$2
v=$build/cli/verity
fail() { echo "simd targets: FAIL: $*"; exit 1; }

# The targets this host runs, best first: simd_test instantiates one suite per target.
mapfile -t targets < <(env -u VERITY_SIMD_TARGET "$build/kernels/simd_test" --gtest_list_tests |
  sed -nE 's#^  DispatchesToTheForcedTarget/([A-Z0-9_]+)( .*)?$#\1#p')
[ ${#targets[@]} -gt 0 ] || fail "simd_test listed no targets"

err=$(VERITY_SIMD_TARGET=NO_SUCH_TARGET "$v" bench --model "$src/models/stories260K.bin" --steps 8 2>&1 >/dev/null)
rc=$?
[ $rc -eq 2 ] || fail "VERITY_SIMD_TARGET=NO_SUCH_TARGET exited $rc, expected 2"
grep -q "VERITY_SIMD_TARGET=NO_SUCH_TARGET: not a target of this build" <<<"$err" || fail "no error naming the value: $err"

passed=0 failed=0
for t in "${targets[@]}"; do
  echo "== VERITY_SIMD_TARGET=$t"
  ok=1
  export VERITY_SIMD_TARGET=$t
  out=$("$build/kernels/simd_test" 2>&1) || { echo "$out" | tail -n 30; ok=0; }
  grep -q "simd: dispatching to $t " <<<"$out" || { echo "simd_test did not dispatch to $t"; ok=0; }
  "$build/kernels/kernels_test" --gtest_filter='Kernels.*' >/tmp/simd_targets.$$ 2>&1 || { tail -n 30 /tmp/simd_targets.$$; ok=0; }
  "$build/tests/dtype_test" --gtest_filter='DType.*' >/tmp/simd_targets.$$ 2>&1 || { tail -n 30 /tmp/simd_targets.$$; ok=0; }
  ran=$(VERITY_THREADS=1 "$v" bench --model "$src/models/stories260K.bin" --steps 32 --min-seconds 0 2>/dev/null |
    /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["kernels"]["simd_target"])')
  [ "$ran" = "$t" ] || { echo "verity bench ran $ran, not $t"; ok=0; }
  if [ $ok -eq 1 ]; then passed=$((passed + 1)); echo "   $t: pass"; else failed=$((failed + 1)); echo "   $t: FAIL"; fi
done
rm -f /tmp/simd_targets.$$
echo "simd targets: ${#targets[@]} targets (${targets[*]}), $passed passed, $failed failed"
[ $failed -eq 0 ] && [ $passed -eq ${#targets[@]} ]
