#!/usr/bin/env bash
# Regenerates the pinned reference logits of the shipped model,
# models/stories260K.ref-logits.bin (format: docs/parity.md), with the
# independent float64 NumPy forward (tests/reference/llama_ref.py): 512 tokens,
# BOS then the reference's own greedy choices to the end of the context, and
# the rows of every position a default parity run scores (7 depths x 8 and
# deep's 14 x 16: 224 rows, ~460 KB). Deterministic: one BLAS thread, fixed
# order of every sum; rerunning it rewrites the same bytes on the same NumPy.
# usage: scripts/make-reference-logits.sh [OUT]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-models/stories260K.ref-logits.bin}
OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 \
  /usr/bin/python3 tests/reference/llama_ref.py models/stories260K.bin --greedy 512 \
  --model-name models/stories260K.bin --out "$out"
