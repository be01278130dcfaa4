#!/usr/bin/env python3
"""Deal Catch test cases to N parts of equal recorded time (scripts/test.sh, ASan stage).

Reads the test case names (one a line) on stdin and ctest's cost file of the warnings-as-errors
build (build/Testing/Temporary/CTestCostData.txt: "unit:<name> <runs> <seconds>" a line, the
unit ctests being one test case each), and writes PREFIX_0.txt .. PREFIX_{N-1}.txt as Catch test
specs (names escaped). Longest first, each to the part with the least time so far; the
sanitizers slow cases by different factors, so scripts/test.sh runs more parts than cores and
the cores take them in turn. A case without a recorded time counts as the median's. Prints each
part's cases and recorded seconds.
"""
import re
import statistics
import sys


def main() -> int:
    if len(sys.argv) != 4:
        print("usage: shard_tests.py COSTS N PREFIX < names", file=sys.stderr)
        return 2
    costs_path, shards, prefix = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    names = [line.rstrip("\n") for line in sys.stdin if line.strip()]
    seconds = {}
    try:
        with open(costs_path, encoding="utf-8") as f:
            for line in f:
                m = re.match(r"^unit:(.*) (\d+) ([0-9.eE+-]+)$", line.rstrip("\n"))
                if m:
                    seconds[m.group(1)] = float(m.group(3))
    except FileNotFoundError:
        pass  # no times: every case weighs the same, and dealing longest-first is round robin
    known = [seconds[n] for n in names if n in seconds]
    default = statistics.median(known) if known else 1.0
    weight = {n: seconds.get(n, default) for n in names}
    loads = [0.0] * shards
    dealt = [[] for _ in range(shards)]
    for n in sorted(names, key=lambda n: -weight[n]):
        i = loads.index(min(loads))
        loads[i] += weight[n]
        dealt[i].append(n)
    for i, cases in enumerate(dealt):
        with open(f"{prefix}_{i}.txt", "w", encoding="utf-8") as f:
            for n in cases:
                f.write(re.sub(r"([^A-Za-z0-9 _.:-])", r"\\\1", n) + "\n")
        print(f"part {i}: {len(cases)} test cases, {loads[i]:.1f} s in the -O1 build")
    return 0


if __name__ == "__main__":
    sys.exit(main())
