#!/usr/bin/env python3
"""The planner against published measured runs (docs/validation.md).

For every run of a measured-runs file (tests/data/measured_runs.json: Korthikanti et al. 2022,
Narayanan et al. 2021, the Megatron-LM README's H100 table) this sets the run up as its source
describes it, asks `pipesched plan` for its step time (and memory where the source measured it),
and prints predicted, measured and the error. With --check it exits 1 when an error passes the
thresholds of docs/validation.md. Only the standard library: a ctest runs it.

  scripts/validation.py --cli build/bin/pipesched [--markdown FILE] [--check] [--only PREFIX]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# Thresholds on |error| (docs/validation.md): the targets.
THRESHOLDS = {
    "kor": {"each": 0.05, "mean": 0.03, "memory": 0.03},
    "nar": {"each": 0.07},
    "meg": {"each": 0.10},
    "table4": {"each": 0.10},
    # Runs the model was not built on (tests/data/other_runs.json; docs/validation.md, "Other
    # published runs"): guards of what it predicts out of the box (Megatron-DeepSpeed's stack ran
    # slower than Megatron-LM's own; FP8 on H100), and the target once one run has calibrated
    # the GPU.
    "mtnlg": {"each": 0.25},
    "bloom": {"each": 0.25},
    "mbr": {"each": 0.20},
    "calibrated": {"each": 0.05},
}

# Families that ran on Megatron-DeepSpeed (Megatron-LM's layers, DeepSpeed's pipeline engine).
MEGATRON_DEEPSPEED = ("mtnlg", "bloom")

# How Narayanan et al. ran Table 1, from their own scripts for the SC21 artifact
# (Megatron-LM examples/academic_paper_scripts/sc21/run_table_1.sh, commit de7dc40f88 of
# August 2021): micro-batch size, layers per virtual pipeline stage (None: not interleaved) and
# DDP implementation (PyTorch's reduces during the backward; Megatron's local one after it).
NARAYANAN_SC21 = {
    "nar-1.7b": (16, None, "torch"), "nar-3.6b": (16, None, "torch"),
    "nar-7.5b": (16, None, "torch"), "nar-18.4b": (8, None, "torch"),
    "nar-39.1b": (4, None, "local"), "nar-76.1b": (2, 5, "local"),
    "nar-145.6b": (2, 5, "local"), "nar-310.1b": (1, 3, "local"),
    "nar-529.6b": (1, 1, "local"), "nar-1008b": (1, None, "local"),
}

# Korthikanti et al.'s Megatron-LM (2022): the backward's tensor-parallel collectives beside
# the weight-gradient GEMMs (run_setup), in Table 4's layers as in Table 5's steps.
KORTHIKANTI_TP_OVERLAP = "backward"

# --searched: the planner's own micro-batch and chunks where a source states them (set by main).
SEARCHED = False


def family(run_id):
    return run_id.split("-")[0]


def model_file(run, directory):
    """The run's model as a model JSON: GPT-style (GELU MLP, LayerNorm, learned positions,
    linear biases, tied embeddings) as the sources describe their models, unless the run's model
    says otherwise (the keys the measured-runs format reads: a Llama's SwiGLU, RMSNorm, ...)."""
    m = run["model"]
    spec = {
        "version": 1,
        "name": run["id"],
        "layers": m["layers"],
        "hidden": m["hidden"],
        "ffn": m["ffn"],
        "heads": m["heads"],
        "kv_heads": m.get("kv_heads", m["heads"]),
        "vocab": m["vocab"],
        "mlp": "gelu",
        "norm": "layernorm",
        "tied_embeddings": True,
        "position": "learned",
        "bias": True,
        # Megatron-LM before flash attention materialized the scores; the README's H100 runs
        # (Megatron-Core with Transformer Engine) run fused (flash) attention.
        "attention": run.get("attention", "flash"),
        "dropout": run.get("dropout", False),
    }
    for key in ("head_dim", "mlp", "norm", "tied_embeddings", "position", "bias",
                "activation_bytes"):
        if key in m:
            spec[key] = m[key]
    path = os.path.join(directory, run["id"] + ".model.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    return path


def run_setup(run):
    """How `run` ran, as keys of the measured-runs format (docs/formats.md): what its source
    states, and the framework's behaviour of its time where the source is silent."""
    fam = family(run["id"])
    keys = {}
    if fam in MEGATRON_DEEPSPEED:
        # DeepSpeed's pipeline engine of 2021-22: 1F1B, each send and receive waited on; the
        # data-parallel reduction after the backward; each micro-batch's gradients added in a pass
        # of their own (fp32 accumulation in BLOOM's BF16_Optimizer, which reduces them in fp32);
        # no sequence parallelism; the optimizer unsharded unless the run says otherwise.
        keys["p2p"] = "blocking"
        keys["tp_comm_overlap"] = "none"
        keys["optimizer_sharding"] = "none"
        keys["overlap_grad_reduce"] = False
        keys["grad_reduce_dtype"] = "fp32" if fam == "bloom" else "bf16"
        keys["gradient_accumulation_fusion"] = False
        keys["partition"] = "even"
        keys["schedule"] = "1f1b"
        keys["sequence_parallel"] = False
        return keys
    if fam in ("kor", "nar"):
        # Megatron-LM of 2021-22 waits for each pipeline send and receive. Korthikanti's (2022)
        # runs its backward's tensor-parallel collectives beside the weight-gradient GEMMs
        # (megatron/mpu/layers.py, LinearWithGradAccumulationAndAsyncCommunication: the input
        # gradient's all-reduce, or with SP its reduce-scatter and the input's all-gather, on
        # by default since September 2021); Narayanan's code of April 2021 did not yet.
        keys["p2p"] = "blocking"
        keys["tp_comm_overlap"] = KORTHIKANTI_TP_OVERLAP if fam == "kor" else "none"
        # Megatron-LM of 2021-22: no distributed optimizer, the data-parallel all-reduce after
        # the backward, the attention scores materialized. Korthikanti's Figure 1 counts fp32
        # main gradients (18 bytes a parameter): reduced in fp32; Narayanan's fp16 runs reduce
        # the fp16 gradients (accumulate_allreduce_grads_in_fp32 off by default then).
        keys["optimizer_sharding"] = "none"
        keys["overlap_grad_reduce"] = False
        keys["grad_reduce_dtype"] = "fp32" if fam == "kor" else "bf16"
        keys["partition"] = "even"
        # Each micro-batch's weight gradients: added inside the weight-gradient GEMM by
        # Megatron-LM of 2022 (--gradient-accumulation-fusion, on by default since February
        # 2022); by PyTorch's autograd in a separate add in Megatron-LM of April 2021
        # (megatron/model/distributed.py then).
        keys["gradient_accumulation_fusion"] = fam == "kor"
    else:
        # Megatron-Core (2024; Megatron-Bridge's recipes of 2025 likewise), as its README's
        # benchmark configuration states: distributed optimizer, gradients reduced during the
        # backward (--overlap-grad-reduce, in bf16 by its DDP config's default), TP's collectives
        # overlapped (--tp-comm-overlap), PP's sends overlapped ("enabled by default").
        keys["p2p"] = "overlapped"
        keys["optimizer_sharding"] = "optimizer"
        keys["overlap_grad_reduce"] = True
        keys["grad_reduce_dtype"] = "bf16"
        keys["tp_comm_overlap"] = "all"
    if fam == "kor":
        keys["schedule"] = "interleaved-1f1b" if run["v"] > 1 else "1f1b"
    elif fam == "nar":
        # No sequence parallelism yet in 2021. Micro-batch size, chunks per stage and the DDP
        # as the authors' scripts ran them; with --searched (or for a row they do not list) the
        # micro-batch and chunks are searched over the schedule the paper ran (interleaved for
        # PP > 1).
        keys["sequence_parallel"] = False
        stated = None if SEARCHED else NARAYANAN_SC21.get(run["id"])
        if stated:
            micro_batch, layers_per_chunk, ddp = stated
            keys["micro_batch"] = micro_batch
            keys["v"] = run["model"]["layers"] // run["pp"] // layers_per_chunk \
                if layers_per_chunk else 1
            keys["overlap_grad_reduce"] = ddp == "torch"
        v = keys.get("v", run.get("v"))
        keys["schedule"] = "interleaved-1f1b" if run["pp"] > 1 and v != 1 else "1f1b"
    else:
        # Unstated choices (micro-batch, recompute, chunks per stage) searched, on Megatron's
        # schedule (interleaved for PP > 1); sequence parallelism with TP, as Megatron-Core's
        # performance runs use it.
        keys["schedule"] = "interleaved-1f1b" if run["pp"] > 1 else "1f1b"
        if run["tp"] > 1:
            keys["sequence_parallel"] = True
    return keys


def with_setup(run):
    """The run with its setup keys (what `calibrate --runs` reads)."""
    out = dict(run)
    for k, v in run_setup(run).items():
        out.setdefault(k, v)
    return out


def setup(run, gpu=None):
    """The command-line options that set `run` up as it ran (on `gpu`, a preset or cluster file,
    instead of the run's own when given)."""
    r = with_setup(run)
    gpu = gpu or os.environ.get("VALIDATION_GPU_" + r["gpu"].split("-")[0].upper(), r["gpu"])
    args = ["--gpu", gpu, "--gpus", str(r["gpus"]), "--seq", str(r["seq"]),
            "--global-batch", str(r["global_batch"]), "--tp", str(r["tp"]), "--pp", str(r["pp"]),
            "--p2p", r["p2p"], "--optimizer-sharding", r["optimizer_sharding"],
            "--overlap-grad-reduce", "on" if r["overlap_grad_reduce"] else "off",
            "--grad-reduce-dtype", r["grad_reduce_dtype"],
            "--tp-comm-overlap", r.get("tp_comm_overlap", "none"),
            "--gradient-accumulation-fusion",
            "on" if r.get("gradient_accumulation_fusion", True) else "off"]
    for key, opt in (("v", "-v"), ("cp", "--cp"), ("micro_batch", "--micro-batch"),
                     ("recompute", "--recompute"), ("partition", "--partition"),
                     ("schedule", "--schedule")):
        if key in r:
            args += [opt, str(r[key])]
    if "sequence_parallel" in r:
        args += ["--sequence-parallel" if r["sequence_parallel"] else "--no-sequence-parallel"]
    if r.get("schedule") == "interleaved-1f1b":
        # Megatron-LM's rounds of PP micro-batches (its default then and now), not a smaller
        # group the planner would take to fit a run whose memory alone was measured.
        args += ["--group-size", str(r["pp"])]
    args += os.environ.get("VALIDATION_EXTRA", "").split()
    return args


def variants(run):
    """The choices the run's framework could have made where its source is silent, each a dict
    of keys over the run's own; the fastest is the prediction. Narayanan's interleaving ran on
    Megatron-LM of April 2021, whose arguments.py takes interleaving only for more than 2
    stages and whose transformer.py gives every chunk of a stage the same number of layers:
    v over the divisors of the layers per stage, and no interleaving at PP <= 2."""
    if family(run["id"]) != "nar" or run["pp"] == 1 or "v" in with_setup(run):
        return [{}]
    per_stage = run["model"]["layers"] // run["pp"]
    out = [{"schedule": "1f1b", "v": 1}]
    if run["pp"] > 2:
        out += [{"schedule": "interleaved-1f1b", "v": v} for v in range(2, per_stage + 1)
                if per_stage % v == 0]
    return out


def plan_json(cli, run, directory, gpu=None):
    best = None
    for variant in variants(run):
        r = dict(run, **variant)
        cmd = [cli, "plan", "--model", model_file(r, directory)] + setup(r, gpu) + ["--json",
                                                                                    "--top", "1"]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode not in (0, 1):
            raise RuntimeError(f"{run['id']}: {' '.join(cmd)}\n{out.stderr}")
        doc = json.loads(out.stdout)
        if not doc["plans"]:
            continue
        p = doc["plans"][0]
        if best is None or p["step_time_s"] < best["step_time_s"]:
            best = p
    if best is None:
        raise RuntimeError(f"{run['id']}: no plan")
    return best


def narayanan_hardware_flops(run):
    """Narayanan et al.'s Eq. 3: 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)), the recomputed
    forward included."""
    m = run["model"]
    b, s, l, h, v = run["global_batch"], run["seq"], m["layers"], m["hidden"], m["vocab"]
    return 96.0 * b * s * l * h * h * (1 + s / (6.0 * h) + v / (16.0 * l * h))


def megatron_model_flops(run):
    """Megatron-LM's num_floating_point_operations as the README's table counted them (2024:
    12·B·s·l·h²·((1 + g/a + s/h) + f/h + V/(2·l·h)), attention not halved by the mask)."""
    m = run["model"]
    b, s, l, h, v = run["global_batch"], run["seq"], m["layers"], m["hidden"], m["vocab"]
    f = m["ffn"]
    vocab = -(-v // 128) * 128
    return 12.0 * b * s * l * h * h * ((1 + 1 + s / h) + f / h + vocab / (2.0 * l * h))


def evaluate(cli, run, directory, gpu=None):
    p = plan_json(cli, run, directory, gpu)
    fam = family(run["id"])
    row = {"id": run["id"], "source": run["source"], "plan": p}
    if "step_time_s" in run:
        row["metric"] = "step time (s)"
        row["predicted"] = p["step_time_s"]
        row["measured"] = run["step_time_s"]
    elif fam == "nar":
        row["metric"] = "hardware TFLOP/s per GPU"
        row["predicted"] = narayanan_hardware_flops(run) / (p["step_time_s"] * run["gpus"]) / 1e12
        row["measured"] = run["hardware_tflops_per_gpu"]
    elif fam == "meg":
        row["metric"] = "model TFLOP/s per GPU"
        row["predicted"] = megatron_model_flops(run) / (p["step_time_s"] * run["gpus"]) / 1e12
        row["measured"] = run["model_tflops_per_gpu"]
    if "predicted" in row:
        row["error"] = row["predicted"] / row["measured"] - 1.0
    if "memory_gib" in run:
        st = p["stages"][0]
        mem = st["memory_bytes"]
        par = st["parameters"]
        total_params = par["layers"] + par["embedding"] + par["head"]
        # Figure 1 counts the transformer layers' parameters and optimizer state.
        statics = (mem["weights"] + mem["gradients"] + mem["optimizer"]) * par["layers"] / total_params
        gib = 1024.0 ** 3
        row["memory"] = {
            "weights_and_optimizer": (statics / gib, run["memory_gib"]["weights_and_optimizer"]),
            "activations": (mem["activations"] / gib, run["memory_gib"]["activations"]),
        }
    row["layout"] = "TP{} PP{} v{} b{} m{} {} {}{}".format(
        p["layout"]["tp"], p["layout"]["pp"], p["layout"]["v"], p["layout"]["micro_batch"],
        p["layout"]["microbatches"], p["schedule"], p["recompute"],
        " SP" if p["layout"]["sequence_parallel"] else "")
    return row


def table4(cli, data, directory):
    """Korthikanti et al.'s Table 4: one 22B layer's forward and backward, from a one-layer
    model's plan (its stage's busy time split by op is not in the JSON: the per-layer times are
    read from `pipesched plan --layer-times`)."""
    rows = []
    t4 = data["layer_times_ms"]
    for r in t4["rows"]:
        run = {"id": "table4", "model": {"layers": 48, "hidden": 6144, "heads": 64, "head_dim": 96,
                                         "ffn": 24576, "vocab": 51200},
               "attention": "materialized", "dropout": True}
        gpu = os.environ.get("VALIDATION_GPU_A100", "a100-sxm-80gb")
        cmd = [cli, "plan", "--model", model_file(run, directory), "--gpu", gpu,
               "--tp", "8", "--seq", "2048", "--micro-batch", "4", "--recompute", r["recompute"],
               "--sequence-parallel" if r["sequence_parallel"] else "--no-sequence-parallel",
               "--tp-comm-overlap", KORTHIKANTI_TP_OVERLAP, "--layer-times"]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"table 4: {' '.join(cmd)}\n{out.stderr}")
        t = json.loads(out.stdout)
        fwd = t["forward_s"] * 1e3
        bwd = (t["backward_input_s"] + t["backward_weight_s"] + t["recompute_s"]) * 1e3
        rows.append({"run": r["run"], "forward": (fwd, r["forward_ms"]),
                     "backward": (bwd, r["backward_ms"])})
    return rows


def timed(run):
    """Whether `run` measured a step time or a rate (what calibrate --runs fits to)."""
    return any(k in run for k in ("step_time_s", "hardware_tflops_per_gpu",
                                  "model_tflops_per_gpu"))


def calibrated(cli, runs, on, directory, compute_only=False):
    """`pipesched calibrate --runs` on the run `on` alone, or on every timed run of the family
    `on` names (with their setup keys), then every run of `runs` on the same GPU planned on the
    cluster it writes: what a user who measured one run (or one paper's runs) of a stack gets
    for the others on that GPU. Returns (the calibrate report, the ids calibrated on, rows as
    evaluate() gives them)."""
    first = [r for r in runs if r["id"] == on] or \
        [r for r in runs if family(r["id"]) == on and timed(r)]
    if not first:
        raise RuntimeError(f"--calibrate-on {on}: no such run or family")
    runs_path = os.path.join(directory, "calibration_runs.json")
    with open(runs_path, "w") as f:
        json.dump({"runs": [with_setup(r) for r in first]}, f)
    cluster = os.path.join(directory, "calibrated_cluster.json")
    cmd = [cli, "calibrate", "--runs", runs_path, "--gpu", first[0]["gpu"], "-o", cluster]
    if compute_only:
        cmd.append("--compute-only")
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"calibrate: {' '.join(cmd)}\n{out.stderr}")
    report = [line for line in (out.stdout + out.stderr).splitlines() if line.startswith("fitted")]
    ids = {r["id"] for r in first}
    return report, ids, [evaluate(cli, r, directory, cluster) for r in runs
                         if r["gpu"] == first[0]["gpu"] and timed(r)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "bin", "pipesched"))
    ap.add_argument("--data", default=os.path.join(ROOT, "tests", "data", "measured_runs.json"))
    ap.add_argument("--only", default="", help="run ids starting with this")
    ap.add_argument("--markdown", help="write the table as markdown to this file")
    ap.add_argument("--check", action="store_true", help="exit 1 past the thresholds")
    ap.add_argument("--write-runs", help="write the runs with their setup keys (for calibrate "
                    "--runs) to this file and stop")
    ap.add_argument("--calibrate-on", metavar="ID|FAMILY",
                    help="also calibrate the GPU on this run alone and predict every run with it "
                    "(the others of its family within the 'calibrated' threshold), or on every "
                    "timed run of a family (e.g. kor; every other family's runs within their "
                    "own thresholds)")
    ap.add_argument("--compute-only", action="store_true",
                    help="with --calibrate-on: fit the compute kernels' rate alone, not the "
                    "network's (calibrate --compute-only)")
    ap.add_argument("--searched", action="store_true",
                    help="search the micro-batch and chunks where a source states them "
                    "(what the planner would choose instead of what ran)")
    a = ap.parse_args()
    global SEARCHED
    SEARCHED = a.searched
    with open(a.data) as f:
        data = json.load(f)
    if a.write_runs:
        out = {"about": "tests/data/measured_runs.json with each run's setup keys "
                        "(scripts/validation.py run_setup)",
               "runs": [with_setup(r) for r in data["runs"]]}
        with open(a.write_runs, "w") as f:
            json.dump(out, f, indent=1)
        return 0
    failures = []
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for run in data["runs"]:
            if run["id"].startswith(a.only):
                rows.append(evaluate(a.cli, run, d))
        with_table4 = "layer_times_ms" in data and ("kor".startswith(a.only) or not a.only)
        t4 = table4(a.cli, data, d) if with_table4 else []
        if a.calibrate_on:
            fitted, cal_ids, cal_rows = calibrated(
                a.cli, [r for r in data["runs"] if r["id"].startswith(a.only)
                        or family(r["id"]) == a.calibrate_on or r["id"] == a.calibrate_on],
                a.calibrate_on, d, a.compute_only)
    lines = ["| run | metric | predicted | measured | error | plan |", "|---|---|---:|---:|---:|---|"]
    for r in rows:
        if "predicted" in r:
            lines.append("| {} | {} | {:.3f} | {:.3f} | {:+.1f} % | {} |".format(
                r["id"], r["metric"], r["predicted"], r["measured"], 100 * r["error"], r["layout"]))
        for k, (pred, meas) in r.get("memory", {}).items():
            err = pred / meas - 1.0
            lines.append("| {} | {} (GiB, first stage) | {:.2f} | {:.2f} | {:+.1f} % | {} |".format(
                r["id"], k.replace("_", " "), pred, meas, 100 * err, r["layout"]))
            if abs(err) > THRESHOLDS["kor"]["memory"]:
                failures.append(f"{r['id']} {k}: {100 * err:+.1f} %")
    for r in t4:
        for k in ("forward", "backward"):
            pred, meas = r[k]
            err = pred / meas - 1.0
            lines.append("| table 4: {} | {} (ms) | {:.2f} | {:.2f} | {:+.1f} % | TP8 b4 |".format(
                r["run"], k, pred, meas, 100 * err))
            if abs(err) > THRESHOLDS["table4"]["each"]:
                failures.append(f"table 4 {r['run']} {k}: {100 * err:+.1f} %")
    by_family = {}
    for r in rows:
        if "error" in r:
            fam = family(r["id"])
            by_family.setdefault(fam, []).append(abs(r["error"]))
            if abs(r["error"]) > THRESHOLDS[fam]["each"]:
                failures.append(f"{r['id']}: {100 * r['error']:+.1f} %")
    lines.append("")
    for fam, errs in by_family.items():
        mean = sum(errs) / len(errs)
        lines.append(f"{fam}: mean |error| {100 * mean:.2f} %, worst {100 * max(errs):.2f} % "
                     f"over {len(errs)} runs")
        if "mean" in THRESHOLDS[fam] and mean > THRESHOLDS[fam]["mean"]:
            failures.append(f"{fam}: mean |error| {100 * mean:.2f} %")
    if a.calibrate_on:
        lines += ["", f"calibrated on {a.calibrate_on} alone ({'; '.join(fitted)}):", "",
                  "| run | metric | predicted | measured | error | plan |", "|---|---|---:|---:|---:|---|"]
        whole_family = a.calibrate_on not in cal_ids
        errs = {}
        for r in cal_rows:
            own = r["id"] in cal_ids
            if whole_family and own:
                continue  # the fit itself; `calibrate` prints it
            lines.append("| {}{} | {} | {:.3f} | {:.3f} | {:+.1f} % | {} |".format(
                r["id"], " (calibrated on)" if own else "", r["metric"], r["predicted"],
                r["measured"], 100 * r["error"], r["layout"]))
            # Calibrated on one run: the threshold holds for its own family (its stack, model
            # and cluster at other scales), the others are reported. On a whole family: every
            # other family within its own threshold (the fit generalises).
            fam = family(r["id"])
            if own or (not whole_family and fam != family(a.calibrate_on)):
                continue
            limit = THRESHOLDS[fam]["each"] if whole_family else THRESHOLDS["calibrated"]["each"]
            errs.setdefault(fam, []).append(abs(r["error"]))
            if abs(r["error"]) > limit:
                failures.append(f"{r['id']} calibrated on {a.calibrate_on}: "
                                f"{100 * r['error']:+.1f} %")
        for fam, e in errs.items():
            lines += ["", f"calibrated: mean |error| {100 * sum(e) / len(e):.2f} %, worst "
                          f"{100 * max(e):.2f} % over {len(e)} other {fam} runs"]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(text)
    if failures:
        print("past the thresholds: " + "; ".join(failures))
        if a.check:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
