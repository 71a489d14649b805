#!/usr/bin/env bash
# The README's main command: build verity, then score a real story of engine
# changes into a fresh ledger -- backend flags, a corrupted build, a revert, a
# retraction, and one real optimization commit of this repository rebuilt from
# git against its parent -- and write its changelog.
#
# Every measurement is real: `verity bench` runs of the shipped stories260K
# model on this box, interleaved ABBA by the ledger, gated by `verity parity`.
set -euo pipefail
cd "$(dirname "$0")/.."
out=out/demo
model=models/stories260K.bin
corrupt=attention-stale-past-128

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
field() { sed -nE "s/^[a-z]+: .*\b$1=([^ ]+).*/\1/p" | head -n 1; }

say "building verity (scripts/build.sh)"
scripts/build.sh >/dev/null
v=build/cli/verity
rm -rf "$out" && mkdir -p "$out"
export VERITY_LEDGER="$out/verity.db" VERITY_THREADS=1
bench() { echo "VERITY_THREADS=${2:-1} $1 bench --model $model --steps 512 --backend ${3:-fast}"; }
parity() { echo "$1 parity --model $model --backend ${2:-fast} --json"; }

say "building a deliberately corrupted engine in the background (-DVERITY_CORRUPTION=$corrupt)"
( cmake -S . -B build-corruption-$corrupt -DCMAKE_BUILD_TYPE=Release -DVERITY_CORRUPTION=$corrupt >/dev/null 2>&1 &&
  cmake --build build-corruption-$corrupt --target verity -j"$(nproc)" >"$out/corrupt-build.log" 2>&1 ) &
builder=$!

say "1. a change too small to matter, measured while that build shares the 2 cores (a bad measurement)"
echo "   The reference path reading VERITY_THREADS changes no kernel: predicted +0.5%."
echo "   This first submission to an empty ledger seeds the frontier from its base: the reference kernels."
r1=$($v submit --title "Reference path reads VERITY_THREADS (no kernel change)" --author demo --predict 0.5 \
  --base-cmd "$(bench $v 1 reference)" --head-cmd "$(bench $v 2 reference)" \
  --parity-cmd "$(parity $v reference)")
echo "$r1"
tiny_run=$(echo "$r1" | field run)
tiny_change=$(echo "$r1" | field change)

wait $builder || { echo "corrupted build failed, see $out/corrupt-build.log"; exit 1; }

say "2. the fast path (8-lane dot products, pooled threads): predicted +15% over the reference kernels"
r2=$($v submit --title "Fast CPU kernels" --author demo --predict 15 --claim 15 \
  --base-cmd "$(bench $v 1 reference)" --head-cmd "$(bench $v 1 fast)" \
  --parity-cmd "$(parity $v fast)")
echo "$r2"
fast_change=$(echo "$r2" | field change)
if [ "$(echo "$r2" | field verdict)" = held-surprise ]; then
  say "   the result surprised its prediction: confirming with deep parity (VERITY_PARITY_MODE=deep)"
  $v confirm "$fast_change"
fi

say "3. a corrupted build that skips attention past 128 positions: far faster, and wrong"
echo "   The ledger runs its parity first; its bench command must never run."
$v submit --title "Skip attention past 128 positions (corrupted)" --author demo --predict 30 \
  --base-cmd "$(bench $v)" --head-cmd "touch $out/corrupt-bench-ran; $(bench build-corruption-$corrupt/cli/verity)" \
  --parity-cmd "$(parity build-corruption-$corrupt/cli/verity)"
[ ! -e "$out/corrupt-bench-ran" ] && echo "   (confirmed: the corrupted build's bench command never ran)"

say "4. a revert of the fast path with weak evidence: main without it is not faster"
$v revert "$fast_change" --reason "suspected it slows short prompts" \
  --base-cmd "$(bench $v 1 fast)" --head-cmd "$(bench $v 1 reference)" --parity-cmd "$(parity $v reference)"

say "5. the frontier moved: the parked change is re-measured against it"
rem=$($v remeasure)
echo "$rem"
remeasure_run=$(echo "$rem" | grep "^remeasure: change=$tiny_change " | field run)

say "6. the first measurement of the parked change was taken during a compile: retract it"
$v retract "$tiny_run" --reason "measured while cmake --build of the corrupted engine ran on the same 2 cores" \
  ${remeasure_run:+--replaced-by "$remeasure_run"}

say "7. real history: commit ede8f83 of this repository against its parent, built from git (the ref flow)"
echo "   The project's own ledger (reports/ledger.db) measured this change at +44.8% on stories260K;"
echo "   here it is rebuilt from its commit and scored again on this box: predicted +40%."
echo "   256 steps instead of 512: another workload, so it is judged on its own frontier."
$v submit --title "Fast attention: value sums in 16/8/4-wide chunks (ede8f83)" --author demo --predict 40 \
  --base ede8f83~1 --head ede8f83 --model "$model" --steps 256

say "the ledger's own checks"
verify_out=$($v ledger verify)
echo "$verify_out"
tip=$(echo "$verify_out" | sed -nE 's/.*tip=([0-9a-f]+|genesis).*/\1/p')
$v ledger verify --expect-tip "$tip" >/dev/null || { echo "ledger verify --expect-tip $tip failed"; exit 1; }
echo "   (a reader who noted tip ${tip:0:16} detects truncation with: verity ledger verify --expect-tip <tip>)"
$v frontier

say "changelog"
$v report --out "$out/CHANGELOG.md"
echo
echo "Done. The changelog is $out/CHANGELOG.md (chart beside it); the ledger is $VERITY_LEDGER."
