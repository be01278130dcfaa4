#!/usr/bin/env python3
"""`pipesched plan --export`: torchtitan's command line reads PREFIX.torchtitan.args as the plan
says, and PREFIX.torchtitan.py sets the same values.

Runs `pipesched plan ARGS --json --export WORK/best`, builds a parser from
tests/data/torchtitan_config_spec.json (Trainer.Config's parallelism and training fields as
tyro derives options from them, and the activation-checkpoint subcommands), parses the
exported file with it, applies the consistency rules torchtitan and PyTorch apply to these
options (each check names its place in their source), compares the values with the plan's JSON
and the exported CSV, and reads the .py's assignments with `ast` to compare them too.

usage: torchtitan_export_check.py CLI SPEC WORK [--expect field=value,...] [--absent]
                                  [--no-py] -- ARGS...
"""
import argparse
import ast
import csv
import os
import re

from plan_export_run import check, expected_values, fail, read_plan_export, run_plan_export


def tyro_name(token):
    """tyro's reading of an option (tyro/_cli.py: swap_delimiters): '_' and '-' alike."""
    return token.replace("_", "-")


def torchtitan_parser(spec):
    """An argparse parser with the options tyro makes of the spec's fields, hyphenated as tyro
    names them (the tokens are hyphenated before parsing, as tyro does)."""
    parser = argparse.ArgumentParser(prog="torchtitan", allow_abbrev=False)
    frozen = set(spec["frozen_cli_options"])
    for section, sec in spec["sections"].items():
        for field, f in sec["fields"].items():
            if f"{section}.{field}" not in frozen:
                continue  # not on their command line
            flag = tyro_name(f"--{section}.{field}")
            dest = f"{section}.{field}"
            optional = f.get("optional", False)

            def scalar(convert, optional=optional):
                return lambda text: None if optional and text == "None" else convert(text)

            t = f["type"]
            if t == "bool":
                # tyro's BooleanOptionalAction: --a.b and --a.no-b (flag_to_inverse).
                parser.add_argument(flag, dest=dest, action="store_true", default=None)
                parser.add_argument(tyro_name(f"--{section}.no_{field}"), dest=dest,
                                    action="store_false")
            elif t == "list[list[str]]":
                # One comma-separated word per inner list (ConfigManager's list[str] rule).
                parser.add_argument(flag, dest=dest, nargs="*",
                                    type=lambda w: w.split(","))
            elif t == "literal":
                parser.add_argument(flag, dest=dest, choices=f["choices"])
            else:
                convert = {"int": int, "str": str, "float|int": float}[t]
                parser.add_argument(flag, dest=dest, type=scalar(convert))
    return parser


def placement_of(name, spec, stages, pp):
    """Which rank runs each stage (torchtitan's _get_pp_rank_to_stage_indices_mapping)."""
    cls = spec["pytorch_schedules"]["names"][canonical(name, spec)]["class"]
    if cls in spec["v_style_schedules"]:
        check(stages == 2 * pp, f"V schedule {name} with {stages} stages on {pp} ranks")
        return {s: (s if s < pp else 2 * pp - 1 - s) for s in range(stages)}
    return {s: s % pp for s in range(stages)}


def canonical(name, spec):
    """get_schedule_class matches names case-insensitively."""
    for known in spec["pytorch_schedules"]["names"]:
        if known.lower() == name.lower():
            return known
    fail(f"unknown pipeline schedule {name!r} (PyTorch's get_schedule_class)")


