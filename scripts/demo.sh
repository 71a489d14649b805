#!/usr/bin/env bash
# The README's main command: build, then tell a story with the shipped model.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh >/dev/null
echo "== greedy story from models/stories260K.bin (fast backend) =="
build/cli/verity generate --model models/stories260K.bin --tokenizer models/tok512.bin \
  --steps 200 --temperature 0
