#!/usr/bin/env bash
# The whole test suite, from a fresh Debian machine (as root): installs what is missing, builds
# with warnings as errors, runs every ctest. Used by the README and by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs=(cmake g++ ninja-build catch2 libfmt-dev nlohmann-json3-dev libbenchmark-dev libcli11-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
fi
cmake -S . -B build -G Ninja -DPIPESCHED_WERROR=ON
cmake --build build -j2
ctest --test-dir build -j2 --output-on-failure
