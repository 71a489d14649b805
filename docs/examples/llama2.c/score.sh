#!/usr/bin/env bash
# Scores six real commits of karpathy/llama2.c's run.c against their parents
# into docs/examples/llama2.c/ledger.db, then regenerates its CHANGELOG.md.
# The history comes from the git bundle in the shared folder (cloned afresh
# into a temporary directory); docs/examples/llama2.c/verity.toml says how to
# build, bench and check each ref. Run from verity's checkout, after a build:
#
#   docs/examples/llama2.c/score.sh            # submit all six, then report
#   docs/examples/llama2.c/score.sh report     # only verify and regenerate
#
# The predictions were written before any of these runs, from reading each
# diff (README.md says why each one is what it is).
set -euo pipefail
cd "$(dirname "$0")/../../.."
v=build/cli/verity
here=docs/examples/llama2.c
ledger=$here/ledger.db
bundle=${VERITY_LLAMA2C_BUNDLE:-../shared/peers/llama2.c.bundle}

report() {
  "$v" ledger verify --ledger "$ledger"
  "$v" report --ledger "$ledger" --out "$here/CHANGELOG.md"
}

if [ "${1:-}" != report ]; then
  repo=$(mktemp -d)/llama2.c
  git clone -q "$bundle" "$repo"
  submit() {  # COMMIT PREDICT_PCT TITLE
    "$v" submit --ledger "$ledger" --author "karpathy/llama2.c" --title "$3" --predict "$2" \
      --config "$here/verity.toml" --repo "$repo" --base "$1^" --head "$1" || true  # a rejection exits non-zero
  }
  submit 32c1ff9 0 "32c1ff9 run.c: k and v vectors sized kv_dim, not dim (memory only)"
  submit bd18228 -3 "bd18228 run.c: RoPE frequencies computed online instead of read from the checkpoint"
  submit ad7a1ef 0 "ad7a1ef run.c: SwiGLU in one loop"
  submit 9d73a37 0 "9d73a37 run.c: CLOCK_MONOTONIC for the tok/s timer"
  submit 38c58ac 0 "38c58ac run.c: revert CLOCK_MONOTONIC (back to CLOCK_REALTIME)"
  submit 593d846 1 "593d846 run.c: attention reads k and v straight from the KV cache"
fi
report
