#!/usr/bin/env bash
# The whole test suite, from a fresh Debian machine (as root): installs what is missing, then
#  1. a warnings-as-errors build (-O1) and every ctest (unit, cli, examples, package,
#     MPI and libtorch: both are required here, though optional for a plain build);
#  2. the unit tests again under AddressSanitizer + UndefinedBehaviorSanitizer;
#  3. the threaded code (tests tagged [exec]: drivers, the two-thread zb-auto search) under
#     ThreadSanitizer;
#  4. the libFuzzer targets (scripts/fuzz.sh), a bounded time each.
# Before all of them, clang-format on every tracked C++ file (seconds; fails fast).
# Used by the README and by .ci/run. Set PIPESCHED_QUICK=1 to run only step 1.
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs=(cmake g++ ninja-build catch2 libfmt-dev nlohmann-json3-dev libbenchmark-dev libcli11-dev
      clang-format openmpi-bin libopenmpi-dev clang libclang-rt-14-dev libtorch-dev
      pybind11-dev python3-dev python3-pytest python3-numpy)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing: ${missing[*]}"
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
fi
jobs=2
start=$SECONDS

echo "== 0/4 clang-format"
git ls-files '*.hpp' '*.cpp' | xargs clang-format --dry-run --Werror

echo "== 1/4 build (Werror) and all tests"
# The Python module is built against Debian's python3 (the one python3-pytest serves). -O1
# without debug information: the suite's build is most of its time, and this one is only run
# (a unit-test batch: 54-63 s of CPU against 80-85 s at the default -O2 -g1, back to back); the
# README's first command builds the default.
cmake -S . -B build -G Ninja -DPIPESCHED_WERROR=ON -DPIPESCHED_UNITY_TESTS=ON \
  -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG" \
  -DPIPESCHED_PYTHON=ON -DPython3_EXECUTABLE=/usr/bin/python3
