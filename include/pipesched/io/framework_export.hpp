#pragma once

// A chosen plan as a training framework reads it (docs/formats.md, "Exported plan"):
// Megatron-LM's command-line arguments, spelled as megatron/training/arguments.py and the
// config dataclasses its parser is built from read them (tests/data/megatron_args_spec.json
// names the snapshot they were read from), and torchtitan's `--section.option` overrides and a
// Python config function, spelled as its Trainer.Config dataclasses and their tyro command line
// read them (tests/data/torchtitan_config_spec.json, made by scripts/torchtitan_config_spec.py).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "pipesched/ir/placement.hpp"
#include "pipesched/plan/job.hpp"
#include "pipesched/plan/planner.hpp"

namespace pipesched {

namespace detail {

/// The interleaved schedule's micro-batches per round of the virtual stages: the plan's group
/// size, p when it left it to the generator's default.
inline std::uint32_t group_size_of(const plan_entry& e) {
  return e.choice.group_size == 0 ? e.choice.layout.pp : e.choice.group_size;
}

/// Whether the partition gives global chunk `g` nothing to hold: no layer, and neither the
/// embedding (chunk 0) nor the head (the last chunk).
inline bool chunk_is_empty(const plan_entry& e, std::size_t g) {
  return e.choice.partition[g] == 0 && g != 0 && g + 1 != e.choice.partition.size();
}

/// Tokens of one micro-batch of one data-parallel rank, before CP or SP split them.
inline std::uint64_t microbatch_tokens(const training_job& job, const plan_entry& e) {
  return std::uint64_t{e.choice.layout.micro_batch} * job.sequence;
}

/// Sequences per optimizer step over all data-parallel ranks (CP ranks share theirs).
inline std::uint64_t global_batch_of(const plan_entry& e) {
  const plan_layout& l = e.choice.layout;
  return std::uint64_t{l.micro_batch} * l.microbatches * l.dp;
}

}  // namespace detail

/// Why Megatron-LM's arguments cannot describe `e` as planned, or empty when they can: Megatron
/// trains with 1F1B and interleaved 1F1B (loop placement) here; its distributed optimizer shards
/// the optimizer states only (ZeRO-1), sharded gradients or weights being Megatron-FSDP, another
/// code path with other memory; its interleaved schedule takes p ≤ N ≤ m micro-batches per group
/// with m mod N either 0 or at least p, and p > 1 (p > 2 with blocking transfers); context
/// parallelism splits the sequence into 2·CP pieces; its MoE layer trains with TP > 1 only
/// under sequence parallelism, and takes biases only without expert tensor parallelism; its
/// memory-efficient norm is apex's LayerNorm in the local layers, not selected here.
namespace detail {

/// Why torchtitan's export would not run the planned model: its mixture of experts and MLA
/// (expert parallelism, the routed experts, the latent projections) are not among the
/// arguments written yet, and a dense model's would silently train another model. Empty for a
/// dense model without MLA.
inline std::string moe_export_refusal(const training_job& job) {
  if (job.model.is_moe() || job.model.mla) {
    return std::string("the model has ") + (job.model.is_moe() ? "experts" : "MLA attention") +
           ", whose torchtitan arguments (experts, top-k, expert parallelism, MLA ranks) are not "
           "written yet";
  }
  return {};
}

}  // namespace detail

inline std::string megatron_unsupported(const training_job& job, const plan_entry& e) {
  const plan_layout& l = e.choice.layout;
  const std::string& s = e.choice.schedule;
  using std::to_string;
  if (s != "1f1b" && s != "interleaved-1f1b") {
    return "Megatron-LM runs 1f1b and interleaved-1f1b, not " + s;
  }
  const transformer_spec& t = job.model;
  if (t.is_moe() && l.tp > 1 && !l.sequence_parallel) {
    // moe_layer.py's forward raises when training with TP > 1 and without SP.
    return "Megatron-LM trains a mixture of experts with tp > 1 only with sequence parallelism "
           "(its MoE layer refuses otherwise): plan with SP, not tp = " +
           to_string(l.tp) + " without it";
  }
  if (t.is_moe() && t.bias && l.tp > 1) {
    // TransformerConfig.__post_init__; the planner splits the experts over TP as Megatron's
    // expert tensor parallelism does by default (ETP = TP).
    return "Megatron-LM's experts take biases only with expert tensor parallelism 1, and the "
           "plan splits them over tp = " +
           to_string(l.tp);
  }
  if (t.memory_efficient_norm) {
    // transformer_config.py: memory_efficient_layer_norm reaches apex's LayerNorm only, in the
    // local layers (not Transformer Engine's), which the arguments written here do not select.
    return "Megatron-LM's memory-efficient norm (--memory-efficient-layer-norm) is apex's "
           "LayerNorm in its local layers only; plan without --memory-efficient-norm";
  }
  if (job.sharding == optimizer_sharding::gradients ||
      job.sharding == optimizer_sharding::weights) {
    return "Megatron-LM's distributed optimizer shards the optimizer states only "
           "(--optimizer-sharding optimizer), not the gradients or weights";
  }
  if (l.chunks > 1) {
    const std::uint32_t n = detail::group_size_of(e);
    const std::uint32_t m = l.microbatches;
    if (l.pp < (job.blocking_p2p ? 3u : 2u)) {
      return "Megatron-LM's interleaved schedule needs pp > " +
             std::string(job.blocking_p2p ? "2 with blocking transfers (--p2p blocking)" : "1") +
             ", not pp = " + to_string(l.pp);
    }
    // schedules.py forward_backward_pipelining_with_interleaving refuses these groups.
    if (n < l.pp || n > m || (m % n != 0 && m % n < l.pp)) {
      return "Megatron-LM's interleaved schedule needs p <= N <= m micro-batches per group and "
             "m mod N = 0 or >= p, not N = " +
             to_string(n) + " with p = " + to_string(l.pp) + ", m = " + to_string(m);
    }
  }
  if (l.cp > 1 && job.sequence % (2 * std::uint64_t{l.cp}) != 0) {
    return "Megatron-LM splits each sequence into 2*cp pieces: the sequence (" +
           to_string(job.sequence) +
           " tokens) must be a multiple of 2*cp = " + to_string(2 * std::uint64_t{l.cp});
  }
  return {};
}

/// Megatron-LM's arguments for the plan `e` of `job`, one "--flag" or "--flag value" per line
/// (no quoting needed: `pretrain_gpt.py $(cat PREFIX.megatron.args)`; only --moe-layer-freq's
/// list holds glob characters, which match no file name in practice): the model's shape and
/// structure as the planner costed it (with its experts and MLA ranks), the layout (with expert
/// parallelism), the partition, the group size, recompute, the batch, the optimizer sharding
/// and the gradient reduction's overlap. Call only when
/// megatron_unsupported(job, e) is empty.
inline std::string megatron_args(const training_job& job, const plan_entry& e) {
  const plan_layout& l = e.choice.layout;
  const transformer_spec& t = job.model;
  std::string out;
  const auto arg = [&out](std::string_view flag, const std::string& value = {}) {
    out += std::string(flag);
    if (!value.empty()) {
      out += " " + value;
    }
    out += "\n";
  };
  using std::to_string;
  arg("--num-layers", to_string(t.layers));
  arg("--hidden-size", to_string(t.hidden));
  // Megatron's own default (4h, or 8h/3 rounded for SwiGLU) is not the model's.
  arg("--ffn-hidden-size", to_string(t.ffn));
  arg("--num-attention-heads", to_string(t.heads));
  if (t.mla) {
    // MLA's own head sizes replace kv_channels and the query groups (validate_args refuses
    // GQA with MLA); the query's down projection is always there here (q_lora_rank >= 1).
    arg("--multi-latent-attention");
    arg("--q-lora-rank", to_string(t.q_lora_rank));
    arg("--kv-lora-rank", to_string(t.kv_lora_rank));
    arg("--qk-head-dim", to_string(t.qk_nope_head_dim));
    arg("--qk-pos-emb-head-dim", to_string(t.qk_rope_head_dim));
    arg("--v-head-dim", to_string(t.v_head_dim));
  } else {
    if (t.kv() != t.heads) {
      // num_query_groups is read only with --group-query-attention (argument_utils.py).
      arg("--group-query-attention");
      arg("--num-query-groups", to_string(t.kv()));
    }
    if (t.head_dim != 0 && t.head_dim * t.heads != t.hidden) {
      arg("--kv-channels", to_string(t.head_dim));
    }
  }
  if (t.is_moe()) {
    arg("--num-experts", to_string(t.experts));
    if (t.dense_layers > 0) {
      // Megatron's per-layer pattern, 0 dense and 1 experts, one entry per layer.
      const std::uint32_t moe = t.moe_layers();
      arg("--moe-layer-freq", "([0]*" + to_string(t.dense_layers) +
                                  (moe > 0 ? "+[1]*" + to_string(moe) : std::string()) + ")");
    }
    arg("--moe-router-topk", to_string(t.top_k));
    if (t.top_k == 1) {
      // TransformerConfig.__post_init__: a softmax over one score has no gradient.
      arg("--moe-router-pre-softmax");
    }
    arg("--moe-ffn-hidden-size", to_string(t.expert_ffn));
    if (t.shared_experts > 0) {
      // Megatron runs the shared experts as one MLP of their total size.
      arg("--moe-shared-expert-intermediate-size",
          to_string(std::uint64_t{t.shared_experts} * t.expert_ffn));
    }
    if (t.capacity_factor > 0.0) {
      // Drop and pad, as costed: each expert computes its whole capacity.
      arg("--moe-expert-capacity-factor", detail::shortest(t.capacity_factor));
      arg("--moe-pad-expert-input-to-capacity");
    }
    // As costed: the routed copies all-to-all over the EP ranks (MoEAlltoAllTokenDispatcher,
    // not the default all-gather) and each rank's experts as one grouped GEMM.
    arg("--moe-token-dispatcher-type", "alltoall");
    arg("--moe-grouped-gemm");
  }
  arg("--seq-length", to_string(job.sequence));
  // Required by validate_args, which also wants it at least the sequence length.
  arg("--max-position-embeddings", to_string(job.sequence));
  arg("--position-embedding-type",
      t.position == position_kind::rotary ? "rope" : "learned_absolute");
  arg("--normalization", t.norm == norm_kind::rmsnorm ? "RMSNorm" : "LayerNorm");
  if (t.mlp == mlp_kind::swiglu) {
    arg("--swiglu");
  }
  if (!t.bias) {
    arg("--disable-bias-linear");
  }
  if (!t.tied_embeddings) {
    arg("--untie-embeddings-and-output-weights");
  }
  if (!t.dropout) {
    // Megatron's dropouts default to 0.1; a model without dropout keeps no masks.
    arg("--attention-dropout", "0.0");
    arg("--hidden-dropout", "0.0");
  }
  // flash: FlashAttention (no s x s tensor kept); materialized: the scores and softmax as
  // separate kernels, Transformer Engine's unfused attention.
  arg("--attention-backend", t.attention == attention_kind::flash ? "flash" : "unfused");
  arg("--make-vocab-size-divisible-by", to_string(job.vocab_multiple));
  if (t.activation_bytes <= 2) {
    arg("--bf16");
  }
  if (t.activation_bytes == 1) {
    // Transformer Engine's FP8: E4M3 forward, E5M2 gradients.
    arg("--fp8-format", "hybrid");
  }
  arg("--tensor-model-parallel-size", to_string(l.tp));
  arg("--pipeline-model-parallel-size", to_string(l.pp));
  arg("--context-parallel-size", to_string(l.cp));
  if (t.is_moe()) {
    arg("--expert-model-parallel-size", to_string(l.ep));
  }
  // Even chunks: layers per virtual stage; otherwise Megatron's layout, one "|"-separated
  // entry per global chunk in model order (its flat order is virtual stage, then rank: ours),
  // the embedding "E" first and the loss "L" last. A chunk of no layer is an empty entry, so
  // Llama 3's ends read "E|" and "|L".
  bool even = true;
  for (std::uint32_t layers : e.choice.partition) {
    even = even && layers == e.choice.partition.front();
  }
  if (!even) {
    std::string layout;
    for (std::size_t g = 0; g < e.choice.partition.size(); ++g) {
      layout += g == 0 ? "E" : "|";
      layout += std::string(e.choice.partition[g], 't');
    }
    arg("--pipeline-model-parallel-layout", layout + "L");
  } else if (l.chunks > 1) {
    arg("--num-layers-per-virtual-pipeline-stage", to_string(e.choice.partition.front()));
  }
  if (l.chunks > 1) {
    arg("--microbatch-group-size-per-virtual-pipeline-stage", to_string(detail::group_size_of(e)));
    if (job.blocking_p2p) {
      // Megatron overlaps the interleaved schedule's transfers unless told not to; without
      // virtual stages it always waits for them (validate_args).
      arg("--no-overlap-p2p-communication");
    }
  }
  if (l.sequence_parallel) {
    arg("--sequence-parallel");
  }
  if (e.choice.recompute == recompute_kind::selective) {
    arg("--recompute-granularity", "selective");
  } else if (e.choice.recompute == recompute_kind::full) {
    // Every layer's input kept and the layer re-run: one layer per uniform unit.
    arg("--recompute-granularity", "full");
    arg("--recompute-method", "uniform");
    arg("--recompute-num-layers", "1");
  }
  arg("--micro-batch-size", to_string(l.micro_batch));
  arg("--global-batch-size", to_string(detail::global_batch_of(e)));
  if (job.sharding != optimizer_sharding::none) {
    arg("--use-distributed-optimizer");
  }
  if (job.overlap_grad_reduce) {
    arg("--overlap-grad-reduce");
  }
  if (!job.gradient_accumulation_fusion) {
    arg("--no-gradient-accumulation-fusion");
  }
  return out;
}

/// One torchtitan option: Trainer.Config.<section>.<field> = value, where value is a whole
/// number, a bool (a tyro flag), a string, or a list of lists of strings (one comma-separated
/// word per inner list on the command line).
struct torchtitan_option {
  std::string section;
  std::string field;
  std::variant<std::uint64_t, bool, std::string, std::vector<std::vector<std::string>>> value;
};

/// What torchtitan is told to run the plan: its options, the activation-checkpoint policy (the
/// tyro subcommand: none, selective or full) and, when torchtitan ships a config of the same
/// model, that config function and its model flavor (llama3_405b, "405B").
struct torchtitan_settings {
  std::vector<torchtitan_option> options;
  std::string activation_checkpoint;
  std::string base_config;  ///< empty: torchtitan has no config of this model
  std::string flavor;
};

/// Why torchtitan cannot run `e` as planned, or empty when it can. torchtitan places a stage's
/// chunks in a loop or a V (one route, no DualPipe); its FSDP2 shards the gradients with the
/// optimizer states (no ZeRO-1) and shards over the CP ranks whenever CP > 1; it runs
/// FlexAttention or SDPA, never materialized scores; its norms keep their inputs; every model
/// part needs a module; a micro-batch's tokens must split evenly over SP and 2·CP (trainer.py).
inline std::string torchtitan_unsupported(const training_job& job, const plan_entry& e) {
  const plan_layout& l = e.choice.layout;
  using std::to_string;
  const placement_kind k = e.sched.layout().kind();
  if (const std::string why = detail::moe_export_refusal(job); !why.empty()) {
    return why;
  }
  if (k == placement_kind::dual) {
    return "torchtitan runs one route through the stages; " + e.choice.schedule +
           " has two (DualPipe's, entering at both ends)";
  }
  if (k == placement_kind::custom) {
    return "torchtitan places a stage's chunks in a loop or a V, not " + e.choice.schedule +
           "'s custom placement";
  }
  if (l.pp == 1 && l.chunks > 1) {
    return "torchtitan runs one model part per rank without pipeline parallelism, not v = " +
           to_string(l.chunks);
  }
  if (job.sharding == optimizer_sharding::optimizer) {
    return "torchtitan's FSDP2 shards the gradients with the optimizer states: it has no "
           "optimizer-states-only sharding (--optimizer-sharding optimizer); plan with "
           "gradients, weights or none";
  }
  if (job.sharding == optimizer_sharding::none && l.cp > 1) {
    return "torchtitan shards the parameters over the CP ranks (FSDP) whenever cp > 1: plan "
           "with --optimizer-sharding gradients or weights";
  }
  if (job.model.attention == attention_kind::materialized) {
    return "torchtitan runs flash attention (FlexAttention or SDPA), not materialized scores";
  }
  if (job.model.memory_efficient_norm) {
    return "torchtitan's norms keep their input for the backward (no memory-efficient norm); "
           "plan without --memory-efficient-norm";
  }
  for (std::size_t g = 0; g < e.choice.partition.size(); ++g) {
    if (detail::chunk_is_empty(e, g)) {
      return "torchtitan builds each model part from its modules: global chunk " + to_string(g) +
             " holds no layer, embedding or head";
    }
  }
  const std::uint64_t split =
      (l.sequence_parallel ? std::uint64_t{l.tp} : 1) * (l.cp > 1 ? 2 * std::uint64_t{l.cp} : 1);
  if (detail::microbatch_tokens(job, e) % split != 0) {
    return "torchtitan splits a micro-batch's " + to_string(detail::microbatch_tokens(job, e)) +
           " tokens over SP and 2*cp: they must be a multiple of " + to_string(split);
  }
  return {};
}

namespace detail {

/// PyTorch's ScheduleInterleaved1F1B runs micro-batches in rounds of m / max(1, floor(m/p))
/// (0 when that does not divide m, which it refuses).
inline std::uint32_t torch_interleaved_round(std::uint32_t p, std::uint32_t m) {
  const std::uint32_t rounds = std::max<std::uint32_t>(1, m / p);
  return m % rounds == 0 ? m / rounds : 0;
}

/// torchtitan's name for the plan's schedule, and whether it must run the exported order
/// (PREFIX.compute.csv) because PyTorch's class of that name would run another order or refuse
/// the shape. With a CSV the name only places the stages: in a loop, or in a V for the classes
/// torchtitan's pipeline_parallel.py places so.
struct torchtitan_schedule {
  std::string name;
  bool csv = false;
};

inline torchtitan_schedule torchtitan_schedule_of(const plan_entry& e) {
  const plan_layout& l = e.choice.layout;
  const std::string& s = e.choice.schedule;
  if (e.sched.layout().kind() == placement_kind::v_shape) {
    return {s == "dualpipev" ? "DualPipeV" : "ZBVZeroBubble", true};
  }
  if (s == "gpipe" && l.chunks == 1) {
    return {"GPipe", false};
  }
  // Schedule1F1B refuses m < p; with v = 1 the interleaved order is 1F1B's.
  if ((s == "1f1b" || s == "interleaved-1f1b") && l.chunks == 1) {
    return {"1F1B", l.microbatches < l.pp};
  }
  if (s == "interleaved-1f1b") {
    // Megatron's table and warm-up, which PyTorch's class shares when its round is our group.
    const bool same = torch_interleaved_round(l.pp, l.microbatches) == group_size_of(e);
    return {"Interleaved1F1B", !same};
  }
  return {"PipelineScheduleMulti", true};
}

}  // namespace detail

/// torchtitan's options for the plan `e` of `job`. `csv_path` is where PREFIX.compute.csv
/// (the compute-only order that torchtitan's `_load_csv(path)` reads) is, as torchtitan will
/// open it. Call only when torchtitan_unsupported(job, e) is empty.
inline torchtitan_settings torchtitan_settings_of(const training_job& job,
                                                  const plan_entry& e,
                                                  std::string_view csv_path) {
  const plan_layout& l = e.choice.layout;
  torchtitan_settings out;
  const auto set = [&out](const char* section, const char* field, auto value) {
    out.options.push_back({section, field, std::move(value)});
  };
  using u64 = std::uint64_t;
  const bool sharded =
      job.sharding == optimizer_sharding::gradients || job.sharding == optimizer_sharding::weights;
  set("parallelism", "data_parallel_replicate_degree", sharded ? u64{1} : l.dp);
  set("parallelism", "data_parallel_shard_degree", sharded ? l.dp : u64{1});
  if (sharded) {
    // ZeRO-2 keeps a chunk's gathered weights from its forward to its backward; ZeRO-3 gathers
    // them again for the backward.
    set("parallelism", "fsdp_reshard_after_forward",
        std::string(job.sharding == optimizer_sharding::weights ? "always" : "never"));
  }
  set("parallelism", "tensor_parallel_degree", u64{l.tp});
  if (l.tp > 1) {
    set("parallelism", "enable_sequence_parallel", l.sequence_parallel);
  }
  set("parallelism", "context_parallel_degree", u64{l.cp});
  if (l.cp > 1) {
    // Each rank two pieces of the sequence, one from each end: the causal mask's balance.
    set("parallelism", "context_parallel_load_balancer", std::string("headtail"));
  }
  set("parallelism", "pipeline_parallel_degree", u64{l.pp});
  if (l.pp > 1) {
    const detail::torchtitan_schedule s = detail::torchtitan_schedule_of(e);
    set("parallelism", "pipeline_parallel_schedule", s.name);
    if (s.csv) {
      set("parallelism", "pipeline_parallel_schedule_csv", std::string(csv_path));
    }
    // Each global chunk's modules, model order: the embedding in the first, the final norm
    // and the LM head in the last, so a chunk of no layer holds only those.
    std::vector<std::vector<std::string>> parts;
    std::uint32_t layer = 0;
    for (std::size_t g = 0; g < e.choice.partition.size(); ++g) {
      std::vector<std::string> part;
      if (g == 0) {
        part.emplace_back("tok_embeddings");
      }
      for (std::uint32_t i = 0; i < e.choice.partition[g]; ++i) {
        part.push_back("layers." + std::to_string(layer++));
      }
      if (g + 1 == e.choice.partition.size()) {
        part.emplace_back("norm");
        part.emplace_back("lm_head");
      }
      parts.push_back(std::move(part));
    }
    set("parallelism", "module_fqns_per_model_part", std::move(parts));
    set("parallelism", "num_pp_microbatches", u64{l.microbatches});
  }
  const u64 tokens = detail::microbatch_tokens(job, e);
  set("training", "num_tokens_per_microbatch_per_dp_rank", tokens);
  // Without pipeline parallelism torchtitan runs the m micro-batches as gradient accumulation.
  set("training", "num_tokens_per_train_step", detail::global_batch_of(e) * job.sequence);
  set("training", "max_context_length", u64{job.sequence});
  if (l.pp > 1) {
    set("training", "disable_cuda_graphs", true);  // Trainer.Config refuses CUDA graphs with PP
  }
  if (job.model.activation_bytes == 4) {
    set("training", "mixed_precision_param", std::string("float32"));
  }
  switch (e.choice.recompute) {
    case recompute_kind::none:
      out.activation_checkpoint = "none";
      break;
    case recompute_kind::selective:
      // torchtitan's selective policy is per op (matmul and attention outputs kept, the rest
      // recomputed), not Korthikanti's attention-core recompute: the closest it has.
      out.activation_checkpoint = "selective";
      break;
    case recompute_kind::full:
      out.activation_checkpoint = "full";
      break;
  }
  // torchtitan's Llama 3 flavors (torchtitan/models/llama3/__init__.py), as the presets'.
  struct flavor {
    const char* config;
    const char* name;
    std::uint32_t layers;
    std::uint64_t hidden, ffn;
    std::uint32_t heads;
  };
  for (const flavor& f : {flavor{"llama3_8b", "8B", 32, 4096, 14336, 32},
                          flavor{"llama3_70b", "70B", 80, 8192, 28672, 64},
                          flavor{"llama3_405b", "405B", 126, 16384, 53248, 128}}) {
    const transformer_spec& t = job.model;
    if (t.layers == f.layers && t.hidden == f.hidden && t.ffn == f.ffn && t.heads == f.heads &&
        t.kv() == 8 && t.vocab == 128256 && t.mlp == mlp_kind::swiglu &&
        t.norm == norm_kind::rmsnorm && !t.tied_embeddings && !t.dropout && !t.bias &&
        t.position == position_kind::rotary && (t.head_dim == 0 || t.head_dim == 128)) {
      out.base_config = f.config;
      out.flavor = f.name;
    }
  }
  return out;
}

/// `--section.field value` lines, one option per line, spelled as the dataclass fields (tyro
/// reads '_' and '-' alike); a bool as its flag or its `no_` inverse; the activation-checkpoint
/// subcommand last, as tyro wants its own options after it.
inline std::string torchtitan_args(const torchtitan_settings& s) {
  std::string out;
  for (const torchtitan_option& o : s.options) {
    const std::string flag = "--" + o.section + ".";
    if (const bool* b = std::get_if<bool>(&o.value)) {
      out += flag + (*b ? "" : "no_") + o.field + "\n";
      continue;
    }
    out += flag + o.field + " ";
    if (const auto* n = std::get_if<std::uint64_t>(&o.value)) {
      out += std::to_string(*n);
    } else if (const auto* t = std::get_if<std::string>(&o.value)) {
      out += *t;
    } else {
      const auto& lists = std::get<std::vector<std::vector<std::string>>>(o.value);
      for (std::size_t i = 0; i < lists.size(); ++i) {
        out += i == 0 ? "" : " ";
        for (std::size_t j = 0; j < lists[i].size(); ++j) {
          out += (j == 0 ? "" : ",") + lists[i][j];
        }
      }
    }
    out += "\n";
  }
  return out + "activation-checkpoint:" + s.activation_checkpoint + "\n";
}

namespace detail {

/// A Python string literal of `s` (backslashes and quotes escaped; control characters as \x).
inline std::string python_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      constexpr const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[(c >> 4) & 0xf];
      out += hex[c & 0xf];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace detail

/// A torchtitan config function (a recipe for torchtitan_recipes/): `pipesched_plan()` derives
/// from torchtitan's config of the same model and sets the options torchtitan_args() writes.
/// `summary` is the plan's one-line description for the header comment. Call only when
/// `s.base_config` is not empty.
inline std::string torchtitan_config(const training_job& job,
                                     const torchtitan_settings& s,
                                     std::string_view summary) {
  const bool fp8 = job.model.activation_bytes == 1;
  std::string out =
      "# torchtitan config for pipesched's plan (pipesched plan --export): " +
      std::string(summary) +
      "\n# Copy into torchtitan_recipes/ and run with --module torchtitan_recipes.<this file's "
      "name> --config pipesched_plan.\n# The same options as the .torchtitan.args file beside "
      "it.\n\n";
  out += "from torchtitan.config import ParallelismConfig\n";
  if (fp8) {
    out += "from torchtitan.components.quantization import Float8LinearConverter\n";
  }
  if (s.activation_checkpoint != "none") {
    out += "from torchtitan.distributed.activation_checkpoint import " +
           std::string(s.activation_checkpoint == "full" ? "FullAC" : "SelectiveAC") + "\n";
  }
  out += "from torchtitan.models.llama3 import model_registry\n";
  out += "from torchtitan.models.llama3.config_registry import " + s.base_config + "\n";
  out += "from torchtitan.trainer import Trainer\n\n\n";
  out += "def pipesched_plan() -> Trainer.Config:\n";
  out += "    config = " + s.base_config + "()\n";
  if (fp8) {
    // As torchtitan's 405B config converts its linear layers (the LM head stays bf16).
    out += "    config.model_spec = model_registry(\n        " + detail::python_string(s.flavor) +
           ",\n        converters=[\n            Float8LinearConverter.Config(\n"
           "                filter_fqns=[\"lm_head\"],\n"
           "                model_compile_enabled=config.compile.enable\n"
           "                and \"model\" in config.compile.components,\n"
           "            ),\n        ],\n    )\n";
  } else {
    out += "    # bf16 as planned (the base config may convert linear layers to float8)\n";
    out += "    config.model_spec = model_registry(" + detail::python_string(s.flavor) + ")\n";
  }
  // A fresh section, so none of the base config's degrees or pipeline options survives.
  out += "    config.parallelism = ParallelismConfig()\n";
  for (const torchtitan_option& o : s.options) {
    out += "    config." + o.section + "." + o.field + " = ";
    if (const bool* b = std::get_if<bool>(&o.value)) {
      out += *b ? "True" : "False";
    } else if (const auto* n = std::get_if<std::uint64_t>(&o.value)) {
      out += std::to_string(*n);
    } else if (const auto* t = std::get_if<std::string>(&o.value)) {
      out += detail::python_string(*t);
    } else {
      out += "[\n";
      for (const auto& part : std::get<std::vector<std::vector<std::string>>>(o.value)) {
        out += "        [";
        for (std::size_t j = 0; j < part.size(); ++j) {
          out += (j == 0 ? "" : ", ") + detail::python_string(part[j]);
        }
        out += "],\n";
      }
      out += "    ]";
    }
    out += "\n";
  }
  if (s.activation_checkpoint == "none") {
    out += "    config.activation_checkpoint = None\n";
  } else {
    out += "    config.activation_checkpoint = " +
           std::string(s.activation_checkpoint == "full" ? "FullAC" : "SelectiveAC") +
           ".Config()\n";
  }
  return out + "    return config\n";
}

}  // namespace pipesched
