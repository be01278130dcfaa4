#!/usr/bin/env python3
"""`pipesched plan --export`: Megatron-LM's parser reads PREFIX.megatron.args as the plan says.

Runs `pipesched plan ARGS --json --export WORK/best`, builds an argparse parser from
tests/data/megatron_args_spec.json (the flags as Megatron-LM's parser defines them: type,
choices, action), parses the exported file with it, applies the consistency checks Megatron's
validation applies to these flags (each assertion names the check in their source), and
compares the values with the plan's JSON.

usage: framework_export_check.py CLI SPEC WORK [--expect dest=value,...] [--absent] -- ARGS...

--expect compares str(value) of a parsed dest, or of moe_layers and first_moe_layer (the
layers with experts, the first of them) derived from --moe-layer-freq.
"""
import argparse
import json
import os
import re

from plan_export_run import check, expected_values, fail, read_plan_export, run_plan_export


def moe_freq(text):
    # arguments.py moe_freq_type: an int, or (with a "[") a Python list expression of digits,
    # commas, brackets, parentheses, + and * only (_eval_pattern), evaluated.
    if "[" not in text:
        return int(text)
    if re.search(r"[^,\d\[\]\(\)\+\*]", text):
        raise argparse.ArgumentTypeError(f"invalid pattern: {text}")
    return eval(text, {"__builtins__": {}})


def megatron_parser(spec):
    parser = argparse.ArgumentParser(prog="megatron", allow_abbrev=False)
    types = {"int": int, "str": str, "float": float, "moe_freq": moe_freq}
    for flag, f in spec["flags"].items():
        if f.get("action") in ("store_true", "store_false"):
            parser.add_argument(flag, dest=f["dest"], action=f["action"])
        else:
            kw = {"dest": f["dest"], "type": types[f["type"]], "default": f.get("default")}
            if "choices" in f:
                kw["choices"] = f["choices"]
            parser.add_argument(flag, **kw)
    return parser


def layout_stages(layout):
    # core/transformer/pipeline_parallel_layer_layout.py parse_str_to_list: "|" splits stages
    # (we never write the "(...)*n" or "x*n" shorthands or commas).
    return layout.split("|")


