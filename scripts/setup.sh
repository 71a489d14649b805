#!/usr/bin/env bash
# Installs the Debian packages verity builds with, only those that are missing.
set -euo pipefail
pkgs=(cmake g++ make libcli11-dev python3-jinja2 libtomlplusplus-dev nlohmann-json3-dev libsqlite3-dev sqlite3 libssl-dev
      libgtest-dev libgmock-dev googletest libbenchmark-dev libhwy-dev clang libclang-rt-14-dev ccache python3
      libsentencepiece-dev python3-sentencepiece python3-numpy nodejs libpcre2-dev pkg-config libopenmpi-dev openmpi-bin
      librsvg2-bin hyperfine binutils clang-format libcpp-httplib-dev cmark-gfm chromium postgresql libpq-dev
      libutf8proc-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#pkgs[@]} Debian packages present"
else
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
  echo "setup: installed ${#missing[@]} Debian packages"
fi
# The independent implementations the conformance tests compare against
# (tokenizers, GGUF parser, llama.cpp's prebuilt libllama and its source
# bundle), pinned by tests/npm/package-lock.json. --ignore-scripts: only
# node-llama-cpp has an install script, and it would download or compile
# llama.cpp; the tests use its files as shipped. --omit=optional: its optional
# prebuilt packages (CUDA, Vulkan, other platforms; ~600 MB) are not used; the
# CPU one we use is a direct dependency.
command -v npm >/dev/null || { echo "setup: npm not found (the image's Node.js provides it)" >&2; exit 1; }
npm ci --prefix "$(dirname "$0")/../tests/npm" --omit=optional --ignore-scripts --no-audit --no-fund --loglevel=error
echo "setup: npm packages installed in tests/npm/node_modules"
