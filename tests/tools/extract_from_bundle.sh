#!/usr/bin/env bash
# Extracts files of the llama.cpp release node-llama-cpp ships as
# llama/gitRelease.bundle (tests/npm, scripts/setup.sh) into OUT, for the
# tests that use them: the peer harness its public headers, the Jinja
# conformance test the real chat templates. Never committed: they are not
# ours. Re-extracts only when the bundle's HEAD changes (OUT/.bundle-head
# records it) or a PATH is missing; fails when a PATH is not in the bundle.
#
#   tests/tools/extract_from_bundle.sh BUNDLE OUT PATH...
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 BUNDLE OUT PATH..." >&2; exit 2; }
bundle=$1 out=$2
shift 2
[ -f "$bundle" ] || { echo "extract_from_bundle: $bundle is missing (scripts/setup.sh installs tests/npm)" >&2; exit 1; }
head=$(git bundle list-heads "$bundle" | awk '$2 == "HEAD" { print $1 }')
[ -n "$head" ] || { echo "extract_from_bundle: $bundle has no HEAD ref" >&2; exit 1; }
have=1
for p in "$@"; do [ -e "$out/$p" ] || have=0; done
if [ "$have" -eq 1 ] && [ -f "$out/.bundle-head" ] && [ "$(cat "$out/.bundle-head")" = "$head" ]; then
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git init -q --bare "$tmp/repo"
git -C "$tmp/repo" fetch -q "$(realpath "$bundle")" HEAD
rm -rf "$out"
mkdir -p "$out"
git -C "$tmp/repo" archive FETCH_HEAD "$@" | tar -x -C "$out"
for p in "$@"; do
  [ -e "$out/$p" ] || { echo "extract_from_bundle: $bundle lacks $p" >&2; exit 1; }
done
echo "$head" > "$out/.bundle-head"
echo "extract_from_bundle: $* of $head -> $out"
