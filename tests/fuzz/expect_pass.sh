#!/usr/bin/env bash
# The ctest entry of one fuzz target: runs tests/fuzz/run_fuzz.sh and passes
# only if it exits 0 AND printed its summary line with runs > 0, crashes=0 and
# verdict=PASS for this target (either alone could hide a broken runner).
# usage: tests/fuzz/expect_pass.sh SOURCE_DIR BUILD_DIR SECONDS TARGET
set -uo pipefail
output=$("$(dirname "$0")/run_fuzz.sh" "$@")
rc=$?
printf '%s\n' "$output"
line="^fuzz: target=$4 seconds=[0-9]+ runs=[1-9][0-9]* crashes=0 verdict=PASS$"
if [ $rc -ne 0 ] || ! grep -qE "$line" <<<"$output"; then
  echo "expect_pass: run_fuzz.sh exited $rc; summary line matching '$line' $(grep -qE "$line" <<<"$output" && echo found || echo missing) verdict=FAIL"
  exit 1
fi
