"""What the framework export checkers share (framework_export_check.py for Megatron-LM,
torchtitan_export_check.py): their command line, one `pipesched plan --export` run, and what
it wrote read back.

usage of a checker: CHECKER CLI SPEC WORK [--expect key=value,...] [--absent] [FLAGS] -- ARGS...
"""
import argparse
import json
import os
import subprocess
import sys


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def check(cond, message):
    if not cond:
        fail(message)


def run_plan_export(checker, framework_files, flags=()):
    """Parses the checker's command line (`flags`: its own store_true options), removes the
    framework's files a previous run left (PREFIX + each of `framework_files`), and runs
    `CLI plan ARGS --json --export WORK/best`, which must exit 0. Returns the options, PREFIX
    and the finished run."""
    argv = sys.argv[1:]
    if "--" not in argv:
        fail(f"usage: {checker} CLI SPEC WORK [options] -- plan args")
    split = argv.index("--")
    head, plan_args = argv[:split], argv[split + 1:]
    opts = argparse.ArgumentParser()
    opts.add_argument("cli")
    opts.add_argument("spec")
    opts.add_argument("work")
    opts.add_argument("--expect", default="")
    opts.add_argument("--absent", action="store_true")
    for flag in flags:
        opts.add_argument(flag, action="store_true")
    o = opts.parse_args(head)
    os.makedirs(o.work, exist_ok=True)
    prefix = os.path.join(o.work, "best")
    for suffix in framework_files:
        if os.path.exists(prefix + suffix):
            os.remove(prefix + suffix)
    run = subprocess.run([o.cli, "plan", *plan_args, "--json", "--export", prefix],
                         capture_output=True, text=True)
    check(run.returncode == 0, f"plan exited {run.returncode}: {run.stderr}")
    return o, prefix, run


def read_plan_export(o, run, args_file):
    """The plan's JSON (stdout), its best plan, the framework's spec and the lines of the
    arguments file the export wrote."""
    doc = json.loads(run.stdout)
    with open(o.spec) as f:
        spec = json.load(f)
    with open(args_file) as f:
        lines = f.read().splitlines()
    return doc, doc["plans"][0], spec, lines


def expected_values(o):
    """--expect key=value,...: the values the framework must read, in the order given."""
    return [tuple(pair.split("=")) for pair in filter(None, o.expect.split(","))]
