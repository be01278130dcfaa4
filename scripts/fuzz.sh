#!/usr/bin/env bash
# Fuzzing stage: builds the libFuzzer targets (tests/fuzz/fuzz_*.cpp) with clang++,
# ASan and UBSan, replays each committed seed corpus, then fuzzes each target for
# PIPESCHED_FUZZ_SECONDS seconds (default 25), the targets side by side. Fails on any finding: a crash, a sanitizer
# report, an exception other than pipesched::invalid_argument, a mismatch between validator,
# simulator and memory checker, a single allocation over 512 MB, RSS over 2 GB, or an input
# that takes over 10 s. Reproducers go to build-fuzz/findings/; new inputs to build-fuzz/work/.
# Reproduce one: build-fuzz/bin/fuzz_<name> build-fuzz/findings/<file>
# `scripts/fuzz.sh --build-only` configures and builds the targets and stops.
set -euo pipefail
cd "$(dirname "$0")/.."
build_only=0
[ "${1:-}" = --build-only ] && build_only=1
secs=${PIPESCHED_FUZZ_SECONDS:-25}
if ! command -v clang++ >/dev/null; then
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q clang libclang-rt-14-dev
fi
# Header-only: the three targets compile what they use (the compiled library would be built
# whole, for them alone).
cmake -S . -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPIPESCHED_FUZZ=ON -DPIPESCHED_WERROR=ON -DPIPESCHED_HEADER_ONLY=ON -DPIPESCHED_BUILD_TESTS=OFF \
  -DPIPESCHED_BUILD_EXAMPLES=OFF -DPIPESCHED_BUILD_BENCH=OFF -DPIPESCHED_INSTALL=OFF >/dev/null
cmake --build build-fuzz -j2
[ $build_only = 1 ] && exit 0
mkdir -p build-fuzz/findings
# The targets fuzz side by side (one process each; on 2 cores each gets about 2/3 of one), then
# report in order: a stage of N targets takes one target's time.
bins=(build-fuzz/bin/fuzz_*)
pids=()
for bin in "${bins[@]}"; do
  t=$(basename "$bin")
  mkdir -p "build-fuzz/work/$t"
  "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=512 \
    -max_len=4096 -print_final_stats=1 -artifact_prefix="build-fuzz/findings/$t-" \
    "build-fuzz/work/$t" "tests/fuzz/corpus/$t" >"build-fuzz/$t.log" 2>&1 &
  pids+=($!)
done
status=0
for i in "${!bins[@]}"; do
  t=$(basename "${bins[$i]}")
  log="build-fuzz/$t.log"
  if wait "${pids[$i]}"; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    echo "== fuzz $t: ${runs:-?} executions in ${secs} s, no findings"
  else
    echo "== fuzz $t: FINDING (log $log, reproducer in build-fuzz/findings/)"
    grep -E "ERROR|SUMMARY|fuzz_differential:|terminate|what\(\)" "$log" | head -20 || true
    status=1
  fi
done
exit $status