def main():
    o, prefix, run = run_plan_export("torchtitan_export_check.py",
                                     [".torchtitan.args", ".torchtitan.py"], ["--no-py"])
    args_file, py_file = prefix + ".torchtitan.args", prefix + ".torchtitan.py"
    if o.absent:
        check(not os.path.exists(args_file) and not os.path.exists(py_file),
              "torchtitan files written for a plan torchtitan cannot run")
        note = next((l for l in run.stderr.splitlines() if ".torchtitan.args and " in l), None)
        check(note is not None and " not written: " in note, "no note on stderr: " + run.stderr)
        check(os.path.exists(prefix + ".csv"), "the other files were not written")
        print("torchtitan export ok: not written (" + note + ")")
        return
    doc, plan, spec, lines = read_plan_export(o, run, args_file)
    layout = plan["layout"]
    expect = expected_values(o)
    check(lines and lines[-1].startswith("activation-checkpoint:"),
          "the activation-checkpoint subcommand is not the last line")
    tokens = []
    fields = {s: sec["fields"] for s, sec in spec["sections"].items()}
    for line in lines[:-1]:
        words = line.split()
        m = re.fullmatch(r"--(\w+)\.(no_)?(\w+)", words[0])
        check(m is not None, f"not one --section.field option per line: {line!r}")
        section, no, field = m.groups()
        # Ours are spelled as the dataclass fields, which tyro reads as its own hyphenated names.
        check(field in fields.get(section, {}), f"{section}.{field} is no torchtitan field")
        check(not no or fields[section][field]["type"] == "bool", f"--no_ for a non-bool: {line}")
        tokens += [tyro_name(words[0])] + words[1:]
    sub = tyro_name(lines[-1])
    name = sub.split(":", 1)[1]
    check(sub.startswith("activation-checkpoint:") and name in spec["activation_checkpoint"]["subcommands"],
          f"unknown activation-checkpoint subcommand {lines[-1]!r}")
    # argparse exits 2 on an unknown option or a bad value.
    a = vars(torchtitan_parser(spec).parse_args(tokens))

    def value(section, field):
        got = a.get(f"{section}.{field}")
        return fields[section][field].get("default") if got is None else got

    par = lambda f: value("parallelism", f)
    train = lambda f: value("training", f)
    tp, pp, cp = par("tensor_parallel_degree"), par("pipeline_parallel_degree"), par("context_parallel_degree")
    rep, shard = par("data_parallel_replicate_degree"), par("data_parallel_shard_degree")
    check(shard >= 1, "data_parallel_shard_degree left to torchtitan (-1)")
    # distributed/parallel_dims.py ParallelDims._validate: the degrees multiply to the world.
    check(rep * shard * cp * tp * pp == doc["gpus"],
          f"dp_replicate {rep} * dp_shard {shard} * cp {cp} * tp {tp} * pp {pp} != {doc['gpus']} GPUs")
    dp = rep * shard  # the "batch" mesh: data loading and the global batch
    sp = tp > 1 and par("enable_sequence_parallel")
    tokens_mb = train("num_tokens_per_microbatch_per_dp_rank")
    # trainer.py: a micro-batch's tokens split evenly over SP and 2*cp.
    divisor = (tp if par("enable_sequence_parallel") else 1) * (2 * cp if cp > 1 else 1)
    check(tokens_mb % divisor == 0, f"{tokens_mb} tokens per micro-batch not a multiple of {divisor}")
    # trainer.py: the step's tokens a multiple of one accumulation iteration's; the
    # micro-batches per step are PP's, or gradient accumulation without PP.
    m_pp = par("num_pp_microbatches") if pp > 1 else 1
    per_iteration = tokens_mb * m_pp * dp
    step_tokens = train("num_tokens_per_train_step")
    check(step_tokens > 0 and step_tokens % per_iteration == 0,
          "num_tokens_per_train_step not a multiple of one accumulation iteration")
    accumulation = step_tokens // per_iteration
    # trainer.py Trainer.Config._validate_cuda_graphs: no CUDA graphs with PP.
    check(pp == 1 or train("disable_cuda_graphs"), "PP without --training.disable_cuda_graphs")
    recompute = {"none": "none", "full": "full", "selective": "selective"}[name]
    sharding = doc["optimizer_sharding"]
    reshard = par("fsdp_reshard_after_forward")
    # models/llama3/parallelize.py: FSDP over dp_shard x cp; HSDP replicates over dp_replicate.
    if sharding == "none":
        check(shard == 1 and cp == 1, "none: torchtitan would shard over dp_shard or cp")
    else:
        check(sharding in ("gradients", "weights"), f"torchtitan has no {sharding} sharding")
        check(rep == 1, "sharded plan replicated over dp_replicate")
        check(reshard == ("always" if sharding == "weights" else "never"),
              f"fsdp_reshard_after_forward {reshard} for {sharding}")

    want = {
        "tp": (tp, layout["tp"]), "pp": (pp, layout["pp"]), "cp": (cp, layout["cp"]),
        "dp": (dp, layout["dp"]), "sequence_parallel": (sp, layout["sequence_parallel"]),
        "micro-batch tokens": (tokens_mb, layout["micro_batch"] * doc["sequence"]),
        "micro-batches": (m_pp * accumulation, layout["microbatches"]),
        "step tokens": (step_tokens, doc["tokens_per_step"]),
        "max_context_length": (train("max_context_length"), doc["sequence"]),
        "recompute": (recompute, plan["recompute"]),
    }
    if cp > 1:
        want["CP balance"] = (par("context_parallel_load_balancer"), "headtail")

    if pp > 1:
        sched = par("pipeline_parallel_schedule")
        kind = spec["pytorch_schedules"]["names"][canonical(sched, spec)]["kind"]
        parts = par("module_fqns_per_model_part")
        check(parts is not None, "PP without module_fqns_per_model_part")
        check(all(parts), "a model part without modules")
        layers = sum(len(p) for p in parts) - 3
        expected = ["tok_embeddings"] + [f"layers.{i}" for i in range(layers)] + ["norm", "lm_head"]
        check([m for p in parts for m in p] == expected,
              "the parts do not hold every module once, in model order")
        want["partition"] = ([sum(m.startswith("layers.") for m in p) for p in parts],
                             plan["partition"])
        # pipeline_parallel.py _get_pp_rank_to_stage_indices_mapping: stages divide over ranks.
        check(len(parts) % pp == 0, "model parts not a multiple of pp")
        per_rank = len(parts) // pp
        want["v"] = (per_rank, layout["v"])
        rank_of = placement_of(sched, spec, len(parts), pp)
        for st in plan["stages"]:
            for g in st["chunks"]:
                check(rank_of[g] == st["stage"],
                      f"torchtitan puts chunk {g} on rank {rank_of[g]}, the plan on {st['stage']}")
        csv_path = par("pipeline_parallel_schedule_csv")
        if csv_path:
            # pipeline_parallel.py _build_pipeline_schedule: a CSV runs in _PipelineScheduleRuntime,
            # read by its _load_csv(path) (compute_only).
            check(os.path.isabs(csv_path), "the CSV path is not absolute")
            check(os.path.samefile(csv_path, prefix + ".compute.csv"), "not PREFIX.compute.csv")
            with open(csv_path) as f:
                rows = list(csv.reader(f))
            check(len(rows) == pp, "the CSV does not have one row per rank")
            for rank, row in enumerate(rows):
                for cell in filter(None, (c.strip() for c in row)):
                    m = re.fullmatch(r"(\d+)(F|I|B|W)(\d+)", cell)
                    check(m is not None, f"not a compute action: {cell!r}")
                    check(rank_of[int(m.group(1))] == rank, f"{cell} on rank {rank}")
        else:
            # Without a CSV PyTorch's class builds the order: it must accept the shape and run
            # the plan's order.
            m = layout["microbatches"]
            if kind == "single":
                check(per_rank == 1, f"{sched} runs one stage per rank, not {per_rank}")
            if canonical(sched, spec) == "1F1B":
                check(m >= pp, "Schedule1F1B refuses fewer micro-batches than stages")
                check(plan["schedule"] in ("1f1b", "interleaved-1f1b"), "not a 1F1B plan")
            elif canonical(sched, spec) == "GPipe":
                check(plan["schedule"] == "gpipe", "not a GPipe plan")
            elif canonical(sched, spec) == "Interleaved1F1B":
                # ScheduleInterleaved1F1B: rounds of m / max(1, m // pp) micro-batches.
                rounds = max(1, m // pp)
                check(m % rounds == 0, "Interleaved1F1B refuses m not a multiple of its rounds")
                group = int(dict(expect).get("group_size", pp))
                check(m // rounds == group,
                      f"PyTorch's rounds of {m // rounds} are not the plan's groups of {group}")
                check(plan["schedule"] == "interleaved-1f1b", "not an interleaved plan")
            else:
                fail(f"{sched} without the exported order")
    for key, (got, expected) in want.items():
        check(got == expected, f"{key}: torchtitan reads {got!r}, the plan says {expected!r}")
    for key, text in expect:
        if key in ("group_size",):
            continue
        section, field = key.split(".")
        check(str(value(section, field)) == text,
              f"{key}: {value(section, field)!r}, expected {text}")

    if o.no_py:
        check(not os.path.exists(py_file), "PREFIX.torchtitan.py written for a model torchtitan has no config of")
        check(".torchtitan.py not written: " in run.stderr, "no note on stderr: " + run.stderr)
    else:
        check_py(py_file, spec, a, name)
    print(f"torchtitan export ok: {plan['schedule']} tp {tp} pp {pp} cp {cp} dp {dp}, "
          f"{len(lines)} lines" + ("" if o.no_py else ", .py agrees"))


def check_py(py_file, spec, parsed, ac_name):
    """The .py parses, imports only names torchtitan defines, derives from a Llama 3 config of
    theirs, and assigns the values the .args file gives."""
    with open(py_file) as f:
        tree = ast.parse(f.read(), py_file)
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            known = spec["python_names"].get(node.module)
            check(known is not None, f"imports from {node.module}, which the spec does not list")
            for n in node.names:
                check(n.name in known, f"{node.module} has no {n.name}")
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "pipesched_plan"),
              None)
    check(fn is not None, "no pipesched_plan()")
    first = fn.body[0]
    check(isinstance(first, ast.Assign) and isinstance(first.value, ast.Call),
          "pipesched_plan() does not start from a config function")
    base = first.value.func.id
    check(base in spec["python_names"]["torchtitan.models.llama3.config_registry"],
          f"{base} is no config of torchtitan's")
    assigned, ac = {}, None
    for stmt in fn.body:
        if not isinstance(stmt, ast.Assign):
            continue
        target = ast.unparse(stmt.targets[0])
        if target == "config.activation_checkpoint":
            ac = ast.unparse(stmt.value)
        elif target == "config.model_spec":
            flavor = ast.literal_eval(stmt.value.args[0])
            check(flavor in spec["llama3_flavors"], f"no Llama 3 flavor {flavor}")
        elif re.fullmatch(r"config\.(parallelism|training)\.\w+", target):
            assigned[target[len("config."):]] = ast.literal_eval(stmt.value)
    written = {k: v for k, v in parsed.items() if v is not None}
    check(set(assigned) == set(written),
          f"the .py sets {sorted(set(assigned) ^ set(written))} unlike the .args")
    for key, v in written.items():
        check(assigned[key] == v, f"{key}: the .py sets {assigned[key]!r}, the .args {v!r}")
    expected_ac = {"none": "None", "full": "FullAC.Config()", "selective": "SelectiveAC.Config()"}
    check(ac == expected_ac[ac_name], f"activation_checkpoint {ac} for {ac_name}")


if __name__ == "__main__":
    main()
