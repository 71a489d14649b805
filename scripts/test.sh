#!/usr/bin/env bash
# The README's test command: build everything, then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
cd build
ctest --output-on-failure -j"$(nproc)" 2>&1 | tee ctest.log
# ctest's own summary line proves the suite ran; absence of it is failure.
grep -E "^100% tests passed, 0 tests failed out of [1-9][0-9]*" ctest.log
