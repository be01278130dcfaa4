#!/usr/bin/env bash
# Compares Google Benchmark programs built from different commits, on one machine, in one run:
#
#   scripts/bench_compare.sh ROUNDS 'FILTER ...' NAME=BINARY NAME=BINARY ...
#
# Each (benchmark, binary) runs in a process of its own (so one benchmark's allocations do not
# shape the next one's heap), 5 repetitions, keeping the least CPU time; the binaries alternate
# within each round, so both see the same machine. Prints, per benchmark, the median over the
# rounds of those minima, in the benchmark's unit, and the ratio to the first binary.
# A FILTER is a benchmark name without its /min_time suffix, e.g. simulate/zb-v/p:32/m:256.
# docs/benchmarks.md §6 gives the commands used there.
set -euo pipefail
if [ $# -lt 3 ]; then
  sed -n '2,11p' "$0" >&2
  exit 2
fi
rounds=$1
filters=$2
shift 2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for _ in $(seq "$rounds"); do
  for f in $filters; do
    for nb in "$@"; do
      name=${nb%%=*}
      bin=${nb#*=}
      t=$("$bin" --benchmark_filter="^$f/min_time" --benchmark_repetitions=5 \
        --benchmark_format=json 2>/dev/null | python3 -c '
import json, sys
runs = [b["cpu_time"] for b in json.load(sys.stdin)["benchmarks"] if b.get("run_type") == "iteration"]
print(min(runs) if runs else "none")')
      if [ "$t" = none ]; then
        echo "bench_compare: $bin has no benchmark $f" >&2
        exit 1
      fi
      echo "$f $name $t" >>"$out"
    done
  done
done
python3 - "$out" <<'PY'
import collections, statistics, sys
times = collections.defaultdict(list)
filters, names = [], []
for line in open(sys.argv[1]):
    f, n, t = line.split()
    times[(f, n)].append(float(t))
    if f not in filters:
        filters.append(f)
    if n not in names:
        names.append(n)
for f in filters:
    med = {n: statistics.median(times[(f, n)]) for n in names}
    cells = [f"{n} {med[n]:.0f} ({med[n] / med[names[0]]:.2f})" for n in names]
    print(f"{f:45s}  " + "  ".join(cells))
PY
