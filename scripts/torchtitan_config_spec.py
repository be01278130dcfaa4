#!/usr/bin/env python3
"""Writes tests/data/torchtitan_config_spec.json: the torchtitan options `plan --export` writes,
as torchtitan's own dataclasses and tyro command line define them, read from a snapshot.

Usage: scripts/torchtitan_config_spec.py REPO [--commit REV] [--pytorch-schedules FILE
           --pytorch-commit HASH] [-o OUT]
  REPO                 a clone of github.com/pytorch/torchtitan (a bare git directory works)
  --commit             the revision to read (default HEAD)
  --pytorch-schedules  PyTorch's torch/distributed/pipelining/schedules.py (a checkout's, or an
                       installed torch's: python3 -c "import torch.distributed.pipelining.
                       schedules as s; print(s.__file__)"), for get_schedule_class's names
  --pytorch-commit     the PyTorch commit that file is from (recorded, not checked; with an
                       excerpt of the file, its class declarations and get_schedule_class do)
  -o                   where to write (default: tests/data/torchtitan_config_spec.json)

Only facts about their parser are written, never their code: per option its section, field
name, type, default and choices; the activation-checkpoint subcommands; which options their
frozen-CLI test lists (tests/unit_tests/test_no_new_cli_options.py); the schedule names PyTorch
accepts with each class's kind; which schedules torchtitan places in a V; the names the modules
PREFIX.torchtitan.py imports from define, and the Llama 3 flavors. Everything is read
with `ast` from the source text, nothing imported, so neither torch nor tyro is needed.
"""

import argparse
import ast
import json
import os
import subprocess
import sys


def git_show(repo, rev, path):
    return subprocess.run(["git", "-C", repo, "show", f"{rev}:{path}"], check=True,
                          capture_output=True, text=True).stdout


def git_commit(repo, rev):
    return subprocess.run(["git", "-C", repo, "rev-parse", rev], check=True,
                          capture_output=True, text=True).stdout.strip()


def find_class(tree, name):
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    sys.exit(f"class {name} not found")


def type_of(annotation):
    """The type as the spec spells it: int, float, bool, str, float|int, list[str],
    list[list[str]] or literal (with choices); "optional" when None is allowed."""
    if isinstance(annotation, ast.Subscript) and ast.unparse(annotation.value) == "Literal":
        elts = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [
            annotation.slice]
        return {"type": "literal", "choices": [ast.literal_eval(e) for e in elts]}
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        parts = []

        def flatten(n):
            if isinstance(n, ast.BinOp) and isinstance(n.op, ast.BitOr):
                flatten(n.left)
                flatten(n.right)
            else:
                parts.append(n)

        flatten(annotation)
        named = [p for p in parts if ast.unparse(p) != "None"]
        out = {"type": "|".join(ast.unparse(p) for p in named)}
        if len(named) == 1:
            out = type_of(named[0])
        if len(named) < len(parts):
            out["optional"] = True
        return out
    return {"type": ast.unparse(annotation)}


def dataclass_fields(tree, class_name):
    """Field name -> {type, default} of a dataclass, in declaration order."""
    fields = {}
    for stmt in find_class(tree, class_name).body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        f = type_of(stmt.annotation)
        if stmt.value is not None:
            try:
                f["default"] = ast.literal_eval(stmt.value)
            except ValueError:
                f["default_expression"] = ast.unparse(stmt.value)
        fields[stmt.target.id] = f
    return fields


def frozen_cli_options(source):
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and getattr(node.targets[0], "id", "") == "_FROZEN_CLI_OPTIONS"):
            return sorted(ast.literal_eval(node.value.args[0]))
    sys.exit("_FROZEN_CLI_OPTIONS not found")


def trainer_sections(source):
    """Trainer.Config's section name -> annotation text and default text."""
    trainer = find_class(ast.parse(source), "Trainer")
    config = next(n for n in trainer.body if isinstance(n, ast.ClassDef) and n.name == "Config")
    out = {}
    for stmt in config.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            out[stmt.target.id] = {"annotation": ast.unparse(stmt.annotation),
                                   "default": ast.unparse(stmt.value) if stmt.value else None}
    return out


def ac_subcommands(source):
    """ActivationCheckpointingConfig's members: subcommand name -> the config class it holds."""
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and getattr(node.targets[0], "id", "") == "ActivationCheckpointingConfig"):
            out = {}
            for ann in ast.walk(node.value):
                if isinstance(ann, ast.Subscript) and ast.unparse(ann.value) == "Annotated":
                    held, marker = ann.slice.elts
                    if isinstance(marker, ast.Call) and ast.unparse(marker.func).endswith(
                            "subcommand"):
                        out[ast.literal_eval(marker.args[0])] = ast.unparse(held)
            return out
    sys.exit("ActivationCheckpointingConfig not found")


