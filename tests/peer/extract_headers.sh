#!/usr/bin/env bash
# Extracts llama.cpp's public headers (include/llama.h and ggml/include/*.h,
# which it includes) from node-llama-cpp's gitRelease.bundle into OUT, so the
# peer harness compiles against the headers of the release whose prebuilt
# libllama it links. Never committed: the code is not ours. Re-extracts only
# when the bundle's HEAD changes (OUT/.bundle-head records it).
#
#   tests/peer/extract_headers.sh BUNDLE OUT
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 BUNDLE OUT" >&2; exit 2; }
bundle=$1 out=$2
[ -f "$bundle" ] || { echo "extract_headers: $bundle is missing (scripts/setup.sh installs tests/npm)" >&2; exit 1; }
head=$(git bundle list-heads "$bundle" | awk '$2 == "HEAD" { print $1 }')
[ -n "$head" ] || { echo "extract_headers: $bundle has no HEAD ref" >&2; exit 1; }
if [ -f "$out/.bundle-head" ] && [ "$(cat "$out/.bundle-head")" = "$head" ] && [ -f "$out/include/llama.h" ]; then
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git init -q --bare "$tmp/repo"
git -C "$tmp/repo" fetch -q "$(realpath "$bundle")" HEAD
rm -rf "$out"
mkdir -p "$out"
git -C "$tmp/repo" archive FETCH_HEAD include/llama.h ggml/include | tar -x -C "$out"
[ -f "$out/include/llama.h" ] && [ -f "$out/ggml/include/ggml.h" ] ||
  { echo "extract_headers: $bundle lacks include/llama.h or ggml/include/ggml.h" >&2; exit 1; }
echo "$head" > "$out/.bundle-head"
echo "extract_headers: llama.cpp headers of $head -> $out ($(ls "$out/ggml/include" | wc -l) ggml headers)"
