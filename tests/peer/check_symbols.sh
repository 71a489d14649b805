#!/usr/bin/env bash
# Every llama_*, ggml_* and gguf_* symbol HARNESS imports must be exported
# (defined, dynamic) by one of LIBS; prints the count, lists any missing one
# and exits 1 if there is.
#
#   tests/peer/check_symbols.sh HARNESS LIB...
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 HARNESS LIB..." >&2; exit 2; }
harness=$1
shift
used=$(nm -D --undefined-only "$harness" | awk '{ print $NF }' | sed 's/@.*//' | grep -E '^(llama|ggml|gguf)_' | sort -u)
[ -n "$used" ] || { echo "check_symbols: $harness imports no llama/ggml/gguf symbol (not linked against libllama?)" >&2; exit 1; }
exported=$(for lib in "$@"; do nm -D --defined-only "$lib" | awk '{ print $NF }'; done | sed 's/@.*//' | sort -u)
missing=$(comm -23 <(echo "$used") <(echo "$exported"))
n_used=$(echo "$used" | wc -l)
n_llama=$(echo "$used" | grep -c '^llama_' || true)
libs=$(for lib in "$@"; do basename "$lib"; done | paste -sd, -)
if [ -n "$missing" ]; then
  echo "llama.cpp peer symbols: $n_used used ($n_llama llama_*), $(echo "$missing" | wc -l) not exported by $libs:"
  echo "$missing" | sed 's/^/  /'
  exit 1
fi
echo "llama.cpp peer symbols: $n_used used ($n_llama llama_*), all $n_used exported by $libs, 0 missing"
