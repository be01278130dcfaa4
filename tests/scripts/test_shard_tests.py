#!/usr/bin/env python3
"""scripts/shard_tests.py: longest first to the least loaded process, every case once, Catch's
special characters escaped, cases without a recorded time at the median's."""
import pathlib
import subprocess
import sys
import tempfile

script = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "shard_tests.py"


def shard(names, costs, n):
    with tempfile.TemporaryDirectory() as d:
        cost_file = pathlib.Path(d) / "CTestCostData.txt"
        cost_file.write_text("".join(f"unit:{k} 1 {v}\n" for k, v in costs.items()) +
                             "---\ncli: list 1 9.0\n")
        out = subprocess.run([sys.executable, str(script), str(cost_file), str(n), f"{d}/s"],
                             input="".join(x + "\n" for x in names), text=True,
                             capture_output=True, check=True)
        return [pathlib.Path(f"{d}/s_{i}.txt").read_text().splitlines() for i in range(n)], out.stdout


def expect(cond, what):
    if not cond:
        print(f"shard_tests: {what}")
        sys.exit(1)


# Longest first: a (5) to 0, b (4) to 1, c (3) to 1 (4 < 5), d (3) to 0: 8 s and 7 s.
shards, text = shard(["a", "b", "c", "d"], {"a": 5, "b": 4, "c": 3, "d": 3}, 2)
expect(shards == [["a", "d"], ["b", "c"]], f"dealt {shards}")
expect("8.0 s" in text and "7.0 s" in text, f"loads reported as {text!r}")
# In order, two by two, the same cases would take 8 s and 7 s only by luck: 10 + 1 against 1 + 1.
shards, _ = shard(["x", "y", "z", "w"], {"x": 10, "y": 1, "z": 1, "w": 1}, 2)
expect(shards == [["x"], ["y", "z", "w"]], f"the long case not alone: {shards}")
# Catch's test-spec characters escaped; a case missing from the cost file weighs the median (2).
shards, _ = shard(["plan: a, b [x]", "q", "r"], {"q": 2, "r": 3}, 2)
expect(sorted(shards[0] + shards[1]) == sorted([r"plan: a\, b \[x\]", "q", "r"]),
       f"escaped as {shards}")
# No cost file: every case once, in two halves.
with tempfile.TemporaryDirectory() as d:
    subprocess.run([sys.executable, str(script), f"{d}/none.txt", "2", f"{d}/s"],
                   input="a\nb\nc\n", text=True, capture_output=True, check=True)
    got = [pathlib.Path(f"{d}/s_{i}.txt").read_text().splitlines() for i in range(2)]
    expect(sorted(got[0] + got[1]) == ["a", "b", "c"] and len(got[0]) == 2, f"without times: {got}")
print("shard_tests ok")
