#!/usr/bin/env python3
"""Prints docs/benchmarks.md's per-op table (section 1) from the Google Benchmark programs.

    scripts/bench_table.py [build/bin]

Runs bench_generate, bench_validate, bench_simulate and bench_memory (default sizes, about
two minutes in all) and prints, per schedule, the CPU nanoseconds per op at p = 64, m = 1024
with the RMS error of the linear fit over all sizes in brackets.
"""
import json
import re
import subprocess
import sys

bin_dir = sys.argv[1] if len(sys.argv) > 1 else "build/bin"
phases = ["generate", "validate", "traverse", "simulate", "simulate_stats", "check_memory",
          "check_memory_budget"]
per_op = {}  # (phase, schedule) -> ns/op
rms = {}     # (phase, schedule) -> percent
order = []
for program in ["bench_generate", "bench_validate", "bench_simulate", "bench_memory"]:
    out = subprocess.run([f"{bin_dir}/{program}", "--benchmark_format=json"], check=True,
                         capture_output=True, text=True).stdout
    for b in json.loads(out)["benchmarks"]:
        name = b["name"]
        m = re.match(r"([a-z_]+)/([a-z0-9-]+)/p:64/m:1024/", name)
        if m:
            per_op[(m[1], m[2])] = b["t_per_op"] * 1e9  # seconds per op
            if m[2] not in order:
                order.append(m[2])
        m = re.match(r"([a-z_]+)/([a-z0-9-]+)/.*_RMS$", name)
        if m:
            rms[(m[1], m[2])] = 100.0 * b["rms"]
print("| schedule | " + " | ".join(phases) + " |")
print("|---|" + "---:|" * len(phases))
for s in order:
    cells = []
    for ph in phases:
        v = per_op.get((ph, s))
        cells.append("-" if v is None else f"{v:.1f} ({rms.get((ph, s), 0.0):.0f}%)")
    print(f"| {s} | " + " | ".join(cells) + " |")