cmake --build build -j$jobs
# Stages 3 and 4 build from here on, in the background at the lowest priority (nice 19): the
# TSan build (99 s of CPU) and the fuzz targets' (68 s) take the cores' idle time, which this
# ctest (about 54 core-seconds: the MPI tests hold both slots), stage 2's tails and stage 3's
# run (22 s of wall for 4.5 s of CPU: its cases wait on timeouts) leave, while every test
# process comes first (docs/benchmarks.md §12.3).
bg_builds=()
kill_tree() {  # on a failure, no build left running into the next run's directories
  local child
  for child in $(cat /proc/"$1"/task/*/children 2>/dev/null); do kill_tree "$child"; done
  kill "$1" 2>/dev/null || true
}
trap 'for p in "${bg_builds[@]}"; do kill_tree "$p"; done' EXIT
with_tsan=0
grep -q '\[exec\]' tests/exec/*.cpp 2>/dev/null && with_tsan=1
if [ "${PIPESCHED_QUICK:-0}" != 1 ]; then
  mkdir -p build-tsan build-fuzz
  if [ $with_tsan = 1 ]; then
    nice -n 19 sh -c 'cmake -S . -B build-tsan -G Ninja -DCMAKE_CXX_COMPILER=clang++ \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPIPESCHED_WERROR=ON -DPIPESCHED_UNITY_TESTS=ON \
      -DPIPESCHED_SANITIZE=thread -DPIPESCHED_BUILD_BENCH=OFF \
      -DPIPESCHED_BUILD_EXAMPLES=OFF -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON &&
      cmake --build build-tsan -j2 --target pipesched_exec_tests' >build-tsan/build.log 2>&1 &
    tsan_build=$!
    bg_builds+=($tsan_build)
  fi
  nice -n 19 scripts/fuzz.sh --build-only >build-fuzz/build.log 2>&1 &
  fuzz_build=$!
  bg_builds+=($fuzz_build)
fi
ctest --test-dir build -j$jobs --output-on-failure
# The MPI ctests (label mpi) ran above; make sure MPI was not silently skipped.
ctest --test-dir build -N -L mpi | grep -q "Total Tests: [1-9]" || { echo "MPI tests missing"; exit 1; }
# Likewise the libtorch ctests (label torch, examples/torch_pipeline).
ctest --test-dir build -N -L torch | grep -q "Total Tests: [1-9]" || { echo "libtorch tests missing"; exit 1; }
# Likewise the Python module's pytest suite (label python).
ctest --test-dir build -N -L python | grep -q "Total Tests: [1-9]" || { echo "Python tests missing"; exit 1; }

if [ "${PIPESCHED_QUICK:-0}" = 1 ]; then
  echo "== done (quick) in $((SECONDS - start)) s"
  exit 0
fi

echo "== 2/4 unit tests under ASan + UBSan (at $((SECONDS - start)) s)"
# Stages 2 and 3 build with clang: it compiles a Debug ASan + UBSan test file in less than
# half g++'s time (tests/gen/test_registry.cpp: 44 s against 99 s), and step 1 already builds
# everything warnings-as-errors with g++, so both compilers are checked. Steps 1 and 3 link the
# compiled library; this one builds the unit tests header-only (PIPESCHED_HEADER_ONLY), so both
# modes are built and tested without a build of their own. -O1 (asserts on, as Debug): the
# sanitizers' own advice, and it runs the tests several times faster than -O0.
cmake -S . -B build-asan -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_CXX_FLAGS_DEBUG=-O1 -DPIPESCHED_WERROR=ON -DPIPESCHED_UNITY_TESTS=ON \
  -DPIPESCHED_HEADER_ONLY=ON -DPIPESCHED_SANITIZE=address,undefined -DPIPESCHED_BUILD_BENCH=OFF \
  -DPIPESCHED_BUILD_EXAMPLES=OFF -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON
cmake --build build-asan -j$jobs --target pipesched_tests
# Every test case that step 1's ctest runs as its own process (label unit), here in eight
# processes, two at a time (an ASan binary's start costs about a second of CPU: 550 times over
# under ctest, 8 times here). The cases are dealt by the times step 1's ctest recorded, longest
# first, into eight parts of equal time (scripts/shard_tests.py) that the two cores take in
# turn: the sanitizers slow some cases more than others (the planner's searches about 5 times,
# the cases that wait on timeouts not at all), so fixed halves end far apart, where parts taken
# from a queue end within about one part (docs/benchmarks.md §12.2). Left out, as before:
# three sweeps (the zb-auto grid, the authors' 124 reference rows, the zb schedulers over cost
# and memory scales 1e-9..1e12) that take most of the stage's CPU while adding no code path the
# smaller zb tests don't run, and the property sweeps of the planner and of pack (dozens of
# whole plan or pack searches over random jobs and length mixes; 75 s of this stage's 240 for
# pack's two), whose code paths test_planner's and test_pack's other cases run here; step 1
# runs them in full.
asan_tests=build-asan/bin/pipesched_tests
asan_parts=8
rm -f build-asan/unit_tests_*  # no part of an earlier run read as this one's
# (Catch's list exits with the number of test cases.) --durations prints each case as it ends,
# so a sanitizer's abort is placed after the last one.
{ "$asan_tests" --list-test-names-only || true; } | grep -v '^$' |
  grep -v -E "^(zb-auto grid: valid, counts, never above the limit|zb search against the authors' published results|zb schedulers: every schedule within its limit for cost scales|plan: properties over random small jobs|pack: more memory or faster links never give a slower result|pack: over the length mixes never slower than the naive baseline)" |
  python3 scripts/shard_tests.py build/Testing/Temporary/CTestCostData.txt $asan_parts \
    build-asan/unit_tests
asan_status=0
seq 0 $((asan_parts - 1)) | xargs -P $jobs -I{} sh -c \
  'timeout 1800 "$0" -f build-asan/unit_tests_$1.txt --durations yes >build-asan/unit_tests_$1.log 2>&1' \
  "$asan_tests" {} || asan_status=1
if [ $asan_status != 0 ]; then
  cat build-asan/unit_tests_*.log
  exit 1
fi
grep -h "^All tests passed" build-asan/unit_tests_*.log

echo "== 3/4 threaded code under TSan (at $((SECONDS - start)) s)"
if [ $with_tsan = 1 ]; then
  wait $tsan_build || { cat build-tsan/build.log; exit 1; }
  build-tsan/bin/pipesched_exec_tests '[exec]'
else
  echo "(no [exec] tests yet)"
fi

# The three targets run side by side on the two cores: 15 s each is the CPU that 10 s each one
# after the other had.
echo "== 4/4 fuzz (libFuzzer, 15 s per target, side by side; at $((SECONDS - start)) s)"
wait $fuzz_build || { cat build-fuzz/build.log; exit 1; }
PIPESCHED_FUZZ_SECONDS=${PIPESCHED_FUZZ_SECONDS:-15} scripts/fuzz.sh

echo "== all checks passed in $((SECONDS - start)) s"
