#!/usr/bin/env bash
# Checks that every tracked C++ and CUDA source is formatted with the
# repository's .clang-format, changing nothing; names each file that is not.
# `scripts/format-check.sh --fix` formats them instead. Its last line is the
# summary the suite (format_check) requires.
set -euo pipefail
cd "$(dirname "$0")/.."
fix=0
[ "${1:-}" = "--fix" ] && fix=1
command -v clang-format >/dev/null || { echo "format check: clang-format is not installed (scripts/setup.sh)"; exit 1; }
version=$(clang-format --version | grep -oE '[0-9]+\.[0-9]+\.[0-9]+' | head -n1)
mapfile -t files < <(git ls-files '*.cc' '*.h' '*.cu' '*.cuh')
[ ${#files[@]} -gt 0 ] || { echo "format check: no tracked sources found (not a git checkout?)"; exit 1; }
bad=0
for f in "${files[@]}"; do
  if [ $fix -eq 1 ]; then
    clang-format -i "$f"
  elif ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "not formatted: $f (scripts/format-check.sh --fix)"
    bad=$((bad + 1))
  fi
done
if [ $fix -eq 1 ]; then
  echo "format: ${#files[@]} files formatted in place (clang-format $version)"
  exit 0
fi
echo "format check: ${#files[@]} files, $bad not formatted (clang-format $version)"
[ $bad -eq 0 ]