def main():
    o, prefix, run = run_plan_export("framework_export_check.py", [".megatron.args"])
    args_file = prefix + ".megatron.args"
    if o.absent:
        check(not os.path.exists(args_file), "PREFIX.megatron.args written for a plan Megatron cannot run")
        check(".megatron.args not written: " in run.stderr, "no note on stderr: " + run.stderr)
        print("megatron args export ok: not written (" + run.stderr.strip().splitlines()[0] + ")")
        return
    doc, plan, spec, lines = read_plan_export(o, run, args_file)
    layout = plan["layout"]
    expect = expected_values(o)
    tokens = []
    for line in lines:
        words = line.split()
        check(1 <= len(words) <= 2 and words[0].startswith("--"),
              f"not one flag (and value) per line: {line!r}")
        tokens += words
    # Every flag is one of the spec's (argparse exits 2 on an unknown flag or a bad choice).
    a = megatron_parser(spec).parse_args(tokens)

    tp, pp, cp = a.tensor_model_parallel_size, a.pipeline_model_parallel_size, a.context_parallel_size
    gpus = doc["gpus"]
    # megatron/training/arguments.py validate_args: data_parallel_size = world / (tp*pp*cp).
    check(gpus % (tp * pp * cp) == 0, "world size not divisible by tp*pp*cp")
    dp = gpus // (tp * pp * cp)
    # validate_args: required arguments, and max_position_embeddings >= seq_length.
    for required in ("num_layers", "hidden_size", "num_attention_heads", "max_position_embeddings"):
        check(getattr(a, required) is not None, f"--{required.replace('_', '-')} missing")
    check(a.max_position_embeddings >= a.seq_length, "max_position_embeddings < seq_length")
    # TransformerConfig.__post_init__: heads and query groups against TP; kv_channels from
    # hidden / heads when not given (validate_args asserts the division).
    check(a.num_attention_heads % tp == 0, "num_attention_heads not a multiple of tp")
    if a.group_query_attention:
        g = a.num_query_groups
        check(g % tp == 0 or tp % g == 0, "num_query_groups neither a multiple nor a divisor of tp")
        check(a.num_attention_heads % g == 0, "num_query_groups does not divide the heads")
    if a.kv_channels is None:
        check(a.hidden_size % a.num_attention_heads == 0, "hidden not divisible by heads")
    num_layers = a.num_layers

    # validate_args, "Uneven virtual pipeline parallelism": no more than one of
    # --num-layers-per-virtual-pipeline-stage, --num-virtual-stages-per-pipeline-rank,
    # --pipeline-model-parallel-layout.
    check(not (a.num_layers_per_virtual_pipeline_stage is not None
               and a.pipeline_model_parallel_layout is not None),
          "both --num-layers-per-virtual-pipeline-stage and --pipeline-model-parallel-layout")
    if a.pipeline_model_parallel_layout is not None:
        stages = layout_stages(a.pipeline_model_parallel_layout)
        # validate_args: the layout's stage count divisible by pipeline_model_parallel_size.
        check(len(stages) % pp == 0, "layout stages not divisible by pp")
        vpp = len(stages) // pp
        flat = "".join(stages)
        # PipelineParallelLayerLayout.validate_layer_layout: known characters, embedding first,
        # loss last, each once, decoder layers == num_layers.
        check(set(flat) <= set("ELtm"), "unknown layout character")
        check(flat[0] == "E" and flat[-1] == "L", "layout must start with E and end with L")
        check(flat.count("E") == 1 and flat.count("L") == 1, "E and L exactly once")
        check(flat.count("t") == num_layers, "layout decoder layers != --num-layers")
        per_chunk = [s.count("t") for s in stages]
    elif a.num_layers_per_virtual_pipeline_stage is not None:
        # validate_args: num_layers divisible by pp, and per stage by layers per virtual stage.
        check(num_layers % pp == 0, "num layers not divisible by pp")
        check((num_layers // pp) % a.num_layers_per_virtual_pipeline_stage == 0,
              "layers per stage not divisible by layers per virtual stage")
        vpp = (num_layers // pp) // a.num_layers_per_virtual_pipeline_stage
        per_chunk = [a.num_layers_per_virtual_pipeline_stage] * (pp * vpp)
    else:
        # validate_args: "Number of layers should be divisible by the pipeline-model-parallel size".
        check(num_layers % pp == 0, "num layers not divisible by pp")
        vpp = 1
        per_chunk = [num_layers // pp] * pp
    if vpp > 1:
        # validate_args: the interleaved schedule needs pipeline_model_parallel_size > 1, or > 2
        # without overlapped transfers (--no-overlap-p2p-communication).
        check(pp > (1 if a.overlap_p2p_comm else 2), "interleaved schedule with pp too small")
    else:
        check(a.microbatch_group_size_per_vp_stage is None,
              "a group size without virtual stages")
        check(a.overlap_p2p_comm, "--no-overlap-p2p-communication without virtual stages")

    # num_microbatches_calculator: global batch divisible by micro batch * data parallel.
    check(a.global_batch_size % (a.micro_batch_size * dp) == 0,
          "global batch not divisible by micro batch * dp")
    num_microbatches = a.global_batch_size // (a.micro_batch_size * dp)
    if vpp > 1:
        # ModelParallelConfig.__post_init__: None means pipeline_model_parallel_size.
        n = a.microbatch_group_size_per_vp_stage or pp
        # schedules.py forward_backward_pipelining_with_interleaving: PP <= N <= M, and the
        # remainder M % N is 0 or at least PP.
        check(pp <= n <= num_microbatches, f"group size {n} outside [{pp}, {num_microbatches}]")
        check(num_microbatches % n == 0 or num_microbatches % n >= pp,
              "last micro-batch group shorter than pp")
    # TransformerConfig.__post_init__: full needs a method (uniform, block) and a layer count;
    # selective takes neither.
    if a.recompute_granularity == "full":
        check(a.recompute_method in ("uniform", "block") and a.recompute_num_layers is not None,
              "full recompute without method and layer count")
    else:
        check(a.recompute_method is None and a.recompute_num_layers is None,
              "recompute method or layers without full granularity")
    # validate_args: sequence parallelism is switched off when tp = 1 (ours would be lost).
    check(not (a.sequence_parallel and tp == 1), "sequence parallel with tp = 1")
    # validate_args: seq-length a multiple of 2 * context-parallel-size when cp > 1.
    check(cp == 1 or a.seq_length % (2 * cp) == 0, "seq length vs context parallel size")

    # Mixtures of experts. validate_args: --num-experts 0 means none, EP > 1 needs experts and
    # divides them, ETP None becomes tp; parallel_state.py: the world a multiple of ETP*EP*PP.
    if a.num_experts == 0:
        a.num_experts = None
    moe = a.num_experts is not None
    ep = a.expert_model_parallel_size
    etp = a.expert_tensor_parallel_size or tp
    if ep > 1:
        check(moe, "expert parallelism without --num-experts")
        check(a.num_experts % ep == 0, f"num_experts {a.num_experts} not a multiple of ep {ep}")
    check(gpus % (etp * ep * pp) == 0, "world size not divisible by etp*ep*pp")
    # TransformerConfig.__post_init__: padding to capacity needs a capacity factor.
    check(not a.moe_pad_expert_input_to_capacity or a.moe_expert_capacity_factor is not None,
          "--moe-pad-expert-input-to-capacity without --moe-expert-capacity-factor")
    if moe:
        # gpt_layer_specs.py: an int N puts experts in layers i % N == 0; a list has one 0/1
        # entry per layer.
        freq = a.moe_layer_freq
        if isinstance(freq, list):
            check(len(freq) == num_layers,
                  f"moe_layer_freq has {len(freq)} entries, not num_layers = {num_layers}")
            check(set(freq) <= {0, 1}, "moe_layer_freq entries other than 0 and 1")
            pattern = freq
        else:
            pattern = [1 if i % freq == 0 else 0 for i in range(num_layers)]
        # For --expect: the layers with experts and the first of them.
        a.moe_layers = sum(pattern)
        a.first_moe_layer = pattern.index(1) if 1 in pattern else None
        # router.py selects top-k of the num_experts scores.
        check(1 <= a.moe_router_topk <= a.num_experts, "moe_router_topk outside [1, num_experts]")
        # TransformerConfig.__post_init__: top-1 with the softmax score function (the default)
        # needs the softmax before the top-k.
        check(a.moe_router_topk != 1 or a.moe_router_pre_softmax,
              "topk 1 without --moe-router-pre-softmax")
        # moe_layer.py refuses to train with TP > 1 and without SP (ModelParallelConfig warns
        # for EP > 1 and TP > 1 without it).
        check(tp == 1 or a.sequence_parallel, "MoE with tp > 1 without --sequence-parallel")
        # TransformerConfig.__post_init__: biases in the experts only with ETP 1.
        check(not a.add_bias_linear or etp == 1, "MoE with biases and expert tensor parallelism")
        check(a.moe_shared_expert_intermediate_size is None
              or a.moe_shared_expert_intermediate_size > 0,
              "moe_shared_expert_intermediate_size not positive")
        if a.moe_expert_capacity_factor is not None:
            check(a.moe_router_load_balancing_type in
                  ("aux_loss", "seq_aux_loss", "global_aux_loss", "none"),
                  "capacity factor with a load balancing other than aux_loss, seq_aux_loss, "
                  "global_aux_loss or none")
    else:
        # TransformerConfig.__post_init__: an expert size without experts (every layer MoE).
        check(a.moe_ffn_hidden_size is None, "--moe-ffn-hidden-size without --num-experts")
    if a.multi_latent_attention:
        # validate_args: MLA and GQA are mutually exclusive.
        check(not a.group_query_attention, "--multi-latent-attention with --group-query-attention")
        # MLATransformerConfig.__post_init__: rope fusion (on unless --no-rope-fusion; validate_args
        # turns it off for position embeddings other than rope) only with yarn, MLA's default.
        check(a.position_embedding_type != "rope" or (a.rope_type or "yarn") == "yarn",
              "MLA with rope fusion and a rope type other than yarn")

    # The values against the plan's JSON.
    want = {
        "tp": (tp, layout["tp"]), "pp": (pp, layout["pp"]), "dp": (dp, layout["dp"]),
        "v": (vpp, layout["v"]), "micro_batch": (a.micro_batch_size, layout["micro_batch"]),
        "microbatches": (num_microbatches, layout["microbatches"]),
        "sequence_parallel": (a.sequence_parallel, layout["sequence_parallel"]),
        "partition": (per_chunk, plan["partition"]),
        "recompute": (a.recompute_granularity or "none", plan["recompute"]),
        "layers": (num_layers, sum(plan["partition"])),
        "sequence": (a.seq_length, doc["sequence"]),
        "global_batch": (a.global_batch_size, doc["global_batch"]),
        "distributed optimizer": (a.use_distributed_optimizer,
                                  doc["optimizer_sharding"] == "optimizer"),
        "context parallel": (cp, layout["cp"]),
        "expert parallel": (ep, layout["ep"]),
    }
    if vpp > 1 and "microbatch_group_size_per_vp_stage" not in dict(expect):
        want["group size"] = (a.microbatch_group_size_per_vp_stage, pp)  # the default, p
    for key, (got, expected) in want.items():
        check(got == expected, f"{key}: Megatron reads {got!r}, the plan says {expected!r}")
    if vpp > 1:
        # The exported order runs Megatron's warm-up with that group size (get_pp_rank_microbatches):
        # stage 0 runs 2(p-1) + (v-1)N forwards, then the steady phase's first, before a backward.
        n = a.microbatch_group_size_per_vp_stage
        with open(prefix + ".schedule.json") as f:
            ops = [op for op in json.load(f)["ops"][0] if op["kind"] != "R"]
        first_backward = next(i for i, op in enumerate(ops) if op["kind"] != "F")
        expected = min(2 * (pp - 1) + (vpp - 1) * n + 1, num_microbatches * vpp)
        check(first_backward == expected,
              f"stage 0 runs {first_backward} forwards before a backward, not {expected}")
    for dest, value in expect:
        check(str(getattr(a, dest)) == value, f"{dest}: {getattr(a, dest)!r}, expected {value}")
    print(f"megatron args export ok: {plan['schedule']} tp {tp} pp {pp} v {vpp} dp {dp}, "
          f"{len(lines)} arguments")


if __name__ == "__main__":
    main()
