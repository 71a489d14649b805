#!/usr/bin/env bash
# Proves the ISA check can fail: assembles isa_check_selftest.s (binutils as)
# and requires exactly the refusals below, and the accepted functions absent.
# Usage: isa_check_selftest.sh SOURCE_DIR. Exits 0 only after its summary line.
set -uo pipefail
src=$1
dir=$(mktemp -d) && trap 'rm -rf "$dir"' EXIT
as "$src/tests/tools/isa_check_selftest.s" -o "$dir/t.o" || { echo "isa check selftest: FAIL (as)"; exit 1; }
out=$(/usr/bin/python3 "$src/tests/tools/isa_check.py" --source-dir "$src" "$dir/t.o")
rc=$?
echo "$out"
expected=(
  "a::N_AVX2::evex() [AVX2] needs AVX512"
  "a::N_AVX2::prob() [AVX2] needs AVX512, AVX512_VNNI"
  "a::N_AVX3::bf16() [AVX3] needs AVX512_BF16"
  "a::N_AVX3_DL::amx() [AVX3_DL] needs AMX"
  "a::N_AVX3_DL::vex() [AVX3_DL] needs AVX_VNNI"
  "plain() [baseline] needs AVX2, SSSE3"
)
bad=0
for e in "${expected[@]}"; do
  grep -qF "  outside: t.o: $e" <<<"$out" || { echo "missing refusal: $e"; bad=1; }
done
grep -qE "outside: t.o: a::N_AVX(2|3_DL)::(fine|ok)\(\)" <<<"$out" && { echo "refused an instruction its target guarantees"; bad=1; }
grep -q "^isa check: 8 functions, 22 instructions, 7 outside their target's guarantee$" <<<"$out" || { echo "unexpected summary"; bad=1; }
[ $rc -eq 1 ] || { echo "exit $rc, expected 1"; bad=1; }
if [ $bad -eq 0 ]; then echo "isa check selftest: 7 refusals as expected, 2 functions accepted: PASS"; else echo "isa check selftest: FAIL"; exit 1; fi
