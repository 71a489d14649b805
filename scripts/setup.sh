#!/usr/bin/env bash
# Installs the Debian packages verity builds with, only those that are missing.
set -euo pipefail
pkgs=(cmake g++ make libcli11-dev nlohmann-json3-dev libsqlite3-dev sqlite3 libssl-dev
      libgtest-dev libgmock-dev googletest libbenchmark-dev libhwy-dev clang libclang-rt-14-dev ccache python3)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#pkgs[@]} packages present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
echo "setup: installed ${#missing[@]} packages"