def v_style_schedules(source):
    """The schedule classes torchtitan's _get_pp_rank_to_stage_indices_mapping places in a V."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and node.name == "_get_pp_rank_to_stage_indices_mapping":
            for cmp in ast.walk(node):
                if (isinstance(cmp, ast.Compare) and isinstance(cmp.ops[0], ast.In)
                        and ast.unparse(cmp.left) == "schedule_class"):
                    return [ast.unparse(e) for e in cmp.comparators[0].elts]
    sys.exit("_get_pp_rank_to_stage_indices_mapping not found")


def pytorch_schedules(source):
    """get_schedule_class's names -> class, and each class's kind (single: one stage per rank,
    multi: several), from the class bases in schedules.py."""
    tree = ast.parse(source)
    bases = {n.name: [ast.unparse(b) for b in n.bases] for n in ast.walk(tree)
             if isinstance(n, ast.ClassDef)}

    def kind(cls):
        while cls in bases:
            if cls == "PipelineScheduleSingle":
                return "single"
            if cls == "PipelineScheduleMulti":
                return "multi"
            cls = bases[cls][0] if bases[cls] else None
        sys.exit(f"no kind for {cls}")

    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "get_schedule_class":
            for d in ast.walk(node):
                if isinstance(d, ast.Dict):
                    names = {ast.literal_eval(k): ast.unparse(v) for k, v in zip(d.keys, d.values)}
                    return {n: {"class": c, "kind": kind(c)} for n, c in names.items()}
    sys.exit("get_schedule_class not found")


# The modules PREFIX.torchtitan.py imports from, and the Llama 3 config registry it derives from.
PYTHON_MODULES = {
    "torchtitan.config": "torchtitan/config/__init__.py",
    "torchtitan.components.quantization": "torchtitan/components/quantization/__init__.py",
    "torchtitan.distributed.activation_checkpoint": "torchtitan/distributed/activation_checkpoint.py",
    "torchtitan.models.llama3": "torchtitan/models/llama3/__init__.py",
    "torchtitan.models.llama3.config_registry": "torchtitan/models/llama3/config_registry.py",
    "torchtitan.trainer": "torchtitan/trainer.py",
}


def module_names(source):
    """The names a module defines or imports at its top level (what `from M import N` finds)."""
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {a.asname or a.name.split(".")[0] for a in node.names}
    return sorted(names)


def dict_keys(source, name):
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and getattr(node.targets[0], "id", "") == name):
            return [ast.literal_eval(k) for k in node.value.keys]
    sys.exit(f"{name} not found")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("repo")
    ap.add_argument("--commit", default="HEAD")
    ap.add_argument("--pytorch-schedules")
    ap.add_argument("--pytorch-commit", default="")
    ap.add_argument("-o", "--output", default=os.path.normpath(os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
        "torchtitan_config_spec.json")))
    a = ap.parse_args()
    commit = git_commit(a.repo, a.commit)
    show = lambda path: git_show(a.repo, commit, path)
    date = subprocess.run(["git", "-C", a.repo, "show", "-s", "--format=%cs", commit],
                          check=True, capture_output=True, text=True).stdout.strip()
    configs = ast.parse(show("torchtitan/config/configs.py"))
    frozen = frozen_cli_options(show("tests/unit_tests/test_no_new_cli_options.py"))
    sections = trainer_sections(show("torchtitan/trainer.py"))
    spec = {
        "source": (f"pytorch/torchtitan at commit {commit} ({date}), read by "
                   "scripts/torchtitan_config_spec.py: Trainer.Config's sections (torchtitan/"
                   "trainer.py), their dataclasses (torchtitan/config/configs.py), the "
                   "activation-checkpoint subcommands (torchtitan/distributed/"
                   "activation_checkpoint.py), the frozen command line (tests/unit_tests/"
                   "test_no_new_cli_options.py) and the V-placed schedules (torchtitan/"
                   "distributed/pipeline_parallel.py). tyro derives --section.field from each "
                   "field, '-' and '_' equivalent; a bool is a flag with its --section.no_field "
                   "inverse; list[str] is one comma-separated word (their ConfigManager rule), "
                   "list[list[str]] one such word per inner list. Facts about their parser, "
                   "not their code."),
        "commit": commit,
        "sections": {},
        "frozen_cli_options": [o for o in frozen
                               if o.split(".")[0] in ("parallelism", "training",
                                                      "activation_checkpoint")],
    }
    for section, cls in (("parallelism", "ParallelismConfig"), ("training", "TrainingConfig")):
        if sections[section]["annotation"] != cls:
            sys.exit(f"Trainer.Config.{section} is {sections[section]['annotation']}, not {cls}")
        spec["sections"][section] = {"class": cls, "fields": dataclass_fields(configs, cls)}
    ac = sections["activation_checkpoint"]
    spec["activation_checkpoint"] = {
        "annotation": ac["annotation"],
        "default": ac["default"],
        "subcommands": ac_subcommands(show("torchtitan/distributed/activation_checkpoint.py")),
        "token": "activation-checkpoint:NAME (tyro's subcommand: the field name, ':', the "
                 "subcommand name)",
    }
    spec["v_style_schedules"] = v_style_schedules(show("torchtitan/distributed/pipeline_parallel.py"))
    spec["python_names"] = {m: module_names(show(path)) for m, path in PYTHON_MODULES.items()}
    spec["llama3_flavors"] = dict_keys(show("torchtitan/models/llama3/__init__.py"),
                                       "llama3_configs")
    if a.pytorch_schedules:
        with open(a.pytorch_schedules) as f:
            names = pytorch_schedules(f.read())
        spec["pytorch_schedules"] = {
            "source": ("PyTorch torch/distributed/pipelining/schedules.py get_schedule_class"
                       + (f" at commit {a.pytorch_commit}" if a.pytorch_commit else "")
                       + "; names match case-insensitively; kind from the class's bases"),
            "names": names,
        }
    with open(a.output, "w") as f:
        json.dump(spec, f, indent=1, sort_keys=False)
        f.write("\n")
    print(f"wrote {a.output} ({commit})")


if __name__ == "__main__":
    main()
